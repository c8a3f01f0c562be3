//! [`CheckpointError`]: a checkpoint that could not be written, found or read back.

use std::path::PathBuf;

use super::BoxError;

/// Why a checkpoint could not be written, found or restored: what
/// [`Error::Checkpoint`](crate::Error::Checkpoint) holds. Every message names the checkpoint
/// (or the file) and says what to do; [`source`](std::error::Error::source) is the cause where
/// there is one (burn's `RecordError`, serde's error, the file system's).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// A resume found no checkpoint in the folder it was given.
    #[error("no checkpoint to resume from in {}", dir.display())]
    NotFound {
        /// The folder searched (a log directory, its `checkpoints/`, or a checkpoint's parent).
        dir: PathBuf,
    },
    /// The checkpoint is incomplete or damaged: a file is missing or of the wrong length, the
    /// manifest is malformed, or a checksum does not match. A resume that finds one sets it
    /// aside and takes the one before it; this error is what it reports when none is left.
    #[error("{message}")]
    Damaged {
        /// The whole message, naming every damaged checkpoint.
        message: String,
        /// What found the damage (serde's error, the file system's), when something did.
        #[source]
        source: Option<BoxError>,
    },
    /// A checkpoint's file could not be read, for a reason that is no sign of damage
    /// (permissions, open files, the disk): nothing was set aside or removed.
    #[error(
        "reading {} failed: {source}; a read error is no sign of a damaged checkpoint, so nothing was set aside or removed: fix the cause (permissions, open files, the disk) and try again",
        path.display()
    )]
    Read {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The checkpoint was written in a format this version of stoker does not read.
    #[error("checkpoint {} has format {format}, this version of stoker reads formats {oldest} to {newest}", dir.display())]
    Format {
        /// The checkpoint.
        dir: PathBuf,
        /// Its format.
        format: u64,
        /// The oldest format this version reads.
        oldest: u64,
        /// The newest format this version reads (the one it writes).
        newest: u64,
    },
    /// The checkpoint was read but cannot continue this run: its counters are malformed, its
    /// model is of another architecture, it was written by another world or with other data,
    /// or it resumes past `max_epoch`. The message says which, and what to change.
    #[error("{message}")]
    Mismatch {
        /// The checkpoint.
        dir: PathBuf,
        /// The whole message.
        message: String,
        /// burn's `RecordError` when the model or the optimizer does not load.
        #[source]
        source: Option<BoxError>,
    },
    /// Writing a checkpoint (or a copy of one, or a best model's file) failed; the checkpoints
    /// written before it are intact.
    #[error("{message}")]
    Write {
        /// The whole message: what was being written, the cause's message.
        message: String,
        /// The cause: the file system's error, burn's when the model does not serialize.
        #[source]
        source: Option<BoxError>,
    },
    /// The state a callback (or the monitors' history) keeps in a checkpoint is malformed, or
    /// its journal could not be read or appended to.
    #[error("{message}")]
    State {
        /// The whole message, naming the callback or the history.
        message: String,
        /// serde's or the file system's error, where there is one.
        #[source]
        source: Option<BoxError>,
    },
    /// A name given to a checkpoint copy cannot name a folder of its own.
    #[error("the checkpoint copy name {name:?} {why}")]
    CopyName {
        /// The name.
        name: String,
        /// What is wrong with it.
        why: String,
    },
    /// A `ModelSaver`'s own checkpoint folder holds the checkpoints of another run, and the
    /// run's log-directory policy refuses to mix with them: nothing was changed.
    #[error(
        "the checkpoint folder {} (a ModelSaver's checkpoint_dir) holds the checkpoints of another run ({found}); \
         this run would mix with them: keep-N would prune one run's checkpoints for the other's, and a resume would take \
         whichever has the higher step. Nothing was changed. To continue that run, resume it (Trainer::resume_from the folder); \
         to start afresh, give the ModelSaver another checkpoint_dir, move them away, or choose Trainer::log_dir_policy: \
         LogDirPolicy::Backup or Delete acts on this folder as on the log directory, LogDirPolicy::Keep writes beside them",
        dir.display()
    )]
    OtherRun {
        /// The checkpoint folder.
        dir: PathBuf,
        /// What was found there (`3 checkpoints, the newest step-90`).
        found: String,
    },
}
