//! The view a callback receives ([`Fetched`]): the values of one step, read by name or, through
//! the receiver's fetches resolved at setup, by position ([`Fetched::nth`]); and the types a
//! value is handed over as ([`FetchValue`]), each read out of a view.

use std::borrow::Cow;

use burn::tensor::{Tensor, TensorData};

use super::declare::{Fetch, FetchKind};
use super::outputs::OutputTensor;
use super::plan::FetchPlan;
use crate::error::{Error, Result};

/// The values fetched at one step, as handed to `after_step`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Fetched<'a> {
    plan: Option<&'a FetchPlan>,
    /// The slots of the callback these values are handed to, in the order of its `fetches()`,
    /// resolved once at setup (empty when the receiver is not known: then names are searched).
    own: &'a [u8],
    /// The slot that `host` / `device` read without a search (set by [`Fetched::nth`]).
    pinned: Option<u8>,
    /// Whether these are deferred values (the `fetched` event) rather than the step's own.
    deferred: bool,
}

impl<'a> Fetched<'a> {
    /// No values (a step at which nobody asked for anything).
    pub const fn none() -> Self {
        Fetched { plan: None, own: &[], pinned: None, deferred: false }
    }

    /// The values of `plan`: the current step's, or (`deferred`) the deferred values being
    /// delivered.
    pub(super) fn of(plan: &'a FetchPlan, deferred: bool) -> Self {
        Fetched { plan: Some(plan), own: &[], pinned: None, deferred }
    }

    /// The global step these values belong to (`global_step` after it): the current step in
    /// `after_step`, an earlier one for deferred values in `fetched`; 0 when nothing was fetched.
    pub fn step(&self) -> u64 {
        self.plan.map_or(0, |plan| plan.step(self.deferred))
    }

    /// Whether these are deferred values, delivered in the `fetched` event.
    pub fn is_deferred(&self) -> bool {
        self.deferred
    }

    /// The same values, as handed to the callback of flat index `callback`: its fetches are then
    /// read by position ([`Fetched::nth`]) instead of by name. Called by the trainer and by the
    /// sets' dispatch; costs an index.
    #[doc(hidden)]
    #[inline]
    pub fn for_callback(self, callback: usize) -> Self {
        match self.plan {
            Some(plan) => Fetched { own: plan.owned(callback), pinned: None, ..self },
            None => self,
        }
    }

    /// The values with the receiver's fetch number `k` (its position in the callback's
    /// `fetches()`, named `name`) resolved to its slot: what generated code reads a fetched
    /// parameter through, so that no name is searched at a step. Falls back to the search by
    /// name when the receiver is not known or the slot does not hold `name`.
    #[doc(hidden)]
    #[inline]
    pub fn nth(&self, k: usize, name: &str) -> Self {
        match (self.plan, self.own.get(k)) {
            (Some(plan), Some(&slot)) if plan.slot_name(slot) == name => {
                Fetched { pinned: Some(slot), ..*self }
            }
            _ => Fetched { pinned: None, ..*self },
        }
    }

    /// Whether the receiver's fetch number `k` (its position in the callback's `fetches()`) has
    /// a value here: what a generated deferred hook checks before its call, since one `fetched`
    /// delivery holds only what was asked for at that step.
    #[doc(hidden)]
    #[inline]
    pub fn holds(&self, k: usize) -> bool {
        match (self.plan, self.own.get(k)) {
            (Some(plan), Some(&slot)) => plan.filled(self.deferred) & (1 << slot) != 0,
            _ => false,
        }
    }

    /// The value `name`, handed over as `T`: `values.get::<f32>("cost")?`.
    pub fn get<T: FetchValue>(&self, name: &str) -> Result<T> {
        T::from_fetched(self, name)
    }

    /// The host copy of `name`: its values, flattened, and its shape (in `fetched`, the
    /// deferred copy).
    pub fn host(&self, name: &str) -> Result<(&'a [f32], &'a [usize])> {
        let plan = self.plan.ok_or_else(|| Self::nothing(name))?;
        let kind = if self.deferred { FetchKind::Deferred } else { FetchKind::Host };
        plan.host_values(self.pinned, name, kind)
    }

    /// The device tensor `name`.
    pub fn device(&self, name: &str) -> Result<&'a OutputTensor> {
        let plan = self.plan.ok_or_else(|| Self::nothing(name))?;
        plan.device_value(self.pinned, name)?.ok_or_else(|| Self::nothing(name))
    }

    fn nothing(name: &str) -> Error {
        Error::fetch(format!("`{name}` was not fetched at this step"))
    }
}

/// How a view of the plan's values is made: the current step's for `after_step`, the deferred
/// ones being delivered for `fetched`.
impl FetchPlan {
    /// A view of the current step's values.
    pub(crate) fn view(&self) -> Fetched<'_> {
        Fetched::of(self, false)
    }

    /// A view of the deferred values being delivered.
    pub(crate) fn deferred_view(&self) -> Fetched<'_> {
        Fetched::of(self, true)
    }
}

impl Fetch {
    /// A fetch of the kind `T` is handed over as: `Fetch::of::<f32>("cost")`.
    pub const fn of<T: FetchValue>(name: &'static str) -> Self {
        Fetch { name: Cow::Borrowed(name), kind: T::KIND }
    }
}

/// A type a fetched value can be handed over as.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be fetched from a training step",
    label = "not a fetchable type",
    note = "fetchable types: `f32`, `f64` (scalars), `Vec<f32>`, `TensorData` (copied to the host), \
            `Tensor<1>` .. `Tensor<4>` (stay on the device)"
)]
pub trait FetchValue: Sized {
    /// Whether the value is copied to the host or stays on the device.
    const KIND: FetchKind;

    /// Take the value named `name` out of this step's values.
    fn from_fetched(values: &Fetched<'_>, name: &str) -> Result<Self>;
}

impl FetchValue for f32 {
    const KIND: FetchKind = FetchKind::Host;

    fn from_fetched(values: &Fetched<'_>, name: &str) -> Result<Self> {
        let (data, shape) = values.host(name)?;
        match data {
            [value] => Ok(*value),
            _ => Err(Error::fetch(format!(
                "`{name}` has shape {shape:?}, not a scalar: fetch it as Vec<f32> or TensorData"
            ))),
        }
    }
}

impl FetchValue for f64 {
    const KIND: FetchKind = FetchKind::Host;

    fn from_fetched(values: &Fetched<'_>, name: &str) -> Result<Self> {
        f32::from_fetched(values, name).map(f64::from)
    }
}

impl FetchValue for Vec<f32> {
    const KIND: FetchKind = FetchKind::Host;

    fn from_fetched(values: &Fetched<'_>, name: &str) -> Result<Self> {
        values.host(name).map(|(data, _)| data.to_vec())
    }
}

impl FetchValue for TensorData {
    const KIND: FetchKind = FetchKind::Host;

    fn from_fetched(values: &Fetched<'_>, name: &str) -> Result<Self> {
        let (data, shape) = values.host(name)?;
        Ok(TensorData::new(data.to_vec(), shape.to_vec()))
    }
}

macro_rules! device_tensor_ranks {
    ($($rank:literal => $variant:ident),*) => {$(
        impl FetchValue for Tensor<$rank> {
            const KIND: FetchKind = FetchKind::Device;

            fn from_fetched(values: &Fetched<'_>, name: &str) -> Result<Self> {
                match values.device(name)? {
                    OutputTensor::$variant(tensor) => Ok(tensor.clone()),
                    other => Err(Error::fetch(format!(
                        "`{name}` is a tensor of rank {}, asked for as Tensor<{}>",
                        other.rank(),
                        $rank
                    ))),
                }
            }
        }
    )*};
}

device_tensor_ranks!(1 => Rank1, 2 => Rank2, 3 => Rank3, 4 => Rank4);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fetch::Fetch;

    /// Two callbacks: #0 fetches `a` and `b`, #1 fetches `b` (the slot #0 declared).
    fn plan() -> FetchPlan {
        let mut plan = FetchPlan::default();
        let first = [
            plan.declare(&Fetch::host("a"), "first").unwrap(),
            plan.declare(&Fetch::host("b"), "first").unwrap(),
        ];
        plan.own(0, &first);
        let second = [plan.declare(&Fetch::host("b"), "second").unwrap()];
        plan.own(1, &second);
        plan
    }

    #[test]
    fn a_callbacks_fetches_are_resolved_to_its_slots_at_setup() {
        let plan = plan();
        assert_eq!(plan.view().for_callback(0).nth(0, "a").pinned, Some(0));
        assert_eq!(plan.view().for_callback(0).nth(1, "b").pinned, Some(1));
        // The second callback's first fetch is the slot the first callback declared for `b`.
        assert_eq!(plan.view().for_callback(1).nth(0, "b").pinned, Some(1));
    }

    #[test]
    fn an_unknown_receiver_or_another_name_falls_back_to_the_name() {
        let plan = plan();
        // No receiver, a position past the callback's fetches, a name the slot does not hold,
        // a callback without fetches: no slot is pinned, `host` / `device` search by name.
        assert_eq!(plan.view().nth(0, "a").pinned, None);
        assert_eq!(plan.view().for_callback(1).nth(1, "b").pinned, None);
        assert_eq!(plan.view().for_callback(0).nth(0, "b").pinned, None);
        assert_eq!(plan.view().for_callback(7).nth(0, "a").pinned, None);
        assert_eq!(Fetched::none().for_callback(0).nth(0, "a").pinned, None);
    }
}
