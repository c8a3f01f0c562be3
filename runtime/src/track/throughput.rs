//! Training throughput: steps or samples per second.

use std::time::Duration;

use crate::callback::{Callback, Context};
use crate::error::{Result, check_setting};
use crate::state::{Clock, MonotonicClock};

/// Puts the training throughput each time it is triggered (every epoch by default; at another
/// period under [`PeriodicTrigger`](crate::trigger::PeriodicTrigger)), as tensorpack's
/// `ThroughputTracker` does: the steps run since the previous trigger (or since `before_train`)
/// divided by the time they took, in the scalar `Throughput (steps/sec)`; with
/// [`samples_per_step`](Self::samples_per_step), that times the batch size, in
/// `Throughput (samples/sec)` instead.
///
/// The time counted runs from each `before_epoch` to its `after_epoch`: the callbacks' work
/// after each epoch (`trigger_epoch`: validation, checkpoints) is left out. The tracker reads the
/// clock only at those epoch events and at the triggers: nothing per step. A trigger with no step
/// since the previous one (under `PeriodicTrigger::before_train`) puts nothing. It runs on every
/// worker in data-parallel training (not `chief_only`), as in tensorpack.
///
/// ```
/// use burn_stoker::{trigger::PeriodicTrigger, track::ThroughputTracker};
///
/// // `Throughput (steps/sec)` every epoch.
/// let steps = ThroughputTracker::new();
/// // `Throughput (samples/sec)` with batches of 64, every 100 steps.
/// let samples = PeriodicTrigger::new(ThroughputTracker::new().samples_per_step(64)).every_k_steps(100);
/// # let _ = (steps, samples);
/// ```
#[derive(Debug, Clone)]
pub struct ThroughputTracker<T = MonotonicClock> {
    samples_per_step: Option<u64>,
    clock: T,
    /// Time counted since the last trigger, up to the last pause.
    counted: Duration,
    /// When the running stretch began (inside an epoch).
    running_since: Option<Duration>,
    last_step: u64,
}
crate::kind::kind!(ThroughputTracker<T>);

impl Default for ThroughputTracker {
    fn default() -> Self {
        ThroughputTracker::new()
    }
}

impl ThroughputTracker {
    /// Steps per second.
    pub fn new() -> Self {
        ThroughputTracker {
            samples_per_step: None,
            clock: MonotonicClock::new(),
            counted: Duration::ZERO,
            running_since: None,
            last_step: 0,
        }
    }
}

impl<T: Clock> ThroughputTracker<T> {
    /// The total batch size of a step: put samples per second instead of steps per second
    /// (at least 1; 0 is an error at setup).
    pub fn samples_per_step(mut self, samples: u64) -> Self {
        self.samples_per_step = Some(samples);
        self
    }
    /// Read the time from `clock` (a [`ManualClock`](crate::state::ManualClock) in tests).
    pub fn clock<C: Clock>(self, clock: C) -> ThroughputTracker<C> {
        ThroughputTracker {
            samples_per_step: self.samples_per_step,
            clock,
            counted: self.counted,
            running_since: self.running_since,
            last_step: self.last_step,
        }
    }
    /// The name of the scalar this tracker puts.
    pub fn scalar_name(&self) -> &'static str {
        if self.samples_per_step.is_some() { "Throughput (samples/sec)" } else { "Throughput (steps/sec)" }
    }

    /// Start counting afresh from now, keeping whether the clock runs.
    fn restart(&mut self, global_step: u64) {
        self.counted = Duration::ZERO;
        if self.running_since.is_some() {
            self.running_since = Some(self.clock.now());
        }
        self.last_step = global_step;
    }
}

impl<M, T: Clock> Callback<M> for ThroughputTracker<T> {
    /// Every rank (as in tensorpack): each rank reports its own throughput.
    fn chief_only(&self) -> bool {
        false
    }
    fn setup(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        let valid = self.samples_per_step != Some(0);
        check_setting(valid, "ThroughputTracker", "samples_per_step", "at least 1", 0)
    }
    fn before_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.restart(ctx.global_step());
        Ok(())
    }
    fn before_epoch(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        self.running_since = Some(self.clock.now());
        Ok(())
    }
    fn after_epoch(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        if let Some(since) = self.running_since.take() {
            self.counted += self.clock.now().saturating_sub(since);
        }
        Ok(())
    }
    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let running =
            self.running_since.map_or(Duration::ZERO, |since| self.clock.now().saturating_sub(since));
        let elapsed = (self.counted + running).as_secs_f64();
        let steps = ctx.global_step().saturating_sub(self.last_step);
        let name = self.scalar_name();
        self.restart(ctx.global_step());
        if steps == 0 || elapsed <= 0.0 {
            return Ok(());
        }
        let per_second = steps as f64 / elapsed;
        let value = match self.samples_per_step {
            Some(samples) => per_second * samples as f64,
            None => per_second,
        };
        ctx.monitors().put_scalar(name, value);
        Ok(())
    }
}
