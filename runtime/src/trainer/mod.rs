//! The training loop: burn's step wrapped in tensorpack's callback lifecycle, with checkpoints,
//! resume and graceful interrupts.
//!
//! One file per concept, as burn-train splits its learner:
//! - `data`: what batches come from ([`TrainData`], [`BatchIter`]);
//! - `step`: what the user's step sees ([`Step`]) and what a step is ([`TrainingStep`]);
//! - `defaults`: the callbacks a trainer starts with ([`DefaultCallbacks`]);
//! - `report`: what a run returns ([`TrainReport`], [`TrainError`]; why it ended is a
//!   [`Outcome`](crate::callback::Outcome));
//! - `summary`: what the run did, in a few lines ([`TrainSummary`], printed by
//!   [`TrainSummaryPrinter`]);
//! - `builder`: the [`Trainer`] and its settings; the stop asked from outside
//!   ([`StopHandle`]; SIGINT and SIGTERM are the crate's `signal` module's);
//! - `lock`, `log_dir`: one run at a time in a log directory, and what a fresh run does with an
//!   earlier one ([`LogDirPolicy`]); `saver_dirs`: the same for a `ModelSaver`'s own
//!   `checkpoint_dir`;
//! - a run's owned parts: `dispatch` (the callbacks, their names and order, and how an event
//!   reaches them), `fetches` (who asked for which value at this step), `restore` (a checkpoint
//!   read back), gathered in `run` (`Run`);
//! - what a run does: `train` ([`Trainer::train`]: prepare, loop, finish), `main_loop` (the
//!   epochs, the steps and the boundaries between them), `run_step` (one step), `save` (writing
//!   checkpoints), `data_parallel` (what this rank asks of the others at an exchange, and what
//!   it does with what they agreed), `test_phase` (a test set evaluated once training ends,
//!   [`Trainer::test`]).

mod builder;
mod data;
mod data_parallel;
mod defaults;
mod dispatch;
mod draws;
mod fetches;
mod lock;
mod log_dir;
mod main_loop;
mod misuse;
mod report;
mod restore;
mod run;
mod run_step;
mod save;
mod saver_dirs;
mod step;
mod summary;
mod test_phase;
mod train;
mod versions;

pub use crate::signal::StopHandle;
pub use builder::{DEFERRED_READ_BUDGET, DEFERRED_READ_INTERVAL, NoCallbacksYet, Trainer};
pub use data::{BatchIter, TrainData, VecBatches};
pub use defaults::DefaultCallbacks;
pub use log_dir::LogDirPolicy;
pub use report::{TrainError, TrainReport};
pub use step::{LossFn, Step, StepOutput, TrainingStep};
pub use summary::{BestValue, ScalarSummary, TrainSummary, TrainSummaryPrinter};

pub(crate) use run::{Holds, Resolved, Run};
