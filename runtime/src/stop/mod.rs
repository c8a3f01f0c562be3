//! Early stopping: [`EarlyStopping`], the one early stop of the core (Keras's patience,
//! `min_delta`, baseline, warm-up, restoring the best weights; fastai's `EarlyStoppingCallback`
//! and Lightning's patience cases are its configurations); fastai's [`ShortEpochCallback`], which
//! cuts every epoch short. neon's stop decided by a function of the program's own is a
//! configuration of it, [`EarlyStopping::stop_when`] (`compat::neon::early_stop`).
//!
//! Both early stops read a monitored scalar from [`Monitors`](crate::state::Monitors) when triggered (every
//! epoch by default) and stop training with
//! [`Context::request_stop`](crate::callback::Context::request_stop): order them after the
//! callback that puts the scalar (`#[order(after = InferenceRunner)]`, or later in a tuple). Their
//! counters are callback state: a resumed run stops at the epoch an uninterrupted one would have.

mod early_stopping;
mod rule;
mod short_epoch;

pub use early_stopping::EarlyStopping;
pub use short_epoch::ShortEpochCallback;
pub(crate) use short_epoch::short_epoch_ends;

use serde_json::Value as Json;

use crate::error::{Error, Result};
use crate::state::parse_f64;

/// A usize field of a saved state.
pub(crate) fn state_u64(state: &Json, key: &str, owner: &str) -> Result<u64> {
    state
        .get(key)
        .and_then(Json::as_u64)
        .ok_or_else(|| Error::bad_state(format!("{owner}: the saved state has no number `{key}`: {state}")))
}

/// An optional float field of a saved state (`null` for none).
fn state_f64(state: &Json, key: &str, owner: &str) -> Result<Option<f64>> {
    match state.get(key) {
        None | Some(Json::Null) => Ok(None),
        Some(value) => parse_f64(value)
            .map(Some)
            .ok_or_else(|| Error::bad_state(format!("{owner}: the saved `{key}` {value} is not a number"))),
    }
}

/// A file or folder name made of the statistic's name: every character that is not a letter, a
/// digit, `-`, `_` or `.` becomes `_`.
pub(crate) fn file_safe(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect()
}
