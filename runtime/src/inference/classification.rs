//! Classification over a pass: the error rate ([`ClassificationError`]) and a binary
//! classifier's precision, recall and F1 ([`BinaryClassificationStats`]).

use super::{Inferencer, bit, merged_len, prefixed, ratio_or_zero};
use crate::error::{Error, Result};
use burn::tensor::Tensor;

use crate::fetch::{Fetch, Fetched, Outputs};

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
    /// The misclassified samples and the samples.
    fn sums_on_device(&self) -> bool {
        true
    }
    fn batch_sums(&mut self, outputs: &Outputs) -> Result<Tensor<1>> {
        let name = &self.fetches[0].name;
        let wrong = outputs.get(name).ok_or_else(|| {
            Error::fetch(format!("ClassificationError: `{name}` was not produced by this batch"))
        })?;
        self.total += wrong.num_elements() as u64;
        Ok(wrong.flat().sum())
    }
    fn device_sums(&mut self, sums: &[f64]) -> Result<()> {
        merged_len("ClassificationError", sums, 1)?;
        self.wrong = sums[0];
        Ok(())
    }
    fn partial(&self) -> Option<Vec<f64>> {
        Some(vec![self.wrong, self.total as f64])
    }
    fn merge(&mut self, summed: &[f64]) -> Result<()> {
        merged_len("ClassificationError", summed, 2)?;
        self.wrong = summed[0];
        self.total = summed[1] as u64;
        Ok(())
    }
    fn after_inference(&mut self) -> Vec<(String, f64)> {
        let error = if self.total == 0 { f64::NAN } else { self.wrong / self.total as f64 };
        vec![(self.summary_name.clone(), error)]
    }
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
            return Err(Error::fetch(format!(
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
    /// The four counts of [`counts`](Self::counts).
    fn partial(&self) -> Option<Vec<f64>> {
        Some(self.counts().iter().map(|&c| c as f64).collect())
    }
    fn merge(&mut self, summed: &[f64]) -> Result<()> {
        merged_len("BinaryClassificationStats", summed, 4)?;
        let [tp, fp, fn_, tn] = [0, 1, 2, 3].map(|i| summed[i] as u64);
        (self.true_positives, self.false_positives, self.false_negatives, self.true_negatives) =
            (tp, fp, fn_, tn);
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
