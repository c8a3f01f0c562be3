//! Moving averages of scalar outputs of the step: tensorpack's `MovingAverageSummary`
//! (exponential) and `SimpleMovingAverage` (a sliding window).
//!
//! Both take the step's outputs as device tensors (no transfer at the step), keep the ones they
//! sample, and copy them to the host in **one** transfer when they report (or when 1024 sampled
//! steps wait, or when a checkpoint saves their state). The averages are then computed exactly, in
//! `f64`, over every sampled step.

use std::borrow::Cow;
use std::collections::VecDeque;

use burn::tensor::Tensor;
use serde_json::{Map, Value as Json};

use crate::callback::{Callback, Context, Counters, PeriodSetting};
use crate::error::{Error, Result, check_setting, must_be};
use crate::fetch::{Fetch, FetchKind, Fetched};
use crate::state::{json_f64, parse_f64};

/// Sampled steps kept on the device before they are copied to the host without a report.
const MAX_PENDING_STEPS: usize = 1024;

/// The sampling shared by both averages: which outputs, how often, and the samples not yet on the
/// host.
#[derive(Debug)]
struct Sampler {
    owner: &'static str,
    fetches: Vec<Fetch>,
    period: PeriodSetting,
    /// One rank-1 tensor of one element per name per sampled step, step after step.
    pending: Vec<Tensor<1>>,
}

impl Sampler {
    fn new<S: Into<String>>(owner: &'static str, names: impl IntoIterator<Item = S>) -> Sampler {
        let fetches = names
            .into_iter()
            .map(|n| Fetch { name: Cow::Owned(n.into()), kind: FetchKind::Device })
            .collect();
        Sampler { owner, fetches, period: PeriodSetting::new().every_k_steps(1), pending: Vec::new() }
    }

    fn names(&self) -> impl Iterator<Item = &str> {
        self.fetches.iter().map(|f| &*f.name)
    }

    fn check(&self) -> Result<()> {
        let owner = self.owner;
        if self.fetches.is_empty() {
            return Err(Error::msg(format!("{owner}: no output names given")));
        }
        for (i, fetch) in self.fetches.iter().enumerate() {
            if fetch.name.is_empty() {
                return Err(Error::msg(format!("{owner}: an empty output name")));
            }
            if self.fetches[..i].iter().any(|f| f.name == fetch.name) {
                return Err(Error::msg(format!("{owner}: output `{}` is named twice", fetch.name)));
            }
        }
        self.period.check(owner).map(|_| ())
    }

    #[inline]
    fn due(&self, step: u64) -> bool {
        self.period.period().steps_divide(step)
    }

    /// Keep this step's values (device tensors, no transfer) if the step is sampled. Returns
    /// whether enough samples wait to be folded.
    fn sample(&mut self, values: &Fetched<'_>, global_step: u64) -> Result<bool> {
        if !self.due(global_step) {
            return Ok(false);
        }
        for fetch in &self.fetches {
            let tensor = values.device(&fetch.name)?;
            if tensor.num_elements() != 1 {
                return Err(Error::Fetch(format!(
                    "{}: `{}` has shape {:?}, not a scalar",
                    self.owner,
                    fetch.name,
                    tensor.dims()
                )));
            }
            self.pending.push(tensor.flat());
        }
        Ok(self.pending.len() >= MAX_PENDING_STEPS * self.fetches.len())
    }

    /// The values waiting on the device, step after step (one value per name per step), in one
    /// transfer; `take` empties the waiting list.
    fn host_values(&mut self, take: bool) -> Vec<f64> {
        let pending = if take { std::mem::take(&mut self.pending) } else { self.pending.clone() };
        values_of(pending)
    }
}

fn values_of(mut pending: Vec<Tensor<1>>) -> Vec<f64> {
    let tensor = match pending.len() {
        0 => return Vec::new(),
        1 => pending.pop().expect("one tensor"),
        _ => Tensor::cat(pending, 0),
    };
    tensor.into_data().iter::<f32>().map(f64::from).collect()
}

/// When the averages are put to the monitors.
#[derive(Debug, Clone, Copy)]
struct Reports {
    at_epoch_end: bool,
    every_k_steps: Option<u64>,
    /// The global step of the last report (not to put the same values twice at one step).
    last: Option<u64>,
}

impl Reports {
    fn check(&self, owner: &str) -> Result<()> {
        match self.every_k_steps {
            Some(0) => Err(Error::msg(must_be(owner, "report_every_k_steps", "at least 1", 0))),
            _ => Ok(()),
        }
    }
}

/// What tells the two averages apart: how the samples of one output are accumulated, and how
/// the accumulator is saved in checkpoints. Everything else ([`Averages`]) is shared.
trait Average: std::fmt::Debug {
    /// The callback's name.
    const OWNER: &'static str;
    /// What a malformed saved state is called in the error.
    const STATE: &'static str;
    /// The accumulator of one output.
    type Acc: Clone + std::fmt::Debug;
    /// A check of the settings at setup, before the sampling is checked.
    fn check_first(&self) -> Result<()> {
        Ok(())
    }
    /// A check of the settings at setup, after the sampling is checked.
    fn check_last(&self) -> Result<()> {
        Ok(())
    }
    /// An empty accumulator.
    fn empty(&self) -> Self::Acc;
    /// Accumulate one sample.
    fn add(&self, acc: &mut Self::Acc, x: f64);
    /// The average, if there is a sample.
    fn value(&self, acc: &Self::Acc) -> Option<f64>;
    /// The accumulator as JSON.
    fn save(&self, acc: &Self::Acc) -> Json;
    /// The accumulator read back from [`save`](Self::save)'s JSON.
    fn load(&self, saved: &Json) -> Option<Self::Acc>;
}

/// An exponential moving average with TensorFlow's zero-debiasing, as tensorpack's
/// `add_moving_summary` keeps it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Ema {
    /// `decay * biased + (1 - decay) * x` over the samples, from 0.
    biased: f64,
    /// Samples so far.
    count: u64,
}

impl Ema {
    fn add(&mut self, decay: f64, x: f64) {
        self.biased = decay * self.biased + (1.0 - decay) * x;
        self.count += 1;
    }
    fn value(&self, decay: f64) -> Option<f64> {
        (self.count > 0).then(|| self.biased / (1.0 - decay.powf(self.count as f64)))
    }
}

/// [`MovingAverageSummary`]'s average: exponential, with this decay.
#[derive(Debug, Clone, Copy)]
struct Exponential {
    decay: f64,
}

impl Average for Exponential {
    const OWNER: &'static str = "MovingAverageSummary";
    const STATE: &'static str = "the averages";
    type Acc = Ema;
    fn check_last(&self) -> Result<()> {
        let valid = (0.0..1.0).contains(&self.decay);
        check_setting(valid, "MovingAverageSummary", "decay", "in [0, 1)", self.decay)
    }
    fn empty(&self) -> Ema {
        Ema::default()
    }
    fn add(&self, acc: &mut Ema, x: f64) {
        acc.add(self.decay, x);
    }
    fn value(&self, acc: &Ema) -> Option<f64> {
        acc.value(self.decay)
    }
    fn save(&self, acc: &Ema) -> Json {
        serde_json::json!({ "biased": json_f64(acc.biased), "count": acc.count })
    }
    fn load(&self, saved: &Json) -> Option<Ema> {
        Some(Ema { biased: saved.get("biased").and_then(parse_f64)?, count: saved.get("count")?.as_u64()? })
    }
}

/// [`SimpleMovingAverage`]'s average: the mean of a window of this many samples.
#[derive(Debug, Clone, Copy)]
struct Window {
    size: usize,
}

impl Average for Window {
    const OWNER: &'static str = "SimpleMovingAverage";
    const STATE: &'static str = "the windows";
    type Acc = VecDeque<f64>;
    fn check_first(&self) -> Result<()> {
        check_setting(self.size != 0, "SimpleMovingAverage", "window", "at least 1", 0)
    }
    fn empty(&self) -> VecDeque<f64> {
        VecDeque::with_capacity(self.size)
    }
    fn add(&self, acc: &mut VecDeque<f64>, x: f64) {
        if acc.len() == self.size {
            acc.pop_front();
        }
        acc.push_back(x);
    }
    fn value(&self, acc: &VecDeque<f64>) -> Option<f64> {
        (!acc.is_empty()).then(|| acc.iter().sum::<f64>() / acc.len() as f64)
    }
    fn save(&self, acc: &VecDeque<f64>) -> Json {
        Json::Array(acc.iter().map(|&v| json_f64(v)).collect())
    }
    fn load(&self, saved: &Json) -> Option<VecDeque<f64>> {
        let values: Vec<f64> = saved.as_array()?.iter().map(parse_f64).collect::<Option<_>>()?;
        // A smaller window than the saved run's keeps the latest values.
        let skip = values.len().saturating_sub(self.size);
        Some(values.into_iter().skip(skip).collect())
    }
}

/// The body both averages share: sampling, reports, suffix, one accumulator per output, and
/// their callback methods.
#[derive(Debug)]
struct Averages<A: Average> {
    average: A,
    sampler: Sampler,
    reports: Reports,
    suffix: String,
    accs: Vec<A::Acc>,
}

impl<A: Average> Averages<A> {
    fn new<S: Into<String>>(
        average: A,
        names: impl IntoIterator<Item = S>,
        reports: Reports,
        suffix: &str,
    ) -> Self {
        Averages {
            average,
            sampler: Sampler::new(A::OWNER, names),
            reports,
            suffix: suffix.into(),
            accs: Vec::new(),
        }
    }

    /// Accumulate `values` (one value per output per sampled step, step after step).
    fn fold(average: &A, accs: &mut [A::Acc], values: &[f64]) {
        if accs.is_empty() {
            return;
        }
        for step in values.chunks(accs.len()) {
            for (acc, &x) in accs.iter_mut().zip(step) {
                average.add(acc, x);
            }
        }
    }

    fn report<M>(&mut self, ctx: &mut Context<'_, M>) {
        let step = ctx.global_step();
        if self.reports.last == Some(step) && self.sampler.pending.is_empty() {
            return;
        }
        let values = self.sampler.host_values(true);
        Self::fold(&self.average, &mut self.accs, &values);
        self.reports.last = Some(step);
        let monitors = ctx.monitors();
        for (name, acc) in self.sampler.names().zip(&self.accs) {
            if let Some(value) = self.average.value(acc) {
                monitors.put_scalar(&format!("{name}{}", self.suffix), value);
            }
        }
    }

    fn values(&self) -> Vec<(&str, Option<f64>)> {
        self.sampler.names().zip(&self.accs).map(|(n, a)| (n, self.average.value(a))).collect()
    }

    fn name(&self) -> Cow<'static, str> {
        Cow::Owned(format!("{}({})", A::OWNER, self.sampler.names().collect::<Vec<_>>().join(",")))
    }

    fn wants_fetch(&self, counters: &Counters) -> bool {
        self.sampler.due(counters.next_step())
    }

    fn save_state(&self) -> Result<Option<Json>> {
        // Include the samples still on the device without taking them: the state saved is the
        // state after every step so far.
        let mut accs = self.accs.clone();
        Self::fold(&self.average, &mut accs, &values_of(self.sampler.pending.clone()));
        let state: Map<String, Json> =
            self.sampler.names().zip(&accs).map(|(n, a)| (n.to_string(), self.average.save(a))).collect();
        Ok(Some(Json::Object(state)))
    }

    fn load_state(&mut self, state: Json) -> Result<()> {
        let bad =
            |name: &str| Error::checkpoint(format!("{}: the saved state of `{name}` is malformed", A::OWNER));
        let Json::Object(state) = state else { return Err(bad(A::STATE)) };
        let names: Vec<String> = self.sampler.names().map(str::to_string).collect();
        self.accs = vec![self.average.empty(); names.len()];
        for (name, saved) in &state {
            let Some(index) = names.iter().position(|n| n == name) else {
                crate::logging::warn!(
                    "{}: the checkpoint averages `{name}`, which this run does not; ignored",
                    A::OWNER
                );
                continue;
            };
            self.accs[index] = self.average.load(saved).ok_or_else(|| bad(name))?;
        }
        Ok(())
    }

    fn setup(&mut self) -> Result<()> {
        self.average.check_first()?;
        self.sampler.check()?;
        self.reports.check(self.sampler.owner)?;
        self.average.check_last()?;
        if self.accs.len() != self.sampler.fetches.len() {
            self.accs = vec![self.average.empty(); self.sampler.fetches.len()];
        }
        Ok(())
    }

    fn after_step(&mut self, global_step: u64, values: &Fetched<'_>) -> Result<()> {
        if self.sampler.sample(values, global_step)? {
            let values = self.sampler.host_values(true);
            Self::fold(&self.average, &mut self.accs, &values);
        }
        Ok(())
    }

    fn trigger_step<M>(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if self.reports.every_k_steps.is_some_and(|k| ctx.global_step().is_multiple_of(k)) {
            self.report(ctx);
        }
        Ok(())
    }

    fn trigger_epoch<M>(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if self.reports.at_epoch_end {
            self.report(ctx);
        }
        Ok(())
    }
}

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
mod tests {
    use super::*;

    #[test]
    fn the_zero_debiased_ema_starts_at_the_first_sample() {
        let mut ema = Ema::default();
        ema.add(0.5, 4.0);
        assert_eq!(ema.value(0.5), Some(4.0));
        ema.add(0.5, 1.0);
        // (0.25 * 4 + 0.5 * 1) / (1 - 0.25) = 1.5 / 0.75
        assert_eq!(ema.value(0.5), Some(2.0));
    }

    #[test]
    fn the_window_keeps_the_last_samples_of_each_name() {
        let mut windows = vec![VecDeque::new(), VecDeque::new()];
        Averages::fold(&Window { size: 2 }, &mut windows, &[1.0, 10.0, 2.0, 20.0, 3.0, 30.0]);
        assert_eq!(windows, vec![VecDeque::from([2.0, 3.0]), VecDeque::from([20.0, 30.0])]);
    }
}
