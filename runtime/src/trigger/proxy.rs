//! tensorpack's `ProxyCallback`: a callback that forwards every event to another one, as a base
//! for callbacks that decorate another.

use crate::callback::{Callback, Context, StepBatch, StepGradients, StepLoss, StepPred, for_each_event};
use crate::error::Result;
use crate::fetch::Fetched;
use crate::kind::CallbackKind;

macro_rules! define_proxy {
    ($(;)? $(
        $(#[$doc:meta])*
        $method:ident $variant:ident ($($arg:ident : $ty:ty = $pass:expr; $payload:ty)?) $phase:ident $(-> $default:ident)?;
    )*) => {
        /// What a decorator of a callback changes: tensorpack's `ProxyCallback` subclassed.
        ///
        /// Every method receives the wrapped callback (`inner`) beside the usual arguments, and
        /// has a default that forwards to it: its name, order, fetches, `chief_only`, state,
        /// step hooks, which batches it takes, and every event. Implement the methods the decorator changes and
        /// register [`ProxyCallback::decorated`]`(inner, decorator)`. As in tensorpack,
        /// `trigger_epoch` forwards to the wrapped callback's `trigger_epoch`, which calls *its*
        /// `trigger`: a decorator that changes `trigger` changes the epoch's trigger only if
        /// it overrides `trigger_epoch` too.
        ///
        /// ```
        /// use burn_stoker::prelude::*;
        /// use burn_stoker::trigger::{Proxy, ProxyCallback};
        ///
        /// /// Counts the epochs' triggers of the callback it wraps; forwards everything.
        /// struct CountTriggers(u64);
        ///
        /// impl<M, C: Callback<M>> Proxy<M, C> for CountTriggers {
        ///     fn trigger_epoch(&mut self, inner: &mut C, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        ///         self.0 += 1;
        ///         inner.trigger_epoch(ctx)
        ///     }
        /// }
        ///
        /// let counted = ProxyCallback::decorated(ModelSaver::new(3), CountTriggers(0));
        /// # let _ = counted;
        /// ```
        pub trait Proxy<M, C: Callback<M>> {
            crate::callback::forward_methods!((proxy C);
                name order fetches chief_only save_state load_state step_events takes_after_batch
                takes_training_batches takes_validation_batches wants_fetch);
            $(
                $(#[$doc])*
                fn $method(&mut self, inner: &mut C, ctx: &mut Context<'_, M> $(, $arg: $ty)?) -> Result<()> {
                    inner.$method(ctx $(, $arg)?)
                }
            )*
        }

        impl<M, C: Callback<M>, D: Proxy<M, C>> Callback<M> for ProxyCallback<C, D> {
            crate::callback::forward_methods!((decorated decorator inner);
                name order fetches chief_only save_state load_state step_events takes_after_batch
                takes_training_batches takes_validation_batches wants_fetch);
            $(
                #[inline]
                fn $method(&mut self, ctx: &mut Context<'_, M> $(, $arg: $ty)?) -> Result<()> {
                    Proxy::<M, C>::$method(&mut self.decorator, &mut self.inner, ctx $(, $arg)?)
                }
            )*
        }
    };
}

for_each_event!(define_proxy);

/// The decorator of [`ProxyCallback::new`]: changes nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Forward;

impl<M, C: Callback<M>> Proxy<M, C> for Forward {}

/// A callback that forwards every method to the callback it wraps (tensorpack's
/// `ProxyCallback`), through a decorator ([`Proxy`]) that may change any of them. Named and
/// ordered as the decorator says: as the wrapped callback by default.
#[derive(Debug, Clone, Default)]
pub struct ProxyCallback<C, D = Forward> {
    inner: C,
    decorator: D,
}
impl<C: CallbackKind, D> CallbackKind for ProxyCallback<C, D> {
    const NAME: &'static str = C::NAME;
}

impl<C> ProxyCallback<C, Forward> {
    /// Forward everything to `inner`, unchanged.
    pub fn new(inner: C) -> Self {
        ProxyCallback { inner, decorator: Forward }
    }
}

impl<C, D> ProxyCallback<C, D> {
    /// Forward to `inner` through `decorator`, which changes what it overrides.
    pub fn decorated(inner: C, decorator: D) -> Self {
        ProxyCallback { inner, decorator }
    }
    /// The wrapped callback.
    pub fn inner(&self) -> &C {
        &self.inner
    }
    /// The decorator.
    pub fn decorator(&self) -> &D {
        &self.decorator
    }
}
