//! Validation during training: tensorpack's `InferenceRunner` and its inferencers.
//!
//! An [`InferenceRunner`] runs the model over another data set when triggered (every epoch by
//! default), hands each batch's values to its [`Inferencer`]s — all of them in one pass over the
//! data, with one device-to-host transfer per batch for all their values — and puts their results
//! to the monitors. The inferencers: [`ScalarStats`] (means over datapoints), [`ClassificationError`]
//! (the true error of the set), [`BinaryClassificationStats`] (precision, recall, F1),
//! [`MultiLabelStats`] (neon's per-class statistics), or one of the user's.
//!
//! One file per concept: the trait (`inferencer`), each inferencer (`scalar_stats`,
//! `classification`, `multi_label`) and the runner (`runner`).

mod classification;
mod inferencer;
mod multi_label;
mod runner;
mod scalar_stats;

pub use classification::{BinaryClassificationStats, ClassificationError};
pub use inferencer::Inferencer;
pub use multi_label::MultiLabelStats;
pub use runner::{ForwardOutput, InferenceCounts, InferenceRunner};
pub use scalar_stats::ScalarStats;

use crate::error::{Error, Result};

/// `<prefix>_<name>`, or `name` without a prefix.
pub(super) fn prefixed(prefix: &str, name: &str) -> String {
    if prefix.is_empty() { name.to_string() } else { format!("{prefix}_{name}") }
}

/// A 0/1 value of `name`, or the error saying it is neither.
pub(super) fn bit(value: f32, owner: &str, name: &str) -> Result<bool> {
    if value == 1.0 {
        Ok(true)
    } else if value == 0.0 {
        Ok(false)
    } else {
        Err(Error::Fetch(format!("{owner}: `{name}` holds {value}, not 0 or 1")))
    }
}

/// `numerator / denominator`, 0 when the denominator is 0.
pub(super) fn ratio_or_zero(numerator: u64, denominator: u64) -> f64 {
    if denominator == 0 { 0.0 } else { numerator as f64 / denominator as f64 }
}
