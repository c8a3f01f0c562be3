//! [`LogDirError`]: a log directory this run cannot train into.

use std::path::PathBuf;

/// Why this run cannot train into its log directory: what
/// [`Error::LogDir`](crate::Error::LogDir) holds. Nothing in the directory was changed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogDirError {
    /// Another run (in this process or another one, on this host or another sharing the file
    /// system) holds the directory's lock, or is deleting or moving it aside.
    #[error("{message}")]
    InUse {
        /// The log directory.
        dir: PathBuf,
        /// The whole message: which run holds it, if known, and what to do.
        message: String,
    },
    /// The directory holds an earlier run, and the run's
    /// [`LogDirPolicy`](crate::trainer::LogDirPolicy) is
    /// [`Refuse`](crate::trainer::LogDirPolicy::Refuse).
    #[error(
        "the log directory {} holds an earlier run ({}), and a fresh run into it would mix with it; nothing was changed. \
         To continue that run, resume it (Trainer::auto_resume(true), or resume_from one of its checkpoints). \
         To start afresh, choose what happens to it with Trainer::log_dir_policy: LogDirPolicy::NewVersion trains in a new \
         version_N folder inside it, LogDirPolicy::Backup moves it aside, LogDirPolicy::Delete deletes it, \
         LogDirPolicy::Keep writes beside it (the runs mix); or give this run another log_dir",
        dir.display(),
        found.join(", ")
    )]
    EarlierRun {
        /// The log directory.
        dir: PathBuf,
        /// What marks the earlier run: `"checkpoints/ with 3 checkpoints, the newest step-90"`,
        /// `"stats.json"`, event files.
        found: Vec<String>,
    },
    /// [`LogDirPolicy::Backup`](crate::trainer::LogDirPolicy::Backup) was asked for a directory
    /// that has no name to back it up under (`/`).
    #[error("the log directory {} has no name to back it up under; give this run another log_dir", dir.display())]
    Unnamed {
        /// The log directory.
        dir: PathBuf,
    },
    /// A policy's name, from the command line or the environment, names none.
    #[error("unknown log directory policy `{0}`: choose refuse, backup, delete, keep or version")]
    UnknownPolicy(String),
}
