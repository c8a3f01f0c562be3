//! The callback trait, its events, the context a callback sees, and composition with order.

use std::borrow::Cow;
use std::path::Path;

use std::cell::RefCell;

use burn::optim::{GradientsParams, ModuleOptimizer};
use burn::tensor::Tensor;

use crate::error::{Error, Result};
use crate::fetch::{Fetch, Fetched, OutputTensor, Outputs};
use crate::state::HyperParams;
use crate::state::KeepPolicy;
use crate::state::Monitors;

/// The events of a training run, in tensorpack's order:
///
/// ```text
/// setup, before_train,
/// for each epoch: before_epoch,
///     for each step: before_step, <step>, after_step(values), trigger_step
///     after_epoch, trigger_epoch (which calls trigger by default)
/// after_train (always: after success, a stop, an error or a panic)
/// ```
#[derive(Debug, Clone, Copy)]
pub enum Event<'v> {
    /// Once, before anything runs.
    Setup,
    /// After setup, before the first step.
    BeforeTrain,
    /// At the start of each epoch.
    BeforeEpoch,
    /// Before each step.
    BeforeStep,
    /// After each step, with the values fetched at it.
    AfterStep(Fetched<'v>),
    /// After each step's `after_step`; `global_step` counts the step.
    TriggerStep,
    /// At the end of each epoch.
    AfterEpoch,
    /// After `after_epoch`; by default calls `trigger`.
    TriggerEpoch,
    /// Only when a wrapper (such as [`PeriodicTrigger`](crate::PeriodicTrigger)) calls it.
    Trigger,
    /// Always, last.
    AfterTrain,
    /// Inside a step, after the forward pass and before backward: the loss may be changed
    /// (fastai's `after_loss`). Only for callbacks whose [`Callback::step_hooks`] ask for it.
    BeforeBackward(&'v StepLoss<'v>),
    /// Inside a step, after backward and before the optimizer: the gradients may be changed or
    /// withheld (fastai's `after_backward`). Only for callbacks whose [`Callback::step_hooks`] ask
    /// for it.
    AfterBackward(&'v StepGradients),
}

impl Event<'_> {
    /// The event's name, as written in `#[callback(on = ...)]`.
    pub fn name(&self) -> &'static str {
        match self {
            Event::Setup => "setup",
            Event::BeforeTrain => "before_train",
            Event::BeforeEpoch => "before_epoch",
            Event::BeforeStep => "before_step",
            Event::AfterStep(_) => "after_step",
            Event::TriggerStep => "trigger_step",
            Event::AfterEpoch => "after_epoch",
            Event::TriggerEpoch => "trigger_epoch",
            Event::Trigger => "trigger",
            Event::AfterTrain => "after_train",
            Event::BeforeBackward(_) => "before_backward",
            Event::AfterBackward(_) => "after_backward",
        }
    }
}

/// Which events inside a step a callback takes ([`Callback::step_hooks`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StepHooks {
    /// [`Callback::before_backward`]: the loss, before backward.
    pub loss: bool,
    /// [`Callback::after_backward`]: the gradients, before the optimizer.
    pub gradients: bool,
}

impl StepHooks {
    /// Neither.
    pub const NONE: StepHooks = StepHooks { loss: false, gradients: false };
    /// The loss only.
    pub const LOSS: StepHooks = StepHooks { loss: true, gradients: false };
    /// The gradients only.
    pub const GRADIENTS: StepHooks = StepHooks { loss: false, gradients: true };
}

/// The loss of the step being run, handed to [`Callback::before_backward`]: read it, replace it
/// (the replacement is what backward differentiates and what the `"loss"` output holds), and read
/// the step's other outputs (an RNN's activations for an activation penalty).
#[derive(Debug)]
pub struct StepLoss<'a> {
    pub(crate) loss: RefCell<Option<Tensor<1>>>,
    pub(crate) outputs: &'a Outputs,
}

impl StepLoss<'_> {
    /// The loss as it stands (a rank-1 tensor of one element, on the autodiff graph).
    pub fn get(&self) -> Tensor<1> {
        self.loss.borrow().clone().expect("the loss is present during before_backward")
    }
    /// Replace the loss.
    pub fn set(&self, loss: Tensor<1>) {
        *self.loss.borrow_mut() = Some(loss);
    }
    /// Change the loss with `f` (e.g. `|loss| loss + penalty`).
    pub fn update(&self, f: impl FnOnce(Tensor<1>) -> Tensor<1>) {
        let mut slot = self.loss.borrow_mut();
        let loss = slot.take().expect("the loss is present during before_backward");
        *slot = Some(f(loss));
    }
    /// A named output the step put (with the autodiff graph, so a penalty on it trains).
    pub fn output(&self, name: &str) -> Option<&OutputTensor> {
        self.outputs.get(name)
    }
}

/// The gradients of the step being run, handed to [`Callback::after_backward`]. A callback may
/// change them, or take them away: when no gradients are left after every callback, the trainer
/// skips the optimizer for this step (gradient accumulation).
#[derive(Debug)]
pub struct StepGradients {
    pub(crate) grads: RefCell<Option<GradientsParams>>,
}

impl StepGradients {
    /// Whether gradients are present (a previous callback may have taken them).
    pub fn is_present(&self) -> bool {
        self.grads.borrow().is_some()
    }
    /// Take the gradients out; unless some callback puts gradients back, the optimizer does not
    /// run at this step.
    pub fn take(&self) -> Option<GradientsParams> {
        self.grads.borrow_mut().take()
    }
    /// Put gradients (back) for the optimizer.
    pub fn set(&self, grads: GradientsParams) {
        *self.grads.borrow_mut() = Some(grads);
    }
    /// Change the gradients in place with `f`, if present.
    pub fn update(&self, f: impl FnOnce(GradientsParams) -> GradientsParams) {
        let mut slot = self.grads.borrow_mut();
        if let Some(grads) = slot.take() {
            *slot = Some(f(grads));
        }
    }
}

/// The trainer's counters. `epoch_num` is 1-based; `global_step` counts finished steps (inside
/// `after_step` and `trigger_step` it already counts the step that just ran); `local_step` counts
/// the finished steps of the current epoch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub(crate) epoch_num: u64,
    pub(crate) global_step: u64,
    pub(crate) local_step: u64,
    pub(crate) starting_epoch: u64,
    pub(crate) max_epoch: u64,
    pub(crate) steps_per_epoch: u64,
}

impl Counters {
    /// The current epoch, 1-based; in `trigger_epoch`, the epoch that just finished. 0 before the first epoch.
    pub fn epoch_num(&self) -> u64 {
        self.epoch_num
    }
    /// Finished steps since the run (or the resumed run's first run) began.
    pub fn global_step(&self) -> u64 {
        self.global_step
    }
    /// Finished steps in the current epoch.
    pub fn local_step(&self) -> u64 {
        self.local_step
    }
    /// The first epoch this run trains (greater than 1 on resume).
    pub fn starting_epoch(&self) -> u64 {
        self.starting_epoch
    }
    /// The last epoch.
    pub fn max_epoch(&self) -> u64 {
        self.max_epoch
    }
    /// Steps in each epoch.
    pub fn steps_per_epoch(&self) -> u64 {
        self.steps_per_epoch
    }
    /// The global step the run ends at.
    pub fn last_step(&self) -> u64 {
        self.max_epoch * self.steps_per_epoch
    }
    /// The counters as they were before the step that just ran.
    pub fn before_step(&self) -> Counters {
        Counters {
            global_step: self.global_step.saturating_sub(1),
            local_step: self.local_step.saturating_sub(1),
            ..*self
        }
    }
    /// The number the step about to run will have (`global_step + 1`), as seen from `before_step`.
    pub fn next_step(&self) -> u64 {
        self.global_step + 1
    }
}

/// What callbacks asked the trainer to do at the next step boundary.
#[derive(Debug, Default)]
pub(crate) struct Control {
    pub(crate) stop: Option<String>,
    pub(crate) skip_epoch: bool,
    /// A checkpoint to write at the next boundary, with what to keep.
    pub(crate) checkpoint: Option<KeepPolicy>,
    /// Copies of that checkpoint to write (MinSaver / MaxSaver folders).
    pub(crate) copies: Vec<String>,
}

/// Everything the trainer holds that a callback may read or change.
pub(crate) struct TrainState<M> {
    pub(crate) counters: Counters,
    pub(crate) model: Option<M>,
    pub(crate) optimizer: ModuleOptimizer,
    pub(crate) hyper: HyperParams,
    pub(crate) monitors: Monitors,
    pub(crate) control: Control,
    pub(crate) log_dir: std::path::PathBuf,
    /// What to keep when a checkpoint is written without a saver asking (on an interrupt).
    pub(crate) checkpoint_policy: KeepPolicy,
}

/// What a callback sees at an event: the counters, the model, the optimizer, the hyper-parameters,
/// the monitors, and the controls to stop training or skip the rest of an epoch.
///
/// Every event runs between steps, so changing the model (WGAN clipping, EMA) or a hyper-parameter
/// is always safe and takes effect at the next step.
pub struct Context<'a, M> {
    pub(crate) state: &'a mut TrainState<M>,
}

impl<M> Context<'_, M> {
    /// The trainer's counters.
    pub fn counters(&self) -> &Counters {
        &self.state.counters
    }
    /// Shortcut for `counters().epoch_num()`.
    pub fn epoch_num(&self) -> u64 {
        self.state.counters.epoch_num
    }
    /// Shortcut for `counters().global_step()`.
    pub fn global_step(&self) -> u64 {
        self.state.counters.global_step
    }
    /// Shortcut for `counters().local_step()`.
    pub fn local_step(&self) -> u64 {
        self.state.counters.local_step
    }
    /// The model being trained.
    ///
    /// # Panics
    /// If a panic inside the optimizer's step lost the model (then only `after_train` runs).
    pub fn model(&self) -> &M {
        self.state.model.as_ref().expect("the model was lost by a panic inside the training step")
    }
    /// The model, to change its weights between steps.
    ///
    /// # Panics
    /// As [`model`](Self::model).
    pub fn model_mut(&mut self) -> &mut M {
        self.state.model.as_mut().expect("the model was lost by a panic inside the training step")
    }
    /// The optimizer (its state is saved in checkpoints).
    pub fn optimizer(&self) -> &ModuleOptimizer {
        &self.state.optimizer
    }
    /// The hyper-parameters: the learning rate and the ones registered by name.
    pub fn hyper(&self) -> &HyperParams {
        &self.state.hyper
    }
    /// The hyper-parameters, to change them; the change applies from the next step.
    pub fn hyper_mut(&mut self) -> &mut HyperParams {
        &mut self.state.hyper
    }
    /// The current learning rate.
    pub fn learning_rate(&self) -> f64 {
        self.state.hyper.learning_rate()
    }
    /// Set the learning rate from the next step on.
    pub fn set_learning_rate(&mut self, value: f64) {
        self.state.hyper.set_learning_rate(value);
    }
    /// The monitors: put scalars, images, histograms and texts; read the history.
    pub fn monitors(&mut self) -> &mut Monitors {
        &mut self.state.monitors
    }
    /// The monitors, to read the history.
    pub fn monitors_ref(&self) -> &Monitors {
        &self.state.monitors
    }
    /// The log directory (checkpoints, stats.json, event files).
    pub fn log_dir(&self) -> &Path {
        &self.state.log_dir
    }
    /// Stop training at the next step boundary; `after_train` still runs for every callback.
    /// The epoch in progress ends without its `after_epoch` and `trigger_epoch` (tensorpack's
    /// `StopTraining`), so nothing is saved from a state the stop was meant to avoid.
    pub fn request_stop(&mut self, reason: impl Into<String>) {
        if self.state.control.stop.is_none() {
            self.state.control.stop = Some(reason.into());
        }
    }
    /// Whether a stop was requested, and why.
    pub fn stop_requested(&self) -> Option<&str> {
        self.state.control.stop.as_deref()
    }
    /// Write a checkpoint (see [`saver::checkpoint`](crate::saver::checkpoint)) at the next
    /// boundary: after the current step's `trigger_step`, or after the current epoch's
    /// `trigger_epoch` and statistics, or before the first step when asked during `setup` or
    /// `before_train`. Every callback has then handled the event, so the checkpoint holds their
    /// states as of that moment. [`ModelSaver`](crate::ModelSaver) calls this.
    pub fn request_checkpoint(&mut self, policy: KeepPolicy) {
        self.state.control.checkpoint = Some(policy);
    }
    /// Write the checkpoint of the next boundary also as the complete copy
    /// `checkpoints/<name>/` (replacing the previous copy of that name once complete).
    /// [`MinSaver`](crate::saver::MinSaver) calls this.
    pub fn request_checkpoint_copy(&mut self, name: impl Into<String>) {
        let name = name.into();
        if !self.state.control.copies.contains(&name) {
            self.state.control.copies.push(name);
        }
    }
    /// End the current epoch after this step: its `after_epoch` and `trigger_epoch` still run.
    pub fn skip_rest_of_epoch(&mut self) {
        self.state.control.skip_epoch = true;
    }
}

/// Ordering constraints of one callback: the names of callbacks it must run after and before,
/// within every event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Order {
    /// Run after these.
    pub after: Vec<Cow<'static, str>>,
    /// Run before these.
    pub before: Vec<Cow<'static, str>>,
}

impl Order {
    /// No constraint.
    pub fn none() -> Self {
        Self::default()
    }
    /// Run after the callback named `name`.
    pub fn after(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.after.push(name.into());
        self
    }
    /// Run before the callback named `name`.
    pub fn before(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.before.push(name.into());
        self
    }
    /// Both sets of constraints.
    pub fn merge(mut self, other: Order) -> Self {
        self.after.extend(other.after);
        self.before.extend(other.before);
        self
    }
}

/// The short name of a type: its path and generic arguments removed (`PeriodicTrigger`).
pub fn short_type_name<T: ?Sized>() -> &'static str {
    let full = std::any::type_name::<T>();
    let base = full.split('<').next().unwrap_or(full);
    base.rsplit("::").next().unwrap_or(base)
}

/// A training callback: code bound to the events of the training loop.
///
/// Every method has a default that does nothing, so an implementation names only the events it
/// uses. `M` is the model's type; callbacks that do not look at the model implement
/// `Callback<M>` for every `M`.
///
/// ```
/// use burn_stoker::prelude::*;
///
/// struct CountEpochs(u64);
///
/// impl<M> Callback<M> for CountEpochs {
///     fn trigger_epoch(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
///         self.0 += 1;
///         ctx.monitors().put_scalar("epochs_seen", self.0 as f64);
///         Ok(())
///     }
/// }
/// ```
pub trait Callback<M> {
    /// The callback's name, used in ordering constraints and error messages. Defaults to the
    /// type's short name.
    fn name(&self) -> Cow<'static, str> {
        Cow::Borrowed(short_type_name::<Self>())
    }
    /// Constraints on where this callback runs among the others.
    fn order(&self) -> Order {
        Order::none()
    }
    /// The step outputs this callback may ask for.
    fn fetches(&self) -> &[Fetch] {
        &[]
    }
    /// With data-parallel training, whether this callback runs only on the chief worker
    /// (tensorpack's default for most callbacks). The trainer trains on one device today, where
    /// every callback runs; the flag is reported in [`CallbackInfo`] for the data-parallel
    /// trainer to come.
    fn chief_only(&self) -> bool {
        true
    }
    /// The callback's state to save in checkpoints (JSON); `None`, the default, saves nothing.
    /// `#[callback(state)]` writes this for a serializable type.
    fn save_state(&self) -> Result<Option<serde_json::Value>> {
        Ok(None)
    }
    /// Restore the state [`save_state`](Self::save_state) saved.
    fn load_state(&mut self, state: serde_json::Value) -> Result<()> {
        let _ = state;
        Ok(())
    }
    /// Which of the events inside a step ([`before_backward`](Self::before_backward),
    /// [`after_backward`](Self::after_backward)) this callback takes. The trainer delivers them
    /// only to callbacks that ask, so a run where nobody does pays nothing for them.
    fn step_hooks(&self) -> StepHooks {
        StepHooks::NONE
    }
    /// Inside the step, between the forward pass and backward: read or replace the loss (fastai's
    /// `after_loss`, e.g. `RNNRegularizer`'s activation penalties). Delivered only when
    /// [`step_hooks`](Self::step_hooks) has `loss`. The model is readable; counters are those of
    /// `before_step` (`global_step` does not yet count this step).
    fn before_backward(&mut self, ctx: &mut Context<'_, M>, loss: &StepLoss<'_>) -> Result<()> {
        let _ = (ctx, loss);
        Ok(())
    }
    /// Inside the step, between backward and the optimizer: read, change or withhold the
    /// gradients (gradient clipping, accumulation). Delivered only when
    /// [`step_hooks`](Self::step_hooks) has `gradients`.
    fn after_backward(&mut self, ctx: &mut Context<'_, M>, grads: &StepGradients) -> Result<()> {
        let _ = (ctx, grads);
        Ok(())
    }
    /// Whether the callback wants its fetches from the step about to run (`counters.next_step()`).
    /// Called before `before_step`, only for callbacks that declare fetches.
    fn wants_fetch(&self, counters: &Counters) -> bool {
        let _ = counters;
        true
    }
    /// Once, before anything runs: prepare what the callback needs.
    fn setup(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let _ = ctx;
        Ok(())
    }
    /// After setup, before the first step.
    fn before_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let _ = ctx;
        Ok(())
    }
    /// At the start of each epoch. Keep it cheap.
    fn before_epoch(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let _ = ctx;
        Ok(())
    }
    /// Before each step.
    fn before_step(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let _ = ctx;
        Ok(())
    }
    /// After each step, with the values this callback (and any other) asked for.
    fn after_step(&mut self, ctx: &mut Context<'_, M>, values: &Fetched<'_>) -> Result<()> {
        let _ = (ctx, values);
        Ok(())
    }
    /// After each step's `after_step`.
    fn trigger_step(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let _ = ctx;
        Ok(())
    }
    /// At the end of each epoch. Keep it cheap.
    fn after_epoch(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let _ = ctx;
        Ok(())
    }
    /// After `after_epoch`. Calls [`trigger`](Self::trigger) unless overridden.
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.trigger(ctx)
    }
    /// The callback's periodic work: every epoch by default, at another period under
    /// [`PeriodicTrigger`](crate::PeriodicTrigger).
    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let _ = ctx;
        Ok(())
    }
    /// Always runs last: after success, a stop, an error or a panic.
    fn after_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let _ = ctx;
        Ok(())
    }
}

/// What a callback function may return: `()`, [`Result<()>`](crate::Result), a [`Flow`], or a
/// `Result<Flow>`.
#[diagnostic::on_unimplemented(
    message = "a callback cannot return `{Self}`",
    label = "return `()`, `burn_stoker::Result<()>` or `burn_stoker::Flow` instead",
    note = "a callback returns `()`, `burn_stoker::Result<()>`, `burn_stoker::Flow` (to stop training or skip the rest of an epoch) or `burn_stoker::Result<burn_stoker::Flow>`"
)]
pub trait CallbackReturn {
    /// Apply the returned value to the run.
    fn apply<M>(self, ctx: &mut Context<'_, M>) -> Result<()>;
}

impl CallbackReturn for () {
    #[inline]
    fn apply<M>(self, _ctx: &mut Context<'_, M>) -> Result<()> {
        Ok(())
    }
}

impl<T: CallbackReturn> CallbackReturn for Result<T> {
    #[inline]
    fn apply<M>(self, ctx: &mut Context<'_, M>) -> Result<()> {
        self?.apply(ctx)
    }
}

/// What a callback function can ask of the loop by returning it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Flow {
    /// Go on.
    Continue,
    /// Stop training at the next step boundary, with this reason (see
    /// [`Context::request_stop`]).
    Stop(String),
    /// End the current epoch after this step (see [`Context::skip_rest_of_epoch`]).
    SkipEpoch,
}

impl CallbackReturn for Flow {
    #[inline]
    fn apply<M>(self, ctx: &mut Context<'_, M>) -> Result<()> {
        match self {
            Flow::Continue => {}
            Flow::Stop(reason) => ctx.request_stop(reason),
            Flow::SkipEpoch => ctx.skip_rest_of_epoch(),
        }
        Ok(())
    }
}

/// Deliver `event` to a single callback.
pub fn deliver<M, C: Callback<M> + ?Sized>(
    callback: &mut C,
    event: Event<'_>,
    ctx: &mut Context<'_, M>,
) -> Result<()> {
    match event {
        Event::Setup => callback.setup(ctx),
        Event::BeforeTrain => callback.before_train(ctx),
        Event::BeforeEpoch => callback.before_epoch(ctx),
        Event::BeforeStep => callback.before_step(ctx),
        Event::AfterStep(values) => callback.after_step(ctx, &values),
        Event::TriggerStep => callback.trigger_step(ctx),
        Event::AfterEpoch => callback.after_epoch(ctx),
        Event::TriggerEpoch => callback.trigger_epoch(ctx),
        Event::Trigger => callback.trigger(ctx),
        Event::AfterTrain => callback.after_train(ctx),
        Event::BeforeBackward(loss) => callback.before_backward(ctx, loss),
        Event::AfterBackward(grads) => callback.after_backward(ctx, grads),
    }
}

macro_rules! forward_callback {
    ($($pointer:ty),*) => {$(
        impl<M, C: Callback<M> + ?Sized> Callback<M> for $pointer {
            fn name(&self) -> Cow<'static, str> {
                (**self).name()
            }
            fn order(&self) -> Order {
                (**self).order()
            }
            fn fetches(&self) -> &[Fetch] {
                (**self).fetches()
            }
            fn chief_only(&self) -> bool {
                (**self).chief_only()
            }
            fn save_state(&self) -> Result<Option<serde_json::Value>> {
                (**self).save_state()
            }
            fn load_state(&mut self, state: serde_json::Value) -> Result<()> {
                (**self).load_state(state)
            }
            fn wants_fetch(&self, counters: &Counters) -> bool {
                (**self).wants_fetch(counters)
            }
            fn step_hooks(&self) -> StepHooks {
                (**self).step_hooks()
            }
            fn before_backward(&mut self, ctx: &mut Context<'_, M>, loss: &StepLoss<'_>) -> Result<()> {
                (**self).before_backward(ctx, loss)
            }
            fn after_backward(&mut self, ctx: &mut Context<'_, M>, grads: &StepGradients) -> Result<()> {
                (**self).after_backward(ctx, grads)
            }
            fn setup(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
                (**self).setup(ctx)
            }
            fn before_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
                (**self).before_train(ctx)
            }
            fn before_epoch(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
                (**self).before_epoch(ctx)
            }
            fn before_step(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
                (**self).before_step(ctx)
            }
            fn after_step(&mut self, ctx: &mut Context<'_, M>, values: &Fetched<'_>) -> Result<()> {
                (**self).after_step(ctx, values)
            }
            fn trigger_step(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
                (**self).trigger_step(ctx)
            }
            fn after_epoch(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
                (**self).after_epoch(ctx)
            }
            fn trigger_epoch(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
                (**self).trigger_epoch(ctx)
            }
            fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
                (**self).trigger(ctx)
            }
            fn after_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
                (**self).after_train(ctx)
            }
        }
    )*};
}

// A boxed callback, and a callback lent to the trainer (to read its fields after training).
forward_callback!(Box<C>, &mut C);

/// What the trainer learns about one callback of a set at setup.
#[derive(Debug, Clone)]
pub struct CallbackInfo<'a> {
    /// Its name.
    pub name: Cow<'static, str>,
    /// Its ordering constraints.
    pub order: Order,
    /// What it may fetch.
    pub fetches: &'a [Fetch],
    /// Whether it runs only on the chief worker in data-parallel training (see
    /// [`Callback::chief_only`]).
    pub chief_only: bool,
    /// The events inside a step it takes ([`Callback::step_hooks`]).
    pub step_hooks: StepHooks,
}

/// What [`Callbacks::state`] does with one callback's checkpointed state.
#[derive(Debug, Clone)]
pub enum StateOp {
    /// Return the state to save ([`Callback::save_state`]).
    Save,
    /// Restore this saved state ([`Callback::load_state`]).
    Load(serde_json::Value),
}

/// Marks a set of callbacks made of one [`Callback`] (see [`Callbacks`]).
#[derive(Debug)]
pub enum Single {}

/// A set of callbacks, addressed by a flat index `0..len()`, dispatched statically.
///
/// Every [`Callback`] is a set of one; tuples (up to 16), `Vec`s and `Option`s of sets are sets;
/// `#[derive(Callbacks)]` makes a struct a set. The trainer orders the members of the whole set
/// once at setup, then delivers each event to them in that order.
///
/// `Marker` tells the kinds of sets apart (a single callback is [`Single`], a tuple the tuple of
/// its members' markers...). It is always inferred; code generic over sets carries it along as a
/// type parameter: `fn run<C: Callbacks<M, K>, K>(callbacks: C)`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a callback for a model of type `{M}`",
    label = "not a callback for `{M}`",
    note = "a callback implements `burn_stoker::Callback<M>` (by hand, or with `#[callback]` on a function or an impl block); tuples, `Vec`s, `Option`s of callbacks and `#[derive(Callbacks)]` structs are sets of callbacks",
    note = "a callback whose context names a model (`Context<'_, Mlp>`, `Context<'_, impl Module>`) is a callback only for the models that fit; a tuple or a `#[derive(Callbacks)]` struct is a set only if every member is, and every field's type must be a callback"
)]
pub trait Callbacks<M, Marker> {
    /// Every member has this many callbacks, when that is known at compile time.
    const FIXED_LEN: Option<usize> = None;
    /// The number of callbacks.
    fn len(&self) -> usize;
    /// Whether the set is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Name, order and fetches of callback `index`.
    fn info(&self, index: usize) -> CallbackInfo<'_>;
    /// Whether callback `index` wants its fetches at the next step.
    fn wants_fetch(&self, index: usize, counters: &Counters) -> bool;
    /// Deliver `event` to callback `index`.
    fn dispatch(&mut self, index: usize, event: Event<'_>, ctx: &mut Context<'_, M>) -> Result<()>;
    /// Save (`Ok(Some(state))` for a stateful callback) or restore callback `index`'s state.
    fn state(&mut self, index: usize, op: StateOp) -> Result<Option<serde_json::Value>>;
    /// Deliver `event` to every callback of the set in registration order, the first having
    /// flat index `base`; `cursor` is set to each callback's flat index before it runs (so that an
    /// error or a panic can be attributed). Stops at the first error. The trainer uses this when
    /// the resolved order is the registration order: one pass, no index search.
    #[inline]
    fn dispatch_all(
        &mut self,
        base: usize,
        event: Event<'_>,
        ctx: &mut Context<'_, M>,
        cursor: &mut usize,
    ) -> Result<()> {
        for index in 0..self.len() {
            *cursor = base + index;
            self.dispatch(index, event, ctx)?;
        }
        Ok(())
    }
}

impl<M, C: Callback<M>> Callbacks<M, Single> for C {
    const FIXED_LEN: Option<usize> = Some(1);
    #[inline]
    fn len(&self) -> usize {
        1
    }
    fn info(&self, _index: usize) -> CallbackInfo<'_> {
        CallbackInfo {
            name: self.name(),
            order: self.order(),
            fetches: self.fetches(),
            chief_only: self.chief_only(),
            step_hooks: self.step_hooks(),
        }
    }
    #[inline]
    fn wants_fetch(&self, _index: usize, counters: &Counters) -> bool {
        Callback::wants_fetch(self, counters)
    }
    #[inline]
    fn dispatch(&mut self, _index: usize, event: Event<'_>, ctx: &mut Context<'_, M>) -> Result<()> {
        deliver(self, event, ctx)
    }
    fn state(&mut self, _index: usize, op: StateOp) -> Result<Option<serde_json::Value>> {
        match op {
            StateOp::Save => self.save_state(),
            StateOp::Load(state) => self.load_state(state).map(|()| None),
        }
    }
    #[inline(always)]
    fn dispatch_all(
        &mut self,
        base: usize,
        event: Event<'_>,
        ctx: &mut Context<'_, M>,
        cursor: &mut usize,
    ) -> Result<()> {
        *cursor = base;
        deliver(self, event, ctx)
    }
}

impl<M, K, C: Callbacks<M, K>> Callbacks<M, Option<K>> for Option<C> {
    fn len(&self) -> usize {
        self.as_ref().map_or(0, C::len)
    }
    fn info(&self, index: usize) -> CallbackInfo<'_> {
        self.as_ref().expect("index within len").info(index)
    }
    fn wants_fetch(&self, index: usize, counters: &Counters) -> bool {
        self.as_ref().is_some_and(|c| c.wants_fetch(index, counters))
    }
    #[inline]
    fn dispatch(&mut self, index: usize, event: Event<'_>, ctx: &mut Context<'_, M>) -> Result<()> {
        match self {
            Some(c) => c.dispatch(index, event, ctx),
            None => Ok(()),
        }
    }
    fn state(&mut self, index: usize, op: StateOp) -> Result<Option<serde_json::Value>> {
        match self {
            Some(c) => c.state(index, op),
            None => Ok(None),
        }
    }
    #[inline]
    fn dispatch_all(
        &mut self,
        base: usize,
        event: Event<'_>,
        ctx: &mut Context<'_, M>,
        cursor: &mut usize,
    ) -> Result<()> {
        match self {
            Some(c) => c.dispatch_all(base, event, ctx, cursor),
            None => Ok(()),
        }
    }
}

impl<M, K, C: Callbacks<M, K>> Callbacks<M, Vec<K>> for Vec<C> {
    fn len(&self) -> usize {
        match C::FIXED_LEN {
            Some(n) => n * self.as_slice().len(),
            None => self.iter().map(C::len).sum(),
        }
    }
    fn info(&self, index: usize) -> CallbackInfo<'_> {
        let (member, index) = locate(self, index);
        self[member].info(index)
    }
    fn wants_fetch(&self, index: usize, counters: &Counters) -> bool {
        let (member, index) = locate(self, index);
        self[member].wants_fetch(index, counters)
    }
    #[inline]
    fn dispatch(&mut self, index: usize, event: Event<'_>, ctx: &mut Context<'_, M>) -> Result<()> {
        let (member, index) = locate(self, index);
        self[member].dispatch(index, event, ctx)
    }
    fn state(&mut self, index: usize, op: StateOp) -> Result<Option<serde_json::Value>> {
        let (member, index) = locate(self, index);
        self[member].state(index, op)
    }
    #[inline]
    fn dispatch_all(
        &mut self,
        mut base: usize,
        event: Event<'_>,
        ctx: &mut Context<'_, M>,
        cursor: &mut usize,
    ) -> Result<()> {
        for member in self.iter_mut() {
            member.dispatch_all(base, event, ctx, cursor)?;
            base += match C::FIXED_LEN {
                Some(n) => n,
                None => member.len(),
            };
        }
        Ok(())
    }
}

/// The member of `set` holding flat index `index`, and the index within it.
#[inline]
fn locate<M, K, C: Callbacks<M, K>>(set: &[C], mut index: usize) -> (usize, usize) {
    if let Some(n) = C::FIXED_LEN
        && n > 0
    {
        return (index / n, index % n);
    }
    for (member, c) in set.iter().enumerate() {
        let len = c.len();
        if index < len {
            return (member, index);
        }
        index -= len;
    }
    panic!("callback index out of range")
}

macro_rules! tuple_callbacks {
    ($($name:ident $marker:ident $index:tt),+) => {
        impl<M, $($marker, $name: Callbacks<M, $marker>),+> Callbacks<M, ($($marker,)+)> for ($($name,)+) {
            const FIXED_LEN: Option<usize> = {
                let mut total = 0;
                let mut fixed = true;
                $(match $name::FIXED_LEN { Some(n) => total += n, None => fixed = false })+
                if fixed { Some(total) } else { None }
            };
            #[inline]
            fn len(&self) -> usize {
                0 $(+ self.$index.len())+
            }
            fn info(&self, mut index: usize) -> CallbackInfo<'_> {
                $(
                    let len = self.$index.len();
                    if index < len {
                        return self.$index.info(index);
                    }
                    index -= len;
                )+
                panic!("callback index {index} out of range")
            }
            #[inline]
            fn wants_fetch(&self, mut index: usize, counters: &Counters) -> bool {
                $(
                    let len = self.$index.len();
                    if index < len {
                        return self.$index.wants_fetch(index, counters);
                    }
                    index -= len;
                )+
                let _ = index;
                false
            }
            #[inline]
            fn dispatch(&mut self, mut index: usize, event: Event<'_>, ctx: &mut Context<'_, M>) -> Result<()> {
                $(
                    let len = self.$index.len();
                    if index < len {
                        return self.$index.dispatch(index, event, ctx);
                    }
                    index -= len;
                )+
                let _ = (index, event, ctx);
                Ok(())
            }
            fn state(&mut self, mut index: usize, op: StateOp) -> Result<Option<serde_json::Value>> {
                $(
                    let len = self.$index.len();
                    if index < len {
                        return self.$index.state(index, op);
                    }
                    index -= len;
                )+
                let _ = (index, op);
                Ok(None)
            }
            #[inline]
            fn dispatch_all(
                &mut self,
                mut base: usize,
                event: Event<'_>,
                ctx: &mut Context<'_, M>,
                cursor: &mut usize,
            ) -> Result<()> {
                $(
                    self.$index.dispatch_all(base, event, ctx, cursor)?;
                    base += self.$index.len();
                )+
                let _ = base;
                Ok(())
            }
        }
    };
}

impl<M> Callbacks<M, ()> for () {
    const FIXED_LEN: Option<usize> = Some(0);
    fn len(&self) -> usize {
        0
    }
    fn info(&self, index: usize) -> CallbackInfo<'_> {
        panic!("callback index {index} out of range")
    }
    fn wants_fetch(&self, _index: usize, _counters: &Counters) -> bool {
        false
    }
    fn dispatch(&mut self, _index: usize, _event: Event<'_>, _ctx: &mut Context<'_, M>) -> Result<()> {
        Ok(())
    }
    fn state(&mut self, _index: usize, _op: StateOp) -> Result<Option<serde_json::Value>> {
        Ok(None)
    }
    #[inline]
    fn dispatch_all(&mut self, _: usize, _: Event<'_>, _: &mut Context<'_, M>, _: &mut usize) -> Result<()> {
        Ok(())
    }
}

tuple_callbacks!(A KA 0);
tuple_callbacks!(A KA 0, B KB 1);
tuple_callbacks!(A KA 0, B KB 1, C KC 2);
tuple_callbacks!(A KA 0, B KB 1, C KC 2, D KD 3);
tuple_callbacks!(A KA 0, B KB 1, C KC 2, D KD 3, E KE 4);
tuple_callbacks!(A KA 0, B KB 1, C KC 2, D KD 3, E KE 4, F KF 5);
tuple_callbacks!(A KA 0, B KB 1, C KC 2, D KD 3, E KE 4, F KF 5, G KG 6);
tuple_callbacks!(A KA 0, B KB 1, C KC 2, D KD 3, E KE 4, F KF 5, G KG 6, H KH 7);
tuple_callbacks!(A KA 0, B KB 1, C KC 2, D KD 3, E KE 4, F KF 5, G KG 6, H KH 7, I KI 8);
tuple_callbacks!(A KA 0, B KB 1, C KC 2, D KD 3, E KE 4, F KF 5, G KG 6, H KH 7, I KI 8, J KJ 9);
tuple_callbacks!(A KA 0, B KB 1, C KC 2, D KD 3, E KE 4, F KF 5, G KG 6, H KH 7, I KI 8, J KJ 9, K KK 10);
tuple_callbacks!(A KA 0, B KB 1, C KC 2, D KD 3, E KE 4, F KF 5, G KG 6, H KH 7, I KI 8, J KJ 9, K KK 10, L KL 11);
tuple_callbacks!(A KA 0, B KB 1, C KC 2, D KD 3, E KE 4, F KF 5, G KG 6, H KH 7, I KI 8, J KJ 9, K KK 10, L KL 11, N KN 12);
tuple_callbacks!(A KA 0, B KB 1, C KC 2, D KD 3, E KE 4, F KF 5, G KG 6, H KH 7, I KI 8, J KJ 9, K KK 10, L KL 11, N KN 12, O KO 13);
tuple_callbacks!(A KA 0, B KB 1, C KC 2, D KD 3, E KE 4, F KF 5, G KG 6, H KH 7, I KI 8, J KJ 9, K KK 10, L KL 11, N KN 12, O KO 13, P KP 14);
tuple_callbacks!(A KA 0, B KB 1, C KC 2, D KD 3, E KE 4, F KF 5, G KG 6, H KH 7, I KI 8, J KJ 9, K KK 10, L KL 11, N KN 12, O KO 13, P KP 14, Q KQ 15);

/// Resolve the order of a set's callbacks: `after` / `before` constraints sorted topologically,
/// ties kept in registration order. A constraint on `Name` designates the callback named `Name`
/// and every callback named `Name(...)`. A cycle is an error naming every callback in it; a constraint
/// naming a callback that is not registered is an error.
pub fn resolve_order(names: &[Cow<'static, str>], orders: &[Order]) -> Result<Vec<usize>> {
    let n = names.len();
    let find = |target: &str, who: usize, key: &str| -> Result<Vec<usize>> {
        // `Name` also designates every `Name(detail)`: the instances of one type, told apart by
        // what they act on (`ScheduledHyperParamSetter(learning_rate)`).
        let designates = |name: &str| {
            name == target || name.strip_prefix(target).is_some_and(|rest| rest.starts_with('('))
        };
        let found: Vec<usize> = (0..n).filter(|&j| designates(&names[j])).collect();
        if found.is_empty() {
            let known: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
            return Err(Error::Order(format!(
                "callback `{}` is ordered {key} `{target}`, but no callback named `{target}` is registered; registered: {}",
                names[who],
                known.join(", ")
            )));
        }
        if found.contains(&who) {
            return Err(Error::Order(format!("callback `{}` is ordered {key} itself", names[who])));
        }
        Ok(found)
    };
    // edges[a] contains b: a runs before b.
    let mut edges = vec![Vec::new(); n];
    let mut indegree = vec![0usize; n];
    for (i, order) in orders.iter().enumerate() {
        for target in &order.after {
            for j in find(target, i, "after")? {
                edges[j].push(i);
                indegree[i] += 1;
            }
        }
        for target in &order.before {
            for j in find(target, i, "before")? {
                edges[i].push(j);
                indegree[j] += 1;
            }
        }
    }
    let mut done = vec![false; n];
    let mut result = Vec::with_capacity(n);
    while result.len() < n {
        // The first ready callback in registration order keeps ties stable.
        let Some(next) = (0..n).find(|&i| !done[i] && indegree[i] == 0) else {
            let cycle = find_cycle(&edges, &done);
            let names: Vec<String> = cycle.iter().map(|&i| format!("`{}`", names[i])).collect();
            return Err(Error::Order(format!(
                "the callbacks' order constraints form a cycle: {} -> {}",
                names.join(" -> "),
                names[0]
            )));
        };
        done[next] = true;
        result.push(next);
        for &j in &edges[next] {
            indegree[j] -= 1;
        }
    }
    Ok(result)
}

/// One cycle among the callbacks not yet placed (every one of them has a predecessor left).
fn find_cycle(edges: &[Vec<usize>], done: &[bool]) -> Vec<usize> {
    let n = edges.len();
    // Walk backwards along predecessors until a callback repeats.
    let mut preds = vec![Vec::new(); n];
    for (a, targets) in edges.iter().enumerate() {
        for &b in targets {
            if !done[a] && !done[b] {
                preds[b].push(a);
            }
        }
    }
    let start = (0..n).find(|&i| !done[i]).expect("a callback is left");
    let mut path = vec![start];
    let mut seen = vec![usize::MAX; n];
    seen[start] = 0;
    let mut current = start;
    loop {
        let prev = preds[current][0];
        if seen[prev] != usize::MAX {
            let mut cycle: Vec<usize> = path[seen[prev]..].to_vec();
            cycle.reverse();
            // Start with the earliest registered, so that the message does not depend on the walk.
            let first = cycle.iter().enumerate().min_by_key(|&(_, &i)| i).map_or(0, |(k, _)| k);
            cycle.rotate_left(first);
            return cycle;
        }
        seen[prev] = path.len();
        path.push(prev);
        current = prev;
    }
}
