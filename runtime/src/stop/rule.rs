//! A stop rule of the program's own, [`EarlyStopping::stop_when`](super::EarlyStopping::stop_when):
//! neon's `stop_func(state, value) -> (state, stop)`, its state kept in checkpoints.

use std::any::Any;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value as Json;

use crate::error::{Error, Result};

/// A function that decides from each new value whether to stop, with the state it keeps.
pub(super) trait StopRule: Send {
    /// Whether to stop, given the statistic's new `value`.
    fn decide(&mut self, value: f64, owner: &str) -> Result<bool>;
    /// The state, as saved in checkpoints.
    fn save(&self, owner: &str) -> Result<Json>;
    /// Restore what [`save`](Self::save) saved.
    fn load(&mut self, saved: Json, owner: &str) -> Result<()>;
    /// The state, for [`EarlyStopping::rule_state`](super::EarlyStopping::rule_state).
    fn state(&self) -> Option<&dyn Any>;
}

/// `function(state, value) -> (state, stop)` and its state (`None` only while the function runs,
/// or after it panicked).
pub(super) struct FunctionRule<S, F> {
    pub(super) state: Option<S>,
    pub(super) function: F,
}

impl<S, F> StopRule for FunctionRule<S, F>
where
    S: Serialize + DeserializeOwned + Send + 'static,
    F: FnMut(S, f64) -> (S, bool) + Send,
{
    fn decide(&mut self, value: f64, owner: &str) -> Result<bool> {
        let state = self.state.take().ok_or_else(|| {
            Error::msg(format!("{owner}: the stop function's state was lost (it panicked earlier)"))
        })?;
        let (state, stop) = (self.function)(state, value);
        self.state = Some(state);
        Ok(stop)
    }

    fn save(&self, owner: &str) -> Result<Json> {
        // The state itself (`S`, not `Option<S>`: a unit state `()` is `null` either way, and
        // `null` read back as an `Option<()>` was `None`, the state lost).
        serde_json::to_value(self.state.as_ref())
            .map_err(|e| Error::context(format!("{owner}: saving the stop function's state"), e))
    }

    fn load(&mut self, saved: Json, owner: &str) -> Result<()> {
        let loaded: S = serde_json::from_value(saved).map_err(|e| {
            Error::bad_state_from(format!("{owner}: loading the stop function's state: {e}"), e)
        })?;
        self.state = Some(loaded);
        Ok(())
    }

    fn state(&self) -> Option<&dyn Any> {
        self.state.as_ref().map(|s| s as &dyn Any)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A unit state (`()`, neon's `None` kept by a function that needs none) survives a
    /// checkpoint: it was saved as `null`, read back as an `Option<()>` of `None`, and the resumed
    /// run failed at its next value with "the stop function's state was lost".
    #[test]
    fn a_unit_state_survives_save_and_load() {
        let mut unit = FunctionRule { state: Some(()), function: |(), value: f64| ((), value < 0.1) };
        let saved = unit.save("test").unwrap();
        unit.load(saved, "test").unwrap();
        assert_eq!(unit.state().and_then(|s| s.downcast_ref::<()>()), Some(&()));
        let mut rises = FunctionRule { state: Some(3u32), function: |n: u32, _: f64| (n + 1, false) };
        let saved = rises.save("test").unwrap();
        assert_eq!(saved, 3, "the state itself");
        rises.state = None;
        rises.load(saved, "test").unwrap();
        assert_eq!(rises.state().and_then(|s| s.downcast_ref::<u32>()), Some(&3));
        assert!(!rises.decide(1.0, "test").unwrap());
        assert_eq!(rises.state().and_then(|s| s.downcast_ref::<u32>()), Some(&4));
    }
}
