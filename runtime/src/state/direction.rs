//! [`Direction`]: which way a watched statistic improves, the one rule every callback that
//! watches one reads its name by.

use super::monitors::Better;
use crate::error::{Error, Result};

/// Which way a watched statistic improves: what `.mode(...)` takes on every callback that
/// watches one ([`EarlyStopping`](crate::stop::EarlyStopping),
/// [`ReduceLrOnPlateau`](crate::param::ReduceLrOnPlateau),
/// [`SaveBestState`](crate::saver::SaveBestState)). Keras's and Lightning's `mode`, one rule
/// for all of them.
#[doc(alias = "mode")]
#[doc(alias = "Mode")]
#[doc(alias = "PlateauMode")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Direction {
    /// Tell from the statistic's name (Keras's `"auto"`): see [`Direction::resolve`].
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

impl Direction {
    /// [`Direction::Min`] or [`Direction::Max`]: this direction itself, or for
    /// [`Direction::Auto`] the direction the statistic's name tells, or `None` when it cannot
    /// tell.
    ///
    /// Keras 3 minimizes `loss` / `val_loss` and asks each compiled metric for its direction.
    /// stoker's statistics are plain names, so `Auto` reads the words of the name (split at every
    /// character that is not a letter or a digit, case ignored): a word such as `loss`, `cost`,
    /// `error`, `wrong`, `mse`, `mae`, `perplexity` means lower is better; `accuracy`, `acc`,
    /// `correct`, `precision`, `recall`, `f1`, `auc`, `auroc`, `iou`, `psnr` means higher is better. A
    /// name with words of both kinds, or of neither, cannot be told: name the direction.
    ///
    /// ```
    /// use burn_stoker::state::Direction;
    /// assert_eq!(Direction::Auto.resolve("val_loss"), Some(Direction::Min));
    /// assert_eq!(Direction::Auto.resolve("val-error-top1"), Some(Direction::Min));
    /// assert_eq!(Direction::Auto.resolve("validation_accuracy"), Some(Direction::Max));
    /// assert_eq!(Direction::Auto.resolve("val_f1"), Some(Direction::Max));
    /// assert_eq!(Direction::Auto.resolve("val_auroc"), Some(Direction::Max));
    /// assert_eq!(Direction::Auto.resolve("throughput"), None);
    /// assert_eq!(Direction::Max.resolve("val_loss"), Some(Direction::Max));
    /// ```
    pub fn resolve(self, statistic: &str) -> Option<Direction> {
        match self {
            Direction::Min | Direction::Max => Some(self),
            Direction::Auto => {
                let lower = statistic.to_ascii_lowercase();
                let words: Vec<&str> = lower.split(|c: char| !c.is_ascii_alphanumeric()).collect();
                let down = words.iter().any(|w| LOWER_IS_BETTER.contains(w));
                let up = words.iter().any(|w| HIGHER_IS_BETTER.contains(w));
                match (down, up) {
                    (true, false) => Some(Direction::Min),
                    (false, true) => Some(Direction::Max),
                    _ => None,
                }
            }
        }
    }

    /// Which way `statistic` improves, as [`resolve`](Self::resolve) tells; `None` when it
    /// cannot.
    pub(crate) fn resolve_better(self, statistic: &str) -> Option<Better> {
        match self.resolve(statistic)? {
            Direction::Max => Some(Better::Higher),
            _ => Some(Better::Lower),
        }
    }

    /// Which way `statistic` improves, or the error saying that the direction must be named.
    pub(crate) fn better(self, statistic: &str, owner: &str) -> Result<Better> {
        self.resolve_better(statistic).ok_or_else(|| {
            Error::invalid(format!(
                "{owner}: cannot tell from its name whether `{statistic}` should be minimized or maximized; \
                 name the direction with `.mode(Direction::Min)` or `.mode(Direction::Max)`"
            ))
        })
    }
}
