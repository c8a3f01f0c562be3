//! # stoker
//!
//! Declared training callbacks and a training loop on [burn] that costs nothing per step beyond
//! burn's own work.
//!
//! Everything other than the training iterations happens in callbacks ([`Callback`]): validation
//! ([`InferenceRunner`]), checkpoints ([`ModelSaver`]), schedules
//! ([`ScheduledHyperParamSetter`]), monitors (TensorBoard, `stats.json`, the terminal), progress.
//! Callbacks are declared with attributes ([`callback`](macro@callback),
//! [`fetch`](macro@fetch), [`order`](macro@order), [`derive(Callbacks)`](derive@Callbacks)) or
//! written as [`Callback`] implementations. The [`Trainer`] runs them in tensorpack's lifecycle;
//! values computed by a step reach the callbacks that asked for them in one device-to-host
//! transfer ([`fetch`](mod@fetch)).
//!
//! ## One path per item
//!
//! Every public item has exactly one path: the public module of its concept
//! (`burn_stoker::trainer::Trainer`, `burn_stoker::callback::Context`,
//! `burn_stoker::monitor::TensorBoardWriter`, `burn_stoker::state::Monitors`, ...). The files a
//! concept module is split into are private; the module re-exports their items once
//! (`burn_stoker::monitor::CsvWriter`, not `monitor::csv::CsvWriter`). The crate root holds the
//! modules and only these items: [`Error`] and [`Result`] (a callback returns
//! `burn_stoker::Result<()>`) and the four macros. The monitor store, the hyper-parameters and the
//! keep policy live in [`state`] alone. [`prelude`] is not a second home: it is a convenience for
//! `use burn_stoker::prelude::*;`.
//!
//! ## Features
//!
//! Each item that needs a feature says so on docs.rs. The features, from `Cargo.toml`:
//!
#![doc = document_features::document_features!()]
//! ## Messages
//!
//! Every message of the library (a warning, a note that a run resumes from a checkpoint) is a
//! [`log`](https://docs.rs/log) record, its target the module that says it
//! (`burn_stoker::saver::checkpoint`): a program that installs a logger (`env_logger`,
//! `tracing-subscriber`, burn-train's) receives them all and stoker prints nothing itself; without
//! one, they are lines on stderr (`stoker: ...`), which
//! [`logging::stderr_fallback`] or `STOKER_LOG=off` silences. Where these docs say a callback
//! writes a line "on stderr", it is such a record. The callbacks whose job is to print (the scalar
//! printer, the progress bar, the summaries) print, and are removed like any callback.
//!
//! [`Callback`]: callback::Callback
//! [`InferenceRunner`]: inference::InferenceRunner
//! [`ModelSaver`]: saver::ModelSaver
//! [`ScheduledHyperParamSetter`]: param::ScheduledHyperParamSetter
//! [`Trainer`]: trainer::Trainer
#![warn(missing_docs)]
// On docs.rs (`--cfg docsrs`): every item behind a feature is labelled with it.
#![cfg_attr(docsrs, feature(doc_cfg))]

// The macros generate `::burn_stoker::...` paths; this lets the runtime use its own macros.
extern crate self as burn_stoker;

#[doc(hidden)]
pub mod bench_support;
#[cfg(feature = "burn-train")]
pub mod burn_train;
pub mod callback;
#[cfg(feature = "cli")]
pub mod cli;
pub mod compat;
pub mod debug;
pub mod device;
mod error;
pub mod fetch;
pub mod inference;
pub mod kind;
pub mod logging;
pub mod modify;
pub mod monitor;
pub mod param;
pub mod saver;
mod signal;
pub mod state;
pub mod stop;
pub mod track;
pub mod trainer;
pub mod trigger;
pub mod world;

pub use error::{BoxError, CheckpointError, ConfigError, Error, LogDirError, Result, WorldError};

/// Examples of [`derive@Callbacks`]:
///
/// ```
/// use burn_stoker::prelude::*;
///
/// #[callback(on = trigger)]
/// fn checkpoint_note<M>(ctx: &mut Context<'_, M>) {
///     ctx.monitors().put_text("note", "epoch done");
/// }
///
/// #[derive(Callbacks)]
/// struct Training {
///     saver: ModelSaver,
///     #[every_k_epochs(5)]
///     #[order(after = ModelSaver)]
///     note: CheckpointNote,
/// }
///
/// let _set = Training { saver: ModelSaver::new(3), note: CheckpointNote };
/// ```
pub use burn_stoker_macros::Callbacks;
/// Examples of [`macro@callback`], run as this crate's doc tests (the macro's own documentation is
/// its reference):
///
/// ```
/// use burn_stoker::prelude::*;
///
/// #[callback(on = trigger, every_k_epochs = 2)]
/// fn report_lr<M>(ctx: &mut Context<'_, M>) {
///     let lr = ctx.learning_rate();
///     ctx.monitors().put_scalar("lr", lr);
/// }
///
/// let _callback: ReportLr = ReportLr;
/// ```
///
/// ```
/// use burn_stoker::prelude::*;
///
/// #[derive(Default, serde::Serialize, serde::Deserialize)]
/// struct StepCount(u64);
///
/// #[callback(state)]
/// impl StepCount {
///     #[on(trigger_step)]
///     fn count(&mut self) {
///         self.0 += 1;
///     }
///
///     #[on(trigger)]
///     fn report<M>(&mut self, ctx: &mut Context<'_, M>) {
///         ctx.monitors().put_scalar("steps", self.0 as f64);
///     }
/// }
/// ```
pub use burn_stoker_macros::callback;
/// Examples of [`macro@fetch`]:
///
/// ```
/// use burn_stoker::prelude::*;
///
/// #[callback(on = after_step, every_k_steps = 50)]
/// #[fetch("loss", "accuracy")]
/// fn watch(loss: f32, accuracy: f64) -> Flow {
///     if loss.is_finite() && accuracy >= 0.0 { Flow::Continue } else { Flow::Stop("diverged".into()) }
/// }
/// ```
///
/// A deferred fetch (`deferred` in the list) is read back without the step waiting for it; the
/// function runs when the values arrive, after a later step:
///
/// ```
/// use burn_stoker::prelude::*;
///
/// #[callback(on = after_step, every_k_steps = 10)]
/// #[fetch("loss", deferred)]
/// fn log_loss<M>(loss: f32, ctx: &mut Context<'_, M>) {
///     ctx.monitors().put_scalar("loss_every_10", f64::from(loss));
/// }
/// ```
pub use burn_stoker_macros::fetch;
/// Examples of [`macro@order`]:
///
/// ```
/// use burn_stoker::prelude::*;
///
/// #[callback(on = trigger)]
/// #[order(after = InferenceRunner)]
/// fn after_validation<M>(ctx: &mut Context<'_, M>) {
///     let _ = ctx.monitors_ref().latest("validation_error");
/// }
///
/// /// Checks the loss before the callbacks at the default order 0 see it.
/// #[callback(on = after_step)]
/// #[order(-9)]
/// #[fetch("loss")]
/// fn check_loss(loss: f32) -> Flow {
///     if loss.is_finite() { Flow::Continue } else { Flow::CancelFit }
/// }
/// ```
pub use burn_stoker_macros::order;

/// What a training program usually needs, for `use burn_stoker::prelude::*;`.
///
/// A convenience, not a second home: each item's one path is its module's
/// (`burn_stoker::trainer::Trainer`).
pub mod prelude {
    pub use crate::{
        Callbacks, callback, callback::Callback, callback::CallbackExt, callback::Callbacks,
        callback::Context, callback::Counters, callback::Flow, callback::Named, callback::Order,
        callback::Outcome, fetch, fetch::Fetch, fetch::Fetched, fetch::Outputs,
        inference::ClassificationError, inference::InferenceRunner, inference::ScalarStats,
        kind::CallbackKind, order, param::HumanHyperParamSetter, param::HyperParamSetterWithFunc,
        param::LrSchedulerSetter, param::ReduceLrOnPlateau, param::ScheduledHyperParamSetter,
        param::StatMonitorParamSetter, saver::MaxSaver, saver::MinSaver, saver::ModelSaver,
        state::SharedParam, stop::EarlyStopping, track::ProgressBar, trainer::DefaultCallbacks,
        trainer::LogDirPolicy, trainer::Step, trainer::TrainError, trainer::TrainReport, trainer::Trainer,
        trigger::EnableCallbackIf, trigger::PeriodicCallback, trigger::PeriodicTrigger,
    };
}

/// What the macros' generated code refers to. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::callback::set::SealedCallbacks;
    pub use crate::callback::state::StateCallback;
    pub use crate::callback::{
        Callback, CallbackInfo, CallbackReturn, Callbacks, Context, Counters, Event, Order, Period, StateOp,
        StepBatch, StepEvents, StepGradients, StepLoss, StepPred, counters_before_step, deliver,
    };
    pub use crate::error::{Error, Result};
    pub use crate::fetch::{Fetch, FetchValue, Fetched};
    pub use crate::kind::{CallbackField, CallbackKind};
    pub use crate::trigger::generated::{epoch_due, field_gate, field_wants, step_due};
    pub use serde_json::Value as StateValue;

    pub use std::borrow::Cow;
    pub use std::option::Option::{self, None, Some};
    pub use std::result::Result::{Err, Ok};

    /// Named by every expansion of burn-stoker-macros 0.1 (`const _: () = ...;`): a pair of
    /// crates of other versions fails to compile with an error naming this item, which says what
    /// each needs. Its name follows this crate's version (a test checks it).
    #[allow(non_upper_case_globals)]
    pub const burn_stoker_macros_0_1_needs_burn_stoker_0_1: () = ();

    #[cfg(test)]
    mod tests {
        /// The marker's name is this crate's version's, as the macros crate of the same version
        /// writes it.
        #[test]
        fn the_version_marker_names_this_crates_version() {
            let (major, minor) = (env!("CARGO_PKG_VERSION_MAJOR"), env!("CARGO_PKG_VERSION_MINOR"));
            let expected = format!("burn_stoker_macros_{major}_{minor}_needs_burn_stoker_{major}_{minor}");
            let _: () = super::burn_stoker_macros_0_1_needs_burn_stoker_0_1;
            assert_eq!(stringify!(burn_stoker_macros_0_1_needs_burn_stoker_0_1), expected);
        }
    }
}
