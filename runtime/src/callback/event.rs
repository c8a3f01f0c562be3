//! The events of a training run, listed once.
//!
//! [`for_each_event!`](for_each_event) holds the list; everything that names every event is
//! generated from it: the [`Event`] enum and its [`name`](Event::name), the event methods of the
//! [`Callback`](crate::callback::Callback) trait and their forwarding through `Box` and `&mut`,
//! [`deliver`](crate::callback::deliver), the gating wrappers' bodies
//! ([`PeriodicCallback`](crate::trigger::PeriodicCallback),
//! [`EnableCallbackIf`](crate::trigger::EnableCallbackIf)), the gate of a `#[derive(Callbacks)]` field and
//! [`CallbackFactory`](crate::debug::CallbackFactory)'s closures. A new event is one entry here (and its
//! place in the trainer's loop).

use super::step::{StepBatch, StepGradients, StepLoss, StepPred};
use crate::fetch::Fetched;

/// The one list of the events, in the order a run delivers them.
///
/// `for_each_event!(then)` expands to `then! { ; <list> }`, and
/// `for_each_event!(then { extra tokens })` to `then! { extra tokens ; <list> }`. Each entry reads
///
/// ```text
/// /// What the event is (the doc of the Callback method and of the Event variant).
/// method Variant (arg: &ArgType = value passed from the variant's payload; Payload<'v>) Phase -> default;
/// ```
///
/// where the parenthesis is empty for an event without a value, `Phase` is the event's
/// [`Phase`] (which decides how the gating wrappers treat it) and `-> default` names the method
/// whose call is the default body (otherwise the default does nothing).
macro_rules! for_each_event {
    ($then:ident $({ $($extra:tt)* })?) => {
        $then! {
            $($($extra)*)? ;
            /// Once, before anything runs: prepare what the callback needs. A trainer trains
            /// once, so this is also fastai's `after_create` (which the DSL accepts as this
            /// event's name: `#[callback(on = after_create)]`): the callbacks, the model, the
            /// optimizer and the log directory are there, a resumed run's counters restored.
            #[doc(alias = "after_create")]
            setup Setup () Once;
            /// After setup, before the first step (a resumed run's state is already loaded).
            #[doc(alias = "on_fit_start")]
            #[doc(alias = "on_train_begin")]
            #[doc(alias = "on_train_start")]
            before_train BeforeTrain () Once;
            /// At the start of each epoch. Keep it cheap.
            #[doc(alias = "on_train_epoch_start")]
            #[doc(alias = "on_epoch_begin")]
            before_epoch BeforeEpoch () Epoch;
            /// Before each step.
            #[doc(alias = "on_train_batch_start")]
            #[doc(alias = "on_train_batch_begin")]
            before_step BeforeStep () BeforeStep;
            /// After each step, with the values fetched at it: what this callback (and any other)
            /// asked for.
            #[doc(alias = "on_train_batch_end")]
            after_step AfterStep (values: &Fetched<'_> = &values; Fetched<'v>) AfterStep;
            /// The values of this callback's deferred fetches
            /// ([`Fetch::deferred`](crate::fetch::Fetch::deferred)), read back from the device
            /// without stopping the step that made them: delivered after a later step's `after_step`
            /// (the next one, or the next where the read is done) and, at the latest, before the
            /// epoch's `after_epoch`, before a checkpoint is written and before `after_train`.
            /// [`Fetched::step`](crate::fetch::Fetched::step) is the step they belong to. Only the
            /// callbacks that asked at that step receive it, once per step they asked at, in order.
            fetched Fetched (values: &Fetched<'_> = &values; Fetched<'v>) Around;
            /// After every batch, of training and of a validation pass alike (fastai's
            /// `after_batch`; [`Context::training`](crate::callback::Context::training) tells
            /// which): in training after the step's `after_step` (and any `fetched`), before
            /// `trigger_step`, a cancelled batch's too (after `after_cancel_batch`); in a
            /// validation pass the trainer runs, after the inferencers read the batch, or after
            /// `after_cancel_batch` when a callback cancelled it. Delivered to every callback,
            /// never gated. A cancel returned here applies to what encloses the batch
            /// (`CancelValid` during validation; `CancelTrain`, `CancelEpoch`, `CancelFit` in
            /// training); `CancelBatch` is an error, the batch being over.
            after_batch AfterBatch () Around;
            /// After each step's `after_step`; `global_step` already counts the step.
            trigger_step TriggerStep () TriggerStep;
            /// At the end of each epoch. Keep it cheap.
            #[doc(alias = "on_train_epoch_end")]
            #[doc(alias = "on_epoch_end")]
            after_epoch AfterEpoch () Epoch;
            /// After `after_epoch`. By default calls `trigger`.
            trigger_epoch TriggerEpoch () Epoch -> trigger;
            /// The callback's periodic work: every epoch by default (from `trigger_epoch`), at
            /// another period under [`PeriodicTrigger`](crate::trigger::PeriodicTrigger).
            trigger Trigger () Epoch;
            /// Always runs last: after success, a stop, an error or a panic.
            #[doc(alias = "on_fit_end")]
            #[doc(alias = "on_train_end")]
            #[doc(alias = "on_exception")]
            after_train AfterTrain () Once;
            /// Inside the step, before the step function runs: read or replace the batch (fastai's
            /// `before_batch`: MixUp, CutMix, label smoothing). Delivered only to callbacks whose
            /// [`step_events`](crate::callback::Callback::step_events) have `batch`, at every
            /// training step and at every batch of a validation pass (there
            /// [`Context::training`](crate::callback::Context::training) is `false`). The model is
            /// readable; counters are those of `before_step`.
            before_batch BeforeBatch (batch: &StepBatch<'_> = batch; &'v StepBatch<'v>) InStep;
            /// Inside the step, between the model's forward pass and the loss: read or replace the
            /// model's output (fastai's `after_pred`), which the step function hands over with
            /// [`Step::pred`](crate::trainer::Step::pred). Delivered only to callbacks whose
            /// [`step_events`](crate::callback::Callback::step_events) have `pred`. The step
            /// function holds the model meanwhile: the context does not reach it
            /// ([`Context::model`](crate::callback::Context::model) panics there).
            after_pred AfterPred (pred: &StepPred<'_> = pred; &'v StepPred<'v>) InStep;
            /// Inside the step, between the forward pass and backward: read or replace the loss
            /// (fastai's `after_loss`, which the DSL also accepts as this event's name:
            /// `#[callback(on = after_loss)]`; e.g. `RNNRegularizer`'s activation penalties).
            /// Delivered only to callbacks whose
            /// [`step_events`](crate::callback::Callback::step_events) have `loss`. The model is
            /// readable; counters are those of `before_step` (`global_step` does not yet count
            /// this step).
            #[doc(alias = "after_loss")]
            before_backward BeforeBackward (loss: &StepLoss<'_> = loss; &'v StepLoss<'v>) InStep;
            /// Inside the step, between backward and the optimizer: read, change or withhold the
            /// gradients (gradient clipping, accumulation). Delivered only to callbacks whose
            /// [`step_events`](crate::callback::Callback::step_events) have `gradients`.
            after_backward AfterBackward (grads: &StepGradients = grads; &'v StepGradients) InStep;
            /// Before a validation pass (fastai's `before_validate`): delivered to every callback when
            /// a callback's trigger asks for a pass with
            /// [`Context::request_validation`](crate::callback::Context::request_validation)
            /// ([`InferenceRunner`](crate::inference::InferenceRunner) does). From here to
            /// `after_validate`, [`Context::training`](crate::callback::Context::training) is `false`.
            before_validate BeforeValidate () Around;
            /// The validation pass itself: delivered only to the callback that asked for it, after
            /// every callback's `before_validate`.
            validate Validate () Around;
            /// After a validation pass (fastai's `after_validate`): delivered to every callback; the
            /// event that triggered the pass then goes on with the callbacks after the one that asked.
            after_validate AfterValidate () Around;
            /// After a callback returned
            /// [`Flow::CancelBackward`](crate::callback::Flow::CancelBackward) from
            /// `before_backward` (fastai's `after_cancel_backward`): backward did not run; the
            /// callbacks that take the gradients receive `after_backward` with the gradients the
            /// optimizer steps with (zeros, or those a `CancelBatch` kept), then the optimizer
            /// and the rest of the batch run. Inside the step: the counters do not count it yet.
            after_cancel_backward AfterCancelBackward () InStep;
            /// After a callback returned [`Flow::CancelBatch`](crate::callback::Flow::CancelBatch):
            /// the rest of the batch did not run (no optimizer step); `after_step` follows.
            after_cancel_batch AfterCancelBatch () Around;
            /// After a callback returned [`Flow::CancelEpoch`](crate::callback::Flow::CancelEpoch):
            /// the rest of the epoch did not run; `after_epoch` and `trigger_epoch` follow.
            after_cancel_epoch AfterCancelEpoch () Around;
            /// After a callback returned [`Flow::CancelFit`](crate::callback::Flow::CancelFit): the
            /// rest of training did not run (nor the epoch's `after_epoch`); `after_train` follows.
            after_cancel_fit AfterCancelFit () Around;
            /// After a callback returned [`Flow::CancelStep`](crate::callback::Flow::CancelStep)
            /// from `after_backward`: the step's gradients were dropped (no optimizer step); the
            /// rest of the batch follows (`after_step`, `trigger_step`). Inside the step: the
            /// counters do not count it yet.
            after_cancel_step AfterCancelStep () InStep;
            /// After a callback returned [`Flow::CancelTrain`](crate::callback::Flow::CancelTrain):
            /// the rest of the epoch's training did not run; `after_epoch` and `trigger_epoch`
            /// (where the epoch is validated) follow.
            after_cancel_train AfterCancelTrain () Around;
            /// After a callback returned [`Flow::CancelValid`](crate::callback::Flow::CancelValid)
            /// in `before_validate` or during the pass: the rest of the pass did not run;
            /// `after_validate` follows.
            after_cancel_validate AfterCancelValidate () Around;
        }
    };
}
pub(crate) use for_each_event;

/// Where an event falls in the loop, which decides how the gating wrappers
/// ([`PeriodicCallback`](crate::trigger::PeriodicCallback),
/// [`EnableCallbackIf`](crate::trigger::EnableCallbackIf), a gated `#[derive(Callbacks)]` field) treat it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Runs once (`setup`, `before_train`, `after_train`): never gated.
    Once,
    /// Once per epoch (`before_epoch`, `after_epoch`, `trigger_epoch`, `trigger`).
    Epoch,
    /// `before_step`: decides whether the step's events are delivered.
    BeforeStep,
    /// `after_step`, with the step's fetched values.
    AfterStep,
    /// `trigger_step`.
    TriggerStep,
    /// Inside the step (`before_batch`, `after_pred`, `before_backward`, `after_backward`, and
    /// `after_cancel_backward` and `after_cancel_step`, which follow a cancel there): never gated, since a batch, output,
    /// loss or gradient change that applied only at some steps would be a surprise.
    InStep,
    /// Around a validation pass or a cancellation (`before_validate`, `validate`, `after_validate`,
    /// `after_batch` (which ends every batch, of training and validation), `after_cancel_batch`, `after_cancel_epoch`, `after_cancel_fit`, `after_cancel_train`,
    /// `after_cancel_validate`), or a deferred read's
    /// arrival (`fetched`): never gated, since they follow what the loop did, not a period (a
    /// deferred read was asked for at a step the gate let through).
    Around,
}

macro_rules! define_event {
    ($(;)? $(
        $(#[$doc:meta])*
        $method:ident $variant:ident ($($arg:ident : $ty:ty = $pass:expr; $payload:ty)?) $phase:ident $(-> $default:ident)?;
    )*) => {
        /// The events of a training run, in tensorpack's order:
        ///
        /// ```text
        /// setup, before_train,
        /// for each epoch: before_epoch,
        ///     for each step: before_step, <step: before_batch, forward, after_pred, loss,
        ///                                  before_backward, backward, after_backward,
        ///                                  optimizer>, after_step(values),
        ///         fetched(deferred values of an earlier step, when they arrived), after_batch,
        ///         trigger_step
        ///     after_epoch, trigger_epoch (which calls trigger by default)
        /// after_train (always: after success, a stop, an error or a panic)
        /// ```
        ///
        /// and, where something happens: `before_validate`, `validate` (to the callback that asked),
        /// `after_validate` around a validation pass asked for from a trigger;
        /// `after_cancel_backward`, `after_cancel_batch`,
        /// `after_cancel_epoch`, `after_cancel_fit`, `after_cancel_step`, `after_cancel_train`,
        /// `after_cancel_validate` after a [`Flow`](crate::callback::Flow) cancelled part of the
        /// run (fastai's events).
        #[derive(Debug, Clone, Copy)]
        pub enum Event<'v> {
            $($(#[$doc])* $variant $(($payload))?,)*
        }

        impl Event<'_> {
            /// Every event's name, in the order of the list.
            pub const NAMES: &'static [&'static str] = &[$(stringify!($method)),*];

            /// The event's name, as written in `#[callback(on = ...)]`.
            pub fn name(&self) -> &'static str {
                match self {
                    $(Event::$variant { .. } => stringify!($method),)*
                }
            }

            /// Where the event falls in the loop.
            pub fn phase(&self) -> Phase {
                match self {
                    $(Event::$variant { .. } => Phase::$phase,)*
                }
            }
        }
    };
}

for_each_event!(define_event);

impl Event<'_> {
    /// The event as handed to the callback of flat index `callback`: `after_step`'s values then
    /// read that callback's fetches by position, resolved at setup. Other events are unchanged.
    #[doc(hidden)]
    #[inline(always)]
    pub fn for_callback(self, callback: usize) -> Self {
        match self {
            Event::AfterStep(values) => Event::AfterStep(values.for_callback(callback)),
            Event::Fetched(values) => Event::Fetched(values.for_callback(callback)),
            other => other,
        }
    }

    /// Whether the event comes between two training steps of an epoch, where the epoch's
    /// training goes on after it (`before_step`, `after_step`, `fetched`, `after_batch`,
    /// `trigger_step`).
    pub(crate) fn between_steps(&self) -> bool {
        matches!(
            self,
            Event::BeforeStep
                | Event::AfterStep(_)
                | Event::Fetched(_)
                | Event::AfterBatch
                | Event::TriggerStep
        )
    }
}

#[cfg(test)]
mod tests {
    use super::Phase;

    /// One event as the runtime's list has it: its name, whether a gating wrapper may hold it
    /// back (the phases `Period::gate` and the wrappers always let through are not gated), and
    /// the value its method takes beside the context (its name, its type's name).
    type Row = (&'static str, bool, Option<(&'static str, &'static str)>);

    macro_rules! runtime_table {
        ($(;)? $(
            $(#[$doc:meta])*
            $method:ident $variant:ident ($($arg:ident : $ty:ty = $pass:expr; $payload:ty)?) $phase:ident $(-> $default:ident)?;
        )*) => {
            [$((
                stringify!($method),
                !matches!(Phase::$phase, Phase::Once | Phase::InStep | Phase::Around),
                None$(.or(Some((stringify!($arg), type_name(stringify!($ty))))))?,
            )),*]
        };
    }

    /// `&StepLoss<'_>` -> `StepLoss`.
    fn type_name(ty: &'static str) -> &'static str {
        let ty = ty.trim_start_matches('&').trim_start();
        ty.split(|c: char| !c.is_alphanumeric() && c != '_').next().unwrap_or(ty)
    }

    fn names(rows: &[Row]) -> Vec<&'static str> {
        rows.iter().map(|row| row.0).collect()
    }

    /// The macros' copy of the event list (`macros/src/event.rs`, read through the hidden
    /// `__event_table!()`) and `for_each_event!` name the same events in the same order, with the
    /// same gating and the same parameter: an event added to, removed from or renamed in either
    /// list alone fails here.
    #[test]
    fn the_macros_event_list_is_the_runtimes() {
        let runtime: &[Row] = &for_each_event!(runtime_table);
        let macros: &[Row] = &burn_stoker_macros::__event_table!();
        let only = |a: &[Row], b: &[Row]| -> Vec<&str> {
            names(a).into_iter().filter(|name| !names(b).contains(name)).collect()
        };
        assert_eq!(
            names(runtime),
            names(macros),
            "the runtime's events (`for_each_event!`, runtime/src/callback/event.rs) and the macros' \
             (`EventKind`, macros/src/event.rs) differ: only in the runtime's: {:?}; only in the \
             macros': {:?} (a new event goes into both lists, in the same place)",
            only(runtime, macros),
            only(macros, runtime),
        );
        for (ours, theirs) in runtime.iter().zip(macros) {
            assert_eq!(
                ours, theirs,
                "event `{}`: (name, gated, parameter) in the runtime's list, then in the macros'",
                ours.0
            );
        }
    }
}
