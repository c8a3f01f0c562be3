//! [`Auroc`]: the area under the ROC curve of a pass, binary or one-vs-rest, exact: every score
//! kept on the device and read once at the pass's end.

use burn::tensor::Tensor;

use super::classes::{host_values, index_of, matrix, one_hot, output, rebuilt};
use super::{Inferencer, prefixed};
use crate::error::{Error, Result};
use crate::fetch::{Fetch, Fetched, OutputTensor, Outputs};

/// The area under the ROC curve over the pass (scikit-learn's `roc_auc_score`), exact: every
/// sample's scores and label stay on the device until the pass ends and are read in its one
/// transfer ([`Inferencer::concatenates_on_device`]), then ranked on the host, ties counting
/// one half (the trapezoids of the ROC curve). The result depends only on the set of scores, not
/// on the order of the batches or of the ranks.
///
/// - [`binary`](Self::binary): a score per sample (`[batch]`, any real: higher means positive)
///   and a 0/1 label; puts `<prefix>_auroc`.
/// - [`one_vs_rest`](Self::one_vs_rest): scores `[batch, classes]` and a class per sample
///   (an index, `[batch]` as floats, or a one-hot row); each class's AUROC against the others,
///   put as `<prefix>_auroc` (their mean, scikit-learn's `multi_class="ovr"` with
///   `average="macro"`) and `<prefix>_auroc_weighted` (weighted by each class's number of
///   labels, `average="weighted"`). scikit-learn wants probabilities there (rows summing to 1);
///   any scores rank the same here.
///
/// The prefix is `val` by default. An AUROC with no positive or no negative sample is undefined:
/// NaN (scikit-learn refuses it). The device holds `classes + 1` values per sample of the pass
/// (2 for a binary one) until its end. In a [data-parallel](super::InferenceRunner::data_parallel)
/// runner every rank's values are gathered ([`Inferencer::gathered`]): the result is the one of
/// the whole set.
///
/// ```
/// use burn::tensor::Tensor;
/// use burn_stoker::inference::Auroc;
/// use burn_stoker::prelude::*;
///
/// let validation: Vec<(Tensor<2>, Tensor<1>)> = Vec::new();
/// let runner = InferenceRunner::new(validation, |model: &burn::nn::Linear, (x, label): (Tensor<2>, Tensor<1>), out: &mut Outputs| {
///     let n = x.dims()[0];
///     out.put("score", model.forward(x).reshape([n])); // one logit per sample
///     out.put("label", label); // 0 or 1
/// })
/// .with(Auroc::binary("score", "label")); // `val_auroc`
/// // Ten classes: `val_auroc` (macro) and `val_auroc_weighted`.
/// let multiclass = Auroc::one_vs_rest("probabilities", "class", 10);
/// # let _ = (runner, multiclass);
/// ```
#[derive(Debug, Clone)]
#[doc(alias = "AurocMetric")]
#[doc(alias = "AUC")]
pub struct Auroc {
    fetches: [Fetch; 2],
    names: [&'static str; 2],
    /// `None`: binary.
    classes: Option<usize>,
    prefix: String,
    /// Each sample's scores then its label (a class index, or 0/1), sample after sample.
    values: Vec<f64>,
}

impl Auroc {
    /// A binary classifier's AUROC: the score `score_name` (`[batch]`) and the 0/1 label
    /// `label_name`.
    pub fn binary(score_name: &'static str, label_name: &'static str) -> Self {
        Auroc::with_classes(score_name, label_name, None)
    }
    /// One AUROC per class of `classes`, each class against the others: the scores
    /// `scores_name` (`[batch, classes]`) and the class `label_name` of each sample.
    pub fn one_vs_rest(scores_name: &'static str, label_name: &'static str, classes: usize) -> Self {
        Auroc::with_classes(scores_name, label_name, Some(classes))
    }
    fn with_classes(scores: &'static str, label: &'static str, classes: Option<usize>) -> Self {
        Auroc {
            fetches: [Fetch::host(scores), Fetch::host(label)],
            names: [scores, label],
            classes,
            prefix: "val".into(),
            values: Vec::new(),
        }
    }
    /// The prefix of the results' names (`val` by default; empty for none).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }
    /// Values per sample: the scores and the label.
    fn width(&self) -> usize {
        self.classes.unwrap_or(1) + 1
    }
    /// Every label is 0/1 (binary) or a class index; else the error naming the label.
    fn check_labels(&self) -> Result<()> {
        let width = self.width();
        let limit = self.classes.unwrap_or(2) as f64;
        match self
            .values
            .chunks(width)
            .map(|sample| sample[width - 1])
            .find(|&l| l.fract() != 0.0 || !(0.0..limit).contains(&l))
        {
            None => Ok(()),
            Some(label) => Err(Error::fetch(format!(
                "Auroc: `{}` holds {label}, not {}",
                self.names[1],
                match self.classes {
                    None => "0 or 1".to_string(),
                    Some(classes) => format!("a class in 0..{classes}"),
                }
            ))),
        }
    }
    /// Class `class`'s AUROC against the others, and its number of labels.
    fn one_class(&self, class: Option<usize>) -> (f64, u64) {
        let width = self.width();
        let mut samples: Vec<(f64, bool)> = self
            .values
            .chunks(width)
            .map(|s| match class {
                None => (s[0], s[1] == 1.0),
                Some(c) => (s[c], s[width - 1] == c as f64),
            })
            .collect();
        area(&mut samples)
    }
}

/// The area under the ROC curve of `(score, positive)` samples, with their number of positives:
/// the Mann-Whitney statistic, each sample ranked among all (ties sharing their mean rank),
/// (sum of the positives' ranks − P(P+1)/2) / (P·N). NaN without a positive or a negative.
fn area(samples: &mut [(f64, bool)]) -> (f64, u64) {
    samples.sort_by(|a, b| a.0.total_cmp(&b.0));
    let positives = samples.iter().filter(|s| s.1).count() as u64;
    let negatives = samples.len() as u64 - positives;
    if positives == 0 || negatives == 0 {
        return (f64::NAN, positives);
    }
    let mut rank_sum = 0.0;
    let mut start = 0;
    while start < samples.len() {
        let end = start + samples[start..].iter().take_while(|s| s.0 == samples[start].0).count();
        // Ranks start + 1 ..= end, their mean for each of the tied samples.
        let mean_rank = (start + 1 + end) as f64 / 2.0;
        rank_sum += mean_rank * samples[start..end].iter().filter(|s| s.1).count() as f64;
        start = end;
    }
    let (p, n) = (positives as f64, negatives as f64);
    ((rank_sum - p * (p + 1.0) / 2.0) / (p * n), positives)
}

impl Inferencer for Auroc {
    fn fetches(&self) -> &[Fetch] {
        &self.fetches
    }
    fn before_inference(&mut self) {
        self.values.clear();
    }
    /// The host path: the batch rebuilt on the CPU, through the device code.
    fn on_batch(&mut self, values: &Fetched<'_>) -> Result<()> {
        let outputs = rebuilt(values, &self.names, "Auroc")?;
        let batch = host_values(self.batch_sums(&outputs)?);
        self.values.extend(batch);
        self.check_labels()
    }
    fn sums_on_device(&self) -> bool {
        true
    }
    /// Every sample's values kept, not summed.
    fn concatenates_on_device(&self) -> bool {
        true
    }
    /// The batch's samples, each its scores then its label.
    fn batch_sums(&mut self, outputs: &Outputs) -> Result<Tensor<1>> {
        let [scores_name, label_name] = self.names;
        let (scores, label) = (output(outputs, "Auroc", scores_name)?, output(outputs, "Auroc", label_name)?);
        let (scores, label) = match self.classes {
            None => (vector(scores, "Auroc", scores_name)?, vector(label, "Auroc", label_name)?),
            Some(classes) => (
                matrix(scores, classes, "Auroc", scores_name)?,
                index_of(one_hot(label, classes, "Auroc", label_name)?),
            ),
        };
        let (n, m) = (scores.dims()[0], label.dims()[0]);
        if n != m {
            return Err(Error::fetch(format!(
                "Auroc: `{scores_name}` holds {n} samples and `{label_name}` {m}"
            )));
        }
        Ok(Tensor::cat(vec![scores, label], 1).reshape([n * self.width()]))
    }
    fn device_sums(&mut self, sums: &[f64]) -> Result<()> {
        self.values = sums.to_vec();
        self.check_labels()
    }
    /// No sums: the values are gathered ([`gathered`](Self::gathered)).
    fn partial(&self) -> Option<Vec<f64>> {
        Some(Vec::new())
    }
    fn merge(&mut self, summed: &[f64]) -> Result<()> {
        super::merged_len("Auroc", summed, 0)
    }
    /// Every sample's values.
    fn gathered(&self) -> Option<Vec<f64>> {
        Some(self.values.clone())
    }
    fn merge_gathered(&mut self, all: &[f64]) -> Result<()> {
        self.values = all.to_vec();
        Ok(())
    }
    fn after_inference(&mut self) -> Vec<(String, f64)> {
        let Some(classes) = self.classes else {
            return vec![(prefixed(&self.prefix, "auroc"), self.one_class(None).0)];
        };
        let per_class: Vec<(f64, u64)> = (0..classes).map(|c| self.one_class(Some(c))).collect();
        let support: u64 = per_class.iter().map(|&(_, p)| p).sum();
        let macro_ = per_class.iter().map(|&(a, _)| a).sum::<f64>() / classes.max(1) as f64;
        let weighted = per_class.iter().map(|&(a, p)| a * p as f64).sum::<f64>() / support as f64;
        vec![(prefixed(&self.prefix, "auroc"), macro_), (prefixed(&self.prefix, "auroc_weighted"), weighted)]
    }
}

/// A per-sample vector (`[batch]`, or `[batch, 1]`) as a column `[batch, 1]`.
fn vector(tensor: &OutputTensor, owner: &str, name: &str) -> Result<Tensor<2>> {
    let dims = tensor.dims();
    match dims.as_slice() {
        [n] | [n, 1] => Ok(tensor.flat().reshape([*n, 1])),
        _ => Err(Error::fetch(format!(
            "{owner}: `{name}` has shape {dims:?}, not one value per sample ([batch])"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::area;

    #[test]
    fn the_area_counts_ties_as_one_half() {
        // scikit-learn's own example: roc_auc_score([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) = 0.75.
        let mut samples = [(0.1, false), (0.4, false), (0.35, true), (0.8, true)];
        assert_eq!(area(&mut samples), (0.75, 2));
        // One tie between a positive and a negative: one half of that pair.
        let mut tied = [(0.5, false), (0.5, true), (0.9, true), (0.1, false)];
        assert_eq!(area(&mut tied), (0.875, 2));
        assert!(area(&mut [(0.3, true)]).0.is_nan());
    }
}
