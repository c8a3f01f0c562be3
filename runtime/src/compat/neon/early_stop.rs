//! neon's [`EarlyStop`]: a function of the user's decides when to stop.

use std::borrow::Cow;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value as Json, json};

use crate::callback::{Callback, Context};
use crate::error::{Error, Result};
use crate::state::Watched;
use crate::stop::state_u64;

/// Stops training when a function of the user's says so: neon's `EarlyStopCallback`, whose one
/// public path is `compat::neon::EarlyStop` (the core's early stop is
/// [`EarlyStopping`](crate::stop::EarlyStopping)).
///
/// At each trigger (every epoch by default) where the monitored statistic has a new value, the
/// function receives its state and the value, and returns the new state and whether to stop:
/// `stop_func(state, value) -> (state, stop)`, as in neon. The state starts as `S::default()`
/// (neon's `None`; or give one with [`with_state`](EarlyStop::with_state)) and is callback state:
/// saved in checkpoints, so it must be serializable, and restored on resume.
///
/// neon reads the validation loss its `LossCallback` computed; here the statistic is named. A
/// trigger where the statistic has no new value does not call the function, as neon skips the
/// epochs its `LossCallback` did not evaluate (`--eval_freq 2`: epoch 1), including those before
/// its first value; a run at whose end it was never put logs a warning naming the scalars there
/// are (a misspelt name; [`EarlyStopping`](crate::stop::EarlyStopping) fails at its first trigger). The stop reason (in
/// [`Outcome::Stopped`](crate::callback::Outcome)) gives the value that triggered it (neon logs it).
///
/// ```
/// use burn_stoker::compat::neon::EarlyStop;
///
/// // Stop once the validation cost has risen twice in a row; the state is (previous, rises).
/// let stop = EarlyStop::new("validation_cost", |(previous, rises): (Option<f64>, u32), cost: f64| {
///     let rises = if previous.is_some_and(|p| cost > p) { rises + 1 } else { 0 };
///     ((Some(cost), rises), rises >= 2)
/// });
/// // Stop as soon as the error is under 5%.
/// let target = EarlyStop::new("validation_error", |(), error: f64| ((), error < 0.05));
/// # let _ = (stop, target);
/// ```
#[doc(alias = "EarlyStopCallback")]
pub struct EarlyStop<S, F> {
    watched: Watched,
    state: Option<S>,
    stop_func: F,
}
crate::kind::kind!(EarlyStop<S, F>);

impl<S: std::fmt::Debug, F> std::fmt::Debug for EarlyStop<S, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EarlyStop")
            .field("monitor", &self.watched.name)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl<S: Default, F: FnMut(S, f64) -> (S, bool)> EarlyStop<S, F> {
    /// Call `stop_func(state, value)` with each new value of the monitored scalar `monitor`.
    pub fn new(monitor: impl Into<String>, stop_func: F) -> Self {
        EarlyStop { watched: Watched::new(monitor), state: Some(S::default()), stop_func }
    }
}

impl<S, F> EarlyStop<S, F> {
    /// Start from `state` instead of `S::default()`.
    pub fn with_state(mut self, state: S) -> Self {
        self.state = Some(state);
        self
    }
    /// The function's current state.
    pub fn state(&self) -> Option<&S> {
        self.state.as_ref()
    }
    /// The watched statistic.
    pub fn monitor(&self) -> &str {
        &self.watched.name
    }
    fn label(&self) -> String {
        crate::kind::detailed::<Self>(&self.watched.name).into_owned()
    }
}

impl<M, S, F> Callback<M> for EarlyStop<S, F>
where
    S: Serialize + DeserializeOwned,
    F: FnMut(S, f64) -> (S, bool),
{
    fn name(&self) -> Cow<'static, str> {
        Cow::Owned(self.label())
    }

    fn save_state(&self) -> Result<Option<Json>> {
        // The state itself (`S`, not `Option<S>`: a unit state `()` is `null` either way, and
        // `null` read back as an `Option<()>` was `None`, the state lost).
        let state = serde_json::to_value(self.state.as_ref())
            .map_err(|e| Error::context(format!("{}: saving the stop function's state", self.label()), e))?;
        Ok(Some(json!({ "state": state, "seen": self.watched.seen })))
    }

    fn load_state(&mut self, state: Json) -> Result<()> {
        let owner = self.label();
        self.watched.seen = state_u64(&state, "seen", &owner)? as usize;
        let saved = state.get("state").cloned().unwrap_or(Json::Null);
        let loaded: S = serde_json::from_value(saved).map_err(|e| {
            Error::bad_state_from(format!("{owner}: loading the stop function's state: {e}"), e)
        })?;
        self.state = Some(loaded);
        Ok(())
    }

    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let owner = self.label();
        let Some(value) = self.watched.fresh_if_put(ctx.monitors_ref()) else { return Ok(()) };
        let state = self.state.take().ok_or_else(|| {
            Error::msg(format!("{owner}: the stop function's state was lost (it panicked earlier)"))
        })?;
        let (state, stop) = (self.stop_func)(state, value);
        self.state = Some(state);
        if stop {
            ctx.request_stop(format!(
                "{owner}: the stop function triggered at {} = {value}",
                self.watched.name
            ));
        }
        Ok(())
    }

    fn after_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.watched.warn_if_never_put(ctx.monitors_ref(), &self.label());
        Ok(())
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
        let mut stop = EarlyStop::new("val_loss", |(), value: f64| ((), value < 0.1));
        let saved = Callback::<()>::save_state(&stop).unwrap().unwrap();
        Callback::<()>::load_state(&mut stop, saved).unwrap();
        assert_eq!(stop.state(), Some(&()));
        let mut rises = EarlyStop::new("val_loss", |n: u32, _: f64| (n + 1, false)).with_state(3);
        let saved = Callback::<()>::save_state(&rises).unwrap().unwrap();
        assert_eq!(saved["state"], 3, "the state itself, as before");
        rises.state = None;
        Callback::<()>::load_state(&mut rises, saved).unwrap();
        assert_eq!(rises.state(), Some(&3));
    }
}
