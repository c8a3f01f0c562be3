//! tensorpack's `StatMonitorParamSetter`.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::fmt;

use serde_json::Value as Json;

use super::{Target, Warnings};
use crate::callback::{Callback, Context};
use crate::error::{Error, Result, must_be};
use crate::state::{json_f64, parse_f64};

/// Changes a hyper-parameter to `value_func(old_value)` when a statistic stops decreasing
/// (tensorpack's `StatMonitorParamSetter`).
///
/// Each time it is triggered (after every epoch by default), it takes the latest value of
/// `stat_name` from the monitors ([`Monitors::history`](crate::state::Monitors::history)) and adds it to
/// its last `last_k` observations; a value already observed (put at the same global step) is not
/// added again, with a warning. Once it holds `last_k` observations `h`, it changes the parameter
/// when `min(h) >= h[0] - threshold` — the statistic did not fall more than `threshold` below the
/// oldest of them — and then forgets them, so the next change needs `last_k` new observations.
/// With [`reverse`](Self::reverse) it watches an increasing statistic: the change happens when
/// `max(h) <= h[0] + threshold`. It does nothing at the beginning of training.
///
/// The statistic must be put at least as often as this callback is triggered, and before it in
/// the same event: order it after the callback that puts it (`#[order(after = ...)]`, or register
/// it later). A statistic not put yet is a warning (once), not an error.
///
/// Its observations are saved in checkpoints, so a resumed run decides as the uninterrupted one
/// would (tensorpack forgets them). A `last_k` of 0 or a `threshold` that is NaN is an error at
/// setup.
///
/// ```
/// # use burn_stoker::prelude::*;
/// # use burn_stoker::param::StatMonitorParamSetter;
/// # use burn::module::Module;
/// # use burn::nn::{Linear, LinearConfig};
/// # use burn::optim::SgdConfig;
/// # use burn::tensor::Tensor;
/// # use std::sync::{Arc, Mutex};
/// # let device = burn_stoker::device::cpu();
/// # let model: Linear = LinearConfig::new(2, 1).init(&device);
/// # let batches = vec![(Tensor::<2>::ones([4, 2], &device), Tensor::<2>::zeros([4, 1], &device))];
/// // If the validation error has not decreased over 3 observations (epochs), divide the learning
/// // rate by 5: tensorpack's StatMonitorParamSetter('learning_rate', 'val-error',
/// // lambda x: x * 0.2, threshold=0, last_k=3).
/// let anneal = StatMonitorParamSetter::new("learning_rate", "val-error", |lr| lr * 0.2, 0.0, 3);
/// // A stand-in for validation: the error of each epoch.
/// #[callback(on = trigger_epoch)]
/// fn validate(ctx: &mut Context<'_, impl Module>) {
///     let errors = [0.5, 0.4, 0.4, 0.4, 0.4, 0.3];
///     let error = errors[ctx.epoch_num() as usize - 1];
///     ctx.monitors().put_scalar("val-error", error);
/// }
/// let used = Arc::new(Mutex::new(Vec::new()));
/// let seen = used.clone();
/// Trainer::new(model, SgdConfig::new().init(), batches)
///     .learning_rate(0.5)
///     .max_epoch(6)
///     .log_dir(std::env::temp_dir().join(format!("stoker-doc-stat-monitor-{}", std::process::id())))
///     .default_callbacks(DefaultCallbacks::none())
///     .callbacks((Validate, anneal))
///     .train(move |model: &Linear, (x, y): (Tensor<2>, Tensor<2>), step: &mut Step<'_>| {
///         seen.lock().unwrap().push(step.hyper("learning_rate").unwrap());
///         (model.forward(x) - y).powi_scalar(2).mean()
///     })?;
/// // Observations 0.5, 0.4, 0.4: the error fell, no change. 0.4, 0.4, 0.4 after epoch 4: it did
/// // not, 0.5 becomes 0.1 from epoch 5. Then 0.4 and 0.3 are only two new observations.
/// assert_eq!(*used.lock().unwrap(), [0.5, 0.5, 0.5, 0.5, 0.1, 0.1]);
/// # Ok::<(), burn_stoker::Error>(())
/// ```
pub struct StatMonitorParamSetter<F> {
    target: Target,
    stat: Cow<'static, str>,
    value_func: F,
    threshold: f64,
    last_k: usize,
    reverse: bool,
    /// The last observations, `(global_step, value)`, oldest first.
    observed: VecDeque<(u64, f64)>,
    warnings: Warnings,
}
crate::kind::kind!(StatMonitorParamSetter<F>);

impl<F> fmt::Debug for StatMonitorParamSetter<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StatMonitorParamSetter")
            .field("param", &self.target.param)
            .field("stat", &self.stat)
            .field("threshold", &self.threshold)
            .field("last_k", &self.last_k)
            .field("reverse", &self.reverse)
            .field("observed", &self.observed)
            .finish_non_exhaustive()
    }
}

impl<F: FnMut(f64) -> f64> StatMonitorParamSetter<F> {
    /// Set `param` to `value_func(old_value)` when the last `last_k` observations of `stat_name`
    /// did not decrease by more than `threshold`.
    pub fn new(
        param: impl Into<Cow<'static, str>>,
        stat_name: impl Into<Cow<'static, str>>,
        value_func: F,
        threshold: f64,
        last_k: usize,
    ) -> Self {
        StatMonitorParamSetter {
            target: Target::new::<Self>(param.into()),
            stat: stat_name.into(),
            value_func,
            threshold,
            last_k,
            reverse: false,
            observed: VecDeque::with_capacity(last_k),
            warnings: Warnings::default(),
        }
    }
    /// Watch an increasing statistic (an accuracy): change the parameter when the last `last_k`
    /// observations did not increase by more than `threshold`.
    pub fn reverse(mut self, enable: bool) -> Self {
        self.reverse = enable;
        self
    }
}

impl<M, F: FnMut(f64) -> f64> Callback<M> for StatMonitorParamSetter<F> {
    fn name(&self) -> Cow<'static, str> {
        self.target.name()
    }
    fn save_state(&self) -> Result<Option<Json>> {
        let observed: Vec<Json> =
            self.observed.iter().map(|&(step, v)| Json::Array(vec![step.into(), json_f64(v)])).collect();
        Ok(Some(serde_json::json!({ "observed": observed })))
    }
    fn load_state(&mut self, state: Json) -> Result<()> {
        let bad =
            || Error::bad_state(format!("the saved state of {} is malformed: {state}", self.target.name()));
        let mut observed = VecDeque::with_capacity(self.last_k);
        for pair in state.get("observed").and_then(Json::as_array).ok_or_else(bad)? {
            let step = pair.get(0).and_then(Json::as_u64).ok_or_else(bad)?;
            let value = pair.get(1).and_then(parse_f64).ok_or_else(bad)?;
            observed.push_back((step, value));
        }
        while observed.len() > self.last_k {
            observed.pop_front();
        }
        self.observed = observed;
        Ok(())
    }
    fn setup(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if self.last_k == 0 {
            return Err(Error::hyper_param(must_be(self.target.name(), "last_k", "at least 1", 0)));
        }
        if self.threshold.is_nan() {
            return Err(Error::hyper_param(format!("{}: the threshold is NaN", self.target.name())));
        }
        self.target.check(ctx)
    }
    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let Some(&last) = ctx.monitors_ref().history(&self.stat).last() else {
            self.warnings.once(format!(
                "{}: no statistic named `{}` has been put yet; order it after the callback that puts it",
                self.target.name(),
                self.stat
            ));
            return Ok(());
        };
        if self.observed.back().is_some_and(|&(step, _)| step == last.0) {
            self.warnings.once(format!(
                "{}: triggered, but `{}` has no new value since the last time (it is put less often than this callback runs)",
                self.target.name(),
                self.stat
            ));
            return Ok(());
        }
        if self.observed.len() == self.last_k {
            self.observed.pop_front();
        }
        self.observed.push_back(last);
        if self.observed.len() < self.last_k {
            return Ok(());
        }
        let first = self.observed[0].1;
        let values = self.observed.iter().map(|&(_, v)| v);
        let moved_enough = if self.reverse {
            values.fold(f64::NEG_INFINITY, f64::max) > first + self.threshold
        } else {
            values.fold(f64::INFINITY, f64::min) < first - self.threshold
        };
        if moved_enough {
            return Ok(());
        }
        self.observed.clear();
        let value = (self.value_func)(self.target.current(ctx)?);
        self.target.set(ctx, value)
    }
}
