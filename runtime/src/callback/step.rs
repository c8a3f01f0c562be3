//! The events inside a step: the loss before backward, the gradients before the optimizer.

use std::cell::RefCell;

use burn::optim::GradientsParams;
use burn::tensor::Tensor;

use crate::fetch::{OutputTensor, Outputs};

/// Which events inside a step a callback takes
/// ([`Callback::step_hooks`](crate::callback::Callback::step_hooks)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StepHooks {
    /// [`Callback::before_backward`](crate::callback::Callback::before_backward): the loss, before backward.
    pub loss: bool,
    /// [`Callback::after_backward`](crate::callback::Callback::after_backward): the gradients, before the
    /// optimizer.
    pub gradients: bool,
}

impl StepHooks {
    /// Neither.
    pub const NONE: StepHooks = StepHooks { loss: false, gradients: false };
    /// The loss only.
    pub const LOSS: StepHooks = StepHooks { loss: true, gradients: false };
    /// The gradients only.
    pub const GRADIENTS: StepHooks = StepHooks { loss: false, gradients: true };
}

/// The loss of the step being run, handed to
/// [`Callback::before_backward`](crate::callback::Callback::before_backward): read it, replace it (the
/// replacement is what backward differentiates and what the `"loss"` output holds), and read the step's other
/// outputs (an RNN's activations for an activation penalty).
#[derive(Debug)]
pub struct StepLoss<'a> {
    pub(crate) loss: RefCell<Option<Tensor<1>>>,
    pub(crate) outputs: &'a Outputs,
}

impl StepLoss<'_> {
    /// The loss as it stands (a rank-1 tensor of one element, on the autodiff graph).
    pub fn get(&self) -> Tensor<1> {
        self.loss.borrow().clone().expect("the loss is present during before_backward")
    }
    /// Replace the loss.
    pub fn set(&self, loss: Tensor<1>) {
        *self.loss.borrow_mut() = Some(loss);
    }
    /// Change the loss with `f` (e.g. `|loss| loss + penalty`).
    pub fn update(&self, f: impl FnOnce(Tensor<1>) -> Tensor<1>) {
        let mut slot = self.loss.borrow_mut();
        let loss = slot.take().expect("the loss is present during before_backward");
        *slot = Some(f(loss));
    }
    /// A named output the step put (with the autodiff graph, so a penalty on it trains).
    pub fn output(&self, name: &str) -> Option<&OutputTensor> {
        self.outputs.get(name)
    }
}

/// The gradients of the step being run, handed to
/// [`Callback::after_backward`](crate::callback::Callback::after_backward). A callback may change them, or
/// take them away: when no gradients are left after every callback, the trainer skips the optimizer for this
/// step (gradient accumulation).
#[derive(Debug)]
pub struct StepGradients {
    pub(crate) grads: RefCell<Option<GradientsParams>>,
}

impl StepGradients {
    /// Whether gradients are present (a previous callback may have taken them).
    pub fn is_present(&self) -> bool {
        self.grads.borrow().is_some()
    }
    /// Take the gradients out; unless some callback puts gradients back, the optimizer does not
    /// run at this step.
    pub fn take(&self) -> Option<GradientsParams> {
        self.grads.borrow_mut().take()
    }
    /// Put gradients (back) for the optimizer.
    pub fn set(&self, grads: GradientsParams) {
        *self.grads.borrow_mut() = Some(grads);
    }
    /// Change the gradients in place with `f`, if present.
    pub fn update(&self, f: impl FnOnce(GradientsParams) -> GradientsParams) {
        let mut slot = self.grads.borrow_mut();
        if let Some(grads) = slot.take() {
            *slot = Some(f(grads));
        }
    }
}
