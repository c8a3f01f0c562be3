//! Hyper-parameters and their setters.

use std::borrow::Cow;

use crate::callback::{Callback, Context};
use crate::error::{Error, Result};

/// The name of the built-in learning rate.
pub const LEARNING_RATE: &str = "learning_rate";

/// The run's hyper-parameters: the learning rate, built in, and any other registered by name.
/// The training step reads them through [`Step::hyper`](crate::Step::hyper).
#[derive(Debug, Clone, PartialEq)]
pub struct HyperParams {
    learning_rate: f64,
    named: Vec<(Cow<'static, str>, f64)>,
}

impl HyperParams {
    /// A learning rate and nothing else.
    pub fn new(learning_rate: f64) -> Self {
        HyperParams { learning_rate, named: Vec::new() }
    }
    /// The learning rate the optimizer uses at the next step.
    #[inline]
    pub fn learning_rate(&self) -> f64 {
        self.learning_rate
    }
    /// Set the learning rate.
    pub fn set_learning_rate(&mut self, value: f64) {
        self.learning_rate = value;
    }
    /// Register a hyper-parameter `name` with its initial value; registering it again sets it.
    pub fn register(&mut self, name: impl Into<Cow<'static, str>>, value: f64) {
        let name = name.into();
        match self.named.iter_mut().find(|(n, _)| *n == name) {
            Some(entry) => entry.1 = value,
            None => self.named.push((name, value)),
        }
    }
    /// The value of `name` (`"learning_rate"` or a registered name).
    pub fn get(&self, name: &str) -> Option<f64> {
        if name == LEARNING_RATE {
            return Some(self.learning_rate);
        }
        self.named.iter().find(|(n, _)| n == name).map(|&(_, v)| v)
    }
    /// Set `name`; an unknown name is an error listing the known ones.
    pub fn set(&mut self, name: &str, value: f64) -> Result<()> {
        if !value.is_finite() {
            return Err(Error::HyperParam(format!("hyper-parameter `{name}` cannot be set to {value}")));
        }
        if name == LEARNING_RATE {
            self.learning_rate = value;
            return Ok(());
        }
        match self.named.iter_mut().find(|(n, _)| n == name) {
            Some(entry) => {
                entry.1 = value;
                Ok(())
            }
            None => Err(Error::HyperParam(format!(
                "unknown hyper-parameter `{name}`; known: {}",
                self.names().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
            ))),
        }
    }
    /// Every name, the learning rate first.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        std::iter::once(LEARNING_RATE).chain(self.named.iter().map(|(n, _)| &**n))
    }
}

/// Sets a hyper-parameter by a schedule of `(epoch, value)` points (tensorpack's
/// `ScheduledHyperParamSetter`): `(e, v)` sets `v` after epoch `e` completes, so `v` is used from
/// epoch `e + 1`; `(0, v)` sets it before the first epoch. With `step_based`, the points are
/// `(global_step, value)` and apply after that step.
///
/// With linear interpolation, values between two points are interpolated (never extrapolated).
/// Unlike tensorpack, the value set at the beginning (on by default) is the one the schedule gives
/// for the current point even between points, so a resumed run uses the right value; and 0.0 is a
/// value like any other.
#[derive(Debug, Clone)]
pub struct ScheduledHyperParamSetter {
    param: Cow<'static, str>,
    schedule: Vec<(u64, f64)>,
    linear: bool,
    step_based: bool,
    set_at_beginning: bool,
}

impl ScheduledHyperParamSetter {
    /// A schedule for `param` (`"learning_rate"` or a registered name). Points must increase.
    pub fn new(param: impl Into<Cow<'static, str>>, schedule: impl IntoIterator<Item = (u64, f64)>) -> Self {
        ScheduledHyperParamSetter {
            param: param.into(),
            schedule: schedule.into_iter().collect(),
            linear: false,
            step_based: false,
            set_at_beginning: true,
        }
    }
    /// Interpolate linearly between points.
    pub fn linear(mut self) -> Self {
        self.linear = true;
        self
    }
    /// Points are global steps instead of epochs.
    pub fn step_based(mut self) -> Self {
        self.step_based = true;
        self
    }
    /// Whether to set the value at the beginning of training (default true).
    pub fn set_at_beginning(mut self, enable: bool) -> Self {
        self.set_at_beginning = enable;
        self
    }

    /// The value the schedule gives at point `at`: exact points always, between points only with
    /// interpolation (`exact_only` = false returns the last point's value instead).
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

    fn point<M>(&self, ctx: &Context<'_, M>) -> u64 {
        if self.step_based { ctx.global_step() } else { ctx.epoch_num() }
    }

    fn apply<M>(&self, ctx: &mut Context<'_, M>, exact_only: bool) -> Result<()> {
        if let Some(value) = self.value_at(self.point(ctx), exact_only) {
            ctx.hyper_mut().set(&self.param, value)?;
        }
        Ok(())
    }
}

impl<M> Callback<M> for ScheduledHyperParamSetter {
    fn name(&self) -> Cow<'static, str> {
        Cow::Owned(format!("ScheduledHyperParamSetter({})", self.param))
    }
    fn setup(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if self.schedule.windows(2).any(|w| w[0].0 >= w[1].0) {
            return Err(Error::HyperParam(format!(
                "the schedule of `{}` must have increasing points: {:?}",
                self.param, self.schedule
            )));
        }
        if ctx.hyper().get(&self.param).is_none() {
            return ctx.hyper_mut().set(&self.param, 0.0);
        }
        Ok(())
    }
    fn before_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if self.set_at_beginning { self.apply(ctx, false) } else { Ok(()) }
    }
    fn trigger_step(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if self.step_based { self.apply(ctx, true) } else { Ok(()) }
    }
    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if self.step_based { Ok(()) } else { self.apply(ctx, true) }
    }
}
