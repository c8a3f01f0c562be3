//! tensorpack's `CheckNumerics`: the weights checked for NaN and infinities.

use std::borrow::Cow;

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::Tensor;

use crate::callback::{Callback, Context};
use crate::error::{Error, Result};

/// Checks every float parameter of the model for NaN and infinite values (tensorpack's
/// `CheckNumerics`) at each `trigger` (every epoch; another period under
/// [`PeriodicTrigger`](crate::trigger::PeriodicTrigger)), and with [`run_step`](Self::run_step)
/// after every step too. A non-finite weight is reported by the module path of its parameter
/// (`encoder.layers.0.weight`), the first one in the model's order, with how many of its values
/// are not finite.
///
/// What then happens: tensorpack raises, and so does this by default, so the run fails with an
/// error naming the parameter (after `after_train`, as any error). With
/// [`stop`](Self::stop) the run stops cleanly instead, as
/// [`TerminateOnNaN`](super::TerminateOnNaN) does: at that step's boundary, without writing a
/// checkpoint from then on, with [`Outcome::NonFinite`](crate::callback::Outcome::NonFinite).
///
/// A check counts the non-finite values of each parameter on the device and reads them back in
/// one transfer. It runs on the chief (tensorpack's `_chief_only = True`): the replicas hold the
/// same weights.
///
/// ```
/// use burn_stoker::debug::CheckNumerics;
/// use burn_stoker::trigger::PeriodicTrigger;
///
/// // Every 100 steps, stopping the run cleanly on a non-finite weight.
/// let check = PeriodicTrigger::new(CheckNumerics::new().stop()).every_k_steps(100);
/// # let _ = check;
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckNumerics {
    run_step: bool,
    stop: bool,
}
crate::kind::kind!(CheckNumerics);

impl CheckNumerics {
    /// Check at each trigger; a non-finite weight is an error.
    pub fn new() -> Self {
        CheckNumerics { run_step: false, stop: false }
    }
    /// Check after every step too (one transfer per step).
    pub fn run_step(mut self, enable: bool) -> Self {
        self.run_step = enable;
        self
    }
    /// Stop training cleanly on a non-finite weight instead of failing with an error.
    pub fn stop(mut self) -> Self {
        self.stop = true;
        self
    }

    fn check<M: Module>(&self, ctx: &mut Context<'_, M>) -> Result<()> {
        let mut visitor = CountNonFinite { path: Vec::new(), found: Vec::new() };
        ctx.model().visit(&mut visitor);
        if visitor.found.is_empty() {
            return Ok(());
        }
        let (names, counts): (Vec<String>, Vec<Tensor<1>>) = visitor.found.into_iter().unzip();
        // One transfer for every parameter.
        let counts: Vec<f32> = Tensor::cat(counts, 0).into_data().iter::<f32>().collect();
        let Some((index, count)) = counts.iter().enumerate().find(|(_, c)| **c > 0.0) else {
            return Ok(());
        };
        let reason = format!(
            "parameter `{}` holds {count} non-finite value(s) (NaN or infinite) at global step {} (epoch {})",
            names[index],
            ctx.global_step(),
            ctx.epoch_num()
        );
        if self.stop {
            crate::logging::error!(
                "CheckNumerics: {reason}: training stops at this step, without its checkpoint"
            );
            ctx.stop_non_finite(reason);
            Ok(())
        } else {
            Err(Error::NonFinite(format!("CheckNumerics: {reason}")))
        }
    }
}

/// The number of non-finite values of each float parameter, on the device, with its path.
struct CountNonFinite {
    path: Vec<String>,
    found: Vec<(String, Tensor<1>)>,
}

impl ModuleVisitor for CountNonFinite {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_string());
    }
    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let bad = param.val().detach().is_finite().bool_not().float().sum();
        self.found.push((self.path.join("."), bad));
    }
}

impl<M: Module> Callback<M> for CheckNumerics {
    fn name(&self) -> Cow<'static, str> {
        crate::kind::name_of::<Self>()
    }
    fn trigger_step(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if self.run_step { self.check(ctx) } else { Ok(()) }
    }
    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.check(ctx)
    }
}
