//! What a training step is: what the user's step function sees ([`Step`]), what it hands back
//! ([`StepOutput`]), and the trait a step implements ([`TrainingStep`], [`LossFn`] for a
//! closure). How the trainer runs one is `run_step`'s.

use std::cell::RefCell;

use burn::module::Module;
use burn::optim::{GradientsParams, ModuleOptimizer};
use burn::tensor::Tensor;

use crate::callback::{Counters, StepPred};
use crate::fetch::{OutputTensor, Outputs};
use crate::state::HyperParams;

/// What the training step sees besides the model and the batch: where to put named outputs, the
/// hyper-parameters and the counters; and [`pred`](Self::pred), which hands the model's output to
/// fastai's `after_pred` callbacks.
pub struct Step<'a> {
    pub(super) outputs: &'a mut Outputs,
    pub(super) hyper: &'a HyperParams,
    pub(super) counters: &'a Counters,
    /// The callbacks that take the model's output; `None` when none does.
    pub(super) pred: Option<&'a mut dyn PredHook>,
}

/// Where [`Step::pred`] hands the model's output: the `after_pred` callbacks, by way of the
/// trainer (`run_step`).
pub(super) trait PredHook {
    /// Deliver `after_pred` with `pred`. An error is kept for the trainer, which returns it once
    /// the step function is done: the output is then left as it was.
    fn after_pred(&mut self, pred: &StepPred<'_>);
}

impl Step<'_> {
    /// Hand the model's output to the callbacks that take it in `after_pred` (fastai's
    /// `after_pred`: read it, replace it), and compute the loss from what this returns:
    ///
    /// ```
    /// use burn::nn::Linear;
    /// use burn::tensor::Tensor;
    /// use burn_stoker::trainer::Step;
    ///
    /// // A step function, for `Trainer::train(mse_step)`.
    /// fn mse_step(model: &Linear, (x, y): (Tensor<2>, Tensor<2>), step: &mut Step<'_>) -> Tensor<1> {
    ///     let pred = step.pred(model.forward(x));
    ///     (pred - y).powi_scalar(2).mean()
    /// }
    /// # let _ = mse_step;
    /// ```
    ///
    /// `T` is whatever the model returns (a tensor, a tuple, a struct of `'static` types), and
    /// the callbacks read it as that type ([`StepPred`]). When no callback takes the output this
    /// returns `pred` at the cost of one branch, so a step may always call it; when some do, a
    /// step that does not call it fails with an error saying so (their `after_pred` would never
    /// run). Called twice in a step (two models), it delivers `after_pred` twice. An error or a
    /// cancel a callback returns ends the step once the step function returns, before backward.
    #[inline]
    pub fn pred<T: 'static>(&mut self, pred: T) -> T {
        match &mut self.pred {
            None => pred,
            Some(hook) => {
                let slot = RefCell::new(Some(pred));
                hook.after_pred(&StepPred::new(&slot));
                slot.into_inner().expect("the model's output is in its slot after after_pred")
            }
        }
    }
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
