//! [`Period`]: every `k` steps and/or every `k` epochs, the one period every gate uses.

use std::num::NonZeroU64;

use super::counters::Counters;
use super::event::{Event, Phase};
use crate::error::{Result, setting_error};

/// Every `k` global steps and/or every `k` epochs; neither is "no period". A period of zero
/// cannot be written: the counts are [`NonZeroU64`].
///
/// One type answers every periodic question of the library: [`PeriodicTrigger`]
/// ([`steps_divide`](Self::steps_divide), [`epochs_divide`](Self::epochs_divide)),
/// [`PeriodicCallback`] and a `#[derive(Callbacks)]` field with `#[every_k_*]`
/// ([`step_due`](Self::step_due), [`epoch_due`](Self::epoch_due), [`gate`](Self::gate)), the
/// tensor callbacks of [`debug`](crate::debug) ([`step_or_epoch_end`](Self::step_or_epoch_end))
/// and [`MovingAverageSummary`](crate::monitor::MovingAverageSummary)'s sampling.
///
/// [`PeriodicTrigger`]: crate::trigger::PeriodicTrigger
/// [`PeriodicCallback`]: crate::trigger::PeriodicCallback
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Period {
    steps: Option<NonZeroU64>,
    epochs: Option<NonZeroU64>,
}

impl Period {
    /// No period.
    pub const NONE: Period = Period { steps: None, epochs: None };

    /// From counts that may be absent; a count of 0 is taken as absent (the builders that take
    /// a `u64` report a 0 as an error first: see [`PeriodSetting`]).
    pub const fn new(every_k_steps: Option<u64>, every_k_epochs: Option<u64>) -> Period {
        let steps = match every_k_steps {
            Some(k) => NonZeroU64::new(k),
            None => None,
        };
        let epochs = match every_k_epochs {
            Some(k) => NonZeroU64::new(k),
            None => None,
        };
        Period { steps, epochs }
    }

    /// Every `k` global steps.
    pub const fn every_k_steps(k: NonZeroU64) -> Period {
        Period { steps: Some(k), epochs: None }
    }

    /// The period in steps.
    pub const fn steps(&self) -> Option<NonZeroU64> {
        self.steps
    }

    /// The period in epochs.
    pub const fn epochs(&self) -> Option<NonZeroU64> {
        self.epochs
    }

    /// Whether a period in steps or in epochs is set.
    pub const fn is_periodic(&self) -> bool {
        self.steps.is_some() || self.epochs.is_some()
    }

    /// Whether the period in steps divides `step` (false without one).
    #[inline]
    pub fn steps_divide(&self, step: u64) -> bool {
        self.steps.is_some_and(|k| step.is_multiple_of(k.get()))
    }

    /// Whether the period in epochs divides `epoch` (false without one).
    #[inline]
    pub fn epochs_divide(&self, epoch: u64) -> bool {
        self.epochs.is_some_and(|k| epoch.is_multiple_of(k.get()))
    }

    /// The rule for a step event of step `step` (the global step after it): a multiple of the
    /// period in steps, in an epoch that is a multiple of the period in epochs, or, with a period
    /// in epochs, the very last step of training (the last epoch's last step,
    /// [`Counters::last_step`]). With only a period in steps the last step is not added:
    /// tensorpack's `PeriodicCallback.predicate` adds it only under `every_k_epochs`.
    /// [`PeriodicCallback`](crate::trigger::PeriodicCallback)'s `trigger_step` follows it (read
    /// after the step, as tensorpack's `trigger_step` reads its predicate), and so do every step
    /// event of a `#[derive(Callbacks)]` field with `#[every_k_steps]` and of
    /// `#[callback(every_k_steps = ...)]`; `PeriodicCallback`'s `before_step` and `after_step`
    /// follow [`run_due`](Self::run_due), tensorpack's, one step earlier.
    #[inline]
    pub fn step_due(&self, step: u64, counters: &Counters) -> bool {
        self.steps_divide(step)
            || self.epochs_divide(counters.epoch_num)
            || (self.epochs.is_some() && step == counters.last_step())
    }

    /// [`PeriodicCallback`](crate::trigger::PeriodicCallback)'s rule for `before_step`, the step's
    /// fetches and `after_step`, read from the counters before the step as tensorpack's
    /// `PeriodicCallback.predicate` is read in its `before_run` (whose answer its `after_run`
    /// keeps: tensorpack/callbacks/trigger.py, `EnableCallbackIf`): `global_step`, the steps
    /// done before this one, is a multiple of the period in steps (so the first step of training,
    /// after 0 steps), the epoch is a multiple of the period in epochs, or, with a period in
    /// epochs, the step about to run is the last of training. With every 3 steps: `before_step`
    /// and `after_step` of steps 1, 4, 7... (`global_step` 0, 3, 6 before them), `trigger_step`
    /// of steps 3, 6, 9... ([`step_due`](Self::step_due), after them).
    #[inline]
    pub fn run_due(&self, counters: &Counters) -> bool {
        self.steps_divide(counters.global_step)
            || self.epochs_divide(counters.epoch_num)
            || (self.epochs.is_some() && counters.next_step() == counters.last_step())
    }

    /// [`PeriodicCallback`](crate::trigger::PeriodicCallback)'s rule for an epoch event: the epoch is a
    /// multiple of the period in epochs, `global_step` a multiple of the period in steps, or,
    /// with a period in epochs, it is the last epoch (as in tensorpack, not with only a period
    /// in steps).
    #[inline]
    pub fn epoch_due(&self, counters: &Counters) -> bool {
        self.epochs_divide(counters.epoch_num)
            || self.steps_divide(counters.global_step)
            || (self.epochs.is_some() && counters.epoch_num == counters.max_epoch)
    }

    /// The tensor callbacks' rule: step `step`, the `local`-th of its epoch, is a multiple of the
    /// period in steps, or the last step of an epoch that is a multiple of the period in epochs.
    #[inline]
    pub fn step_or_epoch_end(&self, step: u64, local: u64, counters: &Counters) -> bool {
        self.steps_divide(step)
            || (self.epochs_divide(counters.epoch_num) && local == counters.steps_per_epoch)
    }

    /// Whether a `#[derive(Callbacks)]` field with this period (none: always) and `predicate`
    /// (`#[enable_if]`) receives `event`: [`PeriodicCallback`](crate::trigger::PeriodicCallback)'s and
    /// [`EnableCallbackIf`](crate::trigger::EnableCallbackIf)'s rules, by the event's [`Phase`].
    /// The predicate is read as `EnableCallbackIf` reads it (see [its rule](crate::trigger::EnableCallbackIf#when-the-predicate-is-read)):
    /// `after_step` keeps the answer of before the step (the counters of before the step),
    /// `trigger_step` reads it after the step.
    #[inline]
    pub fn gate(
        &self,
        predicate: Option<fn(&Counters) -> bool>,
        event: &Event<'_>,
        counters: &Counters,
    ) -> bool {
        let periodic = self.is_periodic();
        let holds = |c: &Counters| predicate.is_none_or(|p| p(c));
        let due = || !periodic || self.step_due(counters.global_step, counters);
        match event.phase() {
            Phase::Once | Phase::InStep | Phase::Around => true,
            Phase::BeforeStep => self.wants(predicate, counters),
            Phase::AfterStep => due() && holds(&counters.before_step()),
            Phase::TriggerStep => due() && holds(counters),
            Phase::Epoch => (!periodic || self.epoch_due(counters)) && holds(counters),
        }
    }

    /// Whether a gated `#[derive(Callbacks)]` field receives the next step's events (and may
    /// fetch at it).
    #[inline]
    pub fn wants(&self, predicate: Option<fn(&Counters) -> bool>, counters: &Counters) -> bool {
        (!self.is_periodic() || self.step_due(counters.next_step(), counters))
            && predicate.is_none_or(|p| p(counters))
    }
}

/// A [`Period`] as a builder sets it from `u64` counts: a count of 0 cannot be a period, and is
/// kept as an error that [`check`](Self::check) reports at setup, naming the callback and the key.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PeriodSetting {
    period: Period,
    zero_steps: bool,
    zero_epochs: bool,
}

impl PeriodSetting {
    /// No period yet.
    pub const fn new() -> Self {
        PeriodSetting { period: Period::NONE, zero_steps: false, zero_epochs: false }
    }

    /// Every `k` global steps (`every_k_steps`).
    pub fn every_k_steps(mut self, k: u64) -> Self {
        self.period.steps = NonZeroU64::new(k);
        self.zero_steps = k == 0;
        self
    }

    /// Every `k` epochs (`every_k_epochs`).
    pub fn every_k_epochs(mut self, k: u64) -> Self {
        self.period.epochs = NonZeroU64::new(k);
        self.zero_epochs = k == 0;
        self
    }

    /// The period; an error naming `owner` and the key when a count was 0.
    pub fn check(&self, owner: &str) -> Result<Period> {
        let zero = |key: &str| Err(setting_error(format_args!("`{owner}`"), key, "at least 1", 0));
        if self.zero_steps {
            zero("every_k_steps")
        } else if self.zero_epochs {
            zero("every_k_epochs")
        } else {
            Ok(self.period)
        }
    }

    /// The period as set so far (a count of 0 left out).
    pub const fn period(&self) -> Period {
        self.period
    }
}
