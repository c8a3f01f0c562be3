//! A callback's state in checkpoints: what `#[callback(state)]` generates its
//! `save_state` / `load_state` with.

use crate::error::{Error, Result};

/// `#[callback(state)]` needs a serializable callback. Generated code calls these methods
/// through the trait (`<Self as StateCallback>::save`), all at the `state` token, so that a
/// type that is not serializable gets one error per missing derive, not one per call.
#[diagnostic::on_unimplemented(
    message = "`#[callback(state)]` needs `{Self}` to be serializable",
    label = "`{Self}` does not implement serde's `Serialize` and `Deserialize`",
    note = "add `#[derive(serde::Serialize, serde::Deserialize)]` to `{Self}`, or remove `state`"
)]
pub trait StateCallback {
    /// The value as JSON.
    fn save(&self) -> Result<serde_json::Value>;
    /// Replace the value with the state read from JSON.
    fn load(&mut self, state: serde_json::Value) -> Result<()>;
}

impl<T: serde::Serialize + serde::de::DeserializeOwned> StateCallback for T {
    fn save(&self) -> Result<serde_json::Value> {
        serde_json::to_value(self).map_err(|e| Error::context("saving a callback's state", e))
    }
    fn load(&mut self, state: serde_json::Value) -> Result<()> {
        *self = serde_json::from_value(state).map_err(|e| Error::context("loading a callback's state", e))?;
        Ok(())
    }
}
