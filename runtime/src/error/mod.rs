//! The error type of stoker, [`Error`], and the type of each concern it holds: the configuration
//! ([`ConfigError`]), checkpoints ([`CheckpointError`]), the log directory ([`LogDirError`]) and
//! a data-parallel world ([`WorldError`]), a file each.
//!
//! Every variant that wraps another error (an I/O error, burn's record or dataset error, a
//! callback's own error) keeps it: [`std::error::Error::source`] returns it, so a caller can
//! walk the chain or downcast the cause. The message ([`Display`](fmt::Display)) is complete on
//! its own: it says what stoker was doing, names the path for anything on disk, and quotes the
//! cause's message, so printing an error with `{}` shows everything.

use std::fmt;
use std::path::PathBuf;

mod checkpoint;
mod config;
mod log_dir;
mod world;

pub use checkpoint::CheckpointError;
pub use config::ConfigError;
pub use log_dir::LogDirError;
pub use world::WorldError;

/// Any other error, kept as the cause of an [`Error`]: what [`Error::other`] and
/// [`Error::context`] take, and the source of [`Error::Data`], [`Error::Other`] and of a
/// [`CheckpointError`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What went wrong in a training run, named precisely enough to fix.
///
/// Each concern has its own type, whose variants a program can branch on:
/// [`Config`](Error::Config) (a trainer or a callback set up wrong), [`Checkpoint`](Error::Checkpoint),
/// [`LogDir`](Error::LogDir) and [`World`](Error::World). [`Callback`](Error::Callback) and
/// [`Rank`](Error::Rank) say where an error happened and hold it; [`root`](Error::root) peels
/// them off.
///
/// [`source`](std::error::Error::source) returns the cause where there is one: the callback's
/// error for [`Callback`](Error::Callback), the rank's for [`Rank`](Error::Rank), the operating
/// system's for [`Io`](Error::Io), burn's (or serde's, or the file system's) for
/// [`Checkpoint`](Error::Checkpoint), the data loader's for [`Data`](Error::Data), the writer's
/// for [`Monitor`](Error::Monitor), any other library's for [`Other`](Error::Other).
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A callback returned an error from one of its events.
    Callback {
        /// The callback's name.
        callback: String,
        /// The event that failed (`"setup"`, `"trigger_epoch"`, ...).
        event: &'static str,
        /// What the callback said (the error's source).
        source: Box<Error>,
    },
    /// Code panicked inside a callback or inside the training step; training stopped cleanly.
    Panic {
        /// Where: `callback "Name" in trigger_epoch`, or `the training step`.
        location: String,
        /// The panic's message.
        message: String,
    },
    /// The trainer or a callback was set up in a way that cannot train as asked, found before
    /// training starts (or when a hyper-parameter is set): the message says what to change.
    Config(ConfigError),
    /// A checkpoint could not be written, or none could be read to resume from.
    Checkpoint(CheckpointError),
    /// The log directory cannot be trained into: another run holds it, or it holds an earlier
    /// run the policy refuses to mix with.
    LogDir(LogDirError),
    /// The ranks of a data-parallel world cannot go on together.
    World(WorldError),
    /// The error one rank of a data-parallel world ended with, as the world's runner reports it.
    Rank {
        /// The rank (0 is the chief).
        rank: usize,
        /// What went wrong there (the error's source).
        source: Box<Error>,
    },
    /// The data loader failed or produced no batch.
    Data {
        /// The whole message (the cause's included).
        message: String,
        /// The data loader's error (burn's `DatasetError`), when it failed.
        source: Option<BoxError>,
    },
    /// A file or directory could not be read or written.
    Io {
        /// The path involved.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A monitor writer failed while writing in the background: what
    /// [`WriterFailure::error`](crate::state::WriterFailure::error) holds.
    Monitor {
        /// The whole message (the cause's included).
        message: String,
        /// The writer's error (the `std::io::Error` a
        /// [`MonitorSink`](crate::state::MonitorSink) returned); `None` when the writer panicked.
        source: Option<BoxError>,
    },
    /// The loss, the weights or a watched value stopped being finite numbers. stoker's own
    /// checks ([`TerminateOnNaN`](crate::debug::TerminateOnNaN), the check before a checkpoint)
    /// stop training cleanly with
    /// [`Outcome::NonFinite`](crate::callback::Outcome::NonFinite) instead;
    /// [`CheckNumerics`](crate::debug::CheckNumerics) and a callback of the user's return this
    /// error.
    NonFinite(String),
    /// Any other failure, with its message: what [`Error::msg`] builds.
    Message(String),
    /// Another library's error (or a callback's own), kept as the source: built by
    /// [`Error::other`] and [`Error::context`].
    Other {
        /// The whole message: what was being done, then the cause's message.
        message: String,
        /// The error.
        source: BoxError,
    },
}

macro_rules! from_concern {
    ($($concern:ident => $variant:ident),*) => {$(
        impl From<$concern> for Error {
            fn from(error: $concern) -> Self {
                Error::$variant(error)
            }
        }
    )*};
}
from_concern!(ConfigError => Config, CheckpointError => Checkpoint, LogDirError => LogDir, WorldError => World);

impl Error {
    /// An error with a message: `Err(Error::msg("the log directory is full"))`.
    pub fn msg(message: impl fmt::Display) -> Self {
        Error::Message(message.to_string())
    }

    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }

    /// Any other error, kept as the source; the message is its own:
    /// `.map_err(Error::other)?` in a callback keeps the callback's error for the caller to
    /// downcast.
    pub fn other(source: impl Into<BoxError>) -> Self {
        let source = source.into();
        Error::Other { message: source.to_string(), source }
    }

    /// Any other error, kept as the source, after what was being done:
    /// `Error::context("uploading the scalars", e)` reads `uploading the scalars: <e>`.
    pub fn context(context: impl fmt::Display, source: impl Into<BoxError>) -> Self {
        let source = source.into();
        Error::Other { message: format!("{context}: {source}"), source }
    }

    /// A callback's saved state that cannot be restored (a field missing, a value of another
    /// type): what a [`Callback::load_state`](crate::callback::Callback::load_state) returns
    /// for a state it cannot read, a [`CheckpointError::State`].
    pub fn bad_state(message: impl Into<String>) -> Self {
        CheckpointError::State { message: message.into(), source: None }.into()
    }

    /// A [`CheckpointError::State`] whose cause is `source`; `message` is the whole message.
    pub(crate) fn bad_state_from(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        CheckpointError::State { message: message.into(), source: Some(source.into()) }.into()
    }

    /// A [`CheckpointError::Write`]; `message` is the whole message.
    pub(crate) fn checkpoint_write(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        CheckpointError::Write { message: message.into(), source: Some(source.into()) }.into()
    }

    /// A [`ConfigError::Invalid`]: a callback's settings, wrong in a way no rule words.
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        ConfigError::Invalid(message.into()).into()
    }

    /// A [`ConfigError::Fetch`].
    pub(crate) fn fetch(message: impl Into<String>) -> Self {
        ConfigError::Fetch(message.into()).into()
    }

    /// A [`ConfigError::Order`].
    pub(crate) fn order(message: impl Into<String>) -> Self {
        ConfigError::Order(message.into()).into()
    }

    /// A [`ConfigError::HyperParam`].
    pub(crate) fn hyper_param(message: impl Into<String>) -> Self {
        ConfigError::HyperParam(message.into()).into()
    }

    /// A [`ConfigError::Misuse`].
    pub(crate) fn misuse(message: impl Into<String>) -> Self {
        ConfigError::Misuse(message.into()).into()
    }

    /// A [`WorldError::Transport`].
    pub(crate) fn transport(message: impl Into<String>) -> Self {
        WorldError::Transport(message.into()).into()
    }

    /// A [`WorldError::Mismatch`].
    pub(crate) fn ranks_differ(message: impl Into<String>) -> Self {
        WorldError::Mismatch(message.into()).into()
    }

    /// A data error with no cause but stoker's own judgement (no batch, too few batches).
    pub fn data(message: impl Into<String>) -> Self {
        Error::Data { message: message.into(), source: None }
    }

    /// The error itself, once the layers that say where it happened are peeled off: the source
    /// of an [`Error::Callback`] (a callback's error) or an [`Error::Rank`] (a rank's), down to
    /// the first error that is neither. What to match on to branch on the kind of failure:
    ///
    /// ```
    /// use burn_stoker::Error;
    /// use burn_stoker::LogDirError;
    /// let earlier = LogDirError::EarlierRun { dir: "runs/digits".into(), found: vec!["stats.json".into()] };
    /// let error = Error::Rank { rank: 1, source: Box::new(earlier.into()) };
    /// assert!(matches!(error.root(), Error::LogDir(LogDirError::EarlierRun { .. })));
    /// ```
    pub fn root(&self) -> &Error {
        let mut error = self;
        while let Error::Callback { source, .. } | Error::Rank { source, .. } = error {
            error = source;
        }
        error
    }

    /// A program's own error, of type `E`, that its callback returned with [`Error::other`] or
    /// [`Error::context`]: found at the [`root`](Self::root), whatever callback or rank it came
    /// through. `None` when the root is another error.
    ///
    /// ```
    /// use burn_stoker::Error;
    ///
    /// /// A program's own failure.
    /// #[derive(Debug)]
    /// struct ConfigMismatch(Vec<String>);
    /// impl std::fmt::Display for ConfigMismatch {
    ///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    ///         write!(f, "trained with another configuration ({})", self.0.join(", "))
    ///     }
    /// }
    /// impl std::error::Error for ConfigMismatch {}
    ///
    /// // What its callback returned, as the trainer hands it back.
    /// let error = Error::Callback {
    ///     callback: "SaveConfig".into(),
    ///     event: "before_train",
    ///     source: Box::new(Error::other(ConfigMismatch(vec!["seed 1 there, 2 now".into()]))),
    /// };
    /// let mismatch = error.downcast_ref::<ConfigMismatch>().expect("the program's own error");
    /// assert_eq!(mismatch.0, ["seed 1 there, 2 now"]);
    /// ```
    pub fn downcast_ref<E: std::error::Error + 'static>(&self) -> Option<&E> {
        match self.root() {
            Error::Other { source, .. } => source.downcast_ref::<E>(),
            _ => None,
        }
    }
}

/// What a callback cancelled, as fastai's exceptions name it: a hand-written callback cancels
/// with [`Context::cancel`](crate::callback::Context::cancel)`(Cancel::Batch)`, what
/// [`Flow::CancelBatch`](crate::callback::Flow::CancelBatch),
/// [`Flow::CancelEpoch`](crate::callback::Flow::CancelEpoch),
/// [`Flow::CancelFit`](crate::callback::Flow::CancelFit),
/// [`Flow::CancelStep`](crate::callback::Flow::CancelStep),
/// [`Flow::CancelTrain`](crate::callback::Flow::CancelTrain) and
/// [`Flow::CancelValid`](crate::callback::Flow::CancelValid) do when returned.
///
/// A cancel is a value the context records, never an [`Error`]: the callback returns `Ok(())`,
/// so code that wraps every error it sees (with context, anyhow-style) does not change it.
///
/// ```
/// use burn_stoker::callback::{Callback, Cancel, Context};
///
/// /// Skips every batch of the first step of each epoch, by hand (the DSL returns `Flow::CancelBatch`).
/// struct SkipFirst;
///
/// impl<M> Callback<M> for SkipFirst {
///     fn before_step(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
///         if ctx.local_step() == 0 { ctx.cancel(Cancel::Batch) } else { Ok(()) }
///     }
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancel {
    /// fastai's `CancelBackwardException`.
    Backward,
    /// fastai's `CancelBatchException`.
    Batch,
    /// fastai's `CancelEpochException`.
    Epoch,
    /// fastai's `CancelFitException`.
    Fit,
    /// fastai's `CancelStepException`.
    Step,
    /// fastai's `CancelTrainException`.
    Train,
    /// fastai's `CancelValidException`.
    Valid,
}

impl Cancel {
    /// The [`Flow`](crate::callback::Flow) value's name.
    pub fn flow_name(self) -> &'static str {
        match self {
            Cancel::Backward => "Flow::CancelBackward",
            Cancel::Batch => "Flow::CancelBatch",
            Cancel::Epoch => "Flow::CancelEpoch",
            Cancel::Fit => "Flow::CancelFit",
            Cancel::Step => "Flow::CancelStep",
            Cancel::Train => "Flow::CancelTrain",
            Cancel::Valid => "Flow::CancelValid",
        }
    }

    /// The message of a cancel returned where the loop cannot act on it.
    pub(crate) fn misplaced(self) -> String {
        format!(
            "{} was returned where the training loop cannot act on it ({})",
            self.flow_name(),
            self.applies()
        )
    }

    /// Where it applies, for error messages.
    pub(crate) fn applies(self) -> &'static str {
        match self {
            Cancel::Backward => {
                "CancelBackward applies in before_backward (fastai's after_loss), between the loss and backward, in a training step; to skip the optimizer step use CancelStep in after_backward, to skip the whole batch CancelBatch"
            }
            Cancel::Batch => {
                "CancelBatch applies in before_step, before_batch, after_pred, before_backward, after_backward and after_step, while the batch runs (a training batch or a validation batch), not in after_batch, where the batch is over; to end the epoch use CancelEpoch, to stop training CancelFit"
            }
            Cancel::Epoch => {
                "CancelEpoch applies from before_epoch to the last trigger_step of the epoch, and during the epoch's validation (before_validate and the pass); after_epoch and later, outside a validation pass, the epoch is over: use CancelFit to stop training"
            }
            Cancel::Fit => {
                "CancelFit applies from before_train to trigger_epoch, not in setup, after_cancel_fit or after_train"
            }
            Cancel::Step => {
                "CancelStep applies in after_backward, between backward and the optimizer (fastai's before_step); to skip the whole batch use CancelBatch"
            }
            Cancel::Train => {
                "CancelTrain applies from before_epoch to the last trigger_step of the epoch, while it trains; after_epoch and later, its training is over"
            }
            Cancel::Valid => {
                "CancelValid applies in before_validate and during the validation pass (its batch events, or validate), not in after_validate nor outside a pass"
            }
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Callback { callback, event, source } => {
                write!(f, "callback `{callback}` failed in {event}: {source}")
            }
            Error::Panic { location, message } => write!(f, "panic in {location}: {message}"),
            Error::Config(error) => error.fmt(f),
            Error::Checkpoint(error) => error.fmt(f),
            Error::LogDir(error) => error.fmt(f),
            Error::World(error) => error.fmt(f),
            Error::Rank { rank, source } => write!(f, "rank {rank}: {source}"),
            Error::Data { message, .. }
            | Error::Monitor { message, .. }
            | Error::NonFinite(message)
            | Error::Message(message)
            | Error::Other { message, .. } => f.write_str(message),
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

/// The cause is the wrapped error itself (a callback's or a rank's [`Error`] downcasts to
/// `Error`, not to a `Box`). A concern's error is this error's message: its cause is this one's.
impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Callback { source, .. } | Error::Rank { source, .. } => Some(source.as_ref()),
            Error::Io { source, .. } => Some(source),
            Error::Data { source, .. } | Error::Monitor { source, .. } => {
                source.as_deref().map(|s| s as &(dyn std::error::Error + 'static))
            }
            Error::Other { source, .. } => Some(source.as_ref()),
            Error::Config(error) => error.source(),
            Error::Checkpoint(error) => error.source(),
            Error::LogDir(error) => error.source(),
            Error::World(error) => error.source(),
            Error::Panic { .. } | Error::NonFinite(_) | Error::Message(_) => None,
        }
    }
}

/// An `std::io::Error` that names `path`, for code that returns `std::io::Result` (a monitor
/// writer): its message is `<path>: <error>`, its kind the error's, and the error itself stays
/// reachable down [`source`](std::error::Error::source) (the wrapper's source is the source of
/// the [`Error::Io`] inside it: `error`).
pub(crate) fn io_error_at(path: &std::path::Path, error: std::io::Error) -> std::io::Error {
    std::io::Error::new(error.kind(), Error::io(path, error))
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
/// when `valid`, else a [`ConfigError::Setting`] (worded as [`must_be`] words it).
pub(crate) fn check_setting(
    valid: bool,
    owner: impl fmt::Display,
    setting: &str,
    rule: &str,
    value: impl fmt::Display,
) -> Result<()> {
    if valid { Ok(()) } else { Err(setting_error(owner, setting, rule, value)) }
}

/// A [`ConfigError::Setting`]: `<owner>: <setting> must be <rule>, not <value>`.
pub(crate) fn setting_error(
    owner: impl fmt::Display,
    setting: &str,
    rule: &str,
    value: impl fmt::Display,
) -> Error {
    ConfigError::Setting {
        owner: owner.to_string(),
        setting: setting.to_owned(),
        rule: rule.to_owned(),
        value: value.to_string(),
    }
    .into()
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
