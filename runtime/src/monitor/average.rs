//! Moving averages of scalar outputs of the step: tensorpack's `MovingAverageSummary`
//! (exponential) and `SimpleMovingAverage` (a sliding window).
//!
//! Both take the step's outputs as device tensors (no transfer at the step), keep the ones they
//! sample, and copy them to the host in **one** transfer when they report (or when 1024 sampled
//! steps wait, or when a checkpoint saves their state). The averages are then computed exactly, in
//! `f64`, over every sampled step.

mod accumulators;
mod averages;
mod sampler;

use std::borrow::Cow;

use serde_json::Value as Json;

use accumulators::{Exponential, Window};
use averages::{Averages, Reports};

use crate::callback::{Callback, Context, Counters};
use crate::error::Result;
use crate::fetch::{Fetch, Fetched};

/// The builders and the [`Callback`] implementation both averages share, over their
/// `averages: Averages<_>` field.
macro_rules! average_callback {
    ($type:ident) => {
        impl $type {
            /// Sample the outputs only at the steps whose `global_step` is a multiple of `k` (1 by
            /// default).
            pub fn every_k_steps(mut self, k: u64) -> Self {
                self.averages.sampler.period = self.averages.sampler.period.every_k_steps(k);
                self
            }
            /// Put the average of output `name` as scalar `name` + `suffix`.
            pub fn suffix(mut self, suffix: impl Into<String>) -> Self {
                self.averages.suffix = suffix.into();
                self
            }
        }

        impl<M> Callback<M> for $type {
            fn name(&self) -> Cow<'static, str> {
                self.averages.name()
            }
            fn fetches(&self) -> &[Fetch] {
                &self.averages.sampler.fetches
            }
            fn wants_fetch(&self, counters: &Counters) -> bool {
                self.averages.wants_fetch(counters)
            }
            fn save_state(&self) -> Result<Option<Json>> {
                self.averages.save_state()
            }
            fn load_state(&mut self, state: Json) -> Result<()> {
                self.averages.load_state(state)
            }
            fn setup(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
                self.averages.setup()
            }
            fn after_step(&mut self, ctx: &mut Context<'_, M>, values: &Fetched<'_>) -> Result<()> {
                self.averages.after_step(ctx.global_step(), values)
            }
            fn trigger_step(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
                self.averages.trigger_step(ctx)
            }
            fn trigger_epoch(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
                self.averages.trigger_epoch(ctx)
            }
            fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
                self.averages.report(ctx);
                Ok(())
            }
        }
    };
}

/// Exponential moving averages of scalar outputs of the step, put to the monitors under the
/// outputs' names (tensorpack's `MovingAverageSummary` with `add_moving_summary`, decay 0.95).
///
/// After `t` samples `x_1..x_t` the average is TensorFlow's zero-debiased EMA, as tensorpack keeps
/// it:
///
/// ```text
/// biased_t = decay * biased_(t-1) + (1 - decay) * x_t,  biased_0 = 0
/// ema_t    = biased_t / (1 - decay^t)
/// ```
///
/// so the first average is `x_1` and early values are not pulled towards 0.
///
/// - **Sampling**: every step by default (as tensorpack, whose EMA update runs with each step).
///   A sample costs no device sync: the output is kept as a device tensor, and the samples go to
///   the host in one transfer at the next report (or once 1024 sampled steps wait). With
///   [`every_k_steps`](Self::every_k_steps)`(k)` only the steps whose `global_step` is a multiple
///   of `k` are averaged (fewer tensors kept; the average is then over those steps only).
/// - **Reports**: at the end of every epoch (tensorpack's `MergeAllSummaries` default), from
///   `trigger_epoch` after the epoch's last step; also every `k` global steps with
///   [`report_every_k_steps`](Self::report_every_k_steps) (`MergeAllSummaries(period=k)`); also
///   whenever its `trigger` is called (under [`PeriodicTrigger`](crate::trigger::PeriodicTrigger)). One
///   device-to-host transfer per report.
/// - **Names**: the average of output `loss` is put as scalar `loss` (tensorpack strips the
///   `-summary` suffix of its EMA summaries); [`suffix`](Self::suffix) changes that.
/// - **Resume**: the averages (biased value and count per name) are saved in checkpoints and
///   restored, so a resumed run reports what an uninterrupted one would.
///
/// ```
/// use burn_stoker::prelude::*;
/// use burn_stoker::monitor::MovingAverageSummary;
/// // The step puts `step.output("accuracy", accuracy)`; the loss is always there as "loss".
/// let ema = MovingAverageSummary::new(["loss", "accuracy"]).decay(0.9).report_every_k_steps(100);
/// # let _ = ema;
/// ```
#[derive(Debug)]
pub struct MovingAverageSummary {
    averages: Averages<Exponential>,
}
crate::kind::kind!(MovingAverageSummary);

impl MovingAverageSummary {
    /// Average these outputs of the step (decay 0.95, every step, reported each epoch).
    pub fn new<S: Into<String>>(names: impl IntoIterator<Item = S>) -> Self {
        let reports = Reports { at_epoch_end: true, every_k_steps: None, last: None };
        MovingAverageSummary { averages: Averages::new(Exponential { decay: 0.95 }, names, reports, "") }
    }
    /// The decay, in `[0, 1)` (0.95 by default; 0 reports the last sample).
    pub fn decay(mut self, decay: f64) -> Self {
        self.averages.average.decay = decay;
        self
    }
    /// Also put the averages every `k` global steps (from `trigger_step`).
    pub fn report_every_k_steps(mut self, k: u64) -> Self {
        self.averages.reports.every_k_steps = Some(k);
        self
    }
    /// Whether to put the averages at the end of every epoch (on by default).
    pub fn report_at_epoch_end(mut self, enable: bool) -> Self {
        self.averages.reports.at_epoch_end = enable;
        self
    }
    /// The current averages, by output name (those reported last; samples taken since then are
    /// not in them).
    pub fn averages(&self) -> Vec<(&str, Option<f64>)> {
        self.averages.values()
    }
}

average_callback!(MovingAverageSummary);

/// Simple moving averages — the mean of the last `window` samples — of scalar outputs of the
/// step, put to the monitors as `<name>/SMA` every `window` global steps (tensorpack's
/// `SimpleMovingAverage`).
///
/// - **Sampling**: every step by default (tensorpack fetches every step). A sample costs no
///   device sync: the output is kept as a device tensor, and the samples go to the host in one
///   transfer at the next report (or once 1024 sampled steps wait). With
///   [`every_k_steps`](Self::every_k_steps)`(k)` only the steps whose `global_step` is a multiple
///   of `k` are sampled, and the window holds the last `window` samples.
/// - **Reports**: when `global_step` is a multiple of `window` (tensorpack), or of `k` with
///   [`report_every_k_steps`](Self::report_every_k_steps); also at the end of every epoch with
///   [`report_at_epoch_end`](Self::report_at_epoch_end), and whenever its `trigger` is called
///   (under [`PeriodicTrigger`](crate::trigger::PeriodicTrigger)). Before the window is full the mean is
///   over the samples so far, as tensorpack's does.
/// - **Names**: `<name>/SMA` as tensorpack; [`suffix`](Self::suffix) changes `/SMA`.
/// - **Resume**: the window's values are saved in checkpoints and restored.
///
/// ```
/// use burn_stoker::prelude::*;
/// use burn_stoker::monitor::SimpleMovingAverage;
/// // `loss/SMA`, the mean loss of the last 50 steps, every 50 steps.
/// let sma = SimpleMovingAverage::new(["loss"], 50);
/// # let _ = sma;
/// ```
#[derive(Debug)]
pub struct SimpleMovingAverage {
    averages: Averages<Window>,
}
crate::kind::kind!(SimpleMovingAverage);

impl SimpleMovingAverage {
    /// Average these outputs over the last `window` samples (every step; reported every `window`
    /// steps; put as `<name>/SMA`).
    pub fn new<S: Into<String>>(names: impl IntoIterator<Item = S>, window: usize) -> Self {
        let reports = Reports { at_epoch_end: false, every_k_steps: Some(window as u64), last: None };
        SimpleMovingAverage { averages: Averages::new(Window { size: window }, names, reports, "/SMA") }
    }
    /// Put the averages every `k` global steps instead of every `window`.
    pub fn report_every_k_steps(mut self, k: u64) -> Self {
        self.averages.reports.every_k_steps = Some(k);
        self
    }
    /// Also put the averages at the end of every epoch (off by default).
    pub fn report_at_epoch_end(mut self, enable: bool) -> Self {
        self.averages.reports.at_epoch_end = enable;
        self
    }
}

average_callback!(SimpleMovingAverage);

#[cfg(test)]
mod tests;
