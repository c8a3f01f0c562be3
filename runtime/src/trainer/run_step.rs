//! How the trainer runs one step: the batch hook, the user's forward and loss (with the hook of
//! the model's output), the loss and gradient hooks, backward, the exchange with the other ranks,
//! the optimizer; then the step's values for `after_step`.

use std::cell::RefCell;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use burn::module::Module;
use burn::optim::GradientsParams;
use burn::tensor::Tensor;

use super::dispatch::{Activity, Dispatcher, Flowing, Halt};
use super::run::Run;
use super::step::PredHook;
use super::{Step, StepOutput, TrainingStep};
use crate::callback::{Callbacks, Event, StepBatch, StepGradients, StepLoss, StepPred, TrainState};
use crate::error::{Cancel, Error};

impl<M: Module, K, C: Callbacks<M, K>> Run<M, C, K> {
    /// One step: the user's forward and loss, backward, the optimizer; with the events inside the
    /// step for the callbacks that asked for them. A panic meanwhile is the step's (or the
    /// callback's, in an event).
    #[inline]
    pub(super) fn run_step<B: 'static, S>(&mut self, batch: B, step: &mut S) -> Flowing
    where
        S: TrainingStep<M, B>,
    {
        self.during(Activity::Step, |run| run.step_once(batch, step))
    }

    /// [`run_step`](Self::run_step)'s work.
    #[inline]
    fn step_once<B: 'static, S>(&mut self, batch: B, step: &mut S) -> Flowing
    where
        S: TrainingStep<M, B>,
    {
        if let Some(seeds) = &self.step_seeds {
            seeds.before_step(self.state.counters.global_step);
        }
        self.fetches.outputs.clear();
        if self.state.execution.prepares_replica() {
            self.prepare_replica();
        }
        let output = match self.dispatch.batch_takers().any() {
            true => self.hooked_step(batch, step)?,
            false => {
                let state = &mut self.state;
                step.step(
                    state.model.as_ref().expect("the model is present between steps"),
                    batch,
                    &mut Step {
                        outputs: &mut self.fetches.outputs,
                        hyper: &state.hyper,
                        counters: &state.counters,
                        pred: None,
                    },
                )
            }
        };
        let grads = match output {
            StepOutput::Loss(loss) => match self.dispatch.takes_loss() {
                false => self.backward(loss),
                true => self.hooked_backward(loss)?,
            },
            StepOutput::Gradients { loss, grads } => {
                if self.dispatch.takes_loss() {
                    return Err(self.dispatch.own_backward_refused().into());
                }
                self.fetches.outputs.put("loss", loss);
                grads
            }
        };
        let grads = if self.state.control.kept_grads.is_some() { self.with_kept_grads(grads) } else { grads };
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
        Ok(())
    }

    /// After a step that ran: its values to `after_step`; its deferred values join the next
    /// read, started behind its work when due, even when a callback cancelled in `after_step`
    /// (the step counts: its deferred values arrive, before `after_epoch` or `after_train`); the
    /// values of earlier steps that arrived are delivered.
    #[inline]
    pub(super) fn after_step(&mut self) -> Flowing {
        let Run { dispatch, state, fetches, .. } = self;
        let values = fetches.values(&state.counters, |i| dispatch.name(i).to_string())?;
        let delivered = dispatch.deliver_in_training(state, Event::AfterStep(values));
        let global_step = self.state.counters.global_step;
        self.fetches.defer(global_step)?;
        delivered?;
        if self.fetches.plan.has_pending() {
            self.deliver_deferred(global_step, false)?;
        }
        Ok(())
    }

    /// The replica made ready for the step's forward by the world's transport (NCCL marks its
    /// parameters distributed, so that its backward returns them averaged over the ranks).
    #[cold]
    fn prepare_replica(&mut self) {
        let model = self.state.model.take().expect("the model is present between steps");
        self.state.model = Some(self.state.execution.prepare_replica(model));
    }

    /// The step with fastai's batch events: `before_batch` for the callbacks that take the
    /// batch, then the step function, handing the model's output to the callbacks that take it.
    #[cold]
    #[inline(never)]
    fn hooked_step<B: 'static, S>(&mut self, batch: B, step: &mut S) -> Flowing<StepOutput>
    where
        S: TrainingStep<M, B>,
    {
        let batch = match self.dispatch.batch_takers().batch() {
            true => {
                let slot = RefCell::new(Some(batch));
                self.dispatch.deliver_hook(&mut self.state, Event::BeforeBatch(&StepBatch::new(&slot)))?;
                slot.into_inner().expect("the batch is in its slot after before_batch")
            }
            false => batch,
        };
        let Run { dispatch, state, fetches, .. } = self;
        if !dispatch.batch_takers().pred() {
            let model = state.model.as_ref().expect("the model is present between steps");
            let (hyper, counters) = (&state.hyper, &state.counters);
            let mut sees = Step { outputs: &mut fetches.outputs, hyper, counters, pred: None };
            return Ok(step.step(model, batch, &mut sees));
        }
        // The step function holds the model while `after_pred` callbacks hold the state: the
        // model is out of the state meanwhile (put back whatever happens), and the step reads
        // the hyper-parameters and counters as they were when it started.
        let model = state.model.take().expect("the model is present between steps");
        let (hyper, counters) = (state.hyper.clone(), state.counters);
        let mut hook = AfterPredHook { dispatch, state, delivered: false, error: None };
        let output = catch_unwind(AssertUnwindSafe(|| {
            let pred = Some(&mut hook as &mut dyn PredHook);
            step.step(
                &model,
                batch,
                &mut Step { outputs: &mut fetches.outputs, hyper: &hyper, counters: &counters, pred },
            )
        }));
        let AfterPredHook { dispatch, state, delivered, error } = hook;
        state.model = Some(model);
        let output = output.unwrap_or_else(|panic| resume_unwind(panic));
        match (error, delivered) {
            (Some(halt), _) => Err(halt),
            (None, false) => Err(dispatch.pred_not_handed_over().into()),
            (None, true) => Ok(output),
        }
    }

    /// Backward from the loss: the gradients; the loss joins the step's outputs.
    #[inline]
    fn backward(&mut self, loss: Tensor<1>) -> GradientsParams {
        let model = self.state.model.as_ref().expect("the model is present between steps");
        let grads = GradientsParams::from_grads(loss.backward(), model);
        self.fetches.outputs.put("loss", loss);
        grads
    }

    /// `before_backward` for the callbacks that take the loss, then backward. A
    /// `Flow::CancelBackward` there (fastai's `CancelBackwardException`) skips backward: every
    /// callback receives `after_cancel_backward`, and the step goes on with zero gradients (the
    /// `.grad` fastai's optimizer steps with after its `zero_grad`), to which the gradients a
    /// `CancelBatch` kept are added as to any step's.
    #[cold]
    fn hooked_backward(&mut self, loss: Tensor<1>) -> Flowing<GradientsParams> {
        let slot = StepLoss { loss: RefCell::new(Some(loss)), outputs: &self.fetches.outputs };
        let cancelled = match self.dispatch.deliver_hook(&mut self.state, Event::BeforeBackward(&slot)) {
            Ok(()) => false,
            Err(Halt::Cancel(Cancel::Backward)) => true,
            Err(halt) => return Err(halt),
        };
        let loss = slot.loss.into_inner();
        let loss = loss.ok_or_else(|| Error::misuse("a before_backward callback removed the loss"))?;
        if !cancelled {
            return Ok(self.backward(loss));
        }
        self.fetches.outputs.put("loss", loss);
        self.dispatch.deliver_in_training(&mut self.state, Event::AfterCancelBackward)?;
        let model = self.state.model.as_ref().expect("the model is present between steps");
        let mut zeros = GradientsParams::new();
        model.visit(&mut crate::modify::ZeroGrads { grads: &mut zeros });
        Ok(zeros)
    }

    /// The gradients a `CancelBatch` kept, added into this step's (fastai's backward adds
    /// into the `.grad` that its cancelled batch did not zero).
    #[cold]
    fn with_kept_grads(&mut self, mut grads: GradientsParams) -> GradientsParams {
        let kept = self.state.control.kept_grads.take().expect("kept gradients");
        let model = self.state.model.as_ref().expect("the model is present between steps");
        model.visit(&mut crate::modify::AddGrads { sum: &mut grads, new: kept });
        grads
    }

    /// `after_backward` for the callbacks that take the gradients. A `Flow::CancelStep` there
    /// (fastai's `CancelStepException` from its `before_step`) drops the gradients: every
    /// callback receives `after_cancel_step`, and the step goes on without its optimizer step.
    /// A `Flow::CancelBatch` keeps them for the next step's backward to add into (fastai skips
    /// `step` and `zero_grad`: its `GradientAccumulation`).
    #[cold]
    fn take_gradients(&mut self, grads: Option<GradientsParams>) -> Flowing<Option<GradientsParams>> {
        let slot = StepGradients { grads: RefCell::new(grads) };
        match self.dispatch.deliver_hook(&mut self.state, Event::AfterBackward(&slot)) {
            Ok(()) => Ok(slot.grads.into_inner()),
            Err(Halt::Cancel(Cancel::Step)) => {
                drop(slot);
                self.dispatch.deliver_in_training(&mut self.state, Event::AfterCancelStep)?;
                Ok(None)
            }
            Err(Halt::Cancel(Cancel::Batch)) => {
                self.state.control.kept_grads = slot.grads.into_inner();
                Err(Halt::Cancel(Cancel::Batch))
            }
            Err(halt) => Err(halt),
        }
    }
}

/// The `after_pred` callbacks, reached from the step function through [`Step::pred`].
struct AfterPredHook<'r, C, M, K> {
    dispatch: &'r mut Dispatcher<C, M, K>,
    state: &'r mut TrainState<M>,
    /// Whether the step function handed an output over.
    delivered: bool,
    /// The first error or cancel a callback returned; the outputs handed over after it are left
    /// as they are.
    error: Option<Halt>,
}

impl<C: Callbacks<M, K>, M, K> PredHook for AfterPredHook<'_, C, M, K> {
    fn after_pred(&mut self, pred: &StepPred<'_>) {
        self.delivered = true;
        if self.error.is_none() {
            self.error = self.dispatch.deliver_hook(self.state, Event::AfterPred(pred)).err();
        }
    }
}
