//! What a callback declares it may fetch: a [`Fetch`] (an output's name and a [`FetchKind`]), and
//! the types a value is handed over as ([`FetchValue`]).

use std::borrow::Cow;

use burn::tensor::{Tensor, TensorData};

use super::outputs::OutputTensor;
use super::view::Fetched;
use crate::error::{Error, Result};

/// Where a fetched value is handed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FetchKind {
    /// Copied to the host (f32, f64, `Vec<f32>`, `TensorData`), one transfer per step for all,
    /// handed to `after_step` of the same step.
    Host,
    /// Handed over as a device tensor, no transfer.
    Device,
    /// Copied to the host without stopping the step: handed to the
    /// [`fetched`](crate::callback::Callback::fetched) event of a later step (see the
    /// [module](mod@crate::fetch)).
    Deferred,
}

impl FetchKind {
    /// The deferred form of a host value's kind: what `#[fetch(..., deferred)]` declares. A
    /// device tensor is never read back, so it cannot be deferred: a `static` of fetches that
    /// asks for one fails to compile with this message.
    pub const fn deferred(self) -> FetchKind {
        match self {
            FetchKind::Host | FetchKind::Deferred => FetchKind::Deferred,
            FetchKind::Device => panic!(
                "a device tensor (`Tensor<N>`) cannot be a deferred fetch: it is never read back; fetch it as f32, f64, Vec<f32> or TensorData, or drop `deferred`"
            ),
        }
    }
}

/// One value a callback may ask for: a step output's name and where it wants it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetch {
    /// The output's name, as the step puts it.
    pub name: Cow<'static, str>,
    /// Host copy or device tensor.
    pub kind: FetchKind,
}

impl Fetch {
    /// A value copied to the host.
    pub const fn host(name: &'static str) -> Self {
        Fetch { name: Cow::Borrowed(name), kind: FetchKind::Host }
    }

    /// A tensor that stays on the device.
    pub const fn device(name: &'static str) -> Self {
        Fetch { name: Cow::Borrowed(name), kind: FetchKind::Device }
    }

    /// A value copied to the host without stopping the step: delivered to the callback's
    /// [`fetched`](crate::callback::Callback::fetched) event at a later step, with
    /// [`Fetched::step`] saying which step it belongs to.
    pub const fn deferred(name: &'static str) -> Self {
        Fetch { name: Cow::Borrowed(name), kind: FetchKind::Deferred }
    }

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
            _ => Err(Error::Fetch(format!(
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
                    other => Err(Error::Fetch(format!(
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
