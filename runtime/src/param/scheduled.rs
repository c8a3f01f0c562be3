//! tensorpack's `ScheduledHyperParamSetter`.

use std::borrow::Cow;

use super::setter::setter_callback;
use super::{HyperParamSetter, Target};
use crate::callback::{Callback, Context};
use crate::error::{Error, Result};

/// Sets a hyper-parameter by a schedule of `(epoch, value)` points (tensorpack's
/// `ScheduledHyperParamSetter`): `(e, v)` sets `v` after epoch `e` completes, so `v` is used from
/// epoch `e + 1`; `(0, v)` sets it before the first epoch. With
/// [`step_based`](Self::step_based), the points are `(global_step, value)`: `(s, v)` sets `v`
/// after step `s`, so steps `s + 1, s + 2, ...` use it. Points must increase.
///
/// Without interpolation the value is set only when the epoch (step) is exactly a point. With
/// [`linear`](Self::linear) (tensorpack's `interp='linear'`), each epoch (step) between two points
/// gets the value interpolated between them; before the first point and after the last nothing
/// is set (no extrapolation), so the last point's value stays.
///
/// At the beginning of training ([`set_at_beginning`](Self::set_at_beginning), on by default)
/// the value the schedule gives at the current point is set even between points: the last
/// point's value reached so far (or the interpolated one). With it off, the value is set at the
/// beginning only when the current point is exactly a point (`(0, v)` on a fresh run) or
/// interpolated — tensorpack's behaviour. A resumed run thus continues with the schedule's value.
///
/// It sets the value in `trigger` (called by `trigger_epoch`, or by `trigger_step` when
/// step-based), so [`PeriodicTrigger`](crate::trigger::PeriodicTrigger) can change when it looks.
///
/// Differences from tensorpack, deliberate: `0.0` is a value like any other (tensorpack's check at
/// the beginning skips a point whose value is 0), points that do not increase and values that are
/// not finite are errors at setup instead of being sorted or failing later.
///
/// In data-parallel training it runs on every rank, as in tensorpack: its value depends on the
/// counters alone, so every replica sets the same one.
///
/// ```
/// # use burn_stoker::prelude::*;
/// # use burn::nn::{Linear, LinearConfig};
/// # use burn::optim::SgdConfig;
/// # use burn::tensor::Tensor;
/// # use std::sync::{Arc, Mutex};
/// # let device = burn_stoker::device::cpu();
/// # let model: Linear = LinearConfig::new(2, 1).init(&device);
/// # let batches = vec![(Tensor::<2>::ones([4, 2], &device), Tensor::<2>::zeros([4, 1], &device)); 2];
/// // 0.1 for epochs 1 to 2, then 0.01, then from epoch 5 on 0.001 (tensorpack's
/// // ScheduledHyperParamSetter('learning_rate', [(0, 0.1), (2, 0.01), (4, 0.001)])).
/// let schedule = ScheduledHyperParamSetter::new("learning_rate", [(0, 0.1), (2, 0.01), (4, 0.001)]);
/// let used = Arc::new(Mutex::new(Vec::new()));
/// let seen = used.clone();
/// Trainer::new(model, SgdConfig::new().init(), batches)
///     .max_epoch(5)
///     .log_dir(std::env::temp_dir().join(format!("stoker-doc-scheduled-{}", std::process::id())))
///     .default_callbacks(DefaultCallbacks::none())
///     .callbacks(schedule)
///     .train(move |model: &Linear, (x, y): (Tensor<2>, Tensor<2>), step: &mut Step<'_>| {
///         seen.lock().unwrap().push(step.hyper("learning_rate").unwrap());
///         (model.forward(x) - y).powi_scalar(2).mean()
///     })?;
/// // Two steps per epoch.
/// assert_eq!(*used.lock().unwrap(), [0.1, 0.1, 0.1, 0.1, 0.01, 0.01, 0.01, 0.01, 0.001, 0.001]);
/// # Ok::<(), burn_stoker::Error>(())
/// ```
#[derive(Debug, Clone)]
#[doc(alias = "LearningRateScheduler")]
pub struct ScheduledHyperParamSetter {
    target: Target,
    schedule: Vec<(u64, f64)>,
    linear: bool,
    step_based: bool,
    set_at_beginning: bool,
}
crate::kind::kind!(ScheduledHyperParamSetter);

impl ScheduledHyperParamSetter {
    /// A schedule for `param` (`"learning_rate"` or a registered name). Points must increase.
    pub fn new(param: impl Into<Cow<'static, str>>, schedule: impl IntoIterator<Item = (u64, f64)>) -> Self {
        ScheduledHyperParamSetter {
            target: Target::new::<Self>(param.into()),
            schedule: schedule.into_iter().collect(),
            linear: false,
            step_based: false,
            set_at_beginning: true,
        }
    }
    /// Interpolate linearly between points (tensorpack's `interp='linear'`).
    pub fn linear(mut self) -> Self {
        self.linear = true;
        self
    }
    /// Points are global steps instead of epochs (tensorpack's `step_based=True`).
    pub fn step_based(mut self) -> Self {
        self.step_based = true;
        self
    }
    /// Whether to set the schedule's value at the beginning of training even when the current
    /// point is not one of the schedule's (default true).
    pub fn set_at_beginning(mut self, enable: bool) -> Self {
        self.set_at_beginning = enable;
        self
    }

    /// The value the schedule gives at point `at`: exact points always, between points only with
    /// interpolation (`exact_only` = false returns the last point's value instead); after the
    /// last point, nothing with `exact_only`, the last value without.
    pub fn value_at(&self, at: u64, exact_only: bool) -> Option<f64> {
        let mut last: Option<(u64, f64)> = None;
        for &(point, value) in &self.schedule {
            if point == at {
                return Some(value);
            }
            if point > at {
                return match last {
                    Some((p0, v0)) if self.linear => {
                        Some(v0 + (value - v0) * (at - p0) as f64 / (point - p0) as f64)
                    }
                    Some((_, v0)) if !exact_only => Some(v0),
                    _ => None,
                };
            }
            last = Some((point, value));
        }
        if exact_only { None } else { last.map(|(_, v)| v) }
    }

    /// The schedule's points increase and its values are finite, or the error saying which not.
    fn check_schedule(&self) -> Result<()> {
        let name = self.target.name();
        if self.schedule.windows(2).any(|w| w[0].0 >= w[1].0) {
            return Err(Error::hyper_param(format!(
                "{name}: the schedule's points must increase: {:?}",
                self.schedule
            )));
        }
        if let Some(&(point, value)) = self.schedule.iter().find(|(_, v)| !v.is_finite()) {
            return Err(Error::hyper_param(format!(
                "{name}: the schedule's value at {point} is {value}, not a finite number"
            )));
        }
        Ok(())
    }

    fn point<M>(&self, ctx: &Context<'_, M>) -> u64 {
        if self.step_based { ctx.global_step() } else { ctx.epoch_num() }
    }
}

/// Its value at the current point (epoch or step): exact points (or interpolated) in `trigger`,
/// and in `before_train` the value reached so far unless `set_at_beginning(false)`.
impl HyperParamSetter for ScheduledHyperParamSetter {
    const NAME: &'static str = "ScheduledHyperParamSetter";
    fn param(&self) -> &str {
        &self.target.param
    }
    fn value_to_set<M>(&mut self, ctx: &Context<'_, M>) -> Result<Option<f64>> {
        Ok(self.value_at(self.point(ctx), true))
    }
    fn value_at_beginning<M>(&mut self, ctx: &Context<'_, M>) -> Result<Option<f64>> {
        Ok(self.value_at(self.point(ctx), !self.set_at_beginning))
    }
}

/// [`SetterCallback`](super::SetterCallback)'s callback, after every step when step-based; the
/// schedule is checked at setup.
impl<M> Callback<M> for ScheduledHyperParamSetter {
    setter_callback!(setter: self, step_based: step_based, validate: check_schedule);
}
