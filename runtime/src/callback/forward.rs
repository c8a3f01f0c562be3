//! The methods of [`Callback`](super::Callback) other than the events, forwarded: written once
//! here for every callback that passes them on to another (a pointer, [`Named`](super::Named),
//! the gating wrappers, [`ProxyCallback`](crate::trigger::ProxyCallback) and its
//! [`Proxy`](crate::trigger::Proxy) decorator).

/// Forwards the listed non-event methods of `Callback` (`name`, `order`, `fetches`,
/// `chief_only`, `save_state`, `load_state`, `step_events`, `takes_after_batch`,
/// `takes_training_batches`, `takes_validation_batches`, `wants_fetch`), in one of four ways:
///
/// - `forward_methods!((deref); ...)`: to `**self` (a pointer's impl);
/// - `forward_methods!((field inner); ...)`: to `self.inner`;
/// - `forward_methods!((decorated decorator inner); ...)`: to `self.decorator`'s method of the same
///   name, with `&self.inner` (or `&mut`) first;
/// - `forward_methods!((proxy C); ...)`: a trait's documented defaults taking the wrapped callback
///   `inner: &C` (or `&mut C`) first, forwarding to it.
///
/// Each method's signature is written once, below.
macro_rules! forward_methods {
    ($how:tt; $($method:ident)*) => {
        $($crate::callback::forward_methods!(@method $how $method);)*
    };
    (@method $how:tt name) => {
        $crate::callback::forward_methods!(@fn $how [] [] "The name: the wrapped callback's."
            name() -> ::std::borrow::Cow<'static, str>);
    };
    (@method $how:tt order) => {
        $crate::callback::forward_methods!(@fn $how [] [] "The order: the wrapped callback's."
            order() -> $crate::callback::Order);
    };
    (@method $how:tt fetches) => {
        $crate::callback::forward_methods!(@fn $how [] ['a] "The fetches: the wrapped callback's."
            fetches() -> &'a [$crate::fetch::Fetch]);
    };
    (@method $how:tt chief_only) => {
        $crate::callback::forward_methods!(@fn $how [] []
            "Whether it runs only on the chief: as the wrapped callback."
            chief_only() -> bool);
    };
    (@method $how:tt save_state) => {
        $crate::callback::forward_methods!(@fn $how [] []
            "The state saved in checkpoints: the wrapped callback's."
            save_state() -> $crate::error::Result<Option<::serde_json::Value>>);
    };
    (@method $how:tt load_state) => {
        $crate::callback::forward_methods!(@fn $how [mut] [] "Restore the state: the wrapped callback's."
            load_state(state: ::serde_json::Value) -> $crate::error::Result<()>);
    };
    (@method $how:tt step_events) => {
        $crate::callback::forward_methods!(@fn $how [] [] "The step hooks: the wrapped callback's."
            step_events() -> $crate::callback::StepEvents);
    };
    (@method $how:tt takes_after_batch) => {
        $crate::callback::forward_methods!(@fn $how [] []
            "Whether it takes after_batch in training: as the wrapped callback."
            takes_after_batch() -> bool);
    };
    (@method $how:tt takes_training_batches) => {
        $crate::callback::forward_methods!(@fn $how [] []
            "Whether it takes the events of a training step: as the wrapped callback."
            takes_training_batches() -> bool);
    };
    (@method $how:tt takes_validation_batches) => {
        $crate::callback::forward_methods!(@fn $how [] []
            "Whether it takes the batch events of a validation pass: as the wrapped callback."
            takes_validation_batches() -> bool);
    };
    (@method $how:tt wants_fetch) => {
        $crate::callback::forward_methods!(@fn $how [] []
            "Whether the next step's fetches are wanted: as the wrapped callback."
            wants_fetch(counters: &$crate::callback::Counters) -> bool);
    };
    (@fn (deref) [$($mut:tt)?] [$($lt:lifetime)?] $doc:literal
        $method:ident($($arg:ident: $ty:ty),*) -> $ret:ty) => {
        fn $method$(<$lt>)?(&$($lt)? $($mut)? self $(, $arg: $ty)*) -> $ret {
            (**self).$method($($arg),*)
        }
    };
    (@fn (field $field:ident) [$($mut:tt)?] [$($lt:lifetime)?] $doc:literal
        $method:ident($($arg:ident: $ty:ty),*) -> $ret:ty) => {
        fn $method$(<$lt>)?(&$($lt)? $($mut)? self $(, $arg: $ty)*) -> $ret {
            self.$field.$method($($arg),*)
        }
    };
    (@fn (decorated $decorator:ident $field:ident) [$($mut:tt)?] [$($lt:lifetime)?] $doc:literal
        $method:ident($($arg:ident: $ty:ty),*) -> $ret:ty) => {
        fn $method$(<$lt>)?(&$($lt)? $($mut)? self $(, $arg: $ty)*) -> $ret {
            self.$decorator.$method(&$($mut)? self.$field $(, $arg)*)
        }
    };
    (@fn (proxy $inner:ident) [$($mut:tt)?] [$($lt:lifetime)?] $doc:literal
        $method:ident($($arg:ident: $ty:ty),*) -> $ret:ty) => {
        #[doc = $doc]
        fn $method$(<$lt>)?(&$($lt)? $($mut)? self, inner: &$($lt)? $($mut)? $inner $(, $arg: $ty)*) -> $ret {
            inner.$method($($arg),*)
        }
    };
}
pub(crate) use forward_methods;
