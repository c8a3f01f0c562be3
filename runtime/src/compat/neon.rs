//! neon's names: what only a port of a neon program needs.
//!
//! - [`EarlyStop`]: neon's `EarlyStopCallback`, a stop decided by a function of the program's
//!   own over a state it keeps. The core's early stop is
//!   [`stop::EarlyStopping`](crate::stop::EarlyStopping), Keras's patience rule.
//!
//! neon's other names are aliases of core items: `neon_epoch` and `neon_minibatch` are
//! [`Context::epoch_index`](crate::callback::Context::epoch_index) and
//! [`Context::step_index`](crate::callback::Context::step_index), the `-eval` switch
//! [`cli::normalize_args`](crate::cli::normalize_args), the per-batch means of
//! `MultiLabelStats` [`mean_over_batches`](crate::inference::MultiLabelStats::mean_over_batches).

mod early_stop;

pub use early_stop::EarlyStop;
