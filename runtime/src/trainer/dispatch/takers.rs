//! The callbacks that take fastai's batch events, resolved at setup: in training and in
//! validation ([`PhaseTakers`], fastai's `run_train` / `run_valid`), the batch and the model's
//! output ([`BatchTakers`]), and their delivery to those callbacks: inside a training step
//! (`run_step`), and at each batch of a validation pass the trainer runs (`validation.rs`); and
//! those that take `after_batch` after a training step ([`AfterBatchTakers`]).

use std::borrow::Cow;

use super::halt::{Flowing, cancel_halt, validation_misplaced};
use super::{Activity, CurrentActivity, Delivery, wrap};
use crate::callback::{Callbacks, Context, Event, Raised, StepEvents, TrainState};

/// Who takes the events of a batch in one phase of the loop, training or validation, resolved
/// at setup: a callback that answers `false` to
/// [`Callback::takes_training_batches`](crate::callback::Callback::takes_training_batches) or
/// [`takes_validation_batches`](crate::callback::Callback::takes_validation_batches) (fastai's
/// `run_train` / `run_valid`) is left out of every batch event of that phase.
#[derive(Debug)]
pub(in crate::trainer) struct PhaseTakers {
    /// The callbacks that take the phase's batch events, in run order.
    pub(super) order: Vec<usize>,
    /// Whether `order` is every callback in registration order: a delivery then goes in one pass.
    pub(super) in_order: bool,
    /// Those that take the batch and the model's output.
    pub(super) batch: BatchTakers,
    /// Those that take the loss before backward (`after_loss` in validation), in run order.
    pub(super) loss: Vec<usize>,
    /// Those that take the gradients after backward, in run order (none in validation).
    pub(super) grads: Vec<usize>,
}

impl PhaseTakers {
    /// From the run order, the number of callbacks, whether each takes the phase's batches, and
    /// every callback's hooks.
    pub(super) fn new(order: &[usize], count: usize, takes: &[bool], hooks: &[StepEvents]) -> Self {
        let order: Vec<usize> = order.iter().copied().filter(|&i| takes[i]).collect();
        let in_order = order.len() == count && order.iter().enumerate().all(|(position, &i)| position == i);
        PhaseTakers {
            in_order,
            batch: BatchTakers::new(&order, hooks),
            loss: order.iter().copied().filter(|&i| hooks[i].loss).collect(),
            grads: order.iter().copied().filter(|&i| hooks[i].gradients).collect(),
            order,
        }
    }
}

/// The callbacks that take the batch (`before_batch`) and the model's output (`after_pred`),
/// in run order.
#[derive(Debug, Default)]
pub(in crate::trainer) struct BatchTakers {
    pub(super) batch: Vec<usize>,
    pub(super) pred: Vec<usize>,
    /// Either is not empty: the one flag a step reads.
    any: bool,
}

impl BatchTakers {
    /// From the run order and every callback's hooks.
    pub(super) fn new(order: &[usize], hooks: &[StepEvents]) -> Self {
        let batch: Vec<usize> = order.iter().copied().filter(|&i| hooks[i].batch).collect();
        let pred: Vec<usize> = order.iter().copied().filter(|&i| hooks[i].pred).collect();
        BatchTakers { any: !batch.is_empty() || !pred.is_empty(), batch, pred }
    }

    /// Whether some callback takes the batch or the model's output: the step then goes the cold
    /// way, which delivers them.
    #[inline]
    pub(in crate::trainer) fn any(&self) -> bool {
        self.any
    }

    /// Whether some callback takes the batch.
    pub(in crate::trainer) fn batch(&self) -> bool {
        !self.batch.is_empty()
    }

    /// Whether some callback takes the model's output.
    pub(in crate::trainer) fn pred(&self) -> bool {
        !self.pred.is_empty()
    }
}

/// An event inside a batch (`before_batch`, `after_pred`, `before_backward`, `after_backward`)
/// to the callbacks `takers` names, in run order, the activity given back as found however it
/// ends (but a panic). A cancel stops it there and travels up; a request for a validation pass
/// is an error (no pass runs inside a batch).
#[cold]
pub(super) fn deliver_in_batch<C: Callbacks<M, K>, M, K>(
    callbacks: &mut C,
    names: &[Cow<'static, str>],
    at: &mut CurrentActivity,
    state: &mut TrainState<M>,
    takers: &[usize],
    event: Event<'_>,
) -> Flowing {
    let resume = at.activity;
    let phase = if state.control.validating { crate::callback::Phase::Around } else { event.phase() };
    let mut each = || -> Flowing {
        for &i in takers {
            at.activity = Activity::Callback(i, event.name());
            if let Err(e) = callbacks.dispatch(i, event, &mut Context::new(&mut *state, phase)) {
                return Err(wrap(&names[i], event.name(), e).into());
            }
            match state.control.raised.take() {
                None => {}
                Some(Raised::Cancel(cancel)) => {
                    return Err(cancel_halt(state, names, i, event.name(), cancel));
                }
                Some(Raised::Validate) => return Err(validation_misplaced(&names[i], event.name()).into()),
            }
        }
        Ok(())
    };
    let delivered = each();
    at.activity = resume;
    delivered
}

/// Who takes `after_batch` after a training step ([`Callback::takes_after_batch`]), resolved at
/// setup: a step reads one tag. (A validation pass delivers it to every callback that takes its
/// batches.)
///
/// [`Callback::takes_after_batch`]: crate::callback::Callback::takes_after_batch
#[derive(Debug)]
pub(super) enum AfterBatchTakers {
    /// No callback: nothing is delivered.
    Nobody,
    /// Every callback that takes the training batches: delivered as any event of a step.
    Everyone,
    /// These, in run order.
    Some(Vec<usize>),
}

impl AfterBatchTakers {
    /// From the run order and whether each callback takes `after_batch`.
    pub(super) fn new(order: &[usize], takes: &[bool]) -> Self {
        let takers: Vec<usize> = order.iter().copied().filter(|&i| takes[i]).collect();
        match takers.len() {
            0 => AfterBatchTakers::Nobody,
            n if n == order.len() => AfterBatchTakers::Everyone,
            _ => AfterBatchTakers::Some(takers),
        }
    }
}

impl<C: Callbacks<M, K>, M, K> super::Dispatcher<C, M, K> {
    /// `after_batch` after a training step (fastai's, after the batch level, cancelled or not),
    /// to the callbacks that take it: nothing to do when none does.
    #[inline]
    pub(in crate::trainer) fn deliver_after_batch(&mut self, state: &mut TrainState<M>) -> Flowing {
        match &self.table.after_batch {
            AfterBatchTakers::Nobody => Ok(()),
            AfterBatchTakers::Everyone => self.deliver_in_training(state, Event::AfterBatch),
            AfterBatchTakers::Some(takers) => {
                let (callbacks, table, resume) = (&mut self.callbacks, &self.table, self.at.activity);
                let at = &mut self.at;
                let delivered = Delivery { callbacks, table, order: takers, one_pass: false, at, state }
                    .each(Event::AfterBatch, 0);
                self.at.activity = resume;
                delivered
            }
        }
    }
}

impl<C, M, K> super::Dispatcher<C, M, K> {
    /// The error for callbacks that take the model's output under a step function that did not
    /// hand it over with `Step::pred`.
    #[cold]
    pub(in crate::trainer) fn pred_not_handed_over(&self) -> crate::Error {
        let table = &self.table;
        let takers: Vec<String> =
            table.train.batch.pred.iter().map(|&i| format!("`{}`", table.names[i])).collect();
        crate::Error::misuse(format!(
            "callbacks {} take the model's output in after_pred, but the training step did not hand it over: call `step.pred(output)` on the model's output in the step function, before the loss",
            takers.join(", ")
        ))
    }
}
