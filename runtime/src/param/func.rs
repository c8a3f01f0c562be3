//! tensorpack's `HyperParamSetterWithFunc`.

use std::borrow::Cow;
use std::fmt;

use super::setter::setter_callback;
use super::{HyperParamSetter, Target};
use crate::callback::{Callback, Context};
use crate::error::Result;

/// Sets a hyper-parameter to `func(epoch_num, old_value)` (tensorpack's
/// `HyperParamSetterWithFunc`), where `epoch_num` is the number of epochs that have finished: at
/// the beginning of training (`func(0, initial)` on a fresh run) and after every epoch (`func(e,
/// value)` after epoch `e`, used from epoch `e + 1`). With [`step_based`](Self::step_based), it
/// is `func(global_step, old_value)`, at the beginning and after every step (`func(s, value)`
/// after step `s`, used by step `s + 1`).
///
/// It sets the value in `trigger` (called by `trigger_epoch`, or by `trigger_step` when
/// step-based), so [`PeriodicTrigger`](crate::trigger::PeriodicTrigger) can change when it runs.
///
/// A resumed run does not call `func` at the beginning: the restored value is the one `func`
/// gave at that point already, and calling it again would apply a multiplicative `func` twice
/// (tensorpack calls it again). A value that is not finite is an error.
///
/// In data-parallel training it runs on every rank, as in tensorpack: `func` should depend on its
/// arguments alone, so every replica sets the same value.
///
/// ```
/// # use burn_stoker::prelude::*;
/// # use burn_stoker::param::HyperParamSetterWithFunc;
/// # use burn::nn::{Linear, LinearConfig};
/// # use burn::optim::SgdConfig;
/// # use burn::tensor::Tensor;
/// # use std::sync::{Arc, Mutex};
/// # let device = burn_stoker::device::cpu();
/// # let model: Linear = LinearConfig::new(2, 1).init(&device);
/// # let batches = vec![(Tensor::<2>::ones([4, 2], &device), Tensor::<2>::zeros([4, 1], &device))];
/// // Decrease by a factor of 0.5 every two epochs — tensorpack's example. Like tensorpack, the
/// // function also runs at the beginning, with epoch 0.
/// let decay = HyperParamSetterWithFunc::new("learning_rate", |e, lr| if e % 2 == 0 { lr * 0.5 } else { lr });
/// let used = Arc::new(Mutex::new(Vec::new()));
/// let seen = used.clone();
/// Trainer::new(model, SgdConfig::new().init(), batches)
///     .learning_rate(0.8)
///     .max_epoch(5)
///     .log_dir(std::env::temp_dir().join(format!("stoker-doc-with-func-{}", std::process::id())))
///     .default_callbacks(DefaultCallbacks::none())
///     .callbacks(decay)
///     .train(move |model: &Linear, (x, y): (Tensor<2>, Tensor<2>), step: &mut Step<'_>| {
///         seen.lock().unwrap().push(step.hyper("learning_rate").unwrap());
///         (model.forward(x) - y).powi_scalar(2).mean()
///     })?;
/// // One step per epoch: halved at the beginning, after epoch 2 and after epoch 4.
/// assert_eq!(*used.lock().unwrap(), [0.4, 0.4, 0.2, 0.2, 0.1]);
/// # Ok::<(), burn_stoker::Error>(())
/// ```
#[derive(Clone)]
pub struct HyperParamSetterWithFunc<F> {
    target: Target,
    func: F,
    step_based: bool,
}
crate::kind::kind!(HyperParamSetterWithFunc<F>);

impl<F> fmt::Debug for HyperParamSetterWithFunc<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HyperParamSetterWithFunc")
            .field("param", &self.target.param)
            .field("step_based", &self.step_based)
            .finish_non_exhaustive()
    }
}

impl<F: FnMut(u64, f64) -> f64> HyperParamSetterWithFunc<F> {
    /// Set `param` (`"learning_rate"` or a registered name) to `func(epoch_num, old_value)`.
    pub fn new(param: impl Into<Cow<'static, str>>, func: F) -> Self {
        HyperParamSetterWithFunc { target: Target::new::<Self>(param.into()), func, step_based: false }
    }
    /// Call `func(global_step, old_value)` after every step instead of after every epoch.
    pub fn step_based(mut self) -> Self {
        self.step_based = true;
        self
    }
}

/// `func(point, current value)`, at the beginning too unless the run resumed.
impl<F: FnMut(u64, f64) -> f64> HyperParamSetter for HyperParamSetterWithFunc<F> {
    const NAME: &'static str = "HyperParamSetterWithFunc";
    fn param(&self) -> &str {
        &self.target.param
    }
    fn value_to_set<M>(&mut self, ctx: &Context<'_, M>) -> Result<Option<f64>> {
        let point = if self.step_based { ctx.global_step() } else { ctx.epoch_num() };
        Ok(Some((self.func)(point, self.target.current(ctx)?)))
    }
    fn value_at_beginning<M>(&mut self, ctx: &Context<'_, M>) -> Result<Option<f64>> {
        if ctx.monitors_ref().is_resumed() { Ok(None) } else { self.value_to_set(ctx) }
    }
}

/// [`SetterCallback`](super::SetterCallback)'s callback, after every step when step-based.
impl<M, F: FnMut(u64, f64) -> f64> Callback<M> for HyperParamSetterWithFunc<F> {
    setter_callback!(setter: self, step_based: step_based);
}
