//! The total training time (neon's `RunTimerCallback`).

use std::time::Duration;

use super::humanize_duration;
use crate::callback::{Callback, Context};
use crate::error::Result;
use crate::state::{Clock, MonotonicClock};

/// Measures the training time, from `before_train` to `after_train` (which also runs after a
/// stop, an error or an interrupt), as neon's `RunTimerCallback` does, and reports it at the end:
/// the scalar `time/train` in seconds, and one line on stderr, `stoker: training took 1 hour
/// 2 minutes 3 seconds`.
///
/// neon records the start and end times in its callback data under `time/train`; stoker puts
/// their difference, which is what they are read for, under that name. A resumed run measures
/// its own time. The scalar arrives after the last epoch's statistics, as the monitors send what
/// `after_train` puts (see [`MonitorSink::end_epoch`](crate::state::MonitorSink::end_epoch)).
///
/// ```
/// use burn_stoker::track::RunTimer;
///
/// let timer = RunTimer::new();
/// // Pass it among the trainer's callbacks; lent as `&mut timer`, its `elapsed()` is readable after training.
/// # let _ = timer;
/// ```
#[derive(Debug, Clone)]
pub struct RunTimer<T = MonotonicClock> {
    clock: T,
    start: Option<Duration>,
    elapsed: Option<Duration>,
}
crate::kind::kind!(RunTimer<T>);

impl Default for RunTimer {
    fn default() -> Self {
        RunTimer::new()
    }
}

impl RunTimer {
    /// The name of the scalar of the training time.
    pub const SCALAR: &'static str = "time/train";

    /// A timer on the monotonic clock.
    pub fn new() -> Self {
        RunTimer { clock: MonotonicClock::new(), start: None, elapsed: None }
    }
}

impl<T: Clock> RunTimer<T> {
    /// Read the time from `clock` (a [`ManualClock`](crate::state::ManualClock) in tests).
    pub fn clock<C: Clock>(self, clock: C) -> RunTimer<C> {
        RunTimer { clock, start: self.start, elapsed: self.elapsed }
    }
    /// The training time, once training ended.
    pub fn elapsed(&self) -> Option<Duration> {
        self.elapsed
    }
}

impl<M, T: Clock> Callback<M> for RunTimer<T> {
    fn before_train(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        self.start = Some(self.clock.now());
        self.elapsed = None;
        Ok(())
    }
    fn after_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        // Training never started when another callback's setup failed.
        let Some(start) = self.start.take() else { return Ok(()) };
        let elapsed = self.clock.now().saturating_sub(start);
        self.elapsed = Some(elapsed);
        ctx.monitors().put_scalar(RunTimer::SCALAR, elapsed.as_secs_f64());
        crate::logging::info!("training took {}", humanize_duration(elapsed));
        Ok(())
    }
}
