//! What a callback declares it may fetch: a [`Fetch`] (an output's name and a [`FetchKind`]), and
//! the types a value is handed over as ([`FetchValue`]).

use std::borrow::Cow;

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
    /// [`Fetched::step`](super::Fetched::step) saying which step it belongs to.
    pub const fn deferred(name: &'static str) -> Self {
        Fetch { name: Cow::Borrowed(name), kind: FetchKind::Deferred }
    }
}
