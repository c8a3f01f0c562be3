//! [`StepTimeout`]: a watchdog for training steps that do not return.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::callback::{Callback, Context};
use crate::error::{Error, Result, check_setting};
use crate::fetch::Fetched;
use crate::state::{Clock, MonotonicClock};

/// What [`StepTimeout`] does when a step runs longer than its timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutAction {
    /// Print what happened and end the process at once with exit code
    /// [`StepTimeout::EXIT_CODE`] (the default: a hung step never returns, so nothing else could
    /// end the run).
    Abort,
    /// Print a warning while the step runs; when it returns, fail training with an error naming
    /// the step (tensorpack's behaviour: its timed-out `sess.run` raises `DeadlineExceededError`).
    /// `after_train` runs for every callback. A step that never returns is never noticed past
    /// the warning: use [`Abort`](Self::Abort) for hung steps.
    Fail,
    /// Print a warning while the step runs; when it returns, stop training gracefully (as
    /// [`Context::request_stop`]: the run ends with [`Outcome::Stopped`](crate::callback::Outcome::Stopped)
    /// and `after_train` runs). As with `Fail`, a step that never returns is only warned about.
    Stop,
    /// Print a warning and let the step go on; when it ends, print how long it took. The steps
    /// that timed out are listed by [`StepTimeout::timed_out_steps`].
    Warn,
}

/// What the training thread and the watchdog share: atomics and the clock.
#[derive(Debug)]
struct Watch<C> {
    /// The global step running now (its number once finished), 0 between steps.
    armed: AtomicU64,
    /// When it started, in nanoseconds of `clock`.
    started: AtomicU64,
    /// Its epoch.
    epoch: AtomicU64,
    /// The last step the watchdog reported.
    reported: AtomicU64,
    stop: AtomicBool,
    /// Where the time is read: the system's monotonic clock, or a test's `ManualClock`.
    clock: C,
    /// The steps that timed out (written only when one does).
    timed_out: Mutex<Vec<u64>>,
}

/// Aborts the process, or warns, when a training step runs longer than `timeout`
/// (tensorpack's `SessionRunTimeout(timeout_in_ms)`, TensorFlow's per-run timeout).
///
/// A watchdog thread, started in `before_train` and stopped in `after_train`, looks every
/// [`check_every`](Self::check_every) (a tenth of the timeout by default, between 1 ms and 1 s)
/// at the step in progress. The training thread arms it in `before_step` and disarms it in
/// `after_step` with four atomic stores and a clock read (two reads, except with `Abort`): no
/// lock, allocation or system call per step. The time measured runs from this callback's `before_step` to its
/// `after_step`: the step itself, plus the `before_step` and `after_step` of the callbacks ordered between
/// them.
///
/// On a timeout the watchdog prints, on stderr, which step (global step and epoch) has run for
/// how long, then acts as [`action`](Self::action) says:
/// - [`TimeoutAction::Abort`] (the default) ends the process with exit code
///   [`EXIT_CODE`](Self::EXIT_CODE) (124, as `timeout(1)`): a hung step never returns, so
///   `after_train` cannot run; checkpoints already written are intact, and the run resumes from
///   the last one. It ends the process with `_exit`, without running exit handlers that a hung
///   thread could deadlock.
/// - [`TimeoutAction::Fail`]: when the slow step returns, training fails with an error naming the
///   step and its duration (what tensorpack's `SessionRunTimeout` does, by an exception).
/// - [`TimeoutAction::Stop`]: when the slow step returns, training stops gracefully
///   ([`Outcome::Stopped`](crate::callback::Outcome::Stopped)).
/// - [`TimeoutAction::Warn`] ([`warn_only`](Self::warn_only)): a warning, once per step, and how
///   long the step took when it ends.
///
/// Whatever the action, the steps that ran longer than the timeout are listed by
/// [`timed_out_steps`](Self::timed_out_steps). With `Fail` and `Stop` the decision is made on the
/// training thread when the step returns, from the step's measured duration, so a step that
/// returns just past the timeout, before the watchdog looked, is caught as well.
///
/// Differences from tensorpack: a step cannot be cancelled (burn has no cancellable run), so the
/// default ends the process instead; `Fail` is tensorpack's behaviour for a step that returns.
///
/// In data-parallel training it runs on every rank: each watches its own steps.
///
/// The time is read from a [`Clock`] (the system's monotonic clock by default; a
/// [`ManualClock`](crate::state::ManualClock) with [`clock`](Self::clock) makes a test exact: a
/// step "takes" what the test advances the clock by, whatever the machine's load).
///
/// ```
/// use std::time::Duration;
/// use burn_stoker::debug::{StepTimeout, TimeoutAction};
/// // A step that takes more than 10 minutes is hung: end the process.
/// let watchdog = StepTimeout::new(Duration::from_secs(600));
/// // Only warn about steps slower than 2 s.
/// let warner = StepTimeout::new(Duration::from_secs(2)).warn_only();
/// // Stop training cleanly after a step that took more than 30 s.
/// let stopper = StepTimeout::new(Duration::from_secs(30)).action(TimeoutAction::Stop);
/// # let _ = (watchdog, warner, stopper);
/// ```
#[derive(Debug)]
pub struct StepTimeout<C = MonotonicClock> {
    timeout: Duration,
    check_every: Option<Duration>,
    action: TimeoutAction,
    watch: Arc<Watch<C>>,
    thread: Option<JoinHandle<()>>,
}
crate::kind::kind!(StepTimeout<C>);

impl StepTimeout {
    /// The exit code of a process ended by a step timeout (124, as `timeout(1)` uses).
    pub const EXIT_CODE: i32 = 124;

    /// Abort when a step runs longer than `timeout`.
    pub fn new(timeout: Duration) -> Self {
        StepTimeout::with_watch(timeout, None, TimeoutAction::Abort, MonotonicClock::new())
    }
}

impl<C: Clock + Send + Sync + 'static> StepTimeout<C> {
    fn with_watch(timeout: Duration, check_every: Option<Duration>, action: TimeoutAction, clock: C) -> Self {
        StepTimeout {
            timeout,
            check_every,
            action,
            watch: Arc::new(Watch {
                armed: AtomicU64::new(0),
                started: AtomicU64::new(0),
                epoch: AtomicU64::new(0),
                reported: AtomicU64::new(0),
                stop: AtomicBool::new(false),
                clock,
                timed_out: Mutex::new(Vec::new()),
            }),
            thread: None,
        }
    }
    /// Read the time from `clock` instead of the system's monotonic clock (a
    /// [`ManualClock`](crate::state::ManualClock) in tests). Call it before training.
    ///
    /// ```
    /// use std::time::Duration;
    /// use burn_stoker::debug::{StepTimeout, TimeoutAction};
    /// use burn_stoker::state::ManualClock;
    /// let clock = ManualClock::new();
    /// // A step "takes" whatever the test advances `clock` by while it runs.
    /// let timeout = StepTimeout::new(Duration::from_millis(400)).action(TimeoutAction::Fail).clock(clock.clone());
    /// # let _ = timeout;
    /// ```
    pub fn clock<D: Clock + Send + Sync + 'static>(self, clock: D) -> StepTimeout<D> {
        StepTimeout::with_watch(self.timeout, self.check_every, self.action, clock)
    }
    /// Only warn (see [`TimeoutAction::Warn`]).
    pub fn warn_only(self) -> Self {
        self.action(TimeoutAction::Warn)
    }
    /// What to do on a timeout.
    pub fn action(mut self, action: TimeoutAction) -> Self {
        self.action = action;
        self
    }
    /// How often the watchdog looks (default: a tenth of the timeout, between 1 ms and 1 s). A
    /// timeout is noticed at most this late.
    pub fn check_every(mut self, period: Duration) -> Self {
        self.check_every = Some(period);
        self
    }
    /// The global steps that ran longer than the timeout so far, in the order seen.
    pub fn timed_out_steps(&self) -> Vec<u64> {
        self.watch.timed_out.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    fn now(&self) -> u64 {
        self.watch.clock.now().as_nanos() as u64
    }
}

impl<C> StepTimeout<C> {
    fn stop_thread(&mut self) {
        if let Some(thread) = self.thread.take() {
            self.watch.stop.store(true, Ordering::Release);
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

impl<C> Drop for StepTimeout<C> {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

/// The watchdog's loop.
fn watch<C: Clock>(watch: Arc<Watch<C>>, timeout: Duration, period: Duration, action: TimeoutAction) {
    let timeout_nanos = timeout.as_nanos() as u64;
    while !watch.stop.load(Ordering::Acquire) {
        std::thread::park_timeout(period);
        let step = watch.armed.load(Ordering::Acquire);
        if step == 0 || watch.reported.load(Ordering::Relaxed) == step {
            continue;
        }
        // Read after `armed`: the start of this step or of a later one, never an earlier one, so
        // a race only shortens the time seen.
        let started = watch.started.load(Ordering::Relaxed);
        let epoch = watch.epoch.load(Ordering::Relaxed);
        let elapsed = (watch.clock.now().as_nanos() as u64).saturating_sub(started);
        if elapsed <= timeout_nanos || watch.armed.load(Ordering::Acquire) != step {
            continue;
        }
        watch.reported.store(step, Ordering::Relaxed);
        let elapsed = Duration::from_nanos(elapsed);
        match action {
            TimeoutAction::Abort => {
                crate::logging::error!(
                    "StepTimeout: global step {step} (epoch {epoch}) has run for {elapsed:.2?}, \
                     longer than the timeout of {timeout:?}: ending the process with exit code {}",
                    StepTimeout::EXIT_CODE
                );
                crate::logging::flush();
                exit_now(StepTimeout::EXIT_CODE);
            }
            TimeoutAction::Fail | TimeoutAction::Stop | TimeoutAction::Warn => {
                record_timeout(&watch, step);
                let then = match action {
                    TimeoutAction::Fail => ": training fails when it returns",
                    TimeoutAction::Stop => ": training stops when it returns",
                    _ => "",
                };
                crate::logging::warn!(bare:
                    "StepTimeout: global step {step} (epoch {epoch}) has run for {elapsed:.2?}, \
                     longer than the timeout of {timeout:?}{then}"
                );
            }
        }
    }
}

/// Add `step` to the steps that timed out, once (the watchdog and the training thread may both
/// see it).
#[cold]
fn record_timeout<C>(watch: &Watch<C>, step: u64) {
    let mut steps = watch.timed_out.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if !steps.contains(&step) {
        steps.push(step);
    }
}

/// End the process now, without exit handlers (a hung thread may hold what they need), the
/// helper processes killed first (`StartProcOrThread`'s, the command monitors').
fn exit_now(code: i32) -> ! {
    crate::signal::kill_helpers();
    #[cfg(unix)]
    // SAFETY: `_exit` takes no pointer and does not return.
    unsafe {
        libc::_exit(code)
    }
    #[cfg(not(unix))]
    std::process::exit(code)
}

impl<M, C: Clock + Send + Sync + 'static> Callback<M> for StepTimeout<C> {
    /// Every rank: each watches its own steps.
    fn chief_only(&self) -> bool {
        false
    }
    fn setup(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        check_setting(!self.timeout.is_zero(), "StepTimeout", "timeout", "longer than 0", "0 s")?;
        check_setting(
            !self.check_every.is_some_and(|p| p.is_zero()),
            "StepTimeout",
            "check_every",
            "longer than 0",
            "0 s",
        )?;
        Ok(())
    }
    fn before_train(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        self.stop_thread();
        self.watch.stop.store(false, Ordering::Release);
        let period = self
            .check_every
            .unwrap_or_else(|| (self.timeout / 10).clamp(Duration::from_millis(1), Duration::from_secs(1)));
        let (watch_state, timeout, action) = (self.watch.clone(), self.timeout, self.action);
        let thread = std::thread::Builder::new()
            .name("stoker-StepTimeout".into())
            .spawn(move || watch(watch_state, timeout, period, action))
            .map_err(|e| Error::context("StepTimeout could not start its watchdog thread", e))?;
        self.thread = Some(thread);
        Ok(())
    }
    #[inline]
    fn before_step(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let now = self.now();
        self.watch.started.store(now, Ordering::Relaxed);
        self.watch.epoch.store(ctx.epoch_num(), Ordering::Relaxed);
        self.watch.armed.store(ctx.counters().next_step(), Ordering::Release);
        Ok(())
    }
    #[inline]
    fn after_step(&mut self, ctx: &mut Context<'_, M>, _values: &Fetched<'_>) -> Result<()> {
        self.watch.armed.store(0, Ordering::Release);
        if self.action == TimeoutAction::Abort {
            // A step that returns was not hung; one that timed out ended the process.
            return Ok(());
        }
        let took = self.now().saturating_sub(self.watch.started.load(Ordering::Relaxed));
        if took <= self.timeout.as_nanos() as u64 {
            return Ok(());
        }
        self.timed_out(ctx, Duration::from_nanos(took))
    }
    fn after_train(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        self.watch.armed.store(0, Ordering::Release);
        self.stop_thread();
        Ok(())
    }
}

impl<C: Clock + Send + Sync + 'static> StepTimeout<C> {
    /// The step that just ran took `took`, longer than the timeout: warn, fail or stop.
    #[cold]
    fn timed_out<M>(&self, ctx: &mut Context<'_, M>, took: Duration) -> Result<()> {
        let step = ctx.global_step();
        record_timeout(&self.watch, step);
        let message = format!(
            "global step {step} (epoch {}) took {took:.2?}, longer than the timeout of {:?}",
            ctx.epoch_num(),
            self.timeout
        );
        match self.action {
            TimeoutAction::Fail => Err(Error::msg(format!("StepTimeout: {message}"))),
            TimeoutAction::Stop => {
                crate::logging::warn!(bare: "StepTimeout: {message}: stopping training");
                ctx.request_stop(format!("StepTimeout: {message}"));
                Ok(())
            }
            TimeoutAction::Abort | TimeoutAction::Warn => {
                crate::logging::warn!(bare: "StepTimeout: {message}");
                Ok(())
            }
        }
    }
}
