//! One training step: what the user's step function sees ([`Step`]), and how the trainer runs
//! it (forward and loss, the loss and gradient hooks, backward, the optimizer).

use std::cell::RefCell;

use burn::module::Module;
use burn::optim::{GradientsParams, ModuleOptimizer};
use burn::tensor::Tensor;

use super::main_loop::callback_error;
use super::run::{Phase, Run};
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

/// What a training step hands back to the trainer: the loss, for the trainer to run backward on
/// (a step function), or the gradients it computed itself with the loss they came from (burn-train's
/// `TrainStep`, through [`burn_train::LearnerStep`](crate::burn_train::LearnerStep)).
pub enum StepOutput {
    /// The loss: the trainer runs the `before_backward` callbacks on it, then backward.
    Loss(Tensor<1>),
    /// Gradients the step computed itself (it ran backward), and the loss they are of (put as
    /// `"loss"`). A callback that takes the loss in `before_backward` cannot change them: the
    /// trainer refuses to start such a run.
    Gradients {
        /// The loss backward ran on.
        loss: Tensor<1>,
        /// The gradients of the model's parameters.
        grads: GradientsParams,
    },
}

/// How one training step is computed and applied: what [`Trainer::train_with`](super::Trainer::train_with)
/// runs at every step, statically dispatched.
///
/// [`Trainer::train`](super::Trainer::train) takes a closure computing the loss
/// ([`LossFn`]); [`burn_train::LearnerStep`](crate::burn_train::LearnerStep) (feature `burn-train`)
/// runs a model's burn-train `TrainStep` unchanged. Implement it for a step of your own that computes
/// its gradients or applies them in its own way.
pub trait TrainingStep<M, B> {
    /// Whether [`step`](TrainingStep::step) returns [`StepOutput::Gradients`]: then a callback that
    /// takes the loss in `before_backward` is refused before the first step.
    const OWN_BACKWARD: bool = false;
    /// The forward (and, for [`StepOutput::Gradients`], backward) pass of one batch; named outputs
    /// go to `step.outputs()`.
    fn step(&mut self, model: &M, batch: B, step: &mut Step<'_>) -> StepOutput;
    /// Apply the gradients: by default `optimizer.step(learning_rate, model, grads)`.
    #[inline]
    fn optimize(
        &mut self,
        model: M,
        optimizer: &mut ModuleOptimizer,
        learning_rate: f64,
        grads: GradientsParams,
    ) -> M
    where
        M: Module,
    {
        optimizer.step(learning_rate, model, grads)
    }
}

/// A step function computing the loss, `|model, batch, step| -> loss`, as a [`TrainingStep`]:
/// what [`Trainer::train`](super::Trainer::train) wraps its closure in.
#[derive(Debug, Clone, Copy)]
pub struct LossFn<F>(pub F);

impl<M, B, F> TrainingStep<M, B> for LossFn<F>
where
    F: FnMut(&M, B, &mut Step<'_>) -> Tensor<1>,
{
    #[inline]
    fn step(&mut self, model: &M, batch: B, step: &mut Step<'_>) -> StepOutput {
        StepOutput::Loss((self.0)(model, batch, step))
    }
}

impl<M: Module, K, C: Callbacks<M, K>> Run<M, C, K> {
    /// One step: the user's forward and loss, backward, the optimizer; with the events inside the
    /// step for the callbacks that asked for them.
    #[inline]
    pub(super) fn run_step<B, S>(&mut self, batch: B, step: &mut S) -> Result<()>
    where
        S: TrainingStep<M, B>,
    {
        self.phase = Phase::Step;
        self.outputs.clear();
        #[cfg(feature = "cuda")]
        if self.state.world.as_ref().is_some_and(|agreement| agreement.world.grads_reduced_by_backend()) {
            self.mark_distributed();
        }
        let state = &mut self.state;
        let output = step.step(
            state.model.as_ref().expect("the model is present between steps"),
            batch,
            &mut Step { outputs: &mut self.outputs, hyper: &state.hyper, counters: &state.counters },
        );
        let mut grads = Some(match output {
            StepOutput::Loss(mut loss) => {
                if !self.loss_hooks.is_empty() {
                    loss = self.loss_hooks_run(loss)?;
                }
                let model = self.state.model.as_ref().expect("the model is present between steps");
                let grads = GradientsParams::from_grads(loss.backward(), model);
                self.outputs.put("loss", loss);
                grads
            }
            StepOutput::Gradients { loss, grads } => {
                if !self.loss_hooks.is_empty() {
                    return Err(self.own_backward_refused());
                }
                self.outputs.put("loss", loss);
                grads
            }
        });
        if self.state.world.is_some() {
            grads = self.agree_step(grads.take().expect("the gradients were just computed"))?;
        }
        if !self.grad_hooks.is_empty() {
            grads = self.grad_hooks_run(grads)?;
        }
        let state = &mut self.state;
        if let Some(grads) = grads {
            let model = state.model.take().expect("the model is present between steps");
            state.model =
                Some(step.optimize(model, &mut state.optimizer, state.hyper.learning_rate(), grads));
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

    /// The error for callbacks that take the loss in `before_backward` under a step that ran
    /// backward itself.
    #[cold]
    pub(super) fn own_backward_refused(&self) -> Error {
        let takers: Vec<String> = self.loss_hooks.iter().map(|&i| format!("`{}`", self.names[i])).collect();
        Error::msg(format!(
            "{} take the loss in before_backward, but this training step runs backward itself (a burn-train TrainStep): the loss they would change is already differentiated. Compute the loss with Trainer::train, or change the gradients in after_backward instead",
            takers.join(", ")
        ))
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
                .map_err(|e| callback_error(&mut self.state, &self.names, i, "before_backward", e))?;
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
                .map_err(|e| callback_error(&mut self.state, &self.names, i, "after_backward", e))?;
        }
        self.phase = Phase::Step;
        Ok(slot.grads.into_inner())
    }
}
