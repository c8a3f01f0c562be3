//! How each average accumulates the samples of one output, and saves them in checkpoints: the
//! [`Average`] trait, the exponential average ([`Exponential`], over an [`Ema`]) and the window
//! ([`Window`]).

use std::collections::VecDeque;

use serde_json::Value as Json;

use crate::error::{Result, check_setting};
use crate::kind::CallbackKind;
use crate::state::{json_f64, parse_f64};

/// What tells the two averages apart: how the samples of one output are accumulated, and how
/// the accumulator is saved in checkpoints. Everything else ([`Averages`](super::averages::Averages)) is shared.
pub(super) trait Average: std::fmt::Debug {
    /// The callback's kind, [`CallbackKind::NAME`], which its name starts with.
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
pub(super) struct Ema {
    /// `decay * biased + (1 - decay) * x` over the samples, from 0.
    biased: f64,
    /// Samples so far.
    count: u64,
}

impl Ema {
    pub(super) fn add(&mut self, decay: f64, x: f64) {
        self.biased = decay * self.biased + (1.0 - decay) * x;
        self.count += 1;
    }
    pub(super) fn value(&self, decay: f64) -> Option<f64> {
        (self.count > 0).then(|| self.biased / (1.0 - decay.powf(self.count as f64)))
    }
}

/// [`MovingAverageSummary`](super::MovingAverageSummary)'s average: exponential, with this decay.
#[derive(Debug, Clone, Copy)]
pub(super) struct Exponential {
    pub(super) decay: f64,
}

impl Average for Exponential {
    const OWNER: &'static str = <super::MovingAverageSummary as CallbackKind>::NAME;
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

/// [`SimpleMovingAverage`](super::SimpleMovingAverage)'s average: the mean of a window of this many samples.
#[derive(Debug, Clone, Copy)]
pub(super) struct Window {
    pub(super) size: usize,
}

impl Average for Window {
    const OWNER: &'static str = <super::SimpleMovingAverage as CallbackKind>::NAME;
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
