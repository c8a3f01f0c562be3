//! Sets of callbacks ([`Callbacks`]): one callback, tuples, `Vec`s, `Option`s, dispatched
//! statically by a flat index.

use std::borrow::Cow;

use super::base::{Callback, deliver};
use super::context::Context;
use super::counters::Counters;
use super::event::Event;
use super::order::Order;
use super::step::StepEvents;
use crate::error::Result;
use crate::fetch::Fetch;

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
    /// The events inside a step it takes ([`Callback::step_events`]).
    pub step_events: StepEvents,
    /// Whether it takes `after_batch` after a training step ([`Callback::takes_after_batch`]).
    pub takes_after_batch: bool,
    /// Whether it takes the events of a training step ([`Callback::takes_training_batches`]).
    pub takes_training_batches: bool,
    /// Whether it takes the batch events of a validation pass
    /// ([`Callback::takes_validation_batches`]).
    pub takes_validation_batches: bool,
}

/// What [`Callbacks::state`] does with one callback's checkpointed state.
#[derive(Debug, Clone)]
#[doc(hidden)]
pub enum StateOp {
    /// Return the state to save ([`Callback::save_state`]).
    Save,
    /// Restore this saved state ([`Callback::load_state`]).
    Load(serde_json::Value),
}

/// Marks a set of callbacks made of one [`Callback`] (see [`Callbacks`]).
#[derive(Debug)]
pub enum OneCallback {}

/// What seals [`Callbacks`]: implemented here for every callback, tuples, `Vec`s, `Option`s and
/// `()`, in the crate for its wrappers of sets (`track::Timed`), and by `#[derive(Callbacks)]`
/// (through `__private`), so that no set is written by hand and the trainer's hidden members of
/// `Callbacks` stay its own.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a set of callbacks: `Callbacks` is not implemented by hand",
    label = "not a set of callbacks",
    note = "implement `burn_stoker::callback::Callback<M>` for a callback (or use `#[callback]`), and `#[derive(Callbacks)]` for a struct of callbacks; tuples, `Vec`s and `Option`s of sets are sets"
)]
pub trait SealedCallbacks<M, Marker> {}

impl<M, C: Callback<M>> SealedCallbacks<M, OneCallback> for C {}
impl<M, K, C: Callbacks<M, K>> SealedCallbacks<M, Option<K>> for Option<C> {}
impl<M, K, C: Callbacks<M, K>> SealedCallbacks<M, Vec<K>> for Vec<C> {}
impl<M> SealedCallbacks<M, ()> for () {}

/// A set of callbacks, addressed by a flat index `0..len()`, dispatched statically.
///
/// Every [`Callback`] is a set of one; tuples (up to 16), `Vec`s and `Option`s of sets are sets;
/// `#[derive(Callbacks)]` makes a struct a set. The trainer orders the members of the whole set
/// once at setup, then delivers each event to them in that order.
///
/// `Marker` tells the kinds of sets apart (a single callback is [`OneCallback`], a tuple the tuple of
/// its members' markers...). It is always inferred; code generic over sets carries it along as a
/// type parameter: `fn run<C: Callbacks<M, K>, K>(callbacks: C)`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a callback for a model of type `{M}`",
    label = "not a callback for `{M}`",
    note = "a callback implements `burn_stoker::callback::Callback<M>` (by hand, or with `#[callback]` on a function or an impl block); tuples, `Vec`s, `Option`s of callbacks and `#[derive(Callbacks)]` structs are sets of callbacks",
    note = "a callback whose context names a model (`Context<'_, Mlp>`, `Context<'_, impl Module>`) is a callback only for the models that fit; a tuple or a `#[derive(Callbacks)]` struct is a set only if every member is, and every field's type must be a callback"
)]
pub trait Callbacks<M, Marker>: SealedCallbacks<M, Marker> {
    /// Every member has this many callbacks, when that is known at compile time.
    #[doc(hidden)]
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
    #[doc(hidden)]
    fn state(&mut self, index: usize, op: StateOp) -> Result<Option<serde_json::Value>>;
    /// Deliver `event` to every callback of the set in registration order, the first having
    /// flat index `base`; `cursor` is set to each callback's flat index before it runs (so that an
    /// error or a panic can be attributed). Stops at the first error; after a callback asked
    /// something of the loop at once (a cancel, a validation pass: [`Context::cancel`]), the
    /// callbacks after it are skipped, `cursor` left on it. The trainer uses this when the
    /// resolved order is the registration order: one pass, no index search.
    #[doc(hidden)]
    #[inline]
    fn dispatch_all(
        &mut self,
        base: usize,
        event: Event<'_>,
        ctx: &mut Context<'_, M>,
        cursor: &mut usize,
    ) -> Result<()> {
        for index in 0..self.len() {
            if ctx.raised() {
                break;
            }
            *cursor = base + index;
            self.dispatch(index, event, ctx)?;
        }
        Ok(())
    }
}

impl<M, C: Callback<M>> Callbacks<M, OneCallback> for C {
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
            step_events: self.step_events(),
            takes_after_batch: self.takes_after_batch(),
            takes_training_batches: self.takes_training_batches(),
            takes_validation_batches: self.takes_validation_batches(),
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
        if ctx.raised() {
            return Ok(());
        }
        *cursor = base;
        deliver(self, event.for_callback(base), ctx)
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
        impl<M, $($marker, $name: Callbacks<M, $marker>),+> SealedCallbacks<M, ($($marker,)+)>
            for ($($name,)+)
        {
        }

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
