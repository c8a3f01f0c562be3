//! The time each callback of a set takes (tensorpack's `CallbackTimeLogger`).

use std::borrow::Cow;
use std::fmt::Write as _;
use std::marker::PhantomData;
use std::time::Duration;

use super::{humanize_duration, seconds};
use crate::callback::{CallbackInfo, Callbacks, Context, Counters, Event, StateOp};
use crate::error::{Result, check_setting};
use crate::kind::CallbackField;
use crate::state::{Clock, MonotonicClock};

/// Times every event of every callback of a set, and reports the slow ones at the end of each
/// epoch and at the end of training, as tensorpack's `CallbackTimeLogger` does (`log` records at
/// `Info`; on stderr without a logger, see [`logging`](crate::logging)):
///
/// ```text
/// stoker: callbacks took 4.210 s in epoch 3 (of 10.514 s); InferenceRunner: 3.9 seconds (93%)
/// stoker: callbacks took 42.917 s in the whole run (of 1 minute 45 seconds); InferenceRunner: 39.2 seconds (91%)
/// ```
///
/// A report is written when the callbacks of the set took at least
/// [`min_total`](Self::min_total) (3 s) in the epoch; it names each callback that took more than
/// [`min_callback`](Self::min_callback) (1 s) and more than [`min_share`](Self::min_share) (30 %)
/// of that — tensorpack's thresholds. The time in parentheses is the epoch's (or the run's),
/// from the set's first `before_epoch` (`setup`) to its last `trigger_epoch` (`after_train`).
/// With [`put_scalars`](Self::put_scalars), each callback's time in the epoch is also put as
/// `callback_time/<name>` (seconds) at the end of each epoch.
///
/// tensorpack times `trigger_epoch` alone; this wrapper times every event, the per-step ones
/// too, so that a callback that is slow at every step shows. An epoch's time counts its
/// `before_epoch`, step events, `after_epoch` and `trigger_epoch`; `setup`, `before_train` and
/// `after_train` count in the run's.
///
/// The wrapped set keeps its callbacks' names, order constraints, fetches and states: wrapping
/// changes nothing else. The timing costs two clock reads per callback and event, per step
/// too: it is paid only by the sets wrapped in `Timed`, so leave it out of runs that do not
/// need it.
///
/// ```no_run
/// # use burn_stoker::prelude::*;
/// # use burn::nn::{Linear, LinearConfig};
/// # use burn::optim::AdamConfig;
/// # use burn::tensor::{Device, Tensor};
/// use burn_stoker::track::{EstimatedTimeLeft, ThroughputTracker, Timed};
/// # let device = Device::default().autodiff();
/// # let model: Linear = LinearConfig::new(4, 1).init(&device);
/// # let batches = vec![(Tensor::<2>::ones([8, 4], &device), Tensor::<2>::zeros([8, 1], &device))];
/// Trainer::new(model, AdamConfig::new().init(), batches)
///     .callbacks(Timed::new((ModelSaver::new(5), ThroughputTracker::new(), EstimatedTimeLeft::new())))
///     .train(|model: &Linear, (x, y): (Tensor<2>, Tensor<2>), _step: &mut Step<'_>| {
///         (model.forward(x) - y).powi_scalar(2).mean()
///     })?;
/// # Ok::<(), burn_stoker::Error>(())
/// ```
#[doc(alias = "CallbackTimeLogger")]
#[derive(Debug)]
pub struct Timed<C, T = MonotonicClock> {
    inner: C,
    clock: T,
    min_total: Duration,
    min_callback: Duration,
    min_share: f64,
    put_scalars: bool,
    members: Vec<Member>,
    /// Callbacks whose `setup` ran, whose `after_train` ran, whose `trigger_epoch` ran this epoch.
    set_up: usize,
    finished: usize,
    triggered: usize,
    epoch_start: Option<Duration>,
    run_start: Option<Duration>,
}
impl<C: CallbackField, T> CallbackField for Timed<C, T> {}

#[derive(Debug)]
struct Member {
    name: Cow<'static, str>,
    scalar: String,
    epoch: Duration,
    run: Duration,
}

/// Marks a set of callbacks wrapped in [`Timed`] (see [`Callbacks`]).
#[derive(Debug)]
pub struct TimedSet<K>(PhantomData<fn() -> K>);

impl<C> Timed<C> {
    /// Time the callbacks of `callbacks` (one callback, a tuple, a `Vec`, a
    /// `#[derive(Callbacks)]` struct), with tensorpack's thresholds.
    pub fn new(callbacks: C) -> Self {
        Timed {
            inner: callbacks,
            clock: MonotonicClock::new(),
            min_total: Duration::from_secs(3),
            min_callback: Duration::from_secs(1),
            min_share: 0.3,
            put_scalars: false,
            members: Vec::new(),
            set_up: 0,
            finished: 0,
            triggered: 0,
            epoch_start: None,
            run_start: None,
        }
    }
}

impl<C, T: Clock> Timed<C, T> {
    /// Report only when the callbacks took at least this long in all (3 s by default).
    pub fn min_total(mut self, duration: Duration) -> Self {
        self.min_total = duration;
        self
    }
    /// Name only the callbacks that took more than this long (1 s by default).
    pub fn min_callback(mut self, duration: Duration) -> Self {
        self.min_callback = duration;
        self
    }
    /// Name only the callbacks that took more than this share of the callbacks' total, between 0
    /// and 1 (0.3 by default; another value is an error at setup).
    pub fn min_share(mut self, share: f64) -> Self {
        self.min_share = share;
        self
    }
    /// Also put each callback's time in each epoch as the scalar `callback_time/<name>`, in
    /// seconds (off by default).
    pub fn put_scalars(mut self, enable: bool) -> Self {
        self.put_scalars = enable;
        self
    }
    /// Read the time from `clock` (a [`ManualClock`](crate::state::ManualClock) in tests).
    pub fn clock<C2: Clock>(self, clock: C2) -> Timed<C, C2> {
        Timed {
            inner: self.inner,
            clock,
            min_total: self.min_total,
            min_callback: self.min_callback,
            min_share: self.min_share,
            put_scalars: self.put_scalars,
            members: self.members,
            set_up: self.set_up,
            finished: self.finished,
            triggered: self.triggered,
            epoch_start: self.epoch_start,
            run_start: self.run_start,
        }
    }
    /// The wrapped callbacks.
    pub fn inner(&self) -> &C {
        &self.inner
    }
    /// The wrapped callbacks, unwrapped.
    pub fn into_inner(self) -> C {
        self.inner
    }

    /// Count `start..end`, the time callback `index` took on `event`; report when the epoch or
    /// the run ends.
    fn account<M>(
        &mut self,
        index: usize,
        event: &Event<'_>,
        start: Duration,
        end: Duration,
        ctx: &mut Context<'_, M>,
    ) {
        let spent = end.saturating_sub(start);
        let Some(member) = self.members.get_mut(index) else { return };
        member.run += spent;
        match event {
            Event::Setup => {
                self.set_up += 1;
                self.run_start.get_or_insert(start);
            }
            Event::BeforeTrain => {}
            Event::AfterTrain => {
                self.finished += 1;
                if self.finished == self.set_up {
                    self.report_run(end);
                }
            }
            Event::BeforeEpoch => {
                member.epoch += spent;
                self.epoch_start.get_or_insert(start);
            }
            Event::TriggerEpoch => {
                member.epoch += spent;
                self.triggered += 1;
                if self.triggered == self.members.len() {
                    self.report_epoch(end, ctx);
                }
            }
            Event::BeforeStep
            | Event::AfterStep(_)
            | Event::Fetched(_)
            | Event::AfterBatch
            | Event::TriggerStep
            | Event::AfterEpoch
            | Event::Trigger
            | Event::BeforeBatch(_)
            | Event::AfterPred(_)
            | Event::BeforeBackward(_)
            | Event::AfterBackward(_)
            | Event::BeforeValidate
            | Event::Validate
            | Event::AfterValidate
            | Event::AfterCancelBackward
            | Event::AfterCancelBatch
            | Event::AfterCancelEpoch
            | Event::AfterCancelFit
            | Event::AfterCancelStep
            | Event::AfterCancelTrain
            | Event::AfterCancelValidate => {
                member.epoch += spent;
            }
        }
    }

    fn report_epoch<M>(&mut self, end: Duration, ctx: &mut Context<'_, M>) {
        let wall = end.saturating_sub(self.epoch_start.take().unwrap_or(end));
        self.triggered = 0;
        if self.put_scalars {
            for member in &self.members {
                ctx.monitors().put_scalar(&member.scalar, member.epoch.as_secs_f64());
            }
        }
        let times: Vec<(&str, Duration)> = self.members.iter().map(|m| (&*m.name, m.epoch)).collect();
        if let Some(line) = self.report(&times, &format!("in epoch {}", ctx.epoch_num()), &seconds(wall)) {
            crate::logging::info!("{line}");
        }
        for member in &mut self.members {
            member.epoch = Duration::ZERO;
        }
    }

    fn report_run(&self, end: Duration) {
        let wall = end.saturating_sub(self.run_start.unwrap_or(end));
        let times: Vec<(&str, Duration)> = self.members.iter().map(|m| (&*m.name, m.run)).collect();
        if let Some(line) = self.report(&times, "in the whole run", &humanize_duration(wall)) {
            crate::logging::info!("{line}");
        }
    }

    /// The report of `times`, when they add up to `min_total`.
    fn report(&self, times: &[(&str, Duration)], when: &str, wall: &str) -> Option<String> {
        let total: Duration = times.iter().map(|&(_, t)| t).sum();
        if total < self.min_total || total.is_zero() {
            return None;
        }
        let mut line = format!("callbacks took {} {when} (of {wall})", seconds(total));
        for &(name, time) in times {
            let share = time.as_secs_f64() / total.as_secs_f64();
            if time > self.min_callback && share > self.min_share {
                let _ = write!(line, "; {name}: {} ({:.0}%)", humanize_duration(time), share * 100.0);
            }
        }
        Some(line)
    }
}

impl<M, K, C: Callbacks<M, K>, T: Clock> crate::callback::set::SealedCallbacks<M, TimedSet<K>>
    for Timed<C, T>
{
}

impl<M, K, C: Callbacks<M, K>, T: Clock> Callbacks<M, TimedSet<K>> for Timed<C, T> {
    const FIXED_LEN: Option<usize> = C::FIXED_LEN;

    fn len(&self) -> usize {
        self.inner.len()
    }
    fn info(&self, index: usize) -> CallbackInfo<'_> {
        self.inner.info(index)
    }
    fn wants_fetch(&self, index: usize, counters: &Counters) -> bool {
        self.inner.wants_fetch(index, counters)
    }
    fn dispatch(&mut self, index: usize, event: Event<'_>, ctx: &mut Context<'_, M>) -> Result<()> {
        if let Event::Setup = event
            && self.members.len() != self.inner.len()
        {
            let valid = (0.0..=1.0).contains(&self.min_share);
            check_setting(valid, "Timed", "min_share", "between 0 and 1", self.min_share)?;
            self.members = (0..self.inner.len())
                .map(|i| {
                    let name = self.inner.info(i).name;
                    Member {
                        scalar: format!("callback_time/{name}"),
                        name,
                        epoch: Duration::ZERO,
                        run: Duration::ZERO,
                    }
                })
                .collect();
        }
        let start = self.clock.now();
        let result = self.inner.dispatch(index, event, ctx);
        let end = self.clock.now();
        self.account(index, &event, start, end, ctx);
        result
    }
    fn state(&mut self, index: usize, op: StateOp) -> Result<Option<serde_json::Value>> {
        self.inner.state(index, op)
    }
}
