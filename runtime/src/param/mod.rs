//! Hyper-parameters and the callbacks that set them.
//!
//! A run's [`HyperParams`](crate::state::HyperParams) hold the learning rate (built in) and any other named
//! value: a plain number kept by the trainer
//! ([`Trainer::hyper_param`](crate::trainer::Trainer::hyper_param)), or a value that lives in an object of
//! yours — a dropout rate, an augmentation strength — read and written through a getter and a setter
//! (tensorpack's `ObjAttrParam`: [`Trainer::hyper_param_fn`](crate::trainer::Trainer::hyper_param_fn), or a
//! [`SharedParam`](crate::state::SharedParam) with
//! [`Trainer::hyper_param_shared`](crate::trainer::Trainer::hyper_param_shared)). Every kind is read and set
//! by name ([`Context::hyper`], [`Context::hyper_mut`], [`Step::hyper`](crate::trainer::Step::hyper)), saved
//! in every checkpoint and restored on resume.
//!
//! The setters, each a callback:
//!
//! | callback | sets the value | from |
//! |---|---|---|
//! | [`ScheduledHyperParamSetter`] | at given epochs or steps, optionally interpolated | tensorpack |
//! | [`HyperParamSetterWithFunc`] | to `f(epoch or step, old value)` | tensorpack |
//! | [`StatMonitorParamSetter`] | to `f(old value)` when a statistic stops improving | tensorpack |
//! | [`HumanHyperParamSetter`] | to what a person writes in a file during training | tensorpack |
//! | [`ReduceLrOnPlateau`] | divided by a factor when a statistic plateaus | Keras |
//! | [`LrSchedulerSetter`] | to a burn learning-rate scheduler's value at each step | burn |
//!
//! A setter of your own, as tensorpack users subclass `HyperParamSetter` and write
//! `_get_value_to_set`: implement [`HyperParamSetter`] (its `value_to_set`) and register
//! [`HyperParamSetter::into_callback`] ([`SetterCallback`]).
//!
//! Like tensorpack's `HyperParamSetter`, the tensorpack setters announce a change on stderr
//! (`stoker: ScheduledHyperParamSetter(learning_rate): at global step 300, learning_rate changes
//! from 0.1 to 0.01`), at most once per epoch each.

mod func;
mod human;
mod lr_scheduler;
mod plateau;
mod scheduled;
mod setter;
mod stat;

use std::borrow::Cow;
use std::collections::HashSet;

use crate::callback::Context;
use crate::error::{ConfigError, Error, Result};
use crate::state::LEARNING_RATE;

pub use func::HyperParamSetterWithFunc;
pub use human::HumanHyperParamSetter;
pub use lr_scheduler::LrSchedulerSetter;
pub use plateau::ReduceLrOnPlateau;
pub use scheduled::ScheduledHyperParamSetter;
pub use setter::{HyperParamSetter, SetterCallback};
pub use stat::StatMonitorParamSetter;

/// The hyper-parameter a setter drives: checks it exists, sets it, and announces changes on
/// stderr at most once per epoch (tensorpack's `HyperParamSetter`).
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// The setter's kind, for messages and its name: `ScheduledHyperParamSetter`.
    kind: &'static str,
    pub(crate) param: Cow<'static, str>,
    announced_epoch: Option<u64>,
    announce: bool,
}

impl Target {
    pub(crate) fn new<C: crate::kind::CallbackKind + ?Sized>(param: Cow<'static, str>) -> Self {
        Target { kind: C::NAME, param, announced_epoch: None, announce: true }
    }
    /// A target whose changes are not announced.
    pub(crate) fn quiet(mut self) -> Self {
        self.announce = false;
        self
    }
    /// `Kind(param)`: the setter's name.
    pub(crate) fn name(&self) -> Cow<'static, str> {
        Cow::Owned(format!("{}({})", self.kind, self.param))
    }
    /// An error when the parameter is not registered (at setup).
    pub(crate) fn check<M>(&self, ctx: &Context<'_, M>) -> Result<()> {
        if ctx.hyper().get(&self.param).is_some() {
            return Ok(());
        }
        let known: Vec<String> = ctx.hyper().names().map(|n| format!("`{n}`")).collect();
        Err(Error::hyper_param(format!(
            "{} sets `{}`, which is not a hyper-parameter of this trainer (known: {}); register it with `Trainer::hyper_param`, `hyper_param_fn` or `hyper_param_shared`",
            self.kind,
            self.param,
            known.join(", ")
        )))
    }
    /// The parameter's current value.
    pub(crate) fn current<M>(&self, ctx: &Context<'_, M>) -> Result<f64> {
        ctx.hyper().get(&self.param).ok_or_else(|| ctx.hyper().unknown(&self.param))
    }
    /// Set the parameter to `value`, announcing a change.
    pub(crate) fn set<M>(&mut self, ctx: &mut Context<'_, M>, value: f64) -> Result<()> {
        let old = self.current(ctx)?;
        ctx.hyper_mut().set(&self.param, value).map_err(|e| match e {
            Error::Config(ConfigError::HyperParam(message)) => {
                Error::hyper_param(format!("{}: {message}", self.name()))
            }
            other => other,
        })?;
        if self.announce && old.to_bits() != value.to_bits() && self.announced_epoch != Some(ctx.epoch_num())
        {
            self.announced_epoch = Some(ctx.epoch_num());
            crate::logging::info!(
                "{}: at global step {}, `{}` changes from {old:?} to {value:?}",
                self.name(),
                ctx.global_step(),
                self.param
            );
        }
        Ok(())
    }
}

/// Warnings said once per distinct problem.
#[derive(Debug, Clone, Default)]
pub(crate) struct Warnings {
    seen: HashSet<String>,
}

impl Warnings {
    /// Warn of `message` unless it was said before.
    pub(crate) fn once(&mut self, message: String) {
        if !self.seen.contains(&message) {
            crate::logging::warn!("{message}");
            self.seen.insert(message);
        }
    }
}
