//! Multiclass classification over a pass, counted on the device: the top-k accuracy
//! ([`TopKAccuracy`]) and the confusion matrix with the precision, recall and F1 it gives
//! ([`MulticlassStats`], its matrix also an image in TensorBoard).

use burn::tensor::Tensor;

use super::classes::{host_values, matrix, one_hot, output, rebuilt, top_k_hits};
use super::{Inferencer, merged_len, prefixed, ratio_or_zero};
use crate::error::{Error, Result};
use crate::fetch::{Fetch, Fetched, Outputs};
use crate::state::Image;

/// The share of samples whose label is among the `k` highest scores (scikit-learn's
/// `top_k_accuracy_score`), put as `<prefix>_top<k>_accuracy` (prefix `val` by default:
/// `val_top5_accuracy`).
///
/// Reads the scores `[batch, classes]` (logits or probabilities: only their order counts) and the
/// labels, a class index per sample (`[batch]`, as floats) or a one-hot row per sample
/// (`[batch, classes]`). Ties are broken as scikit-learn breaks them: among classes of equal
/// score, the higher class index ranks first. The hits are counted on the device and added up
/// there over the pass (one value per batch, nothing copied), read in the pass's one transfer.
///
/// ```
/// use burn::tensor::Tensor;
/// use burn_stoker::inference::TopKAccuracy;
/// use burn_stoker::prelude::*;
///
/// let validation: Vec<(Tensor<2>, Tensor<1>)> = Vec::new();
/// let runner = InferenceRunner::new(validation, |model: &burn::nn::Linear, (x, label): (Tensor<2>, Tensor<1>), out: &mut Outputs| {
///     out.put("logits", model.forward(x));
///     out.put("label", label); // class indices, as floats
/// })
/// // `val_top1_accuracy` and `val_top5_accuracy`.
/// .with(TopKAccuracy::new("logits", "label", 1))
/// .with(TopKAccuracy::new("logits", "label", 5));
/// # let _ = runner;
/// ```
#[derive(Debug, Clone)]
#[doc(alias = "TopKAccuracyMetric")]
#[doc(alias = "TopKCategoricalAccuracy")]
pub struct TopKAccuracy {
    fetches: [Fetch; 2],
    names: [&'static str; 2],
    k: usize,
    prefix: String,
    hits: f64,
    samples: u64,
}

impl TopKAccuracy {
    /// Read the scores `scores_name` and the labels `label_name`; count a hit when the label is
    /// among the `k` best scores (`k` ≥ 1; `k` at least the number of classes counts every
    /// sample).
    pub fn new(scores_name: &'static str, label_name: &'static str, k: usize) -> Self {
        TopKAccuracy {
            fetches: [Fetch::host(scores_name), Fetch::host(label_name)],
            names: [scores_name, label_name],
            k: k.max(1),
            prefix: "val".into(),
            hits: 0.0,
            samples: 0,
        }
    }
    /// The prefix of the result's name (`val` by default; empty for none).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }
}

impl Inferencer for TopKAccuracy {
    fn fetches(&self) -> &[Fetch] {
        &self.fetches
    }
    fn before_inference(&mut self) {
        self.hits = 0.0;
        self.samples = 0;
    }
    /// The host path: the batch rebuilt on the CPU, through the device code.
    fn on_batch(&mut self, values: &Fetched<'_>) -> Result<()> {
        let outputs = rebuilt(values, &self.names, "TopKAccuracy")?;
        let hits = host_values(self.batch_sums(&outputs)?);
        self.hits += hits[0];
        Ok(())
    }
    /// The hits.
    fn sums_on_device(&self) -> bool {
        true
    }
    fn batch_sums(&mut self, outputs: &Outputs) -> Result<Tensor<1>> {
        let [scores_name, label_name] = self.names;
        let scores = output(outputs, "TopKAccuracy", scores_name)?;
        let classes = scores.dims().last().copied().unwrap_or(0);
        let scores = matrix(scores, classes, "TopKAccuracy", scores_name)?;
        let label =
            one_hot(output(outputs, "TopKAccuracy", label_name)?, classes, "TopKAccuracy", label_name)?;
        if label.dims()[0] != scores.dims()[0] {
            return Err(Error::fetch(format!(
                "TopKAccuracy: `{scores_name}` holds {} samples and `{label_name}` {}",
                scores.dims()[0],
                label.dims()[0]
            )));
        }
        self.samples += scores.dims()[0] as u64;
        Ok(top_k_hits(scores, label, self.k))
    }
    fn device_sums(&mut self, sums: &[f64]) -> Result<()> {
        merged_len("TopKAccuracy", sums, 1)?;
        self.hits = sums[0];
        Ok(())
    }
    /// The hits and the samples.
    fn partial(&self) -> Option<Vec<f64>> {
        Some(vec![self.hits, self.samples as f64])
    }
    fn merge(&mut self, summed: &[f64]) -> Result<()> {
        merged_len("TopKAccuracy", summed, 2)?;
        (self.hits, self.samples) = (summed[0], summed[1] as u64);
        Ok(())
    }
    /// NaN after a pass of no sample.
    fn after_inference(&mut self) -> Vec<(String, f64)> {
        let accuracy = if self.samples == 0 { f64::NAN } else { self.hits / self.samples as f64 };
        vec![(prefixed(&self.prefix, &format!("top{}_accuracy", self.k)), accuracy)]
    }
}

/// The confusion matrix of a multiclass classifier over the pass, and the accuracy, precision,
/// recall and F1 it gives, as scikit-learn's `precision_recall_fscore_support` over the classes
/// `0..classes` (`labels=range(classes)`).
///
/// Reads the prediction and the label of each sample, each a class index (`[batch]`, as floats)
/// or a row per sample (`[batch, classes]`: scores, whose first largest is the class, as NumPy's
/// `argmax`, or a one-hot row). Each batch adds `one_hot(label)ᵀ · one_hot(prediction)`, a
/// `classes × classes` matrix of counts, to the pass's total on the device; the matrix is read
/// in the pass's one transfer (with every other device inferencer's sums), and the statistics
/// follow on the host. A sample whose label or prediction is no class in `0..classes` (a
/// class index out of range or not whole) is an error naming the outputs, found at no cost: the
/// matrix then counts fewer samples than the batches held.
///
/// Put, with the prefix (`val` by default):
///
/// | name | what |
/// |---|---|
/// | `<prefix>_accuracy` | the share of samples on the diagonal (= the micro averages) |
/// | `<prefix>_precision_macro`, `_recall_macro`, `_f1_macro` | the mean over the classes |
/// | `<prefix>_precision_micro`, `_recall_micro`, `_f1_micro` | from the counts summed over the classes |
/// | `<prefix>_precision_weighted`, `_recall_weighted`, `_f1_weighted` | the mean weighted by each class's number of labels |
/// | `<prefix>_confusion_matrix` | an image (TensorBoard): row *i* the label *i*, column *j* the prediction *j*; each cell's grey is its share of its row (white: all the samples of the class), `cell_pixels` wide |
///
/// A class's precision is TP / (TP + FP), its recall TP / (TP + FN), its F1 2 TP / (2 TP + FP +
/// FN); a ratio whose denominator is 0 (a class never predicted, or never the label) is **0**,
/// scikit-learn's `zero_division` default. [`confusion_matrix`](Self::confusion_matrix) gives
/// the last pass's counts.
///
/// ```
/// use burn::tensor::Tensor;
/// use burn_stoker::inference::MulticlassStats;
/// use burn_stoker::prelude::*;
///
/// let validation: Vec<(Tensor<2>, Tensor<1>)> = Vec::new();
/// let runner = InferenceRunner::new(validation, |model: &burn::nn::Linear, (x, label): (Tensor<2>, Tensor<1>), out: &mut Outputs| {
///     out.put("logits", model.forward(x)); // the prediction: the first largest logit
///     out.put("label", label);
/// })
/// // `val_accuracy`, `val_f1_macro`, ..., and the image `val_confusion_matrix`.
/// .with(MulticlassStats::new("logits", "label", 10));
/// // On a test set: `test_accuracy`, `test_f1_macro`, ...
/// let test = MulticlassStats::new("logits", "label", 10).prefix("test");
/// # let _ = (runner, test);
/// ```
#[derive(Debug, Clone)]
#[doc(alias = "ConfusionMatrix")]
#[doc(alias = "PrecisionMetric")]
#[doc(alias = "RecallMetric")]
#[doc(alias = "FBetaScoreMetric")]
pub struct MulticlassStats {
    fetches: [Fetch; 2],
    names: [&'static str; 2],
    classes: usize,
    prefix: String,
    image: bool,
    /// Row `label`, column `prediction`, row after row.
    matrix: Vec<f64>,
    samples: u64,
}

impl MulticlassStats {
    /// Read the predictions `prediction_name` and the labels `label_name` of `classes` classes.
    pub fn new(prediction_name: &'static str, label_name: &'static str, classes: usize) -> Self {
        MulticlassStats {
            fetches: [Fetch::host(prediction_name), Fetch::host(label_name)],
            names: [prediction_name, label_name],
            classes,
            prefix: "val".into(),
            image: true,
            matrix: vec![0.0; classes * classes],
            samples: 0,
        }
    }
    /// The prefix of the results' names (`val` by default; empty for none).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }
    /// Whether the confusion matrix goes to the monitors as an image at each pass (yes by
    /// default).
    pub fn confusion_image(mut self, put: bool) -> Self {
        self.image = put;
        self
    }
    /// The last pass's confusion matrix: `[label][prediction]`, the number of samples of label
    /// `label` predicted `prediction`.
    pub fn confusion_matrix(&self) -> Vec<Vec<u64>> {
        self.matrix.chunks(self.classes.max(1)).map(|row| row.iter().map(|&c| c as u64).collect()).collect()
    }
    /// The pixels of each cell's side in the image: 32 for a few classes, fewer for many, so
    /// that the image stays near 256 pixels wide (one pixel a cell beyond 256 classes).
    fn cell_pixels(&self) -> usize {
        (256 / self.classes.max(1)).clamp(1, 32)
    }
    /// The confusion matrix as a grey image: each cell its share of its row, 0 to 255.
    pub fn matrix_image(&self) -> Image {
        let (classes, cell) = (self.classes, self.cell_pixels());
        let side = classes * cell;
        let mut pixels = vec![0u8; side * side];
        for (i, row) in self.matrix.chunks(classes.max(1)).enumerate() {
            let total: f64 = row.iter().sum();
            for (j, &count) in row.iter().enumerate() {
                let grey = if total == 0.0 { 0 } else { (255.0 * count / total).round() as u8 };
                for y in i * cell..(i + 1) * cell {
                    pixels[y * side + j * cell..y * side + (j + 1) * cell].fill(grey);
                }
            }
        }
        Image { height: side as u32, width: side as u32, channels: 1, pixels }
    }
    /// Per class: TP, FP (predicted, not the label), FN (the label, not predicted).
    fn per_class(&self) -> Vec<[u64; 3]> {
        let c = self.classes;
        let at = |i: usize, j: usize| self.matrix[i * c + j] as u64;
        (0..c)
            .map(|k| {
                let tp = at(k, k);
                let predicted: u64 = (0..c).map(|i| at(i, k)).sum();
                let labelled: u64 = (0..c).map(|j| at(k, j)).sum();
                [tp, predicted - tp, labelled - tp]
            })
            .collect()
    }
}

/// Precision, recall and F1 of counts TP, FP, FN, each 0 where its denominator is.
fn scores([tp, fp, fn_]: [u64; 3]) -> [f64; 3] {
    [ratio_or_zero(tp, tp + fp), ratio_or_zero(tp, tp + fn_), ratio_or_zero(2 * tp, 2 * tp + fp + fn_)]
}

impl Inferencer for MulticlassStats {
    fn fetches(&self) -> &[Fetch] {
        &self.fetches
    }
    fn before_inference(&mut self) {
        self.matrix.iter_mut().for_each(|c| *c = 0.0);
        self.samples = 0;
    }
    /// The host path: the batch rebuilt on the CPU, through the device code.
    fn on_batch(&mut self, values: &Fetched<'_>) -> Result<()> {
        let outputs = rebuilt(values, &self.names, "MulticlassStats")?;
        let sums = host_values(self.batch_sums(&outputs)?);
        self.matrix.iter_mut().zip(sums).for_each(|(total, count)| *total += count);
        self.check()
    }
    /// The confusion matrix's `classes²` counts.
    fn sums_on_device(&self) -> bool {
        true
    }
    fn batch_sums(&mut self, outputs: &Outputs) -> Result<Tensor<1>> {
        let [prediction_name, label_name] = self.names;
        let owner = "MulticlassStats";
        let predicted =
            one_hot(output(outputs, owner, prediction_name)?, self.classes, owner, prediction_name)?;
        let label = one_hot(output(outputs, owner, label_name)?, self.classes, owner, label_name)?;
        let n = predicted.dims()[0];
        if label.dims()[0] != n {
            return Err(Error::fetch(format!(
                "{owner}: `{prediction_name}` holds {n} samples and `{label_name}` {}",
                label.dims()[0]
            )));
        }
        self.samples += n as u64;
        Ok(label.transpose().matmul(predicted).reshape([self.classes * self.classes]))
    }
    fn device_sums(&mut self, sums: &[f64]) -> Result<()> {
        merged_len("MulticlassStats", sums, self.matrix.len())?;
        self.matrix.copy_from_slice(sums);
        self.check()
    }
    /// The matrix's counts, then the samples.
    fn partial(&self) -> Option<Vec<f64>> {
        Some(self.matrix.iter().copied().chain([self.samples as f64]).collect())
    }
    fn merge(&mut self, summed: &[f64]) -> Result<()> {
        merged_len("MulticlassStats", summed, self.matrix.len() + 1)?;
        let (matrix, samples) = summed.split_at(self.matrix.len());
        self.matrix.copy_from_slice(matrix);
        self.samples = samples[0] as u64;
        Ok(())
    }
    fn after_inference(&mut self) -> Vec<(String, f64)> {
        let per_class = self.per_class();
        let per_class_scores: Vec<[f64; 3]> = per_class.iter().map(|&counts| scores(counts)).collect();
        let support: Vec<u64> = per_class.iter().map(|[tp, _, fn_]| tp + fn_).collect();
        let total: u64 = support.iter().sum();
        let summed = per_class.iter().fold([0; 3], |a, c| [a[0] + c[0], a[1] + c[1], a[2] + c[2]]);
        let micro = scores(summed);
        let mut out = vec![(prefixed(&self.prefix, "accuracy"), ratio_or_zero(summed[0], total))];
        for (m, metric) in ["precision", "recall", "f1"].into_iter().enumerate() {
            let macro_ = per_class_scores.iter().map(|s| s[m]).sum::<f64>() / self.classes.max(1) as f64;
            let weighted = per_class_scores.iter().zip(&support).map(|(s, &w)| s[m] * w as f64).sum::<f64>();
            let weighted = if total == 0 { 0.0 } else { weighted / total as f64 };
            out.push((prefixed(&self.prefix, &format!("{metric}_macro")), macro_));
            out.push((prefixed(&self.prefix, &format!("{metric}_micro")), micro[m]));
            out.push((prefixed(&self.prefix, &format!("{metric}_weighted")), weighted));
        }
        out
    }
    fn images(&mut self) -> Vec<(String, Image)> {
        match self.image && self.classes > 0 {
            true => vec![(prefixed(&self.prefix, "confusion_matrix"), self.matrix_image())],
            false => Vec::new(),
        }
    }
}

impl MulticlassStats {
    /// Every sample of the pass is in the matrix: a label or prediction outside `0..classes`
    /// leaves its sample out of it.
    fn check(&self) -> Result<()> {
        let counted: f64 = self.matrix.iter().sum();
        if counted == self.samples as f64 {
            return Ok(());
        }
        let [prediction_name, label_name] = self.names;
        Err(Error::fetch(format!(
            "MulticlassStats: {} of the {} samples have a label (`{label_name}`) or a prediction (`{prediction_name}`) that is no class in 0..{classes}: give whole class indices below {classes}, or a row of {classes} scores",
            self.samples as f64 - counted,
            self.samples,
            classes = self.classes
        )))
    }
}
