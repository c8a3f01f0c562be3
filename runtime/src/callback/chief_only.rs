//! [`ChiefOnly`]: any callback with where it runs in data-parallel training set from outside
//! (tensorpack's `Callback.set_chief_only`), made by
//! [`CallbackExt::set_chief_only`](super::CallbackExt::set_chief_only).

use super::base::Callback;
use super::context::Context;
use super::event::for_each_event;
use super::step::{StepBatch, StepGradients, StepLoss, StepPred};
use crate::error::Result;
use crate::fetch::Fetched;
use crate::kind::CallbackKind;

/// A callback that runs on the chief alone, or on every rank, as set from outside: tensorpack's
/// `Callback.set_chief_only(v)` (tensorpack/callbacks/base.py), for any callback. Made with
/// [`CallbackExt::set_chief_only`](super::CallbackExt::set_chief_only) (`.set_chief_only(false)`
/// on any callback, in the prelude).
///
/// Everything else is the wrapped callback's: its name, events, order, fetches and state. In a
/// world of several ranks, a callback that takes a value inside the step (the batch, the
/// model's output, the loss, the gradients) must run on every rank: kept on the chief alone it
/// is refused at setup, as it would be unwrapped.
///
/// ```
/// use burn_stoker::prelude::*;
///
/// // Counted on every rank, where `#[callback]`'s default is the chief alone.
/// #[callback(on = trigger_step)]
/// fn count_steps(ctx: &mut Context<'_, burn::nn::Linear>) {
///     let _ = ctx.global_step();
/// }
/// let everywhere = CountSteps.set_chief_only(false);
/// # let _ = everywhere;
/// ```
#[derive(Debug, Clone)]
pub struct ChiefOnly<C> {
    inner: C,
    chief_only: bool,
}
// Designated by the wrapped callback's type.
impl<C: CallbackKind> CallbackKind for ChiefOnly<C> {
    const NAME: &'static str = C::NAME;
}

impl<C> ChiefOnly<C> {
    /// `inner`, on the chief alone (`chief_only` true) or on every rank (false).
    pub fn new(inner: C, chief_only: bool) -> Self {
        ChiefOnly { inner, chief_only }
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

macro_rules! chief_only_callback {
    ($(;)? $(
        $(#[$doc:meta])*
        $method:ident $variant:ident ($($arg:ident : $ty:ty = $pass:expr; $payload:ty)?) $phase:ident $(-> $default:ident)?;
    )*) => {
        impl<M, C: Callback<M>> Callback<M> for ChiefOnly<C> {
            /// As set ([`CallbackExt::set_chief_only`](super::CallbackExt::set_chief_only)).
            fn chief_only(&self) -> bool {
                self.chief_only
            }
            crate::callback::forward_methods!((field inner);
                name order fetches save_state load_state step_events takes_after_batch takes_training_batches takes_validation_batches wants_fetch);
            $(
                #[inline]
                fn $method(&mut self, ctx: &mut Context<'_, M> $(, $arg: $ty)?) -> Result<()> {
                    self.inner.$method(ctx $(, $arg)?)
                }
            )*
        }
    };
}

for_each_event!(chief_only_callback);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::callback::CallbackExt;

    struct Plain;
    impl<M> Callback<M> for Plain {}

    struct Everywhere;
    impl<M> Callback<M> for Everywhere {
        fn chief_only(&self) -> bool {
            false
        }
    }

    #[test]
    fn set_chief_only_overrides_the_callbacks_own_answer_and_keeps_its_name() {
        assert!(Callback::<()>::chief_only(&Plain));
        assert!(!Callback::<()>::chief_only(&Plain.set_chief_only(false)));
        assert!(Callback::<()>::chief_only(&Everywhere.set_chief_only(true)));
        assert_eq!(Callback::<()>::name(&Plain.set_chief_only(false)), "Plain");
        assert_eq!(Callback::<()>::name(&Plain.named("a").set_chief_only(false)), "Plain(a)");
    }
}
