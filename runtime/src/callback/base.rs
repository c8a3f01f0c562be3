//! The [`Callback`] trait, what a callback function returns, and delivery of an event.

use std::borrow::Cow;

use super::context::Context;
use super::counters::Counters;
use super::event::{Event, for_each_event};
use super::order::{Order, short_type_name};
use super::step::{StepBatch, StepEvents, StepGradients, StepLoss, StepPred};
use crate::error::Cancel;
use crate::error::Result;
use crate::fetch::{Fetch, Fetched};
use crate::kind::CallbackKind;

macro_rules! define_callback_trait {
    ($(;)? $(
        $(#[$doc:meta])*
        $method:ident $variant:ident ($($arg:ident : $ty:ty = $pass:expr; $payload:ty)?) $phase:ident $(-> $default:ident)?;
    )*) => {
        /// A training callback: code bound to the events of the training loop.
        ///
        /// Every method has a default that does nothing, so an implementation names only the events it
        /// uses. `M` is the model's type; callbacks that do not look at the model implement
        /// `Callback<M>` for every `M`.
        ///
        /// ```
        /// use burn_stoker::prelude::*;
        ///
        /// struct CountEpochs(u64);
        ///
        /// impl<M> Callback<M> for CountEpochs {
        ///     fn trigger_epoch(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        ///         self.0 += 1;
        ///         ctx.monitors().put_scalar("epochs_seen", self.0 as f64);
        ///         Ok(())
        ///     }
        /// }
        /// ```
        pub trait Callback<M> {

            /// The callback's name, used in ordering constraints and error messages. Defaults to the
            /// type's short name.
            fn name(&self) -> Cow<'static, str> {
                Cow::Borrowed(short_type_name::<Self>())
            }
            /// Constraints on where this callback runs among the others.
            fn order(&self) -> Order {
                Order::none()
            }
            /// The step outputs this callback may ask for: host copies ([`Fetch::host`], handed to
            /// `after_step` of the same step, one transfer for every callback), device tensors
            /// ([`Fetch::device`]) and deferred host copies ([`Fetch::deferred`], handed to
            /// [`fetched`](Self::fetched) at a later step, without the step waiting for them).
            fn fetches(&self) -> &[Fetch] {
                &[]
            }
            /// In data-parallel training ([`crate::world`]), whether this callback runs only on
            /// the chief, rank 0 (tensorpack's default): elsewhere it is never set up and sees no
            /// event. Writers, savers, validation and progress run on the chief; a callback that
            /// changes what every replica computes (the loss, the gradients, when the optimizer
            /// runs) must say `false`, or the replicas diverge. With one device every callback runs.
            fn chief_only(&self) -> bool {
                true
            }
            /// The callback's state to save in checkpoints (JSON); `None`, the default, saves nothing.
            /// `#[callback(state)]` writes this for a serializable type.
            fn save_state(&self) -> Result<Option<serde_json::Value>> {
                Ok(None)
            }
            /// Restore the state [`save_state`](Self::save_state) saved.
            fn load_state(&mut self, state: serde_json::Value) -> Result<()> {
                let _ = state;
                Ok(())
            }
            /// Which of the events inside a step ([`before_batch`](Self::before_batch),
            /// [`after_pred`](Self::after_pred), [`before_backward`](Self::before_backward),
            /// [`after_backward`](Self::after_backward)) this callback takes. The trainer delivers them
            /// only to callbacks that ask, so a run where nobody does pays nothing for them.
            fn step_events(&self) -> StepEvents {
                StepEvents::NONE
            }
            /// Whether this callback takes [`after_batch`](Self::after_batch) after a training
            /// step. `true` by default, so that a callback writing `after_batch` by hand receives
            /// it; `#[callback]` answers from the events it binds. After a training step the
            /// trainer delivers `after_batch` only to the callbacks that answer `true`, so a run
            /// where none does pays nothing for it. A callback that answers `false` must do
            /// nothing in `after_batch` (a validation pass still delivers it to every callback).
            fn takes_after_batch(&self) -> bool {
                true
            }
            /// Whether this callback takes the events of a training step (fastai's `run_train`):
            /// `before_step`, the batch events (`before_batch`, `after_pred`, `before_backward`,
            /// `after_cancel_backward`, `after_backward`, `after_cancel_step`), `after_step`,
            /// `after_cancel_batch` and `after_batch`: fastai's batch level, with tensorpack's
            /// `before_step` and `after_step` inside it. `true` by default; a callback that
            /// answers `false` receives none of them (resolved at setup: the step pays nothing
            /// for it) and may fetch nothing. Every other event still reaches it, `trigger_step`
            /// (between steps, where a validation may be asked for) included.
            #[doc(alias = "run_train")]
            fn takes_training_batches(&self) -> bool {
                true
            }
            /// Whether this callback takes the batch events of a validation pass (fastai's
            /// `run_valid`): `before_batch`, `after_pred`, `after_loss` (`before_backward`),
            /// `after_cancel_batch` and `after_batch` while a pass runs. `true` by default; a
            /// callback that answers `false` receives none of them (fastai's `MixUp` and
            /// `RNNRegularizer` say so), but still `before_validate`, `after_validate` and
            /// `after_cancel_validate`.
            #[doc(alias = "run_valid")]
            fn takes_validation_batches(&self) -> bool {
                true
            }
            /// Whether the callback wants its fetches from the step about to run (`counters.next_step()`).
            /// Called before `before_step`, only for callbacks that declare fetches.
            fn wants_fetch(&self, counters: &Counters) -> bool {
                let _ = counters;
                true
            }
            $(
                $(#[$doc])*
                fn $method(&mut self, ctx: &mut Context<'_, M> $(, $arg: $ty)?) -> Result<()> {
                    event_default!(self, ctx $(, $arg)? $(-> $default)?)
                }
            )*
        }

        /// Deliver `event` to a single callback.
        pub fn deliver<M, C: Callback<M> + ?Sized>(
            callback: &mut C,
            event: Event<'_>,
            ctx: &mut Context<'_, M>,
        ) -> Result<()> {
            match event {
                $(Event::$variant $(($arg))? => callback.$method(ctx $(, $pass)?),)*
            }
        }

        // A boxed callback, and a callback lent to the trainer (to read its fields after training).
        forward_callback!([$($method ($($arg: $ty)?))*] Box<C>);
        forward_callback!([$($method ($($arg: $ty)?))*] &mut C);
    };
}

/// The default body of an event method: do nothing, or call the method the list names.
macro_rules! event_default {
    ($self:ident, $ctx:ident $(, $arg:ident)? -> $default:ident) => {
        $self.$default($ctx)
    };
    ($self:ident, $ctx:ident $(, $arg:ident)?) => {{
        let _ = ($ctx $(, $arg)?);
        Ok(())
    }};
}

/// What a callback function may return: `()`, [`Result<()>`](crate::Result), a [`Flow`], or a
/// `Result<Flow>`.
#[diagnostic::on_unimplemented(
    message = "a callback cannot return `{Self}`",
    label = "return `()`, `burn_stoker::Result<()>` or `burn_stoker::callback::Flow` instead",
    note = "a callback returns `()`, `burn_stoker::Result<()>`, `burn_stoker::callback::Flow` (to stop training, skip the rest of an epoch, or cancel a batch, an epoch or the fit) or `burn_stoker::Result<burn_stoker::callback::Flow>`"
)]
pub trait CallbackReturn {
    /// Apply the returned value to the run.
    fn apply<M>(self, ctx: &mut Context<'_, M>) -> Result<()>;
}

impl CallbackReturn for () {
    #[inline]
    fn apply<M>(self, _ctx: &mut Context<'_, M>) -> Result<()> {
        Ok(())
    }
}

impl<T: CallbackReturn> CallbackReturn for Result<T> {
    #[inline]
    fn apply<M>(self, ctx: &mut Context<'_, M>) -> Result<()> {
        self?.apply(ctx)
    }
}

/// What a callback function can ask of the loop by returning it.
///
/// Two families, as the two libraries stoker follows have them:
///
/// - **tensorpack's**, at the next step boundary: [`Stop`](Flow::Stop) and
///   [`SkipEpoch`](Flow::SkipEpoch) let the rest of the event (every other callback) and the rest
///   of the step run, then act.
/// - **fastai's**, at once: [`CancelBackward`](Flow::CancelBackward),
///   [`CancelBatch`](Flow::CancelBatch), [`CancelEpoch`](Flow::CancelEpoch),
///   [`CancelFit`](Flow::CancelFit), [`CancelStep`](Flow::CancelStep),
///   [`CancelTrain`](Flow::CancelTrain) and [`CancelValid`](Flow::CancelValid) are fastai's
///   `CancelBackwardException`, `CancelBatchException`, `CancelEpochException`,
///   `CancelFitException`, `CancelStepException`, `CancelTrainException` and
///   `CancelValidException`: the callbacks after this one do not receive the event, the rest of
///   the backward pass, batch, epoch, training, optimizer step, training part of the epoch or
///   validation pass does not run, and the loop delivers `after_cancel_backward` /
///   `after_cancel_batch` / `after_cancel_epoch` / `after_cancel_fit` / `after_cancel_step` /
///   `after_cancel_train` / `after_cancel_validate` to every callback before going on. A
///   hand-written callback cancels with [`Context::cancel`] for the same effect.
///
/// Each is a value the context records ([`Context::cancel`]), never an [`Error`](crate::Error):
/// the callback's `Result` stays `Ok`, so code that wraps every error it sees with context does
/// not change what a cancel does. While no callback cancels, the loop pays one test of a flag per
/// callback and event for them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Flow {
    /// Go on.
    Continue,
    /// Stop training at the next step boundary, with this reason (tensorpack's
    /// `StopTraining`). The rest of the event still runs for the other callbacks, and the rest
    /// of the step's events; see [`Context::request_stop`] for what runs and how this differs
    /// from tensorpack's exception.
    Stop(String),
    /// End the current epoch after this step (see [`Context::skip_rest_of_epoch`]).
    SkipEpoch,
    /// Skip the rest of this batch (fastai's `CancelBatchException`). During a validation pass,
    /// returned from `before_batch`, `after_pred` or `after_loss` (`before_backward`) of a
    /// validation batch: the rest of that batch does not run (the inferencers do not see it),
    /// every callback receives `after_cancel_batch`, and the pass goes on with the next batch.
    /// During training: returned from
    /// `before_step`, `before_batch`, `before_backward` or `after_backward`, the step stops there
    /// (from `after_pred`, once the step function returns its loss; no backward
    /// or no optimizer step: the weights do not change), then every callback receives
    /// `after_cancel_batch`, and the step ends as any other: `after_step` (to the callbacks that
    /// fetch nothing: the step has no values), `trigger_step`. The step counts in `global_step`,
    /// as fastai's `after_batch` counts it. From `after_backward` the gradients are kept and
    /// added into the next step's (fastai skips `step` and `zero_grad`: its
    /// `GradientAccumulation`). From `after_step` (inside fastai's batch, its optimizer step
    /// done) the callbacks after this one miss `after_step`, then every callback receives
    /// `after_cancel_batch`. Returned from another event it is an error saying so.
    CancelBatch,
    /// Skip this step's backward pass (fastai's `CancelBackwardException`): returned from
    /// `before_backward` (fastai's `after_loss` and `before_backward`, between the loss and
    /// backward), the callbacks after this one miss `before_backward`, backward does not run,
    /// every callback receives `after_cancel_backward`, and the optimizer steps with the
    /// gradients fastai's would find in `.grad`: zeros (so that momentum and weight decay still
    /// apply, as fastai's `opt.step()` after a skipped backward), or the gradients a
    /// `CancelBatch` from `after_backward` kept (fastai's `GradientAccumulation`). The callbacks
    /// that take the gradients receive them in `after_backward` first, where `CancelStep` still
    /// applies. The rest of the batch runs as at any step (`after_step` with the step's values:
    /// the forward and the loss ran), and the step counts. Returned from another event it is an
    /// error saying so.
    CancelBackward,
    /// Skip the rest of this epoch (fastai's `CancelEpochException`): returned from
    /// `before_epoch` or any event of a step, the rest of the step (if its optimizer has not run,
    /// the weights do not change, and the step does not count) and of the epoch do not run, then
    /// every callback receives `after_cancel_epoch`, then `after_epoch` and `trigger_epoch`, and
    /// the next epoch starts; a validation pass asked for in the cancelled epoch (an
    /// [`InferenceRunner`](crate::inference::InferenceRunner)'s, from `trigger_epoch`) does not
    /// run, as fastai's cancelled epoch is not validated. Returned from `before_validate` or the
    /// epoch's validation pass it is the epoch's: no `after_validate`, then `after_cancel_epoch`.
    /// Returned from `after_epoch` or later, outside a validation pass, it is an error: the
    /// epoch is over.
    CancelEpoch,
    /// Stop training at once (fastai's `CancelFitException`): returned from any event from
    /// `before_train` to `trigger_epoch`, the rest of training does not run (nor the epoch's
    /// `after_epoch`), every callback receives `after_cancel_fit`, then `after_train`; the run
    /// ends [`Stopped`](crate::callback::Outcome::Stopped) with a reason naming the callback and the
    /// event. No checkpoint is written for it.
    CancelFit,
    /// Skip this step's optimizer step (fastai's `CancelStepException`): returned from
    /// `after_backward` (fastai's `before_step`, between backward and the optimizer), the
    /// callbacks after this one miss `after_backward`, the gradients are dropped (the weights do
    /// not change), every callback receives `after_cancel_step`, and the rest of the batch runs as
    /// at any step: `after_step` with the step's values (the forward and the loss ran), then
    /// `trigger_step`; the step counts. Returned from another event it is an error saying so.
    CancelStep,
    /// Skip the rest of this epoch's training (fastai's `CancelTrainException`): returned from
    /// `before_epoch` or any event of a step, the rest of the step (if its optimizer has not run,
    /// the weights do not change, and the step does not count) and the epoch's other steps do
    /// not run, then every callback receives `after_cancel_train`, then `after_epoch` and
    /// `trigger_epoch`, where the epoch's validation runs as usual (fastai's epoch validates
    /// after a cancelled training part too). Returned from `after_epoch` or later in the epoch it
    /// is an error: the epoch's training is over.
    CancelTrain,
    /// Skip the rest of this validation pass (fastai's `CancelValidException`): returned from
    /// `before_validate` (the callbacks after this one miss it, and no pass runs), from any
    /// callback's batch event during the pass (`before_batch`, `after_pred`, `after_loss`: the
    /// batches run so far make the results) or from the pass itself (`validate`), every callback
    /// receives `after_cancel_validate`, then `after_validate`, and the event that asked for the
    /// pass goes on. Returned from `after_validate` or outside a pass it is an error.
    CancelValid,
}

impl CallbackReturn for Flow {
    #[inline]
    fn apply<M>(self, ctx: &mut Context<'_, M>) -> Result<()> {
        match self {
            Flow::Continue => {}
            Flow::Stop(reason) => ctx.request_stop(reason),
            Flow::SkipEpoch => ctx.skip_rest_of_epoch(),
            Flow::CancelBackward => return ctx.cancel(Cancel::Backward),
            Flow::CancelBatch => return ctx.cancel(Cancel::Batch),
            Flow::CancelEpoch => return ctx.cancel(Cancel::Epoch),
            Flow::CancelFit => return ctx.cancel(Cancel::Fit),
            Flow::CancelStep => return ctx.cancel(Cancel::Step),
            Flow::CancelTrain => return ctx.cancel(Cancel::Train),
            Flow::CancelValid => return ctx.cancel(Cancel::Valid),
        }
        Ok(())
    }
}

macro_rules! forward_callback {
    ([$($method:ident ($($arg:ident : $ty:ty)?))*] $pointer:ty) => {
        impl<M, C: Callback<M> + ?Sized> Callback<M> for $pointer {
            crate::callback::forward_methods!((deref);
                name order fetches chief_only save_state load_state wants_fetch step_events takes_after_batch takes_training_batches takes_validation_batches);
            $(
                #[inline]
                fn $method(&mut self, ctx: &mut Context<'_, M> $(, $arg: $ty)?) -> Result<()> {
                    (**self).$method(ctx $(, $arg)?)
                }
            )*
        }
    };
}

for_each_event!(define_callback_trait);

// A boxed callback of any type: a field may hold one; an order target cannot name it.
impl<M> CallbackKind for dyn Callback<M> {
    const NAME: &'static str = "dyn Callback";
}
impl<M> CallbackKind for dyn Callback<M> + Send {
    const NAME: &'static str = "dyn Callback";
}
impl<M> CallbackKind for dyn Callback<M> + Send + Sync {
    const NAME: &'static str = "dyn Callback";
}
