//! [`MultiLabelStats`]: neon's per-class statistics of a multi-label classifier.

use super::{Inferencer, bit, merged_len, prefixed, ratio_or_zero};
use crate::error::{Error, Result};
use crate::fetch::{Fetch, Fetched};

/// neon's epsilon in `PrecisionRecall`, for [`MultiLabelStats::mean_over_batches`].
const NEON_EPSILON: f64 = 1e-6;

/// Per-class statistics of a multi-label (or multi-class) classifier: neon's
/// `MultiLabelStatsCallback` with its `PrecisionRecall` metric, and the misclassification rate of
/// each class, written as monitor scalars.
///
/// The prediction and the label outputs are `[batch, classes]` matrices of 0/1 (one column per
/// class, in the order of `classes`); with [`argmax`](Self::argmax) the prediction holds scores
/// and each row's largest becomes its one predicted class (neon's `binarize`). For each class
/// `c`, over the whole pass: precision = TP / predicted positives, recall = TP / actual
/// positives (0 when the denominator is 0), misclassification = samples whose prediction for
/// `c` differs from their label / samples. Put as `<prefix>_precision/<class>`,
/// `<prefix>_recall/<class>`, `<prefix>_misclassification/<class>` (TensorBoard shows one group
/// per statistic), and their means over the classes (what neon's metric returns) as
/// `<prefix>_precision`, `<prefix>_recall`, `<prefix>_misclassification`; prefix `val` by default.
///
/// **Difference from neon**: neon computes the ratios of each batch, TP / (predicted + 1e-6),
/// and averages them over the batches, so a small last batch weighs as much as a full one and no
/// ratio reaches 1. By default stoker counts over the whole set; [`mean_over_batches`] reproduces
/// neon's arithmetic exactly (misclassification then also averages per-batch rates). neon prints
/// a line per class; the [`ScalarPrinter`](crate::monitor::ScalarPrinter) prints these scalars.
///
/// [`mean_over_batches`]: Self::mean_over_batches
///
/// ```
/// use burn_stoker::inference::MultiLabelStats;
/// // `val_precision/cat`, `val_recall/dog`, `val_misclassification/bird`, `val_precision`, ...
/// let stats = MultiLabelStats::new("predicted", "labels", ["cat", "dog", "bird"]);
/// // From scores, one class per sample.
/// let from_logits = MultiLabelStats::new("logits", "one_hot", ["cat", "dog", "bird"]).argmax(true);
/// # let _ = (stats, from_logits);
/// ```
#[derive(Debug, Clone)]
pub struct MultiLabelStats {
    fetches: [Fetch; 2],
    classes: Vec<String>,
    prefix: String,
    argmax: bool,
    batch_mean: bool,
    true_positives: Vec<u64>,
    predicted: Vec<u64>,
    actual: Vec<u64>,
    wrong: Vec<u64>,
    samples: u64,
    /// neon's per-batch ratios, summed: precision, recall, misclassification per class.
    batch_sums: Vec<[f64; 3]>,
    batches: u64,
    row: Vec<bool>,
}

impl MultiLabelStats {
    /// Read the `[batch, classes]` 0/1 matrices `prediction_name` and `label_name`, whose
    /// columns are `classes`.
    pub fn new<S: Into<String>>(
        prediction_name: &'static str,
        label_name: &'static str,
        classes: impl IntoIterator<Item = S>,
    ) -> Self {
        let classes: Vec<String> = classes.into_iter().map(Into::into).collect();
        let n = classes.len();
        MultiLabelStats {
            fetches: [Fetch::host(prediction_name), Fetch::host(label_name)],
            classes,
            prefix: "val".into(),
            argmax: false,
            batch_mean: false,
            true_positives: vec![0; n],
            predicted: vec![0; n],
            actual: vec![0; n],
            wrong: vec![0; n],
            samples: 0,
            batch_sums: vec![[0.0; 3]; n],
            batches: 0,
            row: vec![false; n],
        }
    }
    /// The prefix of the results' names (`val` by default; empty for none).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }
    /// Whether the prediction holds scores, each row's largest being the predicted class (neon's
    /// `binarize`; off by default: the prediction is 0/1).
    pub fn argmax(mut self, argmax: bool) -> Self {
        self.argmax = argmax;
        self
    }
    /// Compute as neon does: each batch's TP / (predicted + 1e-6) and TP / (actual + 1e-6) (and
    /// misclassified / samples), averaged over the batches (off by default: over the whole set).
    #[doc(alias = "neon_batch_mean")]
    pub fn mean_over_batches(mut self, enable: bool) -> Self {
        self.batch_mean = enable;
        self
    }

    fn check_shape(&self, name: &str, shape: &[usize], len: usize) -> Result<()> {
        let classes = self.classes.len();
        if shape.len() != 2 || shape[1] != classes || len != shape[0] * classes {
            return Err(Error::fetch(format!(
                "MultiLabelStats: `{name}` has shape {shape:?}; expected [batch, {classes}], one column per class ({})",
                self.classes.join(", ")
            )));
        }
        Ok(())
    }
}

impl Inferencer for MultiLabelStats {
    fn fetches(&self) -> &[Fetch] {
        &self.fetches
    }
    fn before_inference(&mut self) {
        for counts in [&mut self.true_positives, &mut self.predicted, &mut self.actual, &mut self.wrong] {
            counts.iter_mut().for_each(|c| *c = 0);
        }
        self.batch_sums.iter_mut().for_each(|s| *s = [0.0; 3]);
        self.samples = 0;
        self.batches = 0;
    }
    fn on_batch(&mut self, values: &Fetched<'_>) -> Result<()> {
        const OWNER: &str = "MultiLabelStats";
        if self.classes.is_empty() {
            return Err(Error::invalid("MultiLabelStats: no class names were given"));
        }
        let [prediction_name, label_name] = [&self.fetches[0].name, &self.fetches[1].name];
        let (predictions, prediction_shape) = values.host(prediction_name)?;
        let (labels, label_shape) = values.host(label_name)?;
        self.check_shape(prediction_name, prediction_shape, predictions.len())?;
        self.check_shape(label_name, label_shape, labels.len())?;
        if prediction_shape[0] != label_shape[0] {
            return Err(Error::fetch(format!(
                "MultiLabelStats: `{prediction_name}` has {} rows and `{label_name}` {}",
                prediction_shape[0], label_shape[0]
            )));
        }
        let classes = self.classes.len();
        let rows = prediction_shape[0];
        // This batch's counts start where the totals are.
        let before: Vec<[u64; 4]> = (0..classes)
            .map(|c| [self.true_positives[c], self.predicted[c], self.actual[c], self.wrong[c]])
            .collect();
        for (scores, truth) in predictions.chunks_exact(classes).zip(labels.chunks_exact(classes)) {
            if self.argmax {
                let best = scores
                    .iter()
                    .enumerate()
                    .fold(0, |best, (c, &s)| if s > scores[best] { c } else { best });
                self.row.iter_mut().enumerate().for_each(|(c, p)| *p = c == best);
            } else {
                for (p, &s) in self.row.iter_mut().zip(scores) {
                    *p = bit(s, OWNER, prediction_name)?;
                }
            }
            for (c, &t) in truth.iter().enumerate() {
                let (p, l) = (self.row[c], bit(t, OWNER, label_name)?);
                self.true_positives[c] += u64::from(p && l);
                self.predicted[c] += u64::from(p);
                self.actual[c] += u64::from(l);
                self.wrong[c] += u64::from(p != l);
            }
        }
        self.samples += rows as u64;
        if self.batch_mean {
            for (c, before) in before.iter().enumerate() {
                let tp = (self.true_positives[c] - before[0]) as f64;
                let predicted = (self.predicted[c] - before[1]) as f64;
                let actual = (self.actual[c] - before[2]) as f64;
                let wrong = (self.wrong[c] - before[3]) as f64;
                let sums = &mut self.batch_sums[c];
                sums[0] += tp / (predicted + NEON_EPSILON);
                sums[1] += tp / (actual + NEON_EPSILON);
                sums[2] += if rows == 0 { 0.0 } else { wrong / rows as f64 };
            }
        }
        self.batches += 1;
        Ok(())
    }
    /// Per class: true positives, predicted and actual positives, misclassified samples, and
    /// neon's three per-batch ratios summed; then the samples and the batches. neon's batch
    /// mean combines exactly too: the ratios of every batch of every rank, over all the batches.
    fn partial(&self) -> Option<Vec<f64>> {
        let classes = self.classes.len();
        let mut values = Vec::with_capacity(7 * classes + 2);
        for c in 0..classes {
            values.extend(
                [self.true_positives[c], self.predicted[c], self.actual[c], self.wrong[c]].map(|v| v as f64),
            );
            values.extend(self.batch_sums[c]);
        }
        values.extend([self.samples as f64, self.batches as f64]);
        Some(values)
    }
    fn merge(&mut self, summed: &[f64]) -> Result<()> {
        let classes = self.classes.len();
        merged_len("MultiLabelStats", summed, 7 * classes + 2)?;
        for (c, values) in summed.chunks_exact(7).take(classes).enumerate() {
            self.true_positives[c] = values[0] as u64;
            self.predicted[c] = values[1] as u64;
            self.actual[c] = values[2] as u64;
            self.wrong[c] = values[3] as u64;
            self.batch_sums[c] = [values[4], values[5], values[6]];
        }
        self.samples = summed[7 * classes] as u64;
        self.batches = summed[7 * classes + 1] as u64;
        Ok(())
    }
    fn after_inference(&mut self) -> Vec<(String, f64)> {
        let classes = self.classes.len();
        let per_class: Vec<[f64; 3]> = (0..classes)
            .map(|c| {
                if self.batch_mean {
                    let n = self.batches.max(1) as f64;
                    let sums = self.batch_sums[c];
                    [sums[0] / n, sums[1] / n, sums[2] / n]
                } else {
                    [
                        ratio_or_zero(self.true_positives[c], self.predicted[c]),
                        ratio_or_zero(self.true_positives[c], self.actual[c]),
                        ratio_or_zero(self.wrong[c], self.samples),
                    ]
                }
            })
            .collect();
        let mut results = Vec::with_capacity(4 * classes + 3);
        for (k, statistic) in ["precision", "recall", "misclassification"].into_iter().enumerate() {
            let name = prefixed(&self.prefix, statistic);
            for (class, values) in self.classes.iter().zip(&per_class) {
                results.push((format!("{name}/{class}"), values[k]));
            }
            let mean = per_class.iter().map(|v| v[k]).sum::<f64>() / classes.max(1) as f64;
            results.push((name, mean));
        }
        results
    }
}
