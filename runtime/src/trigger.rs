//! Wrappers that change when a callback runs: tensorpack's `PeriodicTrigger`, `PeriodicCallback`
//! and `EnableCallbackIf`; and [`ProxyCallback`], the base of a decorator of your own ([`Proxy`]:
//! every method forwarded unless overridden). Each keeps the wrapped callback's name, order, fetches and state. The
//! events inside a step (`before_backward`, `after_backward`) reach the wrapped callback at every
//! step, ungated: a loss or gradient change that applied only at some steps would be a surprise.
//!
//! The periods are [`Period`]s. `PeriodicCallback` and `EnableCallbackIf` gate each event by its
//! [`Phase`](crate::callback::Phase), with bodies generated from the one list of events
//! ([`for_each_event!`](mod@crate::callback)); `PeriodicTrigger` is written out, since it does not
//! gate events but calls `trigger` from three of them.

pub(crate) mod generated;
mod proxy;
#[cfg(test)]
mod tests;

#[cfg(doc)]
use crate::callback::Period;
use crate::callback::{
    Callback, Context, Counters, PeriodSetting, StepBatch, StepGradients, StepLoss, StepPred, for_each_event,
};
use crate::error::{Error, Result};
use crate::fetch::Fetched;
use crate::kind::CallbackKind;

pub use proxy::{Forward, Proxy, ProxyCallback};

/// The event methods of a gating wrapper, generated from the one list of events: each event
/// reaches `self.inner` when the gate of its [`Phase`](crate::callback::Phase) holds.
///
/// `gated_events!(self, ctx; [setup: ..;] epoch: .., before_step: .., after_step: ..,
/// trigger_step: ..)` gives each gate as an expression of `self` and `ctx` (which may return an
/// error with `?`); `before_step`'s is evaluated before the step's other events and may record
/// its answer for them. `Once` and `InStep` events always pass; `setup: ..` runs first in
/// `setup` (to check the wrapper's settings).
macro_rules! gated_events {
    ($self:ident, $ctx:ident; setup: $setup:expr; $($phase:ident: $gate:expr),* $(,)?) => {
        for_each_event!(gated_event_methods { $self, $ctx; { $setup; }; { $($phase: $gate),* } });
    };
    ($self:ident, $ctx:ident; $($phase:ident: $gate:expr),* $(,)?) => {
        for_each_event!(gated_event_methods { $self, $ctx; {}; { $($phase: $gate),* } });
    };
}

macro_rules! gated_event_methods {
    (
        $self:ident, $ctx:ident; $setup:block; $gates:tt;
        $(
            $(#[$doc:meta])*
            $method:ident $variant:ident ($($arg:ident : $ty:ty = $pass:expr; $payload:ty)?) $event_phase:ident $(-> $default:ident)?;
        )*
    ) => {
        $(
            #[inline]
            fn $method(&mut $self, $ctx: &mut Context<'_, M> $(, $arg: $ty)?) -> Result<()> {
                on_setup!($method; $setup);
                let open = phase_gate!($event_phase; $gates);
                if open { $self.inner.$method($ctx $(, $arg)?) } else { Ok(()) }
            }
        )*
    };
}

/// `$hook` in `setup`, nothing in the other events.
macro_rules! on_setup {
    (setup; $hook:block) => {
        $hook
    };
    ($method:ident; $hook:block) => {};
}

/// The gate of one phase among those a wrapper gives (`Once` and `InStep`: always open).
macro_rules! phase_gate {
    (Once; $gates:tt) => { true };
    (InStep; $gates:tt) => { true };
    (Around; $gates:tt) => { true };
    (Epoch; { $($gates:tt)* }) => { phase_gate!(@find epoch; $($gates)*) };
    (BeforeStep; { $($gates:tt)* }) => { phase_gate!(@find before_step; $($gates)*) };
    (AfterStep; { $($gates:tt)* }) => { phase_gate!(@find after_step; $($gates)*) };
    (TriggerStep; { $($gates:tt)* }) => { phase_gate!(@find trigger_step; $($gates)*) };
    (@find epoch; epoch: $gate:expr $(, $($rest:tt)*)?) => { $gate };
    (@find before_step; before_step: $gate:expr $(, $($rest:tt)*)?) => { $gate };
    (@find after_step; after_step: $gate:expr $(, $($rest:tt)*)?) => { $gate };
    (@find trigger_step; trigger_step: $gate:expr $(, $($rest:tt)*)?) => { $gate };
    (@find $want:ident; $other:ident: $gate:expr $(, $($rest:tt)*)?) => { phase_gate!(@find $want; $($($rest)*)?) };
}

/// Calls the wrapped callback's `trigger` every `k` global steps (from `trigger_step`, when
/// `global_step % k == 0`), every `k` epochs (from `trigger_epoch`, when `epoch_num % k == 0`),
/// and once in `before_train` if asked. Its other events run as they are, except `trigger_epoch`,
/// which this wrapper replaces.
#[derive(Debug, Clone)]
pub struct PeriodicTrigger<C> {
    inner: C,
    period: PeriodSetting,
    before_train: bool,
}
// A wrapper is ordered as the callback it wraps (its `name` is its name).
impl<C: CallbackKind> CallbackKind for PeriodicTrigger<C> {
    const NAME: &'static str = C::NAME;
}

impl<C> PeriodicTrigger<C> {
    /// Wrap `inner`; give it a period with the methods below.
    pub fn new(inner: C) -> Self {
        PeriodicTrigger { inner, period: PeriodSetting::new(), before_train: false }
    }
    /// Trigger every `k` global steps.
    pub fn every_k_steps(mut self, k: u64) -> Self {
        self.period = self.period.every_k_steps(k);
        self
    }
    /// Trigger every `k` epochs.
    pub fn every_k_epochs(mut self, k: u64) -> Self {
        self.period = self.period.every_k_epochs(k);
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
    // The wrapped callback's identity and state, as they are.
    crate::callback::forward_methods!((field inner);
        name order fetches chief_only save_state load_state step_events takes_after_batch takes_training_batches takes_validation_batches wants_fetch);
    fn before_batch(&mut self, ctx: &mut Context<'_, M>, batch: &StepBatch<'_>) -> Result<()> {
        self.inner.before_batch(ctx, batch)
    }
    fn after_pred(&mut self, ctx: &mut Context<'_, M>, pred: &StepPred<'_>) -> Result<()> {
        self.inner.after_pred(ctx, pred)
    }
    fn before_backward(&mut self, ctx: &mut Context<'_, M>, loss: &StepLoss<'_>) -> Result<()> {
        self.inner.before_backward(ctx, loss)
    }
    fn after_backward(&mut self, ctx: &mut Context<'_, M>, grads: &StepGradients) -> Result<()> {
        self.inner.after_backward(ctx, grads)
    }
    fn setup(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let name = self.inner.name();
        let period = self.period.check(&name)?;
        if !period.is_periodic() && !self.before_train {
            return Err(Error::invalid(format!(
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
    fn fetched(&mut self, ctx: &mut Context<'_, M>, values: &Fetched<'_>) -> Result<()> {
        self.inner.fetched(ctx, values)
    }
    fn after_batch(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.inner.after_batch(ctx)
    }
    fn trigger_step(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.inner.trigger_step(ctx)?;
        if self.period.period().steps_divide(ctx.global_step()) { self.inner.trigger(ctx) } else { Ok(()) }
    }
    fn after_epoch(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.inner.after_epoch(ctx)
    }
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if self.period.period().epochs_divide(ctx.epoch_num()) { self.inner.trigger(ctx) } else { Ok(()) }
    }
    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.inner.trigger(ctx)
    }
    fn after_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.inner.after_train(ctx)
    }
    fn before_validate(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.inner.before_validate(ctx)
    }
    fn validate(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.inner.validate(ctx)
    }
    fn after_validate(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.inner.after_validate(ctx)
    }
    fn after_cancel_backward(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.inner.after_cancel_backward(ctx)
    }
    fn after_cancel_batch(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.inner.after_cancel_batch(ctx)
    }
    fn after_cancel_epoch(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.inner.after_cancel_epoch(ctx)
    }
    fn after_cancel_fit(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.inner.after_cancel_fit(ctx)
    }
    fn after_cancel_step(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.inner.after_cancel_step(ctx)
    }
    fn after_cancel_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.inner.after_cancel_train(ctx)
    }
    fn after_cancel_validate(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.inner.after_cancel_validate(ctx)
    }
}

/// Delivers the wrapped callback's per-step and per-epoch events only every `k` steps or epochs
/// (tensorpack's `PeriodicCallback`, tensorpack/callbacks/trigger.py); `setup`, `before_train`
/// and `after_train` always run.
///
/// As in tensorpack, the predicate is read at each gated event from the counters of that
/// moment, and the events around a step's work read it before the step:
///
/// - `before_step` (tensorpack's `before_run`) reads it with `global_step` not yet counting the
///   step, and its answer holds for the step's fetches and `after_step` (tensorpack's
///   `after_run`, which keeps `before_run`'s answer): step `n` is delivered when `n - 1`, the
///   steps done before it, is a multiple of `every_k_steps` ([`Period::run_due`]). With every 3
///   steps: steps 1, 4, 7...
/// - `trigger_step` reads it after the step, `global_step` counting it: step `n`'s when `n` is a
///   multiple of `every_k_steps` ([`Period::step_due`]). With every 3 steps: steps 3, 6, 9...
/// - each epoch event (`before_epoch`, `after_epoch`, `trigger_epoch`, `trigger`) of epoch `e`
///   when `e % every_k_epochs == 0` or `global_step % every_k_steps == 0` (so `before_epoch` of
///   the first epoch, at `global_step` 0) ([`Period::epoch_due`]).
///
/// Every step event of an epoch that is one of every `every_k_epochs` is delivered. With
/// `every_k_epochs`, the very last step of training (the last epoch's last step, wherever
/// `global_step` started) and the last epoch's events are delivered too; with only
/// `every_k_steps` neither is added: tensorpack's `PeriodicCallback.predicate` adds them only
/// under `every_k_epochs`. (Before, `before_step` and `after_step` read the rule with the step
/// already counted, one step later than tensorpack's.) Without `every_k_steps` or
/// `every_k_epochs` it is refused at setup: it would deliver every event.
///
/// A `#[derive(Callbacks)]` field with `#[every_k_steps]` and `#[callback(every_k_steps = ...)]`
/// deliver every step event of step `n` when `n` is due ([`Period::gate`]): their
/// `before_step` and `after_step` come a step after `PeriodicCallback`'s.
#[derive(Debug, Clone)]
pub struct PeriodicCallback<C> {
    inner: C,
    period: PeriodSetting,
    step_enabled: bool,
}
impl<C: CallbackKind> CallbackKind for PeriodicCallback<C> {
    const NAME: &'static str = C::NAME;
}

impl<C> PeriodicCallback<C> {
    /// Wrap `inner`; give it a period with the methods below.
    pub fn new(inner: C) -> Self {
        PeriodicCallback { inner, period: PeriodSetting::new(), step_enabled: false }
    }
    /// Deliver step events every `k` steps.
    pub fn every_k_steps(mut self, k: u64) -> Self {
        self.period = self.period.every_k_steps(k);
        self
    }
    /// Deliver events during every `k`-th epoch.
    pub fn every_k_epochs(mut self, k: u64) -> Self {
        self.period = self.period.every_k_epochs(k);
        self
    }
    /// The wrapped callback.
    pub fn inner(&self) -> &C {
        &self.inner
    }
}

impl<M, C: Callback<M>> Callback<M> for PeriodicCallback<C> {
    // The wrapped callback's identity and state, as they are; `wants_fetch` is gated.
    crate::callback::forward_methods!((field inner);
        name order fetches chief_only save_state load_state step_events takes_after_batch takes_training_batches takes_validation_batches);
    fn wants_fetch(&self, counters: &Counters) -> bool {
        self.period.period().run_due(counters) && self.inner.wants_fetch(counters)
    }
    gated_events!(self, ctx;
        setup: if !self.period.check(&self.inner.name())?.is_periodic() {
            return Err(Error::invalid(format!(
                "PeriodicCallback around `{}` has no period: give every_k_steps or every_k_epochs (without one it would deliver every event, as `{}` alone does)",
                self.inner.name(),
                self.inner.name()
            )));
        };
        epoch: self.period.period().epoch_due(ctx.counters()),
        before_step: {
            self.step_enabled = self.period.period().run_due(ctx.counters());
            self.step_enabled
        },
        after_step: self.step_enabled,
        trigger_step: self.period.period().step_due(ctx.global_step(), ctx.counters()),
    );
}

/// Delivers the wrapped callback's events only while a predicate holds (tensorpack's
/// `EnableCallbackIf`); `setup`, `before_train` and `after_train` always run, and so do the
/// events inside a step.
///
/// The predicate reads the counters ([`new`](Self::new): `Fn(&Counters) -> bool`) or the whole
/// [`Context`] ([`with_context`](Self::with_context): the monitors' history, the
/// hyper-parameters, the model), e.g. "enable once `val-error` is below 0.1".
///
/// # When the predicate is read
///
/// As in tensorpack, at each gated event: `before_step` reads it before the step (`global_step`
/// not yet counting it) and its answer holds for that step's fetches and `after_step`;
/// `trigger_step` reads it again after the step (`global_step` counting it); each epoch event
/// (`before_epoch`, `after_epoch`, `trigger_epoch`, `trigger`) reads it when it comes. A
/// predicate that turns true once step 3 has run lets through `trigger_step` of step 3, then
/// `before_step` and `after_step` of step 4. `#[callback(enable_if = ...)]` and a
/// `#[derive(Callbacks)]` field's `#[enable_if(...)]` follow the same rule.
///
/// # Fetches
///
/// The step's fetches are decided before `before_step`, from the counters alone
/// ([`Callback::wants_fetch`]). A counters predicate decides them: a disabled step fetches
/// nothing for the wrapped callback. A context predicate cannot be read there, so the wrapped
/// callback's values leave the device at every step it wants them, enabled or not (what it
/// would cost unwrapped), and reach it only at the enabled steps; gate with a counters predicate,
/// or a [`PeriodicCallback`], where that transfer matters.
///
/// ```
/// use burn_stoker::prelude::*;
/// use burn_stoker::saver::ModelSaver;
///
/// // Save only once the validation error went below 0.1 (read from the monitors).
/// let saver = EnableCallbackIf::with_context(ModelSaver::new(3), |ctx: &Context<'_, burn::nn::Linear>| {
///     ctx.monitors_ref().latest("val-error").is_some_and(|error| error < 0.1)
/// });
/// // Or from the counters: from epoch 5 on.
/// let late = EnableCallbackIf::new(ModelSaver::new(3), |counters: &Counters| counters.epoch_num() >= 5);
/// # let _ = (saver, late);
/// ```
#[derive(Debug, Clone)]
pub struct EnableCallbackIf<C, P> {
    inner: C,
    predicate: P,
    step_enabled: bool,
}
impl<C: CallbackKind, P> CallbackKind for EnableCallbackIf<C, P> {
    const NAME: &'static str = C::NAME;
}

impl<C, P: Fn(&Counters) -> bool> EnableCallbackIf<C, P> {
    /// Wrap `inner`, enabled while `predicate` holds of the counters.
    pub fn new(inner: C, predicate: P) -> Self {
        EnableCallbackIf { inner, predicate, step_enabled: false }
    }
}

impl<C, F> EnableCallbackIf<C, WithContext<F>> {
    /// Wrap `inner`, enabled while `predicate` holds of the [`Context`] at the event (its
    /// monitors, hyper-parameters, model, counters). See [Fetches](Self#fetches) for what it
    /// costs a callback that fetches.
    pub fn with_context<M>(inner: C, predicate: F) -> Self
    where
        F: Fn(&Context<'_, M>) -> bool,
    {
        EnableCallbackIf { inner, predicate: WithContext(predicate), step_enabled: false }
    }
}

impl<C, P> EnableCallbackIf<C, P> {
    /// The wrapped callback.
    pub fn inner(&self) -> &C {
        &self.inner
    }
}

/// What [`EnableCallbackIf`] asks of its predicate: a closure of the counters
/// (`Fn(&Counters) -> bool`) or of the context ([`WithContext`]).
pub trait EnablePredicate<M> {
    /// The answer from the counters alone, when the predicate reads nothing else (then the
    /// step's fetches follow it); `None` when it needs the context.
    fn on_counters(&self, counters: &Counters) -> Option<bool>;
    /// Whether the wrapped callback receives the event `ctx` is at.
    fn holds(&self, ctx: &Context<'_, M>) -> bool;
}

impl<M, F: Fn(&Counters) -> bool> EnablePredicate<M> for F {
    #[inline]
    fn on_counters(&self, counters: &Counters) -> Option<bool> {
        Some(self(counters))
    }
    #[inline]
    fn holds(&self, ctx: &Context<'_, M>) -> bool {
        self(ctx.counters())
    }
}

/// A predicate of the whole [`Context`], made by [`EnableCallbackIf::with_context`].
#[derive(Debug, Clone, Copy)]
pub struct WithContext<F>(pub F);

impl<M, F: Fn(&Context<'_, M>) -> bool> EnablePredicate<M> for WithContext<F> {
    #[inline]
    fn on_counters(&self, _counters: &Counters) -> Option<bool> {
        None
    }
    #[inline]
    fn holds(&self, ctx: &Context<'_, M>) -> bool {
        (self.0)(ctx)
    }
}

impl<M, C: Callback<M>, P: EnablePredicate<M>> Callback<M> for EnableCallbackIf<C, P> {
    // The wrapped callback's identity and state, as they are; `wants_fetch` is gated.
    crate::callback::forward_methods!((field inner);
        name order fetches chief_only save_state load_state step_events takes_after_batch takes_training_batches takes_validation_batches);
    fn wants_fetch(&self, counters: &Counters) -> bool {
        self.predicate.on_counters(counters).unwrap_or(true) && self.inner.wants_fetch(counters)
    }
    gated_events!(self, ctx;
        epoch: self.predicate.holds(ctx),
        before_step: {
            self.step_enabled = self.predicate.holds(ctx);
            self.step_enabled
        },
        after_step: self.step_enabled,
        trigger_step: self.predicate.holds(ctx),
    );
}
