//! [`Named`]: any callback under a name of its own, so that a run can hold several of one type.

use std::borrow::Cow;

use super::base::Callback;
use super::context::Context;
use super::event::for_each_event;
use super::step::{StepBatch, StepGradients, StepLoss, StepPred};
use crate::error::{Result, check_setting};
use crate::fetch::Fetched;
use crate::kind::CallbackKind;

/// A callback under a name of its own: `<Type>(<label>)`, such as `InferenceRunner(test)` or
/// `ModelSaver(archive)`. Made with [`CallbackExt::named`] (`.named("test")` on any callback) or
/// [`Named::new`].
///
/// A run's callbacks must have distinct names: the name keys each callback's state in a
/// checkpoint, and order constraints and error messages designate callbacks by it. A callback's
/// name is its type's (`InferenceRunner`), or its type's with what it acts on
/// (`MinSaver(validation_error)`, `ScheduledHyperParamSetter(learning_rate)`); two callbacks of
/// one type acting on the same thing, such as two [`InferenceRunner`](crate::inference::InferenceRunner)s
/// (one over a validation set, one over a test set, as tensorpack runs them with two
/// `tower_name`s) or two [`ModelSaver`](crate::saver::ModelSaver)s, are told apart by naming
/// them. The label replaces what is in the parenthesis, if anything: `MinSaver::new("cost").named("best")`
/// is `MinSaver(best)`.
///
/// Everything else is the wrapped callback's: its events, order, fetches, where it runs and its
/// state (saved under the new name, so that each of two named callbacks resumes with its own).
/// An order constraint on the type (`#[order(after = InferenceRunner)]`,
/// `Order::none().after("InferenceRunner")`) still designates every callback of that type,
/// named or not; one on the full name (`Order::none().after("InferenceRunner(test)")`)
/// designates that one alone.
///
/// ```
/// use burn::nn::Linear;
/// use burn::tensor::Tensor;
/// use burn_stoker::prelude::*;
///
/// type Batch = (Tensor<2>, Tensor<2>);
/// let forward = |model: &Linear, (x, y): Batch, out: &mut Outputs| {
///     let n = x.dims()[0];
///     out.put("cost", (model.forward(x) - y).powi_scalar(2).mean());
///     n
/// };
/// let (validation_set, test_set): (Vec<Batch>, Vec<Batch>) = (Vec::new(), Vec::new());
/// // `validation_cost` from the first, `test_cost` from the second (tensorpack's prefixes).
/// let validation = InferenceRunner::new(validation_set, forward).with(ScalarStats::new(["cost"]));
/// let test = InferenceRunner::new(test_set, forward)
///     .with(ScalarStats::new(["cost"]).prefix("test"))
///     .named("test"); // `InferenceRunner(test)`
/// let savers = (ModelSaver::new(3), ModelSaver::new(100).named("archive"));
/// # let _ = (validation, test, savers);
/// ```
#[derive(Debug, Clone)]
pub struct Named<C> {
    inner: C,
    label: Cow<'static, str>,
}
// A named callback (`InferenceRunner(test)`) is designated by its type's name.
impl<C: CallbackKind> CallbackKind for Named<C> {
    const NAME: &'static str = C::NAME;
}

impl<C> Named<C> {
    /// `inner` under the name `<its type>(<label>)`. The label must not be empty (an error at
    /// setup otherwise).
    pub fn new(inner: C, label: impl Into<Cow<'static, str>>) -> Self {
        Named { inner, label: label.into() }
    }
    /// The label given.
    pub fn label(&self) -> &str {
        &self.label
    }
    /// The wrapped callback.
    pub fn inner(&self) -> &C {
        &self.inner
    }
    /// The wrapped callback, to change.
    pub fn inner_mut(&mut self) -> &mut C {
        &mut self.inner
    }
    /// The wrapped callback, unwrapped.
    pub fn into_inner(self) -> C {
        self.inner
    }
}

/// `.named("label")` on any callback: the callback under the name `<Type>(<label>)` (see
/// [`Named`]); `.set_chief_only(v)`: the callback on the chief alone or on every rank (see
/// [`ChiefOnly`](super::ChiefOnly)).
///
/// In the prelude; [`Named::new`] does the same. The one meaning of `named` in stoker: a
/// callback's name (the scalar a callback puts is named by its `scalar_name`, as `TrainCost`'s and a burn metric's).
pub trait CallbackExt: Sized {
    /// This callback under the name `<Type>(<label>)`.
    fn named(self, label: impl Into<Cow<'static, str>>) -> Named<Self> {
        Named::new(self, label)
    }
    /// This callback on the chief alone (`true`) or on every rank (`false`) in data-parallel
    /// training, whatever its own [`Callback::chief_only`] says: tensorpack's
    /// `Callback.set_chief_only` (see [`ChiefOnly`](super::ChiefOnly)).
    fn set_chief_only(self, chief_only: bool) -> super::ChiefOnly<Self> {
        super::ChiefOnly::new(self, chief_only)
    }
}

impl<C> CallbackExt for C {}

/// The part of a callback's name that designates its type: up to its first `(`.
pub(crate) fn type_part(name: &str) -> &str {
    name.split_once('(').map_or(name, |(base, _)| base)
}

macro_rules! named_callback {
    ($(;)? $(
        $(#[$doc:meta])*
        $method:ident $variant:ident ($($arg:ident : $ty:ty = $pass:expr; $payload:ty)?) $phase:ident $(-> $default:ident)?;
    )*) => {
        impl<M, C: Callback<M>> Callback<M> for Named<C> {
            fn name(&self) -> Cow<'static, str> {
                Cow::Owned(format!("{}({})", type_part(&self.inner.name()), self.label))
            }
            crate::callback::forward_methods!((field inner);
                order fetches chief_only save_state load_state step_events takes_after_batch takes_training_batches takes_validation_batches wants_fetch);
            $(
                #[inline]
                fn $method(&mut self, ctx: &mut Context<'_, M> $(, $arg: $ty)?) -> Result<()> {
                    named_setup!($method, self);
                    self.inner.$method(ctx $(, $arg)?)
                }
            )*
        }
    };
}

/// In `setup`, the label's check before the wrapped callback's setup; nothing elsewhere.
macro_rules! named_setup {
    (setup, $self:ident) => {
        check_setting(
            !$self.label.trim().is_empty(),
            format_args!("{}", type_part(&$self.inner.name())),
            "the label given to .named(...)",
            "a non-empty word",
            format_args!("{:?}", $self.label),
        )?;
    };
    ($method:ident, $self:ident) => {};
}

for_each_event!(named_callback);

#[cfg(test)]
mod tests {
    use super::*;

    struct Plain;
    impl<M> Callback<M> for Plain {}

    struct Detailed;
    impl<M> Callback<M> for Detailed {
        fn name(&self) -> Cow<'static, str> {
            Cow::Borrowed("Detailed(cost)")
        }
    }

    #[test]
    fn a_named_callback_is_its_type_with_the_label() {
        assert_eq!(Callback::<()>::name(&Plain.named("test")), "Plain(test)");
        assert_eq!(Callback::<()>::name(&Detailed.named("best")), "Detailed(best)");
        assert_eq!(Callback::<()>::name(&Named::new(Plain, String::from("a b"))), "Plain(a b)");
    }
}
