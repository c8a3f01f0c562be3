//! One training step: what the user's step function sees ([`Step`]), and how the trainer runs
//! it (forward and loss, the loss and gradient hooks, backward, the optimizer).

use std::cell::RefCell;

use burn::module::Module;
use burn::optim::GradientsParams;
use burn::tensor::Tensor;

use super::run::{Phase, Run, wrap};
use crate::callback::{Callbacks, Context, Counters, Event, StepGradients, StepLoss};
use crate::error::{Error, Result};
use crate::fetch::{OutputTensor, Outputs};
use crate::state::HyperParams;

/// What the training step sees besides the model and the batch: where to put named outputs, the
/// hyper-parameters and the counters.
pub struct Step<'a> {
    pub(super) outputs: &'a mut Outputs,
    pub(super) hyper: &'a HyperParams,
    pub(super) counters: &'a Counters,
}

impl Step<'_> {
    /// Put a named output (`"accuracy"`, logits...) that callbacks may fetch. The loss is always
    /// there as `"loss"`.
    #[inline]
    pub fn output(&mut self, name: &'static str, tensor: impl Into<OutputTensor>) {
        self.outputs.put(name, tensor);
    }
    /// The outputs put so far, to hand to code shared with inference.
    pub fn outputs(&mut self) -> &mut Outputs {
        self.outputs
    }
    /// A hyper-parameter's current value.
    pub fn hyper(&self, name: &str) -> Option<f64> {
        self.hyper.get(name)
    }
    /// The counters (`global_step` counts the steps before this one).
    pub fn counters(&self) -> &Counters {
        self.counters
    }
}

impl<M: Module, K, C: Callbacks<M, K>> Run<M, C, K> {
    /// One step: the user's forward and loss, backward, the optimizer; with the events inside the
    /// step for the callbacks that asked for them.
    #[inline]
    pub(super) fn run_step<B, F>(&mut self, batch: B, step: &mut F) -> Result<()>
    where
        F: FnMut(&M, B, &mut Step<'_>) -> Tensor<1>,
    {
        self.phase = Phase::Step;
        self.outputs.clear();
        #[cfg(feature = "cuda")]
        if self.state.world.as_ref().is_some_and(|agreement| agreement.world.grads_reduced_by_backend()) {
            self.mark_distributed();
        }
        let state = &mut self.state;
        let mut loss = step(
            state.model.as_ref().expect("the model is present between steps"),
            batch,
            &mut Step { outputs: &mut self.outputs, hyper: &state.hyper, counters: &state.counters },
        );
        if !self.loss_hooks.is_empty() {
            loss = self.loss_hooks_run(loss)?;
        }
        let state = &mut self.state;
        let model = state.model.as_ref().expect("the model is present between steps");
        let mut grads = Some(GradientsParams::from_grads(loss.backward(), model));
        self.outputs.put("loss", loss);
        if self.state.world.is_some() {
            grads = self.agree_step(grads.take().expect("the gradients were just computed"))?;
        }
        if !self.grad_hooks.is_empty() {
            grads = self.grad_hooks_run(grads)?;
        }
        let state = &mut self.state;
        if let Some(grads) = grads {
            let model = state.model.take().expect("the model is present between steps");
            state.model = Some(state.optimizer.step(state.hyper.learning_rate(), model, grads));
        }
        state.counters.global_step += 1;
        state.counters.local_step += 1;
        state.monitors.global_step = state.counters.global_step;
        self.phase = Phase::Trainer;
        Ok(())
    }

    /// Mark the replica's parameters distributed before the step's forward, so that its backward
    /// returns them averaged over the ranks (burn's `DistributedContext`, CUDA). Every step: a
    /// backward consumes the marks, and burn's optimizers put them back only on the parameters
    /// they update.
    #[cfg(feature = "cuda")]
    #[cold]
    fn mark_distributed(&mut self) {
        let model = self.state.model.take().expect("the model is present between steps");
        self.state.model = Some(crate::world::cuda::mark_distributed(model));
    }

    /// `before_backward` for the callbacks that take the loss.
    #[cold]
    fn loss_hooks_run(&mut self, loss: Tensor<1>) -> Result<Tensor<1>> {
        let slot = StepLoss { loss: RefCell::new(Some(loss)), outputs: &self.outputs };
        for &i in &self.loss_hooks {
            self.phase = Phase::Callback(i, "before_backward");
            let mut ctx = Context { state: &mut self.state };
            self.callbacks
                .dispatch(i, Event::BeforeBackward(&slot), &mut ctx)
                .map_err(|e| wrap(&self.names[i], "before_backward", e))?;
        }
        self.phase = Phase::Step;
        slot.loss.into_inner().ok_or_else(|| Error::msg("a before_backward callback removed the loss"))
    }

    /// `after_backward` for the callbacks that take the gradients.
    #[cold]
    fn grad_hooks_run(&mut self, grads: Option<GradientsParams>) -> Result<Option<GradientsParams>> {
        let slot = StepGradients { grads: RefCell::new(grads) };
        for &i in &self.grad_hooks {
            self.phase = Phase::Callback(i, "after_backward");
            let mut ctx = Context { state: &mut self.state };
            self.callbacks
                .dispatch(i, Event::AfterBackward(&slot), &mut ctx)
                .map_err(|e| wrap(&self.names[i], "after_backward", e))?;
        }
        self.phase = Phase::Step;
        Ok(slot.grads.into_inner())
    }
}
