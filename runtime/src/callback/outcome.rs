//! How a run ended: [`Outcome`], which the trainer reports and `after_train`'s callbacks read
//! from their [`Context`](super::Context).

use std::path::PathBuf;

/// Why training ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Every epoch up to `max_epoch` ran.
    Finished,
    /// A callback asked to stop (tensorpack's `StopTraining`), for this reason.
    Stopped(String),
    /// SIGINT or SIGTERM, or a [`StopHandle`](crate::trainer::StopHandle), stopped training at a step
    /// boundary; a checkpoint was written there (resume from it with [`Trainer::auto_resume`](crate::trainer::Trainer::auto_resume)).
    Interrupted {
        /// `"SIGINT"`, `"SIGTERM"`, or `"StopHandle"`.
        signal: String,
        /// The checkpoint written when the signal was handled.
        checkpoint: Option<PathBuf>,
    },
    /// The loss or the weights stopped being finite numbers, and training stopped at that step
    /// boundary without writing a checkpoint of them (Keras's and fastai's `TerminateOnNaN` stop
    /// the same way): [`TerminateOnNaN`](crate::debug::TerminateOnNaN) saw a NaN or infinite
    /// loss, or the trainer's check before writing a checkpoint saw a non-finite loss or weights.
    /// The last good checkpoint stays the latest: [`Trainer::auto_resume`](crate::trainer::Trainer::auto_resume) continues from it.
    ///
    /// In data-parallel training the rank that saw it ends with this outcome, the others stop at
    /// the same step with [`Outcome::Stopped`].
    NonFinite {
        /// What was not finite, and where: `"the loss is NaN at global step 7 (epoch 2)"`,
        /// `"3 weights are not finite at global step 12 (epoch 3)"`.
        reason: String,
        /// The global step whose loss or weights were not finite.
        global_step: u64,
        /// The latest complete checkpoint (written or resumed from earlier in the run), if any.
        checkpoint: Option<PathBuf>,
    },
    /// An error ended training before it finished; it comes with this report in a
    /// [`TrainError`](crate::trainer::TrainError).
    Failed,
}
