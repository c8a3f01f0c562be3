//! Validation during training: tensorpack's `InferenceRunner` and its inferencers.
//!
//! An [`InferenceRunner`] runs the model over another data set when triggered (every epoch by
//! default), hands each batch's values to its [`Inferencer`]s — all of them in one pass over the
//! data, with one device-to-host transfer per batch for all their values — and puts their results
//! to the monitors. The inferencers: [`ScalarStats`] (means over datapoints), [`ClassificationError`]
//! (the true error of the set), [`BinaryClassificationStats`] (precision, recall, F1),
//! [`MultiLabelStats`] (neon's per-class statistics), or one of the user's.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::callback::{Callback, Context, short_type_name};
use crate::error::{Error, Result};
use crate::fetch::{Fetch, FetchPlan, Fetched, Outputs};
use crate::trainer::{BatchIter, TrainData};
use burn::module::Module;

/// Computes statistics over a whole pass of inference from the values of each batch.
///
/// The runner calls, for each pass: [`before_inference`](Self::before_inference), then for each
/// batch [`set_batch_size`](Self::set_batch_size) (when the batch's size is known, and always
/// when [`needs_batch_size`](Self::needs_batch_size) says so) and
/// [`on_batch`](Self::on_batch), then [`after_inference`](Self::after_inference), whose named
/// results go to the monitors.
///
/// A user inferencer: the largest per-sample loss of the validation set.
///
/// ```
/// use burn::nn::Linear;
/// use burn::tensor::Tensor;
/// use burn_stoker::prelude::*;
/// use burn_stoker::Inferencer;
///
/// struct WorstLoss {
///     fetches: [Fetch; 1],
///     worst: f64,
/// }
///
/// impl Inferencer for WorstLoss {
///     fn fetches(&self) -> &[Fetch] {
///         &self.fetches
///     }
///     fn before_inference(&mut self) {
///         self.worst = f64::NEG_INFINITY;
///     }
///     fn on_batch(&mut self, values: &Fetched<'_>) -> burn_stoker::Result<()> {
///         // One value per sample, copied to the host with every other inferencer's values.
///         let (losses, _shape) = values.host("losses")?;
///         for &loss in losses {
///             self.worst = self.worst.max(f64::from(loss));
///         }
///         Ok(())
///     }
///     fn after_inference(&mut self) -> Vec<(String, f64)> {
///         vec![("validation_worst_loss".into(), self.worst)]
///     }
/// }
///
/// let validation: Vec<(Tensor<2>, Tensor<2>)> = Vec::new();
/// let runner = InferenceRunner::new(validation, |model: &Linear, (x, y): (Tensor<2>, Tensor<2>), out: &mut Outputs| {
///     let n = x.dims()[0];
///     out.put("losses", (model.forward(x) - y).powi_scalar(2).mean_dim(1).reshape([n]));
/// })
/// .with(WorstLoss { fetches: [Fetch::host("losses")], worst: f64::NEG_INFINITY });
/// # let _ = runner;
/// ```
pub trait Inferencer {
    /// The inferencer's name in error messages (its type's name by default).
    fn name(&self) -> Cow<'static, str> {
        Cow::Borrowed(short_type_name::<Self>())
    }
    /// The outputs this inferencer reads (copied to the host, all inferencers in one transfer).
    fn fetches(&self) -> &[Fetch];
    /// A pass begins.
    fn before_inference(&mut self);
    /// One batch's values.
    fn on_batch(&mut self, values: &Fetched<'_>) -> Result<()>;
    /// The pass ended: the named results, which go to the monitors.
    fn after_inference(&mut self) -> Vec<(String, f64)>;
    /// Whether [`on_batch`](Self::on_batch) needs to know how many datapoints the batch holds
    /// (false by default; [`ScalarStats`] does). The runner then tells it with
    /// [`set_batch_size`](Self::set_batch_size) before each batch, or fails naming this
    /// inferencer when it cannot tell (see [`InferenceRunner`]).
    fn needs_batch_size(&self) -> bool {
        false
    }
    /// The number of datapoints in the batch whose values [`on_batch`](Self::on_batch) receives
    /// next. Ignored by default.
    fn set_batch_size(&mut self, batch_size: usize) {
        let _ = batch_size;
    }
}

/// The mean of scalar outputs over the datapoints of a pass, put as `<prefix>_<name>`
/// (tensorpack's `ScalarStats`, prefix `validation` by default).
///
/// Each batch's value weighs by the batch's number of datapoints, so the result is the mean over
/// the datapoints even when the last batch is smaller: with a mean cost per batch, it is the
/// mean cost of the set (tensorpack documents this, but its code averages the batches, which is
/// wrong for an uneven last batch). The runner tells each batch's size (see [`InferenceRunner`]:
/// the forward function returns it, or it is read off a per-sample output). Still, a mean of
/// per-batch *accuracies* weighted by size is the set's accuracy only when each is a plain
/// per-sample mean: [`ClassificationError`] counts the samples themselves.
///
/// ```
/// use burn_stoker::prelude::*;
/// // `validation_cost` and `validation_accuracy`; `cost` and `accuracy` without a prefix.
/// let stats = ScalarStats::new(["cost", "accuracy"]);
/// let bare = ScalarStats::new(["cost", "accuracy"]).prefix("");
/// # let _ = (stats, bare);
/// ```
#[derive(Debug, Clone)]
pub struct ScalarStats {
    fetches: Vec<Fetch>,
    prefix: String,
    sums: Vec<f64>,
    datapoints: u64,
    batch_size: Option<usize>,
}

impl ScalarStats {
    /// Average these scalar outputs.
    pub fn new(names: impl IntoIterator<Item = &'static str>) -> Self {
        let fetches: Vec<Fetch> = names.into_iter().map(Fetch::host).collect();
        ScalarStats {
            sums: vec![0.0; fetches.len()],
            fetches,
            prefix: "validation".into(),
            datapoints: 0,
            batch_size: None,
        }
    }
    /// The prefix of the results' names (`validation` by default; empty for none).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }
}

/// `<prefix>_<name>`, or `name` without a prefix.
fn prefixed(prefix: &str, name: &str) -> String {
    if prefix.is_empty() { name.to_string() } else { format!("{prefix}_{name}") }
}

impl Inferencer for ScalarStats {
    fn fetches(&self) -> &[Fetch] {
        &self.fetches
    }
    fn before_inference(&mut self) {
        self.sums.iter_mut().for_each(|s| *s = 0.0);
        self.datapoints = 0;
        self.batch_size = None;
    }
    fn needs_batch_size(&self) -> bool {
        true
    }
    fn set_batch_size(&mut self, batch_size: usize) {
        self.batch_size = Some(batch_size);
    }
    fn on_batch(&mut self, values: &Fetched<'_>) -> Result<()> {
        let n = self.batch_size.take().ok_or_else(|| {
            Error::msg(
                "ScalarStats: the batch's number of datapoints is unknown: InferenceRunner tells it \
                 (call set_batch_size before on_batch)",
            )
        })?;
        for (sum, fetch) in self.sums.iter_mut().zip(&self.fetches) {
            *sum += values.get::<f64>(&fetch.name)? * n as f64;
        }
        self.datapoints += n as u64;
        Ok(())
    }
    fn after_inference(&mut self) -> Vec<(String, f64)> {
        let n = self.datapoints as f64;
        self.fetches
            .iter()
            .zip(&self.sums)
            .map(|(fetch, sum)| {
                (prefixed(&self.prefix, &fetch.name), if n == 0.0 { f64::NAN } else { sum / n })
            })
            .collect()
    }
}

/// The true classification error of a pass, from an output holding one value per sample (1 if
/// the sample is misclassified, 0 if not): the sum over all samples divided by their number,
/// so batches of any size weigh by their size (tensorpack's `ClassificationError`). Give it a
/// "correct" vector instead and it computes the accuracy.
///
/// Several in one runner read several vectors in the same pass and the same transfer, as in
/// tensorpack's ResNet example:
///
/// ```
/// use burn::tensor::Tensor;
/// use burn_stoker::prelude::*;
/// // Batches of per-sample misses: 1 where the label is not the top-1 (top-5) prediction.
/// let validation: Vec<(Tensor<1>, Tensor<1>)> = Vec::new();
/// let runner = InferenceRunner::new(validation, |_model: &burn::nn::Linear, (top1, top5): (Tensor<1>, Tensor<1>), out: &mut Outputs| {
///     out.put("wrong-top1", top1);
///     out.put("wrong-top5", top5);
/// })
/// .with(ClassificationError::new("wrong-top1", "val-error-top1"))
/// .with(ClassificationError::new("wrong-top5", "val-error-top5"));
/// # let _ = runner;
/// ```
#[derive(Debug, Clone)]
pub struct ClassificationError {
    fetches: [Fetch; 1],
    summary_name: String,
    wrong: f64,
    total: u64,
}

impl ClassificationError {
    /// Read the per-sample vector `wrong_name`; put the result as `summary_name`
    /// (tensorpack: `incorrect_vector` and `validation_error`).
    pub fn new(wrong_name: &'static str, summary_name: impl Into<String>) -> Self {
        ClassificationError {
            fetches: [Fetch::host(wrong_name)],
            summary_name: summary_name.into(),
            wrong: 0.0,
            total: 0,
        }
    }
}

impl Inferencer for ClassificationError {
    fn fetches(&self) -> &[Fetch] {
        &self.fetches
    }
    fn before_inference(&mut self) {
        self.wrong = 0.0;
        self.total = 0;
    }
    fn on_batch(&mut self, values: &Fetched<'_>) -> Result<()> {
        let (wrong, _) = values.host(&self.fetches[0].name)?;
        self.wrong += wrong.iter().map(|&w| f64::from(w)).sum::<f64>();
        self.total += wrong.len() as u64;
        Ok(())
    }
    fn after_inference(&mut self) -> Vec<(String, f64)> {
        let error = if self.total == 0 { f64::NAN } else { self.wrong / self.total as f64 };
        vec![(self.summary_name.clone(), error)]
    }
}

/// A 0/1 value of `name`, or the error saying it is neither.
fn bit(value: f32, owner: &str, name: &str) -> Result<bool> {
    if value == 1.0 {
        Ok(true)
    } else if value == 0.0 {
        Ok(false)
    } else {
        Err(Error::Fetch(format!("{owner}: `{name}` holds {value}, not 0 or 1")))
    }
}

/// `numerator / denominator`, 0 when the denominator is 0.
fn ratio_or_zero(numerator: u64, denominator: u64) -> f64 {
    if denominator == 0 { 0.0 } else { numerator as f64 / denominator as f64 }
}

/// Precision, recall and F1 of a binary classifier over the whole pass, from a 0/1 prediction
/// per sample and a 0/1 label per sample (tensorpack's `BinaryClassificationStats`, with F1
/// added), put as `<prefix>_precision`, `<prefix>_recall` and `<prefix>_f1` (prefix `val` by
/// default, as tensorpack's).
///
/// The counts of true positives (TP), false positives (FP) and false negatives (FN) add up over
/// every batch, whatever its size; then precision = TP / (TP + FP), recall = TP / (TP + FN),
/// F1 = 2 TP / (2 TP + FP + FN) (the harmonic mean of the two). A ratio whose denominator is 0 —
/// no positive prediction, no positive label, neither — is **0**, as tensorpack's and
/// scikit-learn's default (`zero_division`) make it: a classifier that finds nothing scores 0.
///
/// The two outputs may have any shape, the same number of values (each value is one decision);
/// a value other than 0 or 1 is an error naming it (threshold the scores in the forward
/// function: `probabilities.greater_elem(0.5).float()`).
///
/// ```
/// use burn_stoker::inference::BinaryClassificationStats;
/// // `val_precision`, `val_recall`, `val_f1`.
/// let stats = BinaryClassificationStats::new("predicted", "label");
/// // `test_precision`, `test_recall`, `test_f1`.
/// let test = BinaryClassificationStats::new("predicted", "label").prefix("test");
/// # let _ = (stats, test);
/// ```
#[derive(Debug, Clone)]
pub struct BinaryClassificationStats {
    fetches: [Fetch; 2],
    prefix: String,
    true_positives: u64,
    false_positives: u64,
    false_negatives: u64,
    true_negatives: u64,
}

impl BinaryClassificationStats {
    /// Read the 0/1 prediction `prediction_name` and the 0/1 label `label_name`.
    pub fn new(prediction_name: &'static str, label_name: &'static str) -> Self {
        BinaryClassificationStats {
            fetches: [Fetch::host(prediction_name), Fetch::host(label_name)],
            prefix: "val".into(),
            true_positives: 0,
            false_positives: 0,
            false_negatives: 0,
            true_negatives: 0,
        }
    }
    /// The prefix of the results' names (`val` by default; empty for none).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }
    /// True positives, false positives, false negatives and true negatives of the last pass.
    pub fn counts(&self) -> [u64; 4] {
        [self.true_positives, self.false_positives, self.false_negatives, self.true_negatives]
    }
}

impl Inferencer for BinaryClassificationStats {
    fn fetches(&self) -> &[Fetch] {
        &self.fetches
    }
    fn before_inference(&mut self) {
        self.true_positives = 0;
        self.false_positives = 0;
        self.false_negatives = 0;
        self.true_negatives = 0;
    }
    fn on_batch(&mut self, values: &Fetched<'_>) -> Result<()> {
        let [prediction_name, label_name] = [&self.fetches[0].name, &self.fetches[1].name];
        let (predictions, prediction_shape) = values.host(prediction_name)?;
        let (labels, label_shape) = values.host(label_name)?;
        if predictions.len() != labels.len() {
            return Err(Error::Fetch(format!(
                "BinaryClassificationStats: `{prediction_name}` has shape {prediction_shape:?} and `{label_name}` shape {label_shape:?}: they must hold one value per sample each"
            )));
        }
        for (&p, &l) in predictions.iter().zip(labels) {
            let p = bit(p, "BinaryClassificationStats", prediction_name)?;
            let l = bit(l, "BinaryClassificationStats", label_name)?;
            match (p, l) {
                (true, true) => self.true_positives += 1,
                (true, false) => self.false_positives += 1,
                (false, true) => self.false_negatives += 1,
                (false, false) => self.true_negatives += 1,
            }
        }
        Ok(())
    }
    fn after_inference(&mut self) -> Vec<(String, f64)> {
        let (tp, fp, fn_) = (self.true_positives, self.false_positives, self.false_negatives);
        vec![
            (prefixed(&self.prefix, "precision"), ratio_or_zero(tp, tp + fp)),
            (prefixed(&self.prefix, "recall"), ratio_or_zero(tp, tp + fn_)),
            (prefixed(&self.prefix, "f1"), ratio_or_zero(2 * tp, 2 * tp + fp + fn_)),
        ]
    }
}

/// neon's epsilon in `PrecisionRecall`, for [`MultiLabelStats::neon_batch_mean`].
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
/// ratio reaches 1. By default stoker counts over the whole set; [`neon_batch_mean`] reproduces
/// neon's arithmetic exactly (misclassification then also averages per-batch rates). neon prints
/// a line per class; the [`ScalarPrinter`](crate::ScalarPrinter) prints these scalars.
///
/// [`neon_batch_mean`]: Self::neon_batch_mean
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
    pub fn neon_batch_mean(mut self, enable: bool) -> Self {
        self.batch_mean = enable;
        self
    }

    fn check_shape(&self, name: &str, shape: &[usize], len: usize) -> Result<()> {
        let classes = self.classes.len();
        if shape.len() != 2 || shape[1] != classes || len != shape[0] * classes {
            return Err(Error::Fetch(format!(
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
            return Err(Error::msg("MultiLabelStats: no class names were given"));
        }
        let [prediction_name, label_name] = [&self.fetches[0].name, &self.fetches[1].name];
        let (predictions, prediction_shape) = values.host(prediction_name)?;
        let (labels, label_shape) = values.host(label_name)?;
        self.check_shape(prediction_name, prediction_shape, predictions.len())?;
        self.check_shape(label_name, label_shape, labels.len())?;
        if prediction_shape[0] != label_shape[0] {
            return Err(Error::Fetch(format!(
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

/// What an [`InferenceRunner`]'s forward function returns: `()`, or the batch's number of
/// datapoints as a `usize`.
#[diagnostic::on_unimplemented(
    message = "an inference forward function cannot return `{Self}`",
    label = "return `()` or the batch's number of datapoints (`usize`)",
    note = "the forward function puts its outputs into `out`; it may return the batch size for the inferencers that weigh batches by it (ScalarStats)"
)]
pub trait ForwardOutput {
    /// The batch's number of datapoints, when the forward function tells it.
    fn batch_size(self) -> Option<usize>;
}

impl ForwardOutput for () {
    fn batch_size(self) -> Option<usize> {
        None
    }
}

impl ForwardOutput for usize {
    fn batch_size(self) -> Option<usize> {
        Some(self)
    }
}

#[derive(Debug, Default)]
struct CountsInner {
    passes: AtomicU64,
    batches: AtomicU64,
    transfers: AtomicU64,
}

/// The counts of an [`InferenceRunner`], readable after the trainer took the runner:
/// passes over the data, batches run, device-to-host transfers made. Cloning shares them.
#[derive(Debug, Clone, Default)]
pub struct InferenceCounts(Arc<CountsInner>);

impl InferenceCounts {
    /// Passes over the inference data.
    pub fn passes(&self) -> u64 {
        self.0.passes.load(Ordering::Relaxed)
    }
    /// Batches run, over every pass.
    pub fn batches(&self) -> u64 {
        self.0.batches.load(Ordering::Relaxed)
    }
    /// Device-to-host transfers of the inferencers' values, over every pass.
    pub fn transfers(&self) -> u64 {
        self.0.transfers.load(Ordering::Relaxed)
    }
}

/// Runs inference over another data set when triggered (every epoch by default) and puts the
/// inferencers' results to the monitors (tensorpack's `InferenceRunner`).
///
/// `forward` computes the outputs of one batch with the model in evaluation mode (`valid()`: no
/// autodiff graph) and puts them into `out`. Every inferencer sees every batch of one pass; the
/// values they read leave the device in one transfer per batch, whatever their number.
///
/// **Batch sizes.** Inferencers that weigh batches by their number of datapoints
/// ([`ScalarStats`]) learn it from the runner, which knows it:
/// - when `forward` returns it (a `usize`: `|model, batch, out| { ...; n }`);
/// - otherwise from the outputs, as Lightning infers a batch's size: on the first batch, the
///   outputs holding more than one value are taken as per-sample outputs, and their first
///   dimension, which must agree, is the batch size; later batches read the same outputs' first
///   dimension (a last batch of one sample included). Only the tensors' shapes are read: no
///   transfer, no sync.
///
/// When neither works (the forward function puts only scalars, or outputs whose first dimensions
/// differ), a runner with such an inferencer fails with an error saying so: return the size from
/// `forward`. An output holding several values that are not per sample (a per-class mean)
/// misleads the inference: return the size then too.
///
/// ```
/// use burn::nn::Linear;
/// use burn::tensor::Tensor;
/// use burn_stoker::prelude::*;
///
/// let validation: Vec<(Tensor<2>, Tensor<2>)> = Vec::new();
/// let runner = InferenceRunner::new(validation, |model: &Linear, (x, y): (Tensor<2>, Tensor<2>), out: &mut Outputs| {
///     let n = x.dims()[0];
///     out.put("cost", (model.forward(x) - y).powi_scalar(2).mean());
///     n // The batch size: `validation_cost` is the mean over the samples.
/// })
/// .with(ScalarStats::new(["cost"]));
/// let counts = runner.counts(); // passes, batches and transfers, readable after training
/// # let _ = (runner, counts);
/// ```
///
/// The parameters' defaults let an order target name the bare type: `#[order(after = InferenceRunner)]`.
pub struct InferenceRunner<D = (), F = ()> {
    data: D,
    forward: F,
    inferencers: Vec<Box<dyn Inferencer>>,
    plan: FetchPlan,
    mask: u64,
    outputs: Outputs,
    needs_batch_size: bool,
    /// The outputs whose first dimension is the batch size, learnt on the first batch.
    per_sample: Vec<&'static str>,
    counts: InferenceCounts,
}

impl<D, F> InferenceRunner<D, F> {
    /// Inference over `data` with `forward`.
    pub fn new(data: D, forward: F) -> Self {
        InferenceRunner {
            data,
            forward,
            inferencers: Vec::new(),
            plan: FetchPlan::default(),
            mask: 0,
            outputs: Outputs::new(),
            needs_batch_size: false,
            per_sample: Vec::new(),
            counts: InferenceCounts::default(),
        }
    }
    /// Add an inferencer.
    pub fn with(mut self, inferencer: impl Inferencer + 'static) -> Self {
        self.inferencers.push(Box::new(inferencer));
        self
    }
    /// A handle on this runner's counts (passes, batches, transfers), which stays readable after
    /// the trainer took the runner.
    pub fn counts(&self) -> InferenceCounts {
        self.counts.clone()
    }
}

/// The names of the inferencers that need the batch size, for error messages.
fn needing(inferencers: &[Box<dyn Inferencer>]) -> String {
    let names: Vec<String> =
        inferencers.iter().filter(|i| i.needs_batch_size()).map(|i| format!("`{}`", i.name())).collect();
    names.join(", ")
}

/// The current batch's size, read off its per-sample outputs (`per_sample`, learnt on the first
/// batch).
fn inferred_batch_size(
    outputs: &Outputs,
    per_sample: &mut Vec<&'static str>,
    inferencers: &[Box<dyn Inferencer>],
) -> Result<usize> {
    let describe = |names: &mut dyn Iterator<Item = &'static str>| -> String {
        let list: Vec<String> =
            names.filter_map(|n| outputs.get(n).map(|t| format!("`{n}` {:?}", t.dims()))).collect();
        list.join(", ")
    };
    let fix = "return the batch size from the forward function (`|model, batch, out| { ...; batch_size }`)";
    if per_sample.is_empty() {
        let candidates: Vec<&'static str> =
            outputs.names().filter(|n| outputs.get(n).is_some_and(|t| t.num_elements() > 1)).collect();
        let Some(&first) = candidates.first() else {
            return Err(Error::Fetch(format!(
                "InferenceRunner: {} needs each batch's number of datapoints, which cannot be read off the forward function's outputs: each holds one value ({}); {fix}",
                needing(inferencers),
                describe(&mut outputs.names())
            )));
        };
        let size = outputs.get(first).map_or(0, |t| t.dims()[0]);
        if candidates.iter().any(|n| outputs.get(n).is_some_and(|t| t.dims()[0] != size)) {
            return Err(Error::Fetch(format!(
                "InferenceRunner: {} needs each batch's number of datapoints, which cannot be read off the forward function's outputs: their first dimensions differ ({}); {fix}",
                needing(inferencers),
                describe(&mut candidates.iter().copied())
            )));
        }
        *per_sample = candidates;
        return Ok(size);
    }
    let mut size = None;
    for &name in per_sample.iter() {
        let Some(tensor) = outputs.get(name) else {
            return Err(Error::Fetch(format!(
                "InferenceRunner: the forward function put `{name}` on an earlier batch, and the batch size was read off it, but not on this one; {fix}"
            )));
        };
        let first = tensor.dims()[0];
        if size.is_some_and(|s| s != first) {
            return Err(Error::Fetch(format!(
                "InferenceRunner: the per-sample outputs' first dimensions differ on this batch ({}); {fix}",
                describe(&mut per_sample.iter().copied())
            )));
        }
        size = Some(first);
    }
    Ok(size.unwrap_or(0))
}

impl<M, D, F, R> Callback<M> for InferenceRunner<D, F>
where
    M: Module,
    D: TrainData,
    F: FnMut(&M, D::Batch, &mut Outputs) -> R,
    R: ForwardOutput,
{
    fn setup(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        if self.inferencers.is_empty() {
            return Err(Error::msg("InferenceRunner has no inferencer: add one with .with(...)"));
        }
        for inferencer in &self.inferencers {
            for fetch in inferencer.fetches() {
                self.mask |= self.plan.declare(fetch, "InferenceRunner")?;
            }
        }
        self.needs_batch_size = self.inferencers.iter().any(|i| i.needs_batch_size());
        Ok(())
    }

    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let model = ctx.model().valid();
        self.inferencers.iter_mut().for_each(|i| i.before_inference());
        let transfers = self.plan.transfers();
        let mut pass = self.data.pass();
        let mut batches = 0u64;
        while let Some(batch) = pass.next_batch() {
            self.outputs.clear();
            let returned = (self.forward)(&model, batch?, &mut self.outputs).batch_size();
            if batches == 0 {
                self.plan.check_names(
                    &self.outputs,
                    &[("InferenceRunner".into(), self.mask)],
                    "its forward function",
                )?;
            }
            let batch_size = match returned {
                Some(size) => Some(size),
                None if self.needs_batch_size => {
                    Some(inferred_batch_size(&self.outputs, &mut self.per_sample, &self.inferencers)?)
                }
                None => None,
            };
            self.plan.fill(&self.outputs, self.mask)?;
            let values = self.plan.view();
            for inferencer in &mut self.inferencers {
                if let Some(size) = batch_size {
                    inferencer.set_batch_size(size);
                }
                inferencer.on_batch(&values)?;
            }
            batches += 1;
        }
        let counts = &self.counts.0;
        counts.passes.fetch_add(1, Ordering::Relaxed);
        counts.batches.fetch_add(batches, Ordering::Relaxed);
        counts.transfers.fetch_add(self.plan.transfers() - transfers, Ordering::Relaxed);
        if batches == 0 {
            return Err(Error::Data("InferenceRunner: the inference data produced no batch".into()));
        }
        for inferencer in &mut self.inferencers {
            for (name, value) in inferencer.after_inference() {
                ctx.monitors().put_scalar(&name, value);
            }
        }
        Ok(())
    }
}
