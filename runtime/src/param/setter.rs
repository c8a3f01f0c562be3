//! tensorpack's `HyperParamSetter` base: the [`HyperParamSetter`] trait a user implements, and
//! [`SetterCallback`], the callback that runs one.

use std::borrow::Cow;

use super::Target;
use crate::callback::{Callback, Context};
use crate::error::Result;
use crate::kind::CallbackKind;

/// What a hyper-parameter setter computes: tensorpack's abstract `HyperParamSetter`, whose
/// users subclass it and write `_get_value_to_set`. Here a type implements this trait and
/// [`into_callback`](Self::into_callback) makes it a callback ([`SetterCallback`]), which:
///
/// - checks at `setup` that [`param`](Self::param) is a hyper-parameter of the trainer (an
///   error naming the known ones otherwise);
/// - sets [`value_at_beginning`](Self::value_at_beginning) in `before_train` (tensorpack's
///   `_enable_before_train`, on by default), and [`value_to_set`](Self::value_to_set) in
///   `trigger`: every epoch by default, at another period under
///   [`PeriodicTrigger`](crate::trigger::PeriodicTrigger);
/// - leaves the value alone when they return `None`, and announces a change on stderr at most
///   once per epoch, as tensorpack logs it;
/// - runs on every rank in data-parallel training (tensorpack's `_chief_only = False`): the
///   value should depend on what every rank sees alike (the counters), so the replicas agree.
///
/// The built-in [`ScheduledHyperParamSetter`](super::ScheduledHyperParamSetter) and
/// [`HyperParamSetterWithFunc`](super::HyperParamSetterWithFunc) implement it too (their own
/// callbacks decide when they run, step by step when step-based).
///
/// ```
/// use burn_stoker::prelude::*;
/// use burn_stoker::param::HyperParamSetter;
///
/// /// Linear warm-up of the learning rate over the first `epochs` epochs, then leave it.
/// struct WarmUp {
///     target: f64,
///     epochs: u64,
/// }
///
/// impl HyperParamSetter for WarmUp {
///     const NAME: &'static str = "WarmUp";
///     fn param(&self) -> &str {
///         "learning_rate"
///     }
///     fn value_to_set<M>(&mut self, ctx: &Context<'_, M>) -> burn_stoker::Result<Option<f64>> {
///         // In before_train epoch_num is 0; in trigger, the epoch that just finished.
///         let epoch = ctx.epoch_num();
///         Ok((epoch < self.epochs).then(|| self.target * (epoch + 1) as f64 / self.epochs as f64))
///     }
/// }
///
/// let callback = WarmUp { target: 0.1, epochs: 4 }.into_callback();
/// # let _ = callback;
/// ```
pub trait HyperParamSetter {
    /// The setter's name: its callback is named `NAME(param)` and ordered by `NAME`
    /// (`#[order(after = SetterCallback<WarmUp>)]`).
    const NAME: &'static str;

    /// The hyper-parameter it sets: `"learning_rate"` or a name registered with the trainer.
    fn param(&self) -> &str;

    /// tensorpack's `_get_value_to_set`: the value to set now, or `None` to leave the current
    /// one. Called in `trigger` (every epoch by default); `ctx` gives the counters, the monitors'
    /// history and the current value (`ctx.hyper().get(param)`).
    fn value_to_set<M>(&mut self, ctx: &Context<'_, M>) -> Result<Option<f64>>;

    /// The value to set in `before_train`; by default [`value_to_set`](Self::value_to_set).
    /// Return `None` to set nothing at the beginning (tensorpack's `_enable_before_train =
    /// False`).
    fn value_at_beginning<M>(&mut self, ctx: &Context<'_, M>) -> Result<Option<f64>> {
        self.value_to_set(ctx)
    }

    /// This setter as a callback.
    fn into_callback(self) -> SetterCallback<Self>
    where
        Self: Sized,
    {
        SetterCallback::new(self)
    }
}

/// Runs a [`HyperParamSetter`]: the callback of a user-written setter (see the trait for when
/// it sets the value).
#[derive(Debug, Clone)]
pub struct SetterCallback<S> {
    setter: S,
    target: Target,
}
// A user-written setter's callback is ordered by the setter's name.
impl<S: HyperParamSetter> CallbackKind for SetterCallback<S> {
    const NAME: &'static str = S::NAME;
}

impl<S: HyperParamSetter> SetterCallback<S> {
    /// The callback of `setter` (also [`HyperParamSetter::into_callback`]).
    pub fn new(setter: S) -> Self {
        let target = Target::new::<Self>(Cow::Owned(setter.param().to_string()));
        SetterCallback { setter, target }
    }
    /// The setter.
    pub fn setter(&self) -> &S {
        &self.setter
    }
}

/// Sets `value` through `target` when there is one.
pub(crate) fn set_value<M>(target: &mut Target, ctx: &mut Context<'_, M>, value: Option<f64>) -> Result<()> {
    match value {
        Some(value) => target.set(ctx, value),
        None => Ok(()),
    }
}

/// The `Callback` methods of a hyper-parameter setter, written once for [`SetterCallback`] and
/// the built-in setters that are their own callback: `setup` checks that the parameter exists
/// (after `self.<check>()?`, with `validate: <check>`), `before_train` sets
/// `value_at_beginning`, `trigger` sets `value_to_set`, called from `trigger_epoch`, or from
/// `trigger_step` when `self.<step_based>` holds (`step_based: false` for never); on every rank
/// (tensorpack's `HyperParamSetter`: each replica sets the value it trains with). `setter:` is
/// the field that holds the [`HyperParamSetter`], or `self`; the target is `self.target`.
macro_rules! setter_callback {
    (setter: $setter:ident, step_based: $step:ident $(, validate: $validate:ident)?) => {
        fn chief_only(&self) -> bool {
            false
        }
        fn name(&self) -> ::std::borrow::Cow<'static, str> {
            self.target.name()
        }
        fn setup(&mut self, ctx: &mut $crate::callback::Context<'_, M>) -> $crate::error::Result<()> {
            $(self.$validate()?;)?
            self.target.check(ctx)
        }
        fn before_train(&mut self, ctx: &mut $crate::callback::Context<'_, M>) -> $crate::error::Result<()> {
            let value = $crate::param::setter::setter_callback!(@field self $setter).value_at_beginning(ctx)?;
            $crate::param::setter::set_value(&mut self.target, ctx, value)
        }
        fn trigger_step(&mut self, ctx: &mut $crate::callback::Context<'_, M>) -> $crate::error::Result<()> {
            if $crate::param::setter::setter_callback!(@field self $step) {
                $crate::callback::Callback::<M>::trigger(self, ctx)
            } else {
                Ok(())
            }
        }
        fn trigger_epoch(&mut self, ctx: &mut $crate::callback::Context<'_, M>) -> $crate::error::Result<()> {
            if $crate::param::setter::setter_callback!(@field self $step) {
                Ok(())
            } else {
                $crate::callback::Callback::<M>::trigger(self, ctx)
            }
        }
        fn trigger(&mut self, ctx: &mut $crate::callback::Context<'_, M>) -> $crate::error::Result<()> {
            let value = $crate::param::setter::setter_callback!(@field self $setter).value_to_set(ctx)?;
            $crate::param::setter::set_value(&mut self.target, ctx, value)
        }
    };
    (@field $self:ident self) => {
        $self
    };
    (@field $self:ident false) => {
        false
    };
    (@field $self:ident $field:ident) => {
        $self.$field
    };
}
pub(super) use setter_callback;

impl<M, S: HyperParamSetter> Callback<M> for SetterCallback<S> {
    setter_callback!(setter: setter, step_based: false);
}
