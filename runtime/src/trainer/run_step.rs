//! How the trainer runs one step: the user's forward and loss, the loss and gradient hooks,
//! backward, the exchange with the other ranks, the optimizer; then the step's values for
//! `after_step`.

use std::cell::RefCell;

use burn::module::Module;
use burn::optim::GradientsParams;
use burn::tensor::Tensor;

use super::dispatch::Activity;
use super::run::Run;
use super::{Step, StepOutput, TrainingStep};
use crate::callback::{Callbacks, Event, StepGradients, StepLoss};
use crate::error::{Break, Cancel, Error, Result};

impl<M: Module, K, C: Callbacks<M, K>> Run<M, C, K> {
    /// One step: the user's forward and loss, backward, the optimizer; with the events inside the
    /// step for the callbacks that asked for them.
    #[inline]
    pub(super) fn run_step<B, S>(&mut self, batch: B, step: &mut S) -> Result<()>
    where
        S: TrainingStep<M, B>,
    {
        self.doing(Activity::Step);
        self.fetches.outputs.clear();
        #[cfg(feature = "cuda")]
        if self.state.execution.grads_reduced_by_backend() {
            self.mark_distributed();
        }
        let state = &mut self.state;
        let output = step.step(
            state.model.as_ref().expect("the model is present between steps"),
            batch,
            &mut Step { outputs: &mut self.fetches.outputs, hyper: &state.hyper, counters: &state.counters },
        );
        let grads = match output {
            StepOutput::Loss(mut loss) => {
                if self.dispatch.takes_loss() {
                    loss = self.take_loss(loss)?;
                }
                let model = self.state.model.as_ref().expect("the model is present between steps");
                let grads = GradientsParams::from_grads(loss.backward(), model);
                self.fetches.outputs.put("loss", loss);
                grads
            }
            StepOutput::Gradients { loss, grads } => {
                if self.dispatch.takes_loss() {
                    return Err(self.dispatch.own_backward_refused());
                }
                self.fetches.outputs.put("loss", loss);
                grads
            }
        };
        let mut grads = self.agree_step(grads)?;
        if self.dispatch.takes_gradients() {
            grads = self.take_gradients(grads)?;
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
        self.doing(Activity::Trainer);
        Ok(())
    }

    /// After a step that ran: its values to `after_step`; its deferred values join the next
    /// read, started behind its work when due, even when a callback cancelled in `after_step`
    /// (the step counts: its deferred values arrive, before `after_epoch` or `after_train`); the
    /// values of earlier steps that arrived are delivered.
    #[inline]
    pub(super) fn after_step(&mut self) -> Result<()> {
        let Run { dispatch, state, fetches, .. } = self;
        let values = fetches.values(&state.counters, |i| dispatch.name(i).to_string())?;
        let delivered = dispatch.deliver(state, Event::AfterStep(values));
        let global_step = self.state.counters.global_step;
        self.fetches.defer(global_step)?;
        delivered?;
        if self.fetches.plan.has_pending() {
            self.deliver_deferred(global_step, false)?;
        }
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
    fn take_loss(&mut self, loss: Tensor<1>) -> Result<Tensor<1>> {
        let slot = StepLoss { loss: RefCell::new(Some(loss)), outputs: &self.fetches.outputs };
        self.dispatch.deliver_hook(&mut self.state, Event::BeforeBackward(&slot))?;
        slot.loss.into_inner().ok_or_else(|| Error::msg("a before_backward callback removed the loss"))
    }

    /// `after_backward` for the callbacks that take the gradients. A `Flow::CancelStep` there
    /// (fastai's `CancelStepException` from its `before_step`) drops the gradients: every
    /// callback receives `after_cancel_step`, and the step goes on without its optimizer step.
    #[cold]
    fn take_gradients(&mut self, grads: Option<GradientsParams>) -> Result<Option<GradientsParams>> {
        let slot = StepGradients { grads: RefCell::new(grads) };
        match self.dispatch.deliver_hook(&mut self.state, Event::AfterBackward(&slot)) {
            Ok(()) => Ok(slot.grads.into_inner()),
            Err(Error::Break(Break::Cancel(Cancel::Step))) => {
                drop(slot);
                self.doing(Activity::Trainer);
                self.deliver(Event::AfterCancelStep)?;
                self.doing(Activity::Step);
                Ok(None)
            }
            Err(error) => Err(error),
        }
    }
}
