//! The time source of what measures time: the trackers, the saver's checkpoint times, `StepTimeout`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Where a tracker reads the time: [`MonotonicClock`] in training, [`ManualClock`] in a test.
pub trait Clock {
    /// The time elapsed since a fixed origin; never decreases.
    fn now(&self) -> Duration;
}

/// The system's monotonic clock ([`Instant`]), the trackers' default.
#[derive(Debug, Clone, Copy)]
pub struct MonotonicClock {
    origin: Instant,
}

impl MonotonicClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        MonotonicClock { origin: Instant::now() }
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        MonotonicClock::new()
    }
}

impl Clock for MonotonicClock {
    #[inline]
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }
}

/// A clock that moves only when told to, for tests: the durations a tracker measures are then
/// exactly the ones the test advanced it by. Clones share the same time.
///
/// ```
/// use std::time::Duration;
/// use burn_stoker::state::{Clock, ManualClock};
///
/// let clock = ManualClock::new();
/// let seen_by_a_tracker = clock.clone();
/// clock.advance(Duration::from_millis(1500));
/// assert_eq!(seen_by_a_tracker.now(), Duration::from_millis(1500));
/// ```
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    nanos: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock at zero.
    pub fn new() -> Self {
        ManualClock::default()
    }
    /// Move the clock forward by `duration`.
    pub fn advance(&self, duration: Duration) {
        let nanos = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        self.nanos.fetch_add(nanos, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::SeqCst))
    }
}
