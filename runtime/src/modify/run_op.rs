//! tensorpack's `RunOp` and `RunUpdateOps`: a closure run on the model between steps.

use std::fmt;

use crate::callback::{Callback, Context};
use crate::error::Result;

/// Runs a closure on the model (tensorpack's `RunOp`, whose op becomes a Rust closure): before
/// training ([`run_before`](Self::run_before), on by default), at each `trigger`
/// ([`run_as_trigger`](Self::run_as_trigger), on by default: every epoch, or at another period
/// under [`PeriodicTrigger`](crate::trigger::PeriodicTrigger)), and with every step
/// ([`run_step`](Self::run_step), off by default: before each step, so that the step trains on
/// what it did) or after every step ([`run_after_step`](Self::run_after_step): on the weights
/// the step produced, as WGAN's weight clipping or a target network's update wants).
///
/// The closure gets the model mutably (`FnMut(&mut M)`); a burn module is changed by replacing
/// it (`*model = model.clone().map(&mut mapper)`), where a mapper that computes new weights
/// makes them fresh leaves (`detach`) that keep `require_grad`, so that the next step trains
/// them, as with
/// [`Context::model_mut`](crate::callback::Context::model_mut). It runs between steps, where a
/// change is always safe; nothing of it happens on the step's path when only the trigger is on.
/// With [`verbose`](Self::verbose) each run is announced on stderr, as tensorpack logs it.
///
/// In data-parallel training it runs on every rank (tensorpack's `_chief_only = False`): it
/// changes what every replica trains, so every replica must run it.
///
/// tensorpack's `RunUpdateOps` (the `UPDATE_OPS` collection run with every step) is
/// [`RunOp::update_ops`]: only with the steps.
///
/// ```
/// use burn::module::Module;
/// use burn_stoker::modify::RunOp;
///
/// // Clip every weight of the model to [-0.01, 0.01] after each step (WGAN).
/// struct Clip;
/// impl burn::module::ModuleMapper for Clip {
///     fn map_float<const D: usize>(
///         &mut self,
///         param: burn::module::Param<burn::tensor::Tensor<D>>,
///     ) -> burn::module::Param<burn::tensor::Tensor<D>> {
///         param.map(|t| {
///             let clipped = t.clone().clamp(-0.01, 0.01).detach();
///             if t.is_require_grad() { clipped.require_grad() } else { clipped }
///         })
///     }
/// }
/// let clip = RunOp::new(|model: &mut burn::nn::Linear| *model = model.clone().map(&mut Clip))
///     .run_before(false)
///     .run_as_trigger(false)
///     .run_after_step(true);
/// # let _ = clip;
/// ```
#[derive(Clone)]
pub struct RunOp<F> {
    op: F,
    run_before: bool,
    run_as_trigger: bool,
    run_step: bool,
    run_after_step: bool,
    verbose: bool,
}
crate::kind::kind!(RunOp<F>);

/// tensorpack's `RunUpdateOps`: a [`RunOp`] run only with every step, made by
/// [`RunOp::update_ops`].
pub type RunUpdateOps<F> = RunOp<F>;

impl<F> fmt::Debug for RunOp<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunOp")
            .field("run_before", &self.run_before)
            .field("run_as_trigger", &self.run_as_trigger)
            .field("run_step", &self.run_step)
            .field("run_after_step", &self.run_after_step)
            .finish_non_exhaustive()
    }
}

impl<F> RunOp<F> {
    /// Run `op` before training and at each trigger (tensorpack's defaults).
    pub fn new(op: F) -> Self {
        RunOp {
            op,
            run_before: true,
            run_as_trigger: true,
            run_step: false,
            run_after_step: false,
            verbose: false,
        }
    }
    /// tensorpack's `RunUpdateOps`: run `op` before every step, and neither before training
    /// nor at the trigger.
    pub fn update_ops(op: F) -> Self {
        RunOp::new(op).run_before(false).run_as_trigger(false).run_step(true)
    }
    /// Run it in `before_train`.
    pub fn run_before(mut self, enable: bool) -> Self {
        self.run_before = enable;
        self
    }
    /// Run it at each `trigger`.
    pub fn run_as_trigger(mut self, enable: bool) -> Self {
        self.run_as_trigger = enable;
        self
    }
    /// Run it before every step (tensorpack's `run_step`: along with the step).
    pub fn run_step(mut self, enable: bool) -> Self {
        self.run_step = enable;
        self
    }
    /// Run it after every step, in `trigger_step`.
    pub fn run_after_step(mut self, enable: bool) -> Self {
        self.run_after_step = enable;
        self
    }
    /// Announce each run on stderr (tensorpack's `verbose`).
    pub fn verbose(mut self, enable: bool) -> Self {
        self.verbose = enable;
        self
    }

    fn run<M>(&mut self, ctx: &mut Context<'_, M>, when: &str) -> Result<()>
    where
        F: FnMut(&mut M),
    {
        if self.verbose {
            crate::logging::info!("RunOp: running {when} at global step {}", ctx.global_step());
        }
        (self.op)(ctx.model_mut());
        Ok(())
    }
}

impl<M, F: FnMut(&mut M)> Callback<M> for RunOp<F> {
    /// Every rank: it changes what each replica trains.
    fn chief_only(&self) -> bool {
        false
    }
    fn before_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if self.run_before { self.run(ctx, "before training") } else { Ok(()) }
    }
    fn before_step(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if self.run_step { self.run(ctx, "with the step") } else { Ok(()) }
    }
    fn trigger_step(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if self.run_after_step { self.run(ctx, "after the step") } else { Ok(()) }
    }
    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if self.run_as_trigger { self.run(ctx, "as a trigger") } else { Ok(()) }
    }
}
