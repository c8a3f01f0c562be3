//! Wrappers that change when a callback runs: tensorpack's `PeriodicTrigger`, `PeriodicCallback`
//! and `EnableCallbackIf`. Each keeps the wrapped callback's name, order, fetches and state. The
//! events inside a step (`before_backward`, `after_backward`) reach the wrapped callback at every
//! step, ungated: a loss or gradient change that applied only at some steps would be a surprise.

use std::borrow::Cow;

use crate::callback::{Callback, Context, Counters, Order, StepGradients, StepHooks, StepLoss};
use crate::error::{Error, Result};
use crate::fetch::{Fetch, Fetched};

macro_rules! forward_identity {
    () => {
        fn name(&self) -> Cow<'static, str> {
            self.inner.name()
        }
        fn order(&self) -> Order {
            self.inner.order()
        }
        fn fetches(&self) -> &[Fetch] {
            self.inner.fetches()
        }
        fn chief_only(&self) -> bool {
            self.inner.chief_only()
        }
        fn save_state(&self) -> Result<Option<serde_json::Value>> {
            self.inner.save_state()
        }
        fn load_state(&mut self, state: serde_json::Value) -> Result<()> {
            self.inner.load_state(state)
        }
        fn step_hooks(&self) -> StepHooks {
            self.inner.step_hooks()
        }
        fn before_backward(&mut self, ctx: &mut Context<'_, M>, loss: &StepLoss<'_>) -> Result<()> {
            self.inner.before_backward(ctx, loss)
        }
        fn after_backward(&mut self, ctx: &mut Context<'_, M>, grads: &StepGradients) -> Result<()> {
            self.inner.after_backward(ctx, grads)
        }
    };
}

fn check_period(name: &str, key: &str, k: Option<u64>) -> Result<()> {
    match k {
        Some(0) => Err(Error::msg(format!("`{name}`: {key} must be at least 1, not 0"))),
        _ => Ok(()),
    }
}

/// Calls the wrapped callback's `trigger` every `k` global steps (from `trigger_step`, when
/// `global_step % k == 0`), every `k` epochs (from `trigger_epoch`, when `epoch_num % k == 0`),
/// and once in `before_train` if asked. Its other events run as they are, except `trigger_epoch`,
/// which this wrapper replaces.
#[derive(Debug, Clone)]
pub struct PeriodicTrigger<C> {
    inner: C,
    every_k_steps: Option<u64>,
    every_k_epochs: Option<u64>,
    before_train: bool,
}

impl<C> PeriodicTrigger<C> {
    /// Wrap `inner`; give it a period with the methods below.
    pub fn new(inner: C) -> Self {
        PeriodicTrigger { inner, every_k_steps: None, every_k_epochs: None, before_train: false }
    }
    /// Trigger every `k` global steps.
    pub fn every_k_steps(mut self, k: u64) -> Self {
        self.every_k_steps = Some(k);
        self
    }
    /// Trigger every `k` epochs.
    pub fn every_k_epochs(mut self, k: u64) -> Self {
        self.every_k_epochs = Some(k);
        self
    }
    /// Also trigger once in `before_train`.
    pub fn before_train(mut self, enable: bool) -> Self {
        self.before_train = enable;
        self
    }
    /// The wrapped callback.
    pub fn inner(&self) -> &C {
        &self.inner
    }
}

impl<M, C: Callback<M>> Callback<M> for PeriodicTrigger<C> {
    forward_identity!();
    fn wants_fetch(&self, counters: &Counters) -> bool {
        self.inner.wants_fetch(counters)
    }
    fn setup(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let name = self.inner.name();
        check_period(&name, "every_k_steps", self.every_k_steps)?;
        check_period(&name, "every_k_epochs", self.every_k_epochs)?;
        if self.every_k_steps.is_none() && self.every_k_epochs.is_none() && !self.before_train {
            return Err(Error::msg(format!(
                "PeriodicTrigger around `{name}` never triggers: give every_k_steps, every_k_epochs or before_train"
            )));
        }
        self.inner.setup(ctx)
    }
    fn before_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.inner.before_train(ctx)?;
        if self.before_train { self.inner.trigger(ctx) } else { Ok(()) }
    }
    fn before_epoch(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.inner.before_epoch(ctx)
    }
    fn before_step(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.inner.before_step(ctx)
    }
    fn after_step(&mut self, ctx: &mut Context<'_, M>, values: &Fetched<'_>) -> Result<()> {
        self.inner.after_step(ctx, values)
    }
    fn trigger_step(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.inner.trigger_step(ctx)?;
        match self.every_k_steps {
            Some(k) if ctx.global_step().is_multiple_of(k) => self.inner.trigger(ctx),
            _ => Ok(()),
        }
    }
    fn after_epoch(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.inner.after_epoch(ctx)
    }
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        match self.every_k_epochs {
            Some(k) if ctx.epoch_num().is_multiple_of(k) => self.inner.trigger(ctx),
            _ => Ok(()),
        }
    }
    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.inner.trigger(ctx)
    }
    fn after_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.inner.after_train(ctx)
    }
}

/// Delivers the wrapped callback's per-step and per-epoch events only every `k` steps or epochs
/// (tensorpack's `PeriodicCallback`); `setup`, `before_train` and `after_train` always run.
///
/// A step event (`before_step`, `after_step` and its fetches, `trigger_step`) of step `n`
/// (`global_step` after it, `next_step()` before it) is delivered when `n % every_k_steps == 0`,
/// when its epoch is one of every `every_k_epochs`, and at the very last step of training. An
/// epoch event (`before_epoch`, `after_epoch`, `trigger_epoch`, `trigger`) of epoch `e` is
/// delivered when `e % every_k_epochs == 0`, when `global_step % every_k_steps == 0`, and at the
/// last epoch. (tensorpack tests `global_step` before and after a step alike, so its
/// `before_run` and `after_run` see different steps; here a step's events agree.)
#[derive(Debug, Clone)]
pub struct PeriodicCallback<C> {
    inner: C,
    every_k_steps: Option<u64>,
    every_k_epochs: Option<u64>,
    step_enabled: bool,
}

impl<C> PeriodicCallback<C> {
    /// Wrap `inner`; give it a period with the methods below.
    pub fn new(inner: C) -> Self {
        PeriodicCallback { inner, every_k_steps: None, every_k_epochs: None, step_enabled: false }
    }
    /// Deliver step events every `k` steps.
    pub fn every_k_steps(mut self, k: u64) -> Self {
        self.every_k_steps = Some(k);
        self
    }
    /// Deliver events during every `k`-th epoch.
    pub fn every_k_epochs(mut self, k: u64) -> Self {
        self.every_k_epochs = Some(k);
        self
    }
    /// The wrapped callback.
    pub fn inner(&self) -> &C {
        &self.inner
    }

    fn step_due(&self, step: u64, counters: &Counters) -> bool {
        step_due(self.every_k_steps, self.every_k_epochs, step, counters)
    }

    fn epoch_due(&self, counters: &Counters) -> bool {
        epoch_due(self.every_k_steps, self.every_k_epochs, counters)
    }
}

/// `PeriodicCallback`'s rule for a step event of step `step`: a multiple of `every_k_steps`, in
/// an epoch that is a multiple of `every_k_epochs`, or the very last step.
pub fn step_due(
    every_k_steps: Option<u64>,
    every_k_epochs: Option<u64>,
    step: u64,
    counters: &Counters,
) -> bool {
    every_k_steps.is_some_and(|k| step.is_multiple_of(k))
        || every_k_epochs.is_some_and(|k| counters.epoch_num.is_multiple_of(k))
        || step == counters.last_step()
}

/// `PeriodicCallback`'s rule for an epoch event: the epoch is a multiple of `every_k_epochs`,
/// `global_step` a multiple of `every_k_steps`, or it is the last epoch.
pub fn epoch_due(every_k_steps: Option<u64>, every_k_epochs: Option<u64>, counters: &Counters) -> bool {
    every_k_epochs.is_some_and(|k| counters.epoch_num.is_multiple_of(k))
        || every_k_steps.is_some_and(|k| counters.global_step.is_multiple_of(k))
        || counters.epoch_num == counters.max_epoch
}

impl<M, C: Callback<M>> Callback<M> for PeriodicCallback<C> {
    forward_identity!();
    fn wants_fetch(&self, counters: &Counters) -> bool {
        self.step_due(counters.next_step(), counters) && self.inner.wants_fetch(counters)
    }
    fn setup(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let name = self.inner.name();
        check_period(&name, "every_k_steps", self.every_k_steps)?;
        check_period(&name, "every_k_epochs", self.every_k_epochs)?;
        self.inner.setup(ctx)
    }
    fn before_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.inner.before_train(ctx)
    }
    fn before_epoch(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if self.epoch_due(ctx.counters()) { self.inner.before_epoch(ctx) } else { Ok(()) }
    }
    fn before_step(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let counters = *ctx.counters();
        self.step_enabled = self.step_due(counters.next_step(), &counters);
        if self.step_enabled { self.inner.before_step(ctx) } else { Ok(()) }
    }
    fn after_step(&mut self, ctx: &mut Context<'_, M>, values: &Fetched<'_>) -> Result<()> {
        if self.step_enabled { self.inner.after_step(ctx, values) } else { Ok(()) }
    }
    fn trigger_step(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if self.step_enabled { self.inner.trigger_step(ctx) } else { Ok(()) }
    }
    fn after_epoch(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if self.epoch_due(ctx.counters()) { self.inner.after_epoch(ctx) } else { Ok(()) }
    }
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if self.epoch_due(ctx.counters()) { self.inner.trigger_epoch(ctx) } else { Ok(()) }
    }
    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if self.epoch_due(ctx.counters()) { self.inner.trigger(ctx) } else { Ok(()) }
    }
    fn after_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.inner.after_train(ctx)
    }
}

/// Delivers the wrapped callback's events only while `predicate(counters)` holds (tensorpack's
/// `EnableCallbackIf`); `setup`, `before_train` and `after_train` always run. The predicate is
/// evaluated at `before_step` and its answer holds for that step's `after_step` (and fetches).
#[derive(Debug, Clone)]
pub struct EnableCallbackIf<C, P> {
    inner: C,
    predicate: P,
    step_enabled: bool,
}

impl<C, P: Fn(&Counters) -> bool> EnableCallbackIf<C, P> {
    /// Wrap `inner`, enabled while `predicate` holds.
    pub fn new(inner: C, predicate: P) -> Self {
        EnableCallbackIf { inner, predicate, step_enabled: false }
    }
    /// The wrapped callback.
    pub fn inner(&self) -> &C {
        &self.inner
    }
}

impl<M, C: Callback<M>, P: Fn(&Counters) -> bool> Callback<M> for EnableCallbackIf<C, P> {
    forward_identity!();
    fn wants_fetch(&self, counters: &Counters) -> bool {
        (self.predicate)(counters) && self.inner.wants_fetch(counters)
    }
    fn setup(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.inner.setup(ctx)
    }
    fn before_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.inner.before_train(ctx)
    }
    fn before_epoch(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if (self.predicate)(ctx.counters()) { self.inner.before_epoch(ctx) } else { Ok(()) }
    }
    fn before_step(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.step_enabled = (self.predicate)(ctx.counters());
        if self.step_enabled { self.inner.before_step(ctx) } else { Ok(()) }
    }
    fn after_step(&mut self, ctx: &mut Context<'_, M>, values: &Fetched<'_>) -> Result<()> {
        if self.step_enabled { self.inner.after_step(ctx, values) } else { Ok(()) }
    }
    fn trigger_step(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if (self.predicate)(ctx.counters()) { self.inner.trigger_step(ctx) } else { Ok(()) }
    }
    fn after_epoch(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if (self.predicate)(ctx.counters()) { self.inner.after_epoch(ctx) } else { Ok(()) }
    }
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if (self.predicate)(ctx.counters()) { self.inner.trigger_epoch(ctx) } else { Ok(()) }
    }
    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if (self.predicate)(ctx.counters()) { self.inner.trigger(ctx) } else { Ok(()) }
    }
    fn after_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.inner.after_train(ctx)
    }
}

/// Whether a `#[derive(Callbacks)]` field with `#[every_k_*]` / `#[enable_if]` receives `event`:
/// `PeriodicCallback`'s and `EnableCallbackIf`'s rules (setup, before_train and after_train always;
/// the events inside a step always, like the wrappers).
pub fn field_gate(
    every_k_steps: Option<u64>,
    every_k_epochs: Option<u64>,
    predicate: Option<fn(&Counters) -> bool>,
    event: &crate::callback::Event<'_>,
    counters: &Counters,
) -> bool {
    use crate::callback::Event;
    let periodic = every_k_steps.is_some() || every_k_epochs.is_some();
    let holds = |c: &Counters| predicate.is_none_or(|p| p(c));
    match event {
        Event::Setup
        | Event::BeforeTrain
        | Event::AfterTrain
        | Event::BeforeBackward(_)
        | Event::AfterBackward(_) => true,
        Event::BeforeStep => {
            (!periodic || step_due(every_k_steps, every_k_epochs, counters.next_step(), counters))
                && holds(counters)
        }
        Event::AfterStep(_) | Event::TriggerStep => {
            (!periodic || step_due(every_k_steps, every_k_epochs, counters.global_step, counters))
                && holds(&counters.before_step())
        }
        Event::BeforeEpoch | Event::AfterEpoch | Event::TriggerEpoch | Event::Trigger => {
            (!periodic || epoch_due(every_k_steps, every_k_epochs, counters)) && holds(counters)
        }
    }
}

/// Whether a gated `#[derive(Callbacks)]` field may fetch at the next step.
pub fn field_wants(
    every_k_steps: Option<u64>,
    every_k_epochs: Option<u64>,
    predicate: Option<fn(&Counters) -> bool>,
    counters: &Counters,
) -> bool {
    let periodic = every_k_steps.is_some() || every_k_epochs.is_some();
    (!periodic || step_due(every_k_steps, every_k_epochs, counters.next_step(), counters))
        && predicate.is_none_or(|p| p(counters))
}
