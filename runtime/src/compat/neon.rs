//! neon's names: what a port of a neon program reaches for.
//!
//! - [`early_stop`]: neon's `EarlyStopCallback(stop_func)`, the core's
//!   [`EarlyStopping`] configured with [`stop_when`](EarlyStopping::stop_when): a stop decided
//!   by a function of the program's own over a state it keeps.
//!
//! neon's other names are aliases of core items: `neon_epoch` and `neon_minibatch` are
//! [`Context::epoch_index`](crate::callback::Context::epoch_index) and
//! [`Context::step_index`](crate::callback::Context::step_index), the `-eval` switch
//! [`cli::normalize_args`](crate::cli::normalize_args), the per-batch means of
//! `MultiLabelStats` [`mean_over_batches`](crate::inference::MultiLabelStats::mean_over_batches).

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::stop::EarlyStopping;

/// neon's `EarlyStopCallback(stop_func)`: stop when `stop_func(state, value) -> (state, stop)`
/// says so, `value` each new value of the monitored scalar `monitor` (neon reads its
/// `LossCallback`'s loss; here the statistic is named). The state starts as `S::default()`
/// (neon's `None`) and is saved in checkpoints. It is
/// `EarlyStopping::new(monitor).stop_when(stop_func)`: see
/// [`EarlyStopping::stop_when`] for what else applies.
///
/// ```
/// use burn_stoker::compat::neon::early_stop;
///
/// // Stop once the validation cost has risen twice in a row; the state is (previous, rises).
/// let stop = early_stop("validation_cost", |(previous, rises): (Option<f64>, u32), cost: f64| {
///     let rises = if previous.is_some_and(|p| cost > p) { rises + 1 } else { 0 };
///     ((Some(cost), rises), rises >= 2)
/// });
/// # let _ = stop;
/// ```
#[doc(alias = "EarlyStopCallback")]
#[doc(alias = "EarlyStop")]
pub fn early_stop<S, F>(monitor: impl Into<String>, stop_func: F) -> EarlyStopping
where
    S: Default + Serialize + DeserializeOwned + Send + 'static,
    F: FnMut(S, f64) -> (S, bool) + Send + 'static,
{
    EarlyStopping::new(monitor).stop_when(stop_func)
}
