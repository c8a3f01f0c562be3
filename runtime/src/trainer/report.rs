//! The report a finished run returns: the model, why the run ended, the counters.

use std::path::PathBuf;

#[cfg(doc)]
use super::Trainer;
use crate::callback::Counters;

/// Why a run that returned `Ok` ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Every epoch up to `max_epoch` ran.
    Finished,
    /// A callback asked to stop (tensorpack's `StopTraining`), for this reason.
    Stopped(String),
    /// SIGINT or SIGTERM stopped training at a step boundary; a checkpoint was written there
    /// (resume from it with [`Trainer::auto_resume`]).
    Interrupted {
        /// `"SIGINT"` or `"SIGTERM"`.
        signal: String,
        /// The checkpoint written when the signal was handled.
        checkpoint: Option<PathBuf>,
    },
}

/// How a run ended, and the trained model.
#[derive(Debug)]
pub struct TrainReport<M> {
    /// The model after the last step.
    pub model: M,
    /// Why the run ended.
    pub outcome: Outcome,
    /// The counters at the end.
    pub counters: Counters,
    /// Device-to-host transfers made for fetches during the run.
    pub fetch_transfers: u64,
}
