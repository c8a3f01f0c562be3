//! The estimated time left until the end of training.

use std::collections::VecDeque;
use std::time::Duration;

use super::humanize_duration;
use crate::callback::{Callback, Context};
use crate::error::{Result, check_setting};
use crate::state::{Clock, MonotonicClock};

/// Estimates the time left until the end of training after each epoch, from the durations of
/// the last `k` epochs (tensorpack's `EstimatedTimeLeft`): their median (the default) or their
/// mean, times the number of epochs left. It writes the estimate to stderr as one line,
/// `stoker: estimated time left: 1 hour 2 minutes 3 seconds`, while epochs remain, and keeps the
/// latest one ([`estimate`](Self::estimate)).
///
/// An epoch's duration is the time between two `trigger_epoch`s (from `before_train` for the
/// first), so it includes the callbacks' time at the end of the epoch: validation and
/// checkpoints are part of what remains to be done. As in tensorpack, nothing is put in the
/// monitors. A resumed run measures its own epochs; when it resumes in the middle of an epoch,
/// that first epoch is short, which the median of the next epochs absorbs.
///
/// ```
/// use burn_stoker::track::EstimatedTimeLeft;
///
/// // tensorpack's defaults: median of the last 5 epochs.
/// let eta = EstimatedTimeLeft::new();
/// // Mean of the last 3 epochs.
/// let eta = EstimatedTimeLeft::new().last_k_epochs(3).median(false);
/// // Pass it among the trainer's callbacks: `.callbacks((eta, ...))`.
/// # let _ = eta;
/// ```
#[derive(Debug, Clone)]
pub struct EstimatedTimeLeft<T = MonotonicClock> {
    last_k_epochs: usize,
    median: bool,
    clock: T,
    durations: VecDeque<Duration>,
    last_time: Option<Duration>,
    estimate: Option<Duration>,
}
crate::kind::kind!(EstimatedTimeLeft<T>);

impl Default for EstimatedTimeLeft {
    fn default() -> Self {
        EstimatedTimeLeft::new()
    }
}

impl EstimatedTimeLeft {
    /// The median of the last 5 epochs (tensorpack's defaults).
    pub fn new() -> Self {
        EstimatedTimeLeft {
            last_k_epochs: 5,
            median: true,
            clock: MonotonicClock::new(),
            durations: VecDeque::new(),
            last_time: None,
            estimate: None,
        }
    }
}

impl<T: Clock> EstimatedTimeLeft<T> {
    /// Estimate from the last `k` epochs (at least 1; 0 is an error at setup).
    pub fn last_k_epochs(mut self, k: usize) -> Self {
        self.last_k_epochs = k;
        self
    }
    /// Use the median (`true`, the default) or the mean (`false`) of their durations.
    pub fn median(mut self, median: bool) -> Self {
        self.median = median;
        self
    }
    /// Read the time from `clock` (a [`ManualClock`](crate::state::ManualClock) in tests).
    pub fn clock<C: Clock>(self, clock: C) -> EstimatedTimeLeft<C> {
        EstimatedTimeLeft {
            last_k_epochs: self.last_k_epochs,
            median: self.median,
            clock,
            durations: self.durations,
            last_time: self.last_time,
            estimate: self.estimate,
        }
    }
    /// The latest estimate: `None` before the first epoch ends, zero after the last one.
    pub fn estimate(&self) -> Option<Duration> {
        self.estimate
    }

    /// The median or the mean of the durations kept (at least one).
    fn epoch_time(&self) -> Duration {
        let nanos: Vec<u128> = self.durations.iter().map(Duration::as_nanos).collect();
        let n = nanos.len() as u128;
        let value = if self.median {
            let mut sorted = nanos;
            sorted.sort_unstable();
            let middle = sorted.len() / 2;
            if sorted.len() % 2 == 1 { sorted[middle] } else { (sorted[middle - 1] + sorted[middle]) / 2 }
        } else {
            nanos.iter().sum::<u128>() / n
        };
        from_nanos(value)
    }
}

fn from_nanos(nanos: u128) -> Duration {
    let secs = nanos / 1_000_000_000;
    Duration::new(u64::try_from(secs).unwrap_or(u64::MAX), (nanos % 1_000_000_000) as u32)
}

impl<M, T: Clock> Callback<M> for EstimatedTimeLeft<T> {
    fn setup(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        check_setting(self.last_k_epochs > 0, "EstimatedTimeLeft", "last_k_epochs", "at least 1", 0)
    }
    fn before_train(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        self.last_time = Some(self.clock.now());
        Ok(())
    }
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let now = self.clock.now();
        let Some(last) = self.last_time.replace(now) else { return Ok(()) };
        if self.durations.len() == self.last_k_epochs {
            self.durations.pop_front();
        }
        self.durations.push_back(now.saturating_sub(last));
        let counters = ctx.counters();
        let epochs_left = counters.max_epoch().saturating_sub(counters.epoch_num());
        let left = from_nanos(self.epoch_time().as_nanos() * u128::from(epochs_left));
        self.estimate = Some(left);
        if !left.is_zero() {
            crate::logging::info!("estimated time left: {}", humanize_duration(left));
        }
        Ok(())
    }
}
