//! [`CallbackFactory`]: a callback made of closures.

use std::borrow::Cow;

use super::tensors::host_fetches;
use crate::callback::{
    Callback, CallbackReturn, Context, Order, StepBatch, StepEvents, StepGradients, StepLoss, StepPred,
    for_each_event,
};
use crate::error::Result;
use crate::fetch::{Fetch, Fetched};

/// A callback made of closures, one per event it handles (tensorpack's
/// `CallbackFactory(setup_graph, before_train, trigger, after_train)`, with the step and epoch
/// events too). Each closure receives the [`Context`] (and `after_step` the fetched values) and
/// returns `()`, `burn_stoker::Result<()>` or a [`Flow`](crate::callback::Flow). An event without a closure
/// costs a test of an `Option`; a closure is called through a pointer.
///
/// The events inside a step are supported too: a [`before_batch`](Self::before_batch) closure
/// (read or replace the batch), an [`after_pred`](Self::after_pred) closure (the model's
/// output), a [`before_backward`](Self::before_backward) closure (read or replace the loss) or an
/// [`after_backward`](Self::after_backward) closure (read, change or withhold the gradients)
/// makes the factory ask for that event in [`Callback::step_events`]; a factory without them asks
/// for none, so the trainer does not deliver them to it and the step pays nothing for them.
///
/// In data-parallel training a factory with a closure for an event inside the step runs on every
/// rank, any other on the chief alone; [`chief_only`](Self::chief_only) decides otherwise.
///
/// Fetches ([`fetch`](Self::fetch)) are copied to the host at every step; to fetch less often,
/// wrap the factory in a [`PeriodicCallback`](crate::trigger::PeriodicCallback). Order constraints are
/// given with [`order`](Self::order).
///
/// `M` is the model's type, which the trainer usually infers; name it
/// (`CallbackFactory::<MyModel>::new()`) when a closure uses the model. Tell factories apart
/// when a run has several (the trainer refuses two callbacks of one name) with
/// [`named`](crate::callback::CallbackExt::named), last: `.named("halve_lr")` names one
/// `CallbackFactory(halve_lr)`.
///
/// ```
/// use burn_stoker::debug::CallbackFactory;
/// use burn_stoker::callback::{CallbackExt, Flow};
/// let callback = CallbackFactory::<()>::new()
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
///     })
///     .named("halve_lr_at_epoch_3");
/// # let _ = callback;
///
/// // Inside each step: halve the loss before backward (the factory asks for that event only).
/// let halve = CallbackFactory::<()>::new()
///     .before_backward(|_ctx, loss| loss.update(|l| l * 0.5))
///     .named("halve_loss");
/// # let _ = halve;
/// ```
pub struct CallbackFactory<M> {
    fetches: Vec<Fetch>,
    handlers: Handlers<M>,
    order: Order,
    chief_only: Option<bool>,
}
crate::kind::kind!(CallbackFactory<M>);

macro_rules! factory_events {
    ($(;)? $(
        $(#[$doc:meta])*
        $method:ident $variant:ident ($($arg:ident : $ty:ty = $pass:expr; $payload:ty)?) $phase:ident $(-> $default:ident)?;
    )*) => {
        /// One optional closure per event.
        struct Handlers<M> {
            $($method: Option<Box<dyn FnMut(&mut Context<'_, M> $(, $ty)?) -> Result<()>>>,)*
        }

        impl<M> Handlers<M> {
            fn none() -> Self {
                Handlers { $($method: None,)* }
            }

            /// The events that have a closure.
            fn events(&self) -> Vec<&'static str> {
                let mut events = Vec::new();
                $(if self.$method.is_some() {
                    events.push(stringify!($method));
                })*
                events
            }
        }

        impl<M: 'static> CallbackFactory<M> {
            $(
                #[doc = concat!("Run `f` in `", stringify!($method), "`.")]
                #[doc = ""]
                $(#[$doc])*
                pub fn $method<R: CallbackReturn>(
                    mut self,
                    mut f: impl FnMut(&mut Context<'_, M> $(, $ty)?) -> R + 'static,
                ) -> Self {
                    self.handlers.$method = Some(Box::new(move |ctx $(, $arg)?| f(ctx $(, $arg)?).apply(ctx)));
                    self
                }
            )*
        }

        impl<M> Callback<M> for CallbackFactory<M> {
            fn order(&self) -> Order {
                self.order.clone()
            }
            fn fetches(&self) -> &[Fetch] {
                &self.fetches
            }
            /// As [`chief_only`](CallbackFactory::chief_only) says; by default every rank when a
            /// closure changes the step, the chief otherwise.
            fn chief_only(&self) -> bool {
                self.chief_only.unwrap_or_else(|| Callback::<M>::step_events(self) == StepEvents::NONE)
            }
            fn takes_after_batch(&self) -> bool {
                self.handlers.after_batch.is_some()
            }
            fn step_events(&self) -> StepEvents {
                StepEvents {
                    batch: self.handlers.before_batch.is_some(),
                    pred: self.handlers.after_pred.is_some(),
                    loss: self.handlers.before_backward.is_some(),
                    gradients: self.handlers.after_backward.is_some(),
                }
            }
            $(
                #[inline]
                fn $method(&mut self, ctx: &mut Context<'_, M> $(, $arg: $ty)?) -> Result<()> {
                    match &mut self.handlers.$method {
                        Some(f) => f(ctx $(, $arg)?),
                        None => factory_default!(self, ctx $(-> $default)?),
                    }
                }
            )*
        }
    };
}

/// What an event without a closure does: nothing, or what the list's default calls (the
/// `trigger_epoch` of a factory without one runs the `trigger` closure).
macro_rules! factory_default {
    ($self:ident, $ctx:ident -> $default:ident) => {
        Callback::$default($self, $ctx)
    };
    ($self:ident, $ctx:ident) => {
        Ok(())
    };
}

for_each_event!(factory_events);

impl<M> std::fmt::Debug for CallbackFactory<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallbackFactory").field("events", &self.handlers.events()).finish()
    }
}

impl<M: 'static> Default for CallbackFactory<M> {
    fn default() -> Self {
        CallbackFactory::new()
    }
}

impl<M: 'static> CallbackFactory<M> {
    /// A callback that does nothing yet, named `CallbackFactory`.
    pub fn new() -> Self {
        CallbackFactory {
            fetches: Vec::new(),
            handlers: Handlers::none(),
            order: Order::none(),
            chief_only: None,
        }
    }
    /// Constraints on where the factory runs among the other callbacks (see [`Order`]).
    pub fn order(mut self, order: Order) -> Self {
        self.order = order;
        self
    }
    /// Whether the factory runs only on the chief in data-parallel training (tensorpack's
    /// `set_chief_only`). Without it, a factory with a `before_backward` or `after_backward`
    /// closure runs on every rank (it changes the step of each replica), any other on the chief.
    pub fn chief_only(mut self, chief_only: bool) -> Self {
        self.chief_only = Some(chief_only);
        self
    }
    /// Step outputs to copy to the host at every step, for the `after_step` closure.
    pub fn fetch<N: Into<Cow<'static, str>>>(mut self, names: impl IntoIterator<Item = N>) -> Self {
        self.fetches = host_fetches(names);
        self
    }
}
