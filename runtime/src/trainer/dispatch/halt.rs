//! What travels up the loop when a delivery does not run to its end ([`Halt`]): a callback's
//! cancel, a value the context recorded, sent up as itself, never as an [`Error`]; or an error.
//! And the errors of control asked for where the loop cannot act on it.

use std::borrow::Cow;

use super::wrap;
use crate::callback::{Raised, TrainState};
use crate::error::{Cancel, Error};

/// Why a delivery, a step or an epoch did not run to its end: a callback's cancel on its way up
/// to the level of the loop that acts on it (fastai's `_with_events`), or an error. A cancel is
/// control, not a failure: it never becomes an [`Error`] but where no level acts on it
/// ([`Dispatcher::misplaced_cancel`]).
#[derive(Debug)]
pub(crate) enum Halt {
    /// A callback cancelled (`Flow::CancelBatch`...).
    Cancel(Cancel),
    /// An error.
    Failed(Error),
}

impl From<Error> for Halt {
    #[inline]
    fn from(error: Error) -> Halt {
        Halt::Failed(error)
    }
}

/// What a delivery returns: done, or halted by a cancel or an error.
pub(crate) type Flowing<T = ()> = std::result::Result<T, Halt>;

/// A cancel callback `i` returned from `event`, on its way up, with who returned it and where
/// remembered; in a data-parallel world (where every rank would have to agree), an error saying
/// so.
#[cold]
pub(super) fn cancel_halt<M>(
    state: &mut TrainState<M>,
    names: &[Cow<'static, str>],
    i: usize,
    event: &'static str,
    cancel: Cancel,
) -> Halt {
    if !state.execution.cancels_allowed() {
        return Halt::Failed(wrap(
            &names[i],
            event,
            Error::misuse(format!(
                "{} is not supported in data-parallel training, where every rank must agree on the steps it runs: return Flow::Stop or Flow::SkipEpoch, which the ranks agree on at the next step boundary",
                cancel.flow_name()
            )),
        ));
    }
    state.control.cancelled_at = Some((i, event));
    Halt::Cancel(cancel)
}

/// The error of a request for a validation pass where none can run.
#[cold]
pub(super) fn validation_misplaced(name: &str, event: &'static str) -> Error {
    wrap(
        name,
        event,
        Error::misuse(
            "a validation pass was requested (Context::request_validation) where the trainer cannot run one: ask from an event between steps (trigger, trigger_step, trigger_epoch, before_train...), not from setup, after_train, inside a step or during another validation pass",
        ),
    )
}

/// What a callback asked of the loop from an event where the loop cannot act on it (`setup`,
/// `after_train`): an error saying so.
#[cold]
pub(super) fn raised_misplaced(name: &str, event: &'static str, raised: Raised) -> Error {
    match raised {
        Raised::Cancel(cancel) => wrap(name, event, Error::misuse(cancel.misplaced())),
        Raised::Validate => validation_misplaced(name, event),
    }
}

/// A cancel returned where the loop cannot act on it (`CancelBatch` from `after_batch`, ...): the
/// error names the callback and the event that returned it, and says where it applies.
#[cold]
pub(super) fn misplaced_cancel<M>(
    state: &TrainState<M>,
    names: &[Cow<'static, str>],
    cancel: Cancel,
) -> Error {
    let message = cancel.misplaced();
    match state.control.cancelled_at {
        Some((i, event)) => wrap(&names[i], event, Error::misuse(message)),
        None => Error::misuse(message),
    }
}
