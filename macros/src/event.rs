//! The events a callback can be bound to: one list (the runtime's `Callback` trait in the same
//! order), from which the names, the rules and the generated methods are all derived. The
//! runtime's tests compare it with the runtime's list through `__event_table!()`.

use proc_macro2::TokenStream;
use quote::quote;

/// One event of the training loop.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum EventKind {
    /// Once, before anything runs.
    Setup,
    /// After setup, before the first step.
    BeforeTrain,
    /// At the start of each epoch.
    BeforeEpoch,
    /// Before each step.
    BeforeStep,
    /// After each step, with the fetched values.
    AfterStep,
    /// Deferred values arrived (`#[fetch(..., deferred)]` on an `after_step` hook): not written
    /// by users, the hook's call is generated into it.
    Fetched,
    /// After every batch, of training and of validation (fastai's `after_batch`).
    AfterBatch,
    /// After each step, `global_step` counting it.
    TriggerStep,
    /// At the end of each epoch.
    AfterEpoch,
    /// At the end of each epoch, after `after_epoch`.
    TriggerEpoch,
    /// tensorpack's `trigger`: from `trigger_epoch` by default.
    Trigger,
    /// Once, at the end, whatever happened.
    AfterTrain,
    /// Inside the step, before the step function: the batch (`&StepBatch`).
    BeforeBatch,
    /// Inside the step, between the model's forward pass and the loss: its output (`&StepPred`).
    AfterPred,
    /// Inside the step, before backward: the loss (`&StepLoss`); fastai's `after_loss`.
    BeforeBackward,
    /// Inside the step, after backward: the gradients (`&StepGradients`).
    AfterBackward,
    /// Before a validation pass, to every callback.
    BeforeValidate,
    /// The validation pass, to the callback that asked for it.
    Validate,
    /// After a validation pass, to every callback.
    AfterValidate,
    /// After a `Flow::CancelBackward`.
    AfterCancelBackward,
    /// After a `Flow::CancelBatch`.
    AfterCancelBatch,
    /// After a `Flow::CancelEpoch`.
    AfterCancelEpoch,
    /// After a `Flow::CancelFit`.
    AfterCancelFit,
    /// After a `Flow::CancelStep`.
    AfterCancelStep,
    /// After a `Flow::CancelTrain`.
    AfterCancelTrain,
    /// After a `Flow::CancelValid`.
    AfterCancelValidate,
}

impl EventKind {
    /// Every event, in the order of the training loop.
    pub const ALL: [EventKind; 26] = [
        EventKind::Setup,
        EventKind::BeforeTrain,
        EventKind::BeforeEpoch,
        EventKind::BeforeStep,
        EventKind::AfterStep,
        EventKind::Fetched,
        EventKind::AfterBatch,
        EventKind::TriggerStep,
        EventKind::AfterEpoch,
        EventKind::TriggerEpoch,
        EventKind::Trigger,
        EventKind::AfterTrain,
        EventKind::BeforeBatch,
        EventKind::AfterPred,
        EventKind::BeforeBackward,
        EventKind::AfterBackward,
        EventKind::BeforeValidate,
        EventKind::Validate,
        EventKind::AfterValidate,
        EventKind::AfterCancelBackward,
        EventKind::AfterCancelBatch,
        EventKind::AfterCancelEpoch,
        EventKind::AfterCancelFit,
        EventKind::AfterCancelStep,
        EventKind::AfterCancelTrain,
        EventKind::AfterCancelValidate,
    ];

    /// The name a user writes, which is also the `Callback` method's name.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Setup => "setup",
            EventKind::BeforeTrain => "before_train",
            EventKind::BeforeEpoch => "before_epoch",
            EventKind::BeforeStep => "before_step",
            EventKind::AfterStep => "after_step",
            EventKind::Fetched => "fetched",
            EventKind::AfterBatch => "after_batch",
            EventKind::TriggerStep => "trigger_step",
            EventKind::AfterEpoch => "after_epoch",
            EventKind::TriggerEpoch => "trigger_epoch",
            EventKind::Trigger => "trigger",
            EventKind::AfterTrain => "after_train",
            EventKind::BeforeBatch => "before_batch",
            EventKind::AfterPred => "after_pred",
            EventKind::BeforeBackward => "before_backward",
            EventKind::AfterBackward => "after_backward",
            EventKind::BeforeValidate => "before_validate",
            EventKind::Validate => "validate",
            EventKind::AfterValidate => "after_validate",
            EventKind::AfterCancelBackward => "after_cancel_backward",
            EventKind::AfterCancelBatch => "after_cancel_batch",
            EventKind::AfterCancelEpoch => "after_cancel_epoch",
            EventKind::AfterCancelFit => "after_cancel_fit",
            EventKind::AfterCancelStep => "after_cancel_step",
            EventKind::AfterCancelTrain => "after_cancel_train",
            EventKind::AfterCancelValidate => "after_cancel_validate",
        }
    }

    /// Every event's name a user writes, in order (for messages listing the valid names).
    pub fn names() -> Vec<&'static str> {
        EventKind::ALL.iter().filter(|event| event.written()).map(|event| event.name()).collect()
    }

    /// The event named `name`, among those a user writes; fastai's `after_loss` is another name
    /// of `before_backward`, its `after_create` another name of `setup`.
    pub fn from_name(name: &str) -> Option<EventKind> {
        match name {
            "after_loss" => return Some(EventKind::BeforeBackward),
            "after_create" => return Some(EventKind::Setup),
            _ => {}
        }
        EventKind::ALL.into_iter().find(|event| event.written() && event.name() == name)
    }

    /// Whether users bind hooks to the event by name (`fetched` is reached through `deferred`).
    fn written(self) -> bool {
        self != EventKind::Fetched
    }

    /// Whether the event runs once per training (periods and predicates make no sense there).
    pub fn runs_once(self) -> bool {
        matches!(self, EventKind::Setup | EventKind::BeforeTrain | EventKind::AfterTrain)
    }

    /// Whether the event is never gated (a period or a predicate is an error there): the events
    /// that run once, inside a step, around a validation pass or after a cancellation.
    pub fn ungated(self) -> bool {
        self.runs_once() || self.in_step() || self.around()
    }

    /// Whether the event runs inside the step, with its payload (the batch, the model's output,
    /// the loss, the gradients).
    pub fn in_step(self) -> bool {
        matches!(
            self,
            EventKind::BeforeBatch
                | EventKind::AfterPred
                | EventKind::BeforeBackward
                | EventKind::AfterBackward
        )
    }

    /// Whether the event surrounds a validation pass, follows a cancellation, or brings a
    /// deferred read's values (`fetched`, which users do not write): the runtime's
    /// `Phase::Around`.
    pub fn around(self) -> bool {
        matches!(
            self,
            EventKind::Fetched
                | EventKind::AfterBatch
                | EventKind::BeforeValidate
                | EventKind::Validate
                | EventKind::AfterValidate
                | EventKind::AfterCancelBackward
                | EventKind::AfterCancelBatch
                | EventKind::AfterCancelEpoch
                | EventKind::AfterCancelFit
                | EventKind::AfterCancelStep
                | EventKind::AfterCancelTrain
                | EventKind::AfterCancelValidate
        )
    }

    /// The payload parameter an in-step event's method takes, as the runtime's trait writes it:
    /// its name and its type's name in `__private`.
    pub fn payload(self) -> Option<(&'static str, &'static str)> {
        match self {
            EventKind::BeforeBatch => Some(("batch", "StepBatch")),
            EventKind::AfterPred => Some(("pred", "StepPred")),
            EventKind::BeforeBackward => Some(("loss", "StepLoss")),
            EventKind::AfterBackward => Some(("grads", "StepGradients")),
            _ => None,
        }
    }

    /// The value the event's method takes beside the context, as the runtime's trait writes it:
    /// its name and its type's name in `__private` (the payload of an in-step event, or the
    /// fetched values).
    pub fn parameter(self) -> Option<(&'static str, &'static str)> {
        self.payload().or(self.has_values().then_some(("values", "Fetched")))
    }

    /// The list as data, for `__event_table!()`: `[(name, gated, parameter), ...]`.
    pub fn table() -> TokenStream {
        let rows = EventKind::ALL.iter().map(|event| {
            let (name, gated) = (event.name(), !event.ungated());
            let parameter = match event.parameter() {
                Some((name, ty)) => quote!(::core::option::Option::Some((#name, #ty))),
                None => quote!(::core::option::Option::None),
            };
            quote!((#name, #gated, #parameter))
        });
        quote!([#(#rows),*])
    }

    /// Whether the event runs at every step (`PeriodicCallback`'s step gating applies).
    pub fn has_step(self) -> bool {
        matches!(self, EventKind::BeforeStep | EventKind::AfterStep | EventKind::TriggerStep)
    }

    /// Whether the event runs at every epoch's start or end (epoch gating applies).
    pub fn is_epoch(self) -> bool {
        matches!(self, EventKind::BeforeEpoch | EventKind::AfterEpoch | EventKind::TriggerEpoch)
    }

    /// Whether the event receives fetched values.
    pub fn has_values(self) -> bool {
        matches!(self, EventKind::AfterStep | EventKind::Fetched)
    }

    /// The position in [`EventKind::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}
