//! Early stopping: Keras's [`EarlyStopping`] (patience, `min_delta`, baseline, warm-up, restoring
//! the best weights) and neon's [`EarlyStop`] (a function of the user's decides); fastai's
//! [`ShortEpochCallback`], which cuts every epoch short.
//!
//! Both read a monitored scalar from [`Monitors`](crate::state::Monitors) when triggered (every
//! epoch by default) and stop training with
//! [`Context::request_stop`](crate::callback::Context::request_stop): order them after the
//! callback that puts the scalar (`#[order(after = InferenceRunner)]`, or later in a tuple). Their
//! counters are callback state: a resumed run stops at the epoch an uninterrupted one would have.

mod early_stop;
mod early_stopping;
mod short_epoch;

pub use early_stop::EarlyStop;
pub use early_stopping::EarlyStopping;
pub use short_epoch::ShortEpochCallback;
pub(crate) use short_epoch::short_epoch_ends;

use serde_json::Value as Json;

use crate::error::{Error, Result};
use crate::state::{Better, parse_f64};

/// Whether a monitored statistic improves by going down or up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Tell from the statistic's name (Keras's `"auto"`): see [`Mode::resolve`].
    #[default]
    Auto,
    /// Lower is better (a loss, an error).
    Min,
    /// Higher is better (an accuracy, an F1 score).
    Max,
}

/// Words of a statistic's name meaning lower is better.
const LOWER_IS_BETTER: &[&str] = &[
    "loss",
    "cost",
    "error",
    "err",
    "errors",
    "wrong",
    "incorrect",
    "misclassification",
    "mse",
    "mae",
    "rmse",
    "msle",
    "mape",
    "nll",
    "entropy",
    "crossentropy",
    "perplexity",
    "ppl",
    "hinge",
    "kl",
    "divergence",
    "distance",
];
/// Words of a statistic's name meaning higher is better.
const HIGHER_IS_BETTER: &[&str] = &[
    "accuracy",
    "acc",
    "correct",
    "precision",
    "recall",
    "f1",
    "fscore",
    "fmeasure",
    "auc",
    "auroc",
    "iou",
    "miou",
    "dice",
    "psnr",
    "ssim",
    "map",
    "bleu",
    "rouge",
    "r2",
];

impl Mode {
    /// [`Mode::Min`] or [`Mode::Max`]: this mode itself, or for [`Mode::Auto`] the direction the
    /// statistic's name tells, or `None` when it cannot tell.
    ///
    /// Keras 3 minimizes `loss` / `val_loss` and asks each compiled metric for its direction.
    /// stoker's statistics are plain names, so `Auto` reads the words of the name (split at every
    /// character that is not a letter or a digit, case ignored): a word such as `loss`, `cost`,
    /// `error`, `wrong`, `mse`, `mae`, `perplexity` means lower is better; `accuracy`, `acc`,
    /// `correct`, `precision`, `recall`, `f1`, `auc`, `auroc`, `iou`, `psnr` means higher is better. A
    /// name with words of both kinds, or of neither, cannot be told: name the mode.
    ///
    /// ```
    /// use burn_stoker::stop::Mode;
    /// assert_eq!(Mode::Auto.resolve("val_loss"), Some(Mode::Min));
    /// assert_eq!(Mode::Auto.resolve("val-error-top1"), Some(Mode::Min));
    /// assert_eq!(Mode::Auto.resolve("validation_accuracy"), Some(Mode::Max));
    /// assert_eq!(Mode::Auto.resolve("val_f1"), Some(Mode::Max));
    /// assert_eq!(Mode::Auto.resolve("val_auroc"), Some(Mode::Max));
    /// assert_eq!(Mode::Auto.resolve("throughput"), None);
    /// assert_eq!(Mode::Max.resolve("val_loss"), Some(Mode::Max));
    /// ```
    pub fn resolve(self, statistic: &str) -> Option<Mode> {
        match self {
            Mode::Min | Mode::Max => Some(self),
            Mode::Auto => {
                let lower = statistic.to_ascii_lowercase();
                let words: Vec<&str> = lower.split(|c: char| !c.is_ascii_alphanumeric()).collect();
                let down = words.iter().any(|w| LOWER_IS_BETTER.contains(w));
                let up = words.iter().any(|w| HIGHER_IS_BETTER.contains(w));
                match (down, up) {
                    (true, false) => Some(Mode::Min),
                    (false, true) => Some(Mode::Max),
                    _ => None,
                }
            }
        }
    }

    /// Which way `statistic` improves, or the error saying that the mode must be named.
    pub(crate) fn better(self, statistic: &str, owner: &str) -> Result<Better> {
        match self.resolve(statistic) {
            Some(Mode::Max) => Ok(Better::Higher),
            Some(_) => Ok(Better::Lower),
            None => Err(Error::invalid(format!(
                "{owner}: cannot tell from its name whether `{statistic}` should be minimized or maximized; \
                 name the mode with `.mode(Mode::Min)` or `.mode(Mode::Max)`"
            ))),
        }
    }
}

/// A usize field of a saved state.
fn state_u64(state: &Json, key: &str, owner: &str) -> Result<u64> {
    state
        .get(key)
        .and_then(Json::as_u64)
        .ok_or_else(|| Error::bad_state(format!("{owner}: the saved state has no number `{key}`: {state}")))
}

/// An optional float field of a saved state (`null` for none).
fn state_f64(state: &Json, key: &str, owner: &str) -> Result<Option<f64>> {
    match state.get(key) {
        None | Some(Json::Null) => Ok(None),
        Some(value) => parse_f64(value)
            .map(Some)
            .ok_or_else(|| Error::bad_state(format!("{owner}: the saved `{key}` {value} is not a number"))),
    }
}

/// A file or folder name made of the statistic's name: every character that is not a letter, a
/// digit, `-`, `_` or `.` becomes `_`.
pub(crate) fn file_safe(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect()
}
