//! The one error type of stoker.

use std::fmt;
use std::path::PathBuf;

/// What went wrong in a training run, named precisely enough to fix.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A callback returned an error from one of its events.
    Callback {
        /// The callback's name.
        callback: String,
        /// The event that failed (`"setup"`, `"trigger_epoch"`, ...).
        event: &'static str,
        /// What the callback said.
        source: Box<Error>,
    },
    /// Code panicked inside a callback or inside the training step; training stopped cleanly.
    Panic {
        /// Where: `callback "Name" in trigger_epoch`, or `the training step`.
        location: String,
        /// The panic's message.
        message: String,
    },
    /// The callbacks' order constraints cannot be satisfied.
    Order(String),
    /// A callback asked for a value the training step does not produce, or of the wrong kind.
    Fetch(String),
    /// The data loader failed or produced no batch.
    Data(String),
    /// A file or directory could not be read or written.
    Io {
        /// The path involved.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A monitor writer failed while writing in the background.
    Monitor(String),
    /// A hyper-parameter is unknown or was given an invalid value.
    HyperParam(String),
    /// A checkpoint could not be written, or none could be read to resume from.
    Checkpoint(String),
    /// The loss or the weights stopped being finite numbers. stoker's own checks
    /// ([`TerminateOnNaN`](crate::debug::TerminateOnNaN), the check before a checkpoint) stop
    /// training cleanly with [`Outcome::NonFinite`](crate::trainer::Outcome::NonFinite) instead;
    /// a callback of the user's may still return this error.
    NonFinite(String),
    /// The error one rank of a data-parallel world ended with, as the world's runner reports it.
    Rank {
        /// The rank (0 is the chief).
        rank: usize,
        /// What went wrong there.
        source: Box<Error>,
    },
    /// Another rank of the data-parallel world failed (or left it), so this rank stopped at the
    /// same step boundary as every other; that rank's own error tells why.
    RankFailed {
        /// The rank that failed first (the lowest one when several failed at the same step).
        rank: usize,
    },
    /// Any other failure, with its message.
    Message(String),
}

impl Error {
    /// An error with a message: `Err(Error::msg("the log directory is full"))`.
    pub fn msg(message: impl fmt::Display) -> Self {
        Error::Message(message.to_string())
    }

    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Callback { callback, event, source } => {
                write!(f, "callback `{callback}` failed in {event}: {source}")
            }
            Error::Panic { location, message } => write!(f, "panic in {location}: {message}"),
            Error::Order(message)
            | Error::Fetch(message)
            | Error::Data(message)
            | Error::Monitor(message)
            | Error::HyperParam(message)
            | Error::Checkpoint(message)
            | Error::NonFinite(message)
            | Error::Message(message) => f.write_str(message),
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
            Error::Rank { rank, source } => write!(f, "rank {rank}: {source}"),
            Error::RankFailed { rank } => {
                write!(f, "rank {rank} of the data-parallel world failed, so every rank stopped")
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Callback { source, .. } | Error::Rank { source, .. } => Some(source.as_ref()),
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(source: std::io::Error) -> Self {
        Error::Io { path: PathBuf::new(), source }
    }
}

/// `Result` with stoker's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The one wording of a setting whose value breaks its rule:
/// `<owner>: <setting> must be <rule>, not <value>`.
pub(crate) fn must_be(
    owner: impl fmt::Display,
    setting: &str,
    rule: &str,
    value: impl fmt::Display,
) -> String {
    format!("{owner}: {setting} must be {rule}, not {value}")
}

/// Check a setting (at setup, where callbacks check what their builders were given): `Ok(())`
/// when `valid`, else an [`Error::Message`] worded by [`must_be`].
pub(crate) fn check_setting(
    valid: bool,
    owner: impl fmt::Display,
    setting: &str,
    rule: &str,
    value: impl fmt::Display,
) -> Result<()> {
    if valid { Ok(()) } else { Err(Error::Message(must_be(owner, setting, rule, value))) }
}

/// The message of a caught panic's payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".into()
    }
}
