//! burn's learning-rate schedulers as a setter.

use std::borrow::Cow;
use std::fmt;

use burn::lr_scheduler::module_lr_scheduler::ModuleLrScheduler;

use super::{LEARNING_RATE, Target};
use crate::callback::{Callback, Context};
use crate::error::Result;

/// Sets the learning rate from one of burn's learning-rate schedulers (`burn::lr_scheduler`:
/// constant, linear, cosine annealing, exponential, Noam, step, sequential, composed) once per
/// step: step `n` (the `n`-th of the whole run, 1-based) uses the scheduler's `n`-th value, as
/// burn-train's `Learner` does.
///
/// It takes what a scheduler config's `init()` returns (burn's `ModuleLrScheduler`), or any
/// [`LrScheduler`](burn::lr_scheduler::LrScheduler). The value for the first step is set in
/// `before_train`, each next one in `trigger_step`, so between steps the learning rate is the one
/// the next step will use.
///
/// A resumed run is exact: in `before_train` a copy of the scheduler as it was given is stepped
/// through the `global_step` values the earlier run used, so step `n` again gets the `n`-th value
/// — whatever the scheduler's kind, including a custom one whose record saves nothing, and also
/// when this setter was added only when resuming. (burn's schedulers are pure functions of the
/// number of steps; the catch-up costs `global_step` calls to `step()` once.) Nothing is saved
/// in checkpoints. If a step's `trigger_step` is not delivered (the callback is gated), the next
/// one catches up.
///
/// Only the scheduler's base rate (the group of all parameters) is used: the trainer has one
/// learning rate, so rates of groups added with `with_group` are ignored. A value that is not
/// finite is an error.
///
/// In data-parallel training it runs on every rank: its value depends on the step alone, so
/// every replica sets the same one.
///
/// ```
/// # use burn_stoker::prelude::*;
/// # use burn_stoker::param::LrSchedulerSetter;
/// # use burn::nn::{Linear, LinearConfig};
/// # use burn::optim::SgdConfig;
/// # use burn::tensor::Tensor;
/// # use std::sync::{Arc, Mutex};
/// use burn::lr_scheduler::linear::LinearLrSchedulerConfig;
/// # let device = burn_stoker::device::cpu();
/// # let model: Linear = LinearConfig::new(2, 1).init(&device);
/// # let batches = vec![(Tensor::<2>::ones([4, 2], &device), Tensor::<2>::zeros([4, 1], &device)); 3];
/// // From 0.5 down to 0.1 over 4 steps, then 0.1.
/// let warmdown = LrSchedulerSetter::new(LinearLrSchedulerConfig::new(0.5, 0.1, 4).init()?);
/// let used = Arc::new(Mutex::new(Vec::new()));
/// let seen = used.clone();
/// Trainer::new(model, SgdConfig::new().init(), batches)
///     .max_epoch(2)
///     .log_dir(std::env::temp_dir().join(format!("stoker-doc-lr-scheduler-{}", std::process::id())))
///     .default_callbacks(DefaultCallbacks::none())
///     .callbacks(warmdown)
///     .train(move |model: &Linear, (x, y): (Tensor<2>, Tensor<2>), step: &mut Step<'_>| {
///         seen.lock().unwrap().push(step.hyper("learning_rate").unwrap());
///         (model.forward(x) - y).powi_scalar(2).mean()
///     })?;
/// let used = used.lock().unwrap();
/// let expected = [0.5, 0.4, 0.3, 0.2, 0.1, 0.1];
/// assert!(used.iter().zip(expected).all(|(u, e)| (u - e).abs() < 1e-12), "{used:?}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
#[doc(alias = "LRScheduler")]
#[doc(alias = "lr_scheduler")]
pub struct LrSchedulerSetter {
    target: Target,
    /// The scheduler as it was given.
    initial: ModuleLrScheduler,
    /// The scheduler in use, and how many values it has given.
    running: Option<(ModuleLrScheduler, u64)>,
}
crate::kind::kind!(LrSchedulerSetter);

impl fmt::Debug for LrSchedulerSetter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LrSchedulerSetter")
            .field("param", &self.target.param)
            .field("values_given", &self.running.as_ref().map(|(_, n)| *n))
            .finish_non_exhaustive()
    }
}

impl LrSchedulerSetter {
    /// Set the learning rate from `scheduler` (what burn's `XxxLrSchedulerConfig::init()`
    /// returns, or any `LrScheduler`).
    pub fn new(scheduler: impl Into<ModuleLrScheduler>) -> Self {
        LrSchedulerSetter {
            target: Target::new::<Self>(Cow::Borrowed(LEARNING_RATE)).quiet(),
            initial: scheduler.into(),
            running: None,
        }
    }
    /// Drive another hyper-parameter than the learning rate.
    pub fn param(mut self, param: impl Into<Cow<'static, str>>) -> Self {
        self.target = Target::new::<Self>(param.into()).quiet();
        self
    }

    /// Set the value step `step` (1-based) uses: the scheduler's `step`-th value.
    fn set_for_step<M>(&mut self, ctx: &mut Context<'_, M>, step: u64) -> Result<()> {
        let (scheduler, given) = self.running.get_or_insert_with(|| (self.initial.clone(), 0));
        let mut value = None;
        while *given < step {
            value = Some(scheduler.step().base());
            *given += 1;
        }
        match value {
            Some(value) => self.target.set(ctx, value),
            None => Ok(()),
        }
    }
}

impl<M> Callback<M> for LrSchedulerSetter {
    /// Every rank: each replica sets the learning rate it trains with.
    fn chief_only(&self) -> bool {
        false
    }
    fn name(&self) -> Cow<'static, str> {
        self.target.name()
    }
    fn setup(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.running = None;
        self.target.check(ctx)
    }
    fn before_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.running = None;
        self.set_for_step(ctx, ctx.global_step() + 1)
    }
    fn trigger_step(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.set_for_step(ctx, ctx.global_step() + 1)
    }
}
