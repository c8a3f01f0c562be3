//! The training loop: burn's step wrapped in tensorpack's callback lifecycle, with checkpoints,
//! resume and graceful interrupts.
//!
//! One file per concept, as burn-train splits its learner:
//! - `data`: what batches come from ([`TrainData`], [`BatchIter`]);
//! - `step`: what the user's step sees ([`Step`]), what a step is ([`TrainingStep`]) and how one
//!   step runs;
//! - `defaults`: the callbacks a trainer starts with ([`DefaultCallbacks`]);
//! - `report`: what a run returns ([`TrainReport`], [`TrainError`]; why it ended is a
//!   [`Outcome`](crate::callback::Outcome));
//! - `summary`: what the run did, in a few lines ([`TrainSummary`], printed by
//!   [`TrainSummaryPrinter`]);
//! - `builder`: the [`Trainer`] and its settings;
//! - `run`: [`Trainer::train`], a run's state, its setup and teardown;
//! - `main_loop`: the epochs, the steps and the boundaries between them;
//! - `resume`, `stop_handle`: checkpoints read back, the stop asked from outside (SIGINT and SIGTERM are `crate::signal`'s);
//! - `lock`, `log_dir`: one run at a time in a log directory, and what a fresh run does with an
//!   earlier one ([`LogDirPolicy`]).

mod builder;
mod data;
mod defaults;
mod lock;
mod log_dir;
mod main_loop;
mod report;
mod resume;
mod run;
mod step;
mod stop_handle;
mod summary;
mod world;

pub use builder::{DEFERRED_READ_INTERVAL, Trainer};
pub use data::{BatchIter, TrainData, VecBatches};
pub use defaults::DefaultCallbacks;
pub use log_dir::LogDirPolicy;
pub use report::{TrainError, TrainReport};
pub use step::{LossFn, Step, StepOutput, TrainingStep};
pub use stop_handle::StopHandle;
pub use summary::{BestValue, ScalarSummary, TrainSummary, TrainSummaryPrinter};

pub(crate) use run::Run;
