//! The events of a training run.

use super::step::{StepGradients, StepLoss};
use crate::fetch::Fetched;

/// The events of a training run, in tensorpack's order:
///
/// ```text
/// setup, before_train,
/// for each epoch: before_epoch,
///     for each step: before_step, <step>, after_step(values), trigger_step
///     after_epoch, trigger_epoch (which calls trigger by default)
/// after_train (always: after success, a stop, an error or a panic)
/// ```
#[derive(Debug, Clone, Copy)]
pub enum Event<'v> {
    /// Once, before anything runs.
    Setup,
    /// After setup, before the first step.
    BeforeTrain,
    /// At the start of each epoch.
    BeforeEpoch,
    /// Before each step.
    BeforeStep,
    /// After each step, with the values fetched at it.
    AfterStep(Fetched<'v>),
    /// After each step's `after_step`; `global_step` counts the step.
    TriggerStep,
    /// At the end of each epoch.
    AfterEpoch,
    /// After `after_epoch`; by default calls `trigger`.
    TriggerEpoch,
    /// Only when a wrapper (such as [`PeriodicTrigger`](crate::PeriodicTrigger)) calls it.
    Trigger,
    /// Always, last.
    AfterTrain,
    /// Inside a step, after the forward pass and before backward: the loss may be changed
    /// (fastai's `after_loss`). Only for callbacks whose [`Callback::step_hooks`] ask for it.
    BeforeBackward(&'v StepLoss<'v>),
    /// Inside a step, after backward and before the optimizer: the gradients may be changed or
    /// withheld (fastai's `after_backward`). Only for callbacks whose [`Callback::step_hooks`] ask
    /// for it.
    AfterBackward(&'v StepGradients),
}

impl Event<'_> {
    /// The event's name, as written in `#[callback(on = ...)]`.
    pub fn name(&self) -> &'static str {
        match self {
            Event::Setup => "setup",
            Event::BeforeTrain => "before_train",
            Event::BeforeEpoch => "before_epoch",
            Event::BeforeStep => "before_step",
            Event::AfterStep(_) => "after_step",
            Event::TriggerStep => "trigger_step",
            Event::AfterEpoch => "after_epoch",
            Event::TriggerEpoch => "trigger_epoch",
            Event::Trigger => "trigger",
            Event::AfterTrain => "after_train",
            Event::BeforeBackward(_) => "before_backward",
            Event::AfterBackward(_) => "after_backward",
        }
    }
}
