//! [`CallbackFactory`]: a callback made of closures.

use std::borrow::Cow;

use super::tensors::host_fetches;
use crate::callback::{Callback, CallbackReturn, Context, Order, StepGradients, StepHooks, StepLoss};
use crate::error::Result;
use crate::fetch::{Fetch, Fetched};

type EventFn<M> = Box<dyn FnMut(&mut Context<'_, M>) -> Result<()>>;
type StepFn<M> = Box<dyn FnMut(&mut Context<'_, M>, &Fetched<'_>) -> Result<()>>;
type LossFn<M> = Box<dyn FnMut(&mut Context<'_, M>, &StepLoss<'_>) -> Result<()>>;
type GradientsFn<M> = Box<dyn FnMut(&mut Context<'_, M>, &StepGradients) -> Result<()>>;

/// A callback made of closures, one per event it handles (tensorpack's
/// `CallbackFactory(setup_graph, before_train, trigger, after_train)`, with the step and epoch
/// events too). Each closure receives the [`Context`] (and `after_step` the fetched values) and
/// returns `()`, `burn_stoker::Result<()>` or a [`Flow`](crate::Flow). An event without a closure
/// costs a test of an `Option`; a closure is called through a pointer.
///
/// The events inside a step are supported too: a [`before_backward`](Self::before_backward)
/// closure (read or replace the loss) or an [`after_backward`](Self::after_backward) closure
/// (read, change or withhold the gradients) makes the factory ask for that event in
/// [`Callback::step_hooks`]; a factory without them asks for neither, so the trainer does not
/// deliver them to it and the step pays nothing for them.
///
/// Fetches ([`fetch`](Self::fetch)) are copied to the host at every step; to fetch less often,
/// wrap the factory in a [`PeriodicCallback`](crate::PeriodicCallback). Order constraints are
/// given with [`order`](Self::order).
///
/// `M` is the model's type, which the trainer usually infers; name it
/// (`CallbackFactory::<MyModel>::new()`) when a closure uses the model. Give each factory its own
/// [`name`](Self::name) when a run has several (the trainer refuses two callbacks of one name).
///
/// ```
/// use burn_stoker::debug::CallbackFactory;
/// use burn_stoker::Flow;
/// let callback = CallbackFactory::<()>::new()
///     .name("halve_lr_at_epoch_3")
///     .before_train(|ctx| eprintln!("training from step {}", ctx.global_step()))
///     .trigger(|ctx| {
///         if ctx.epoch_num() == 3 {
///             let lr = ctx.learning_rate();
///             ctx.set_learning_rate(lr / 2.0);
///         }
///     })
///     .fetch(["loss"])
///     .after_step(|_ctx, values| -> burn_stoker::Result<Flow> {
///         let loss: f32 = values.get("loss")?;
///         Ok(if loss.is_nan() { Flow::Stop("the loss is NaN".into()) } else { Flow::Continue })
///     });
/// # let _ = callback;
///
/// // Inside each step: halve the loss before backward (the factory asks for that event only).
/// let halve = CallbackFactory::<()>::new().name("halve_loss").before_backward(|_ctx, loss| {
///     loss.update(|l| l * 0.5)
/// });
/// # let _ = halve;
/// ```
pub struct CallbackFactory<M> {
    name: Cow<'static, str>,
    fetches: Vec<Fetch>,
    setup: Option<EventFn<M>>,
    before_train: Option<EventFn<M>>,
    before_epoch: Option<EventFn<M>>,
    before_step: Option<EventFn<M>>,
    after_step: Option<StepFn<M>>,
    trigger_step: Option<EventFn<M>>,
    after_epoch: Option<EventFn<M>>,
    trigger_epoch: Option<EventFn<M>>,
    trigger: Option<EventFn<M>>,
    after_train: Option<EventFn<M>>,
    before_backward: Option<LossFn<M>>,
    after_backward: Option<GradientsFn<M>>,
    order: Order,
}

impl<M> std::fmt::Debug for CallbackFactory<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let events: Vec<&str> = [
            ("setup", self.setup.is_some()),
            ("before_train", self.before_train.is_some()),
            ("before_epoch", self.before_epoch.is_some()),
            ("before_step", self.before_step.is_some()),
            ("after_step", self.after_step.is_some()),
            ("trigger_step", self.trigger_step.is_some()),
            ("after_epoch", self.after_epoch.is_some()),
            ("trigger_epoch", self.trigger_epoch.is_some()),
            ("trigger", self.trigger.is_some()),
            ("after_train", self.after_train.is_some()),
            ("before_backward", self.before_backward.is_some()),
            ("after_backward", self.after_backward.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, set)| set.then_some(name))
        .collect();
        f.debug_struct("CallbackFactory").field("name", &self.name).field("events", &events).finish()
    }
}

impl<M: 'static> Default for CallbackFactory<M> {
    fn default() -> Self {
        CallbackFactory::new()
    }
}

fn event<M, R: CallbackReturn>(mut f: impl FnMut(&mut Context<'_, M>) -> R + 'static) -> Option<EventFn<M>>
where
    M: 'static,
{
    Some(Box::new(move |ctx| f(ctx).apply(ctx)))
}

impl<M: 'static> CallbackFactory<M> {
    /// A callback that does nothing yet, named `CallbackFactory`.
    pub fn new() -> Self {
        CallbackFactory {
            name: Cow::Borrowed("CallbackFactory"),
            fetches: Vec::new(),
            setup: None,
            before_train: None,
            before_epoch: None,
            before_step: None,
            after_step: None,
            trigger_step: None,
            after_epoch: None,
            trigger_epoch: None,
            trigger: None,
            after_train: None,
            before_backward: None,
            after_backward: None,
            order: Order::none(),
        }
    }
    /// The callback's name (in order constraints and error messages).
    pub fn name(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.name = name.into();
        self
    }
    /// Constraints on where the factory runs among the other callbacks (see [`Order`]).
    pub fn order(mut self, order: Order) -> Self {
        self.order = order;
        self
    }
    /// Step outputs to copy to the host at every step, for the `after_step` closure.
    pub fn fetch<N: Into<Cow<'static, str>>>(mut self, names: impl IntoIterator<Item = N>) -> Self {
        self.fetches = host_fetches(names);
        self
    }
    /// Run `f` in `setup` (tensorpack's `setup_graph`).
    pub fn setup<R: CallbackReturn>(mut self, f: impl FnMut(&mut Context<'_, M>) -> R + 'static) -> Self {
        self.setup = event(f);
        self
    }
    /// Run `f` in `before_train`.
    pub fn before_train<R: CallbackReturn>(
        mut self,
        f: impl FnMut(&mut Context<'_, M>) -> R + 'static,
    ) -> Self {
        self.before_train = event(f);
        self
    }
    /// Run `f` in `before_epoch`.
    pub fn before_epoch<R: CallbackReturn>(
        mut self,
        f: impl FnMut(&mut Context<'_, M>) -> R + 'static,
    ) -> Self {
        self.before_epoch = event(f);
        self
    }
    /// Run `f` in `before_step`.
    pub fn before_step<R: CallbackReturn>(
        mut self,
        f: impl FnMut(&mut Context<'_, M>) -> R + 'static,
    ) -> Self {
        self.before_step = event(f);
        self
    }
    /// Run `f` in `after_step`, with the values of [`fetch`](Self::fetch).
    pub fn after_step<R: CallbackReturn>(
        mut self,
        mut f: impl FnMut(&mut Context<'_, M>, &Fetched<'_>) -> R + 'static,
    ) -> Self {
        self.after_step = Some(Box::new(move |ctx, values| f(ctx, values).apply(ctx)));
        self
    }
    /// Run `f` in `trigger_step`.
    pub fn trigger_step<R: CallbackReturn>(
        mut self,
        f: impl FnMut(&mut Context<'_, M>) -> R + 'static,
    ) -> Self {
        self.trigger_step = event(f);
        self
    }
    /// Run `f` in `after_epoch`.
    pub fn after_epoch<R: CallbackReturn>(
        mut self,
        f: impl FnMut(&mut Context<'_, M>) -> R + 'static,
    ) -> Self {
        self.after_epoch = event(f);
        self
    }
    /// Run `f` in `trigger_epoch` instead of the default, which calls the `trigger` closure.
    pub fn trigger_epoch<R: CallbackReturn>(
        mut self,
        f: impl FnMut(&mut Context<'_, M>) -> R + 'static,
    ) -> Self {
        self.trigger_epoch = event(f);
        self
    }
    /// Run `f` in `trigger`: at the end of every epoch, or at the period of a
    /// [`PeriodicTrigger`](crate::PeriodicTrigger) around the factory.
    pub fn trigger<R: CallbackReturn>(mut self, f: impl FnMut(&mut Context<'_, M>) -> R + 'static) -> Self {
        self.trigger = event(f);
        self
    }
    /// Run `f` in `after_train` (always, last).
    pub fn after_train<R: CallbackReturn>(
        mut self,
        f: impl FnMut(&mut Context<'_, M>) -> R + 'static,
    ) -> Self {
        self.after_train = event(f);
        self
    }
    /// Run `f` inside each step, between the forward pass and backward, with the loss to read or
    /// replace (see [`Callback::before_backward`]); the factory then asks for the event.
    pub fn before_backward<R: CallbackReturn>(
        mut self,
        mut f: impl FnMut(&mut Context<'_, M>, &StepLoss<'_>) -> R + 'static,
    ) -> Self {
        self.before_backward = Some(Box::new(move |ctx, loss| f(ctx, loss).apply(ctx)));
        self
    }
    /// Run `f` inside each step, between backward and the optimizer, with the gradients to read,
    /// change or withhold (see [`Callback::after_backward`]); the factory then asks for the event.
    pub fn after_backward<R: CallbackReturn>(
        mut self,
        mut f: impl FnMut(&mut Context<'_, M>, &StepGradients) -> R + 'static,
    ) -> Self {
        self.after_backward = Some(Box::new(move |ctx, grads| f(ctx, grads).apply(ctx)));
        self
    }
}

#[inline]
fn call<M>(f: &mut Option<EventFn<M>>, ctx: &mut Context<'_, M>) -> Result<()> {
    match f {
        Some(f) => f(ctx),
        None => Ok(()),
    }
}

impl<M> Callback<M> for CallbackFactory<M> {
    fn name(&self) -> Cow<'static, str> {
        self.name.clone()
    }
    fn order(&self) -> Order {
        self.order.clone()
    }
    fn fetches(&self) -> &[Fetch] {
        &self.fetches
    }
    fn step_hooks(&self) -> StepHooks {
        StepHooks { loss: self.before_backward.is_some(), gradients: self.after_backward.is_some() }
    }
    fn before_backward(&mut self, ctx: &mut Context<'_, M>, loss: &StepLoss<'_>) -> Result<()> {
        match &mut self.before_backward {
            Some(f) => f(ctx, loss),
            None => Ok(()),
        }
    }
    fn after_backward(&mut self, ctx: &mut Context<'_, M>, grads: &StepGradients) -> Result<()> {
        match &mut self.after_backward {
            Some(f) => f(ctx, grads),
            None => Ok(()),
        }
    }
    fn setup(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        call(&mut self.setup, ctx)
    }
    fn before_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        call(&mut self.before_train, ctx)
    }
    fn before_epoch(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        call(&mut self.before_epoch, ctx)
    }
    #[inline]
    fn before_step(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        call(&mut self.before_step, ctx)
    }
    #[inline]
    fn after_step(&mut self, ctx: &mut Context<'_, M>, values: &Fetched<'_>) -> Result<()> {
        match &mut self.after_step {
            Some(f) => f(ctx, values),
            None => Ok(()),
        }
    }
    #[inline]
    fn trigger_step(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        call(&mut self.trigger_step, ctx)
    }
    fn after_epoch(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        call(&mut self.after_epoch, ctx)
    }
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        match &mut self.trigger_epoch {
            Some(f) => f(ctx),
            None => call(&mut self.trigger, ctx),
        }
    }
    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        call(&mut self.trigger, ctx)
    }
    fn after_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        call(&mut self.after_train, ctx)
    }
}
