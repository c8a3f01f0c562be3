//! neon's command-line switches for callbacks (feature `cli`): a clap [`Args`](clap::Args)
//! struct to flatten into a program's own arguments, whose flags add the matching callbacks.
//!
//! | flag | what it adds |
//! |---|---|
//! | `--eval_freq N`, `-eval N` | the program's validation (an [`InferenceRunner`](crate::inference::InferenceRunner) or any callback), run every `N` epochs; off without the flag, as in neon |
//! | `--serialize [N]` | a [`ModelSaver`] checkpoint every `N` epochs (`--serialize` alone: every epoch, neon's `const=1`; `--serialize 0`, neon's default: none, unless `--save_path` is given) |
//! | `-H K`, `--history K` | how many of those checkpoints to keep, as neon's `SerializeModelCallback` keeps them: 1 for `K` of 1 (the default) or 0, `K + 1` for a larger `K` (neon removes the oldest file only once more than `K` are there, before writing the next) |
//! | `-s DIR`, `--save_path DIR` | the log directory: checkpoints, `stats.json`, TensorBoard files; without `--serialize`, it also turns checkpoints on, every epoch, as neon's `--save_path` does |
//! | `--model_file FILE` | a [`LoadModel`]: the weights loaded from `FILE` (a burnpack or a checkpoint folder) before the first step |
//! | `--progress_bar` / `--no_progress_bar` | the progress bar on (the default) or off |
//! | `-o FILE`, `--output_file FILE` | (feature `hdf5`) neon's callback data in HDF5, a [`CallbackDataWriter`](crate::monitor::CallbackDataWriter) evaluating every `--eval_freq` epochs |
//!
//! Differs from neon: `--save_path` names the log directory, not the model file; checkpoints
//! are folders in it (`checkpoints/step-N/`), never a pickle beside the program. neon's
//! single-dash `-eval` is no clap flag (clap's short flags are one letter: `-eval` would read as
//! `-e val`): pass the program's arguments through [`normalize_args`] first, which rewrites it to
//! `--eval_freq`; `--eval` is an alias clap knows.
//!
//! ```
//! use clap::Parser;
//! use burn_stoker::cli::CallbackArgs;
//!
//! #[derive(Parser)]
//! struct Cli {
//!     /// Epochs to train.
//!     #[arg(long, default_value_t = 10)]
//!     epochs: u64,
//!     #[command(flatten)]
//!     callbacks: CallbackArgs,
//! }
//!
//! let cli = Cli::parse_from(burn_stoker::cli::normalize_args(["train", "-eval", "2", "--serialize", "5", "--no_progress_bar"]));
//! assert_eq!(cli.callbacks.eval_freq, Some(2));
//! let defaults = cli.callbacks.default_callbacks(burn_stoker::trainer::DefaultCallbacks::default());
//! assert!(defaults.progress.is_none());
//! let saver = cli.callbacks.saver();
//! assert!(saver.is_some());
//! assert_eq!(cli.callbacks.history, 1);
//! ```

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::saver::{LoadModel, ModelSaver};
use crate::trainer::DefaultCallbacks;
use crate::trigger::PeriodicTrigger;

/// neon's callback switches; `#[command(flatten)]` them into a program's clap arguments.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct CallbackArgs {
    /// Run validation every N epochs (off without this flag; neon's -eval, see `normalize_args`).
    #[arg(long = "eval_freq", alias = "eval", value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub eval_freq: Option<u64>,
    /// Write a checkpoint (model, optimizer, callback state) every N epochs (every epoch when
    /// given without N; none with 0, neon's default, unless --save_path is given).
    #[arg(
        long = "serialize",
        value_name = "N",
        num_args = 0..=1,
        default_missing_value = "1",
        value_parser = clap::value_parser!(u64)
    )]
    pub serialize: Option<u64>,
    /// How many of the --serialize checkpoints to keep: 1 for K of 0 or 1, else K + 1, as neon
    /// keeps them.
    #[arg(short = 'H', long = "history", value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u64))]
    pub history: u64,
    /// The log directory: checkpoints, stats.json and TensorBoard files go there; checkpoints
    /// every epoch unless --serialize says otherwise.
    #[arg(short = 's', long = "save_path", value_name = "DIR")]
    pub save_path: Option<PathBuf>,
    /// Load the model's weights from this file (a burnpack, or a checkpoint folder) before
    /// training.
    #[arg(long = "model_file", value_name = "FILE")]
    pub model_file: Option<PathBuf>,
    /// Show the progress bar (the default).
    #[arg(long = "progress_bar", overrides_with = "no_progress_bar")]
    pub progress_bar: bool,
    /// Hide the progress bar.
    #[arg(long = "no_progress_bar", overrides_with = "progress_bar")]
    pub no_progress_bar: bool,
    /// Save the callback data (costs, validation, timing) to this HDF5 file, in neon's layout.
    #[cfg(feature = "hdf5")]
    #[arg(short = 'o', long = "output_file", value_name = "FILE")]
    pub output_file: Option<PathBuf>,
}

impl CallbackArgs {
    /// `defaults` with the progress bar removed when `--no_progress_bar` was given (the last of
    /// `--progress_bar` / `--no_progress_bar` wins).
    pub fn default_callbacks(&self, mut defaults: DefaultCallbacks) -> DefaultCallbacks {
        if self.no_progress_bar {
            defaults.progress = None;
        }
        defaults
    }

    /// A [`ModelSaver`] keeping [`kept_checkpoints`](Self::kept_checkpoints), triggered every
    /// `--serialize` epochs, or every epoch when `--save_path` was given without `--serialize`
    /// or with `--serialize 0` (neon: "No schedule given for model serialization, using default
    /// 1", said here too); `None` with neither. As neon's, it keeps no other checkpoint (no
    /// hourly one: `keep_every_n_hours(f64::INFINITY)`).
    pub fn saver(&self) -> Option<PeriodicTrigger<ModelSaver>> {
        let every = match (self.serialize.filter(|&n| n > 0), &self.save_path) {
            (Some(every), _) => every,
            (None, Some(path)) => {
                crate::logging::info!(
                    "--save_path {} without --serialize: a checkpoint every epoch",
                    path.display()
                );
                1
            }
            (None, None) => return None,
        };
        let saver = ModelSaver::new(self.kept_checkpoints()).keep_every_n_hours(f64::INFINITY);
        Some(PeriodicTrigger::new(saver).every_k_epochs(every))
    }

    /// How many checkpoints `-H K` keeps, as neon's `SerializeModelCallback` does: one file for
    /// `K` of 0 or 1; for a larger `K` it removes the oldest file when more than `K` are there,
    /// before it writes the next, so `K + 1` remain.
    ///
    /// ```
    /// use burn_stoker::cli::CallbackArgs;
    /// let with = |history| CallbackArgs { history, ..CallbackArgs::default() }.kept_checkpoints();
    /// assert_eq!((with(0), with(1), with(2), with(5)), (1, 1, 3, 6));
    /// ```
    pub fn kept_checkpoints(&self) -> usize {
        if self.history > 1 { (self.history as usize).saturating_add(1) } else { 1 }
    }

    /// The weights of `--model_file` loaded before the first step ([`LoadModel`]); `None`
    /// without the flag.
    pub fn model_loader(&self) -> Option<LoadModel> {
        self.model_file.as_ref().map(LoadModel::new)
    }

    /// The program's validation callback, triggered every `--eval_freq` epochs; `None` without
    /// the flag (neon runs no validation then).
    pub fn evaluation<C>(&self, validation: C) -> Option<PeriodicTrigger<C>> {
        let every = self.eval_freq?;
        Some(PeriodicTrigger::new(validation).every_k_epochs(every))
    }

    /// neon's callback data file at `-o/--output_file` (relative to the log directory), its
    /// evaluations every `--eval_freq` epochs (1 without the flag); `None` without `-o`. Name the
    /// scalars the validation puts with [`CallbackDataWriter::loss`](crate::monitor::CallbackDataWriter::loss)
    /// and [`metric`](crate::monitor::CallbackDataWriter::metric).
    ///
    /// ```
    /// use burn_stoker::cli::CallbackArgs;
    /// use clap::Parser;
    ///
    /// #[derive(Parser)]
    /// struct Cli {
    ///     #[command(flatten)]
    ///     callbacks: CallbackArgs,
    /// }
    ///
    /// let cli = Cli::parse_from(["train", "-o", "data.h5", "--eval_freq", "2"]);
    /// let data = cli.callbacks.callback_data().expect("-o was given");
    /// assert_eq!(data.path(), std::path::Path::new("data.h5"));
    /// let data = data.loss("validation_cost");
    /// # let _ = data;
    /// ```
    #[cfg(feature = "hdf5")]
    pub fn callback_data(&self) -> Option<crate::monitor::CallbackDataWriter> {
        let path = self.output_file.clone()?;
        Some(crate::monitor::CallbackDataWriter::new(path).eval_freq(self.eval_freq.unwrap_or(1)))
    }

    /// The log directory: `--save_path` if given, else `default`.
    pub fn log_dir(&self, default: impl AsRef<Path>) -> PathBuf {
        self.save_path.clone().unwrap_or_else(|| default.as_ref().to_path_buf())
    }
}

/// The program's arguments with neon's single-dash `-eval N` (and `-eval=N`) rewritten to
/// `--eval_freq`, which clap reads; every other argument as it is, and nothing after a `--`.
/// Call it on the arguments before clap parses them:
/// `Cli::parse_from(normalize_args(std::env::args_os()))`.
///
/// ```
/// use burn_stoker::cli::normalize_args;
/// let args = normalize_args(["train", "-eval", "2", "-eval=3", "--", "-eval"]);
/// assert_eq!(args, ["train", "--eval_freq", "2", "--eval_freq=3", "--", "-eval"]);
/// ```
#[doc(alias = "neon_args")]
pub fn normalize_args<I, T>(args: I) -> Vec<OsString>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let mut after_separator = false;
    args.into_iter()
        .map(Into::into)
        .map(|arg| {
            if after_separator {
                return arg;
            }
            match arg.to_str() {
                Some("--") => {
                    after_separator = true;
                    arg
                }
                Some("-eval") => OsString::from("--eval_freq"),
                Some(text) if text.starts_with("-eval=") => {
                    OsString::from(format!("--eval_freq={}", &text[6..]))
                }
                _ => arg,
            }
        })
        .collect()
}
