//! The [`Inferencer`] trait: statistics over a pass of inference.

use std::borrow::Cow;

#[cfg(doc)]
use super::{InferenceRunner, ScalarStats};
use crate::callback::short_type_name;
use crate::error::Result;
use crate::state::Image;
use burn::tensor::Tensor;

use crate::fetch::{Fetch, Fetched, Outputs};

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
/// use burn_stoker::inference::Inferencer;
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
///
/// `Send`, so that a trainer holding an [`InferenceRunner`](super::InferenceRunner) can move to
/// another thread.
pub trait Inferencer: Send {
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
    /// This pass's state as sums that add up over the parts of a data set: what a
    /// [data-parallel](InferenceRunner::data_parallel) runner sums over the ranks before
    /// [`merge`](Self::merge) hands the totals back. Called after the last
    /// [`on_batch`](Self::on_batch) of a pass, and once at setup, before any pass, to learn
    /// whether the inferencer can be combined at all.
    ///
    /// `None`, the default, says it cannot: a data-parallel runner with this inferencer fails at
    /// setup naming it, rather than averaging results that do not average (a median, a maximum
    /// kept as a mean, a ratio of ratios). Give sums and counts (never ratios), always the same
    /// number of values: the built-in inferencers give their sums and their counts of datapoints
    /// or decisions, so that the combined result is the one a single rank computes over the
    /// whole set.
    fn partial(&self) -> Option<Vec<f64>> {
        None
    }
    /// Whether this inferencer adds its batches up on the device: the runner then calls
    /// [`batch_sums`](Self::batch_sums) instead of [`on_batch`](Self::on_batch), never copies
    /// this inferencer's fetches to the host batch by batch, adds the batches' sums on the
    /// device and hands the pass's totals to [`device_sums`](Self::device_sums) after one
    /// transfer for every such inferencer together. False by default (values per batch on the
    /// host, one transfer per batch for all host inferencers). [`ScalarStats`] and
    /// [`ClassificationError`](super::ClassificationError) do; an inferencer that must look at
    /// every value (a check that labels are 0 or 1, a maximum) does not.
    fn sums_on_device(&self) -> bool {
        false
    }
    /// One batch's sums, computed on the device from the forward function's outputs as a rank-1
    /// tensor with the same number of values at every batch (no transfer: the runner adds it to
    /// the pass's total on the device). Called only when
    /// [`sums_on_device`](Self::sums_on_device) says so, after
    /// [`set_batch_size`](Self::set_batch_size); count on the host what the host knows (the
    /// batch size, a tensor's shape). The default fails naming the inferencer.
    fn batch_sums(&mut self, outputs: &Outputs) -> Result<Tensor<1>> {
        let _ = outputs;
        Err(crate::error::Error::invalid(format!(
            "{}: says its sums are on the device (Inferencer::sums_on_device) but does not implement Inferencer::batch_sums",
            self.name()
        )))
    }
    /// The pass's totals of [`batch_sums`](Self::batch_sums), read back once, after the last
    /// batch and before [`partial`](Self::partial) and [`after_inference`](Self::after_inference).
    /// The default fails naming the inferencer.
    fn device_sums(&mut self, sums: &[f64]) -> Result<()> {
        let _ = sums;
        Err(crate::error::Error::invalid(format!(
            "{}: says its sums are on the device (Inferencer::sums_on_device) but does not implement Inferencer::device_sums",
            self.name()
        )))
    }
    /// Whether the runner keeps this inferencer's batch values on the device and joins them end
    /// to end rather than adding them (false by default): an inferencer that needs every
    /// per-sample value of the pass (an AUROC ranks every score) and still wants one transfer.
    /// With [`sums_on_device`](Self::sums_on_device) also true, [`batch_sums`](Self::batch_sums)
    /// may then return a tensor of any length at each batch (the batch's values, say `n` rows of
    /// a score and a label); the runner keeps them on the device and hands their concatenation,
    /// in batch order, to [`device_sums`](Self::device_sums) in the pass's one transfer. The
    /// device holds the pass's values until its end: keep them to a few per sample.
    fn concatenates_on_device(&self) -> bool {
        false
    }
    /// Values of this pass that a [data-parallel](InferenceRunner::data_parallel) runner gathers
    /// from every rank rather than sums: each rank's list, of any length, joined in rank order
    /// and handed to [`merge_gathered`](Self::merge_gathered) on every rank, after
    /// [`merge`](Self::merge). `None`, the default, gathers nothing. For what no sum of fixed
    /// length holds exactly (the scores an AUROC ranks); [`partial`](Self::partial) must still
    /// say `Some` (an empty list will do) for the runner to accept the inferencer. It costs a
    /// second exchange in the pass, of every rank's values.
    fn gathered(&self) -> Option<Vec<f64>> {
        None
    }
    /// Replace this pass's gathered values by `all`: every rank's [`gathered`](Self::gathered)
    /// list, rank 0's first. The default fails naming the inferencer.
    fn merge_gathered(&mut self, all: &[f64]) -> Result<()> {
        let _ = all;
        Err(crate::error::Error::invalid(format!(
            "{}: gives values to gather (Inferencer::gathered) but does not implement Inferencer::merge_gathered",
            self.name()
        )))
    }
    /// Images of the pass, put to the monitors after the scalars of
    /// [`after_inference`](Self::after_inference) (TensorBoard shows them; other writers skip
    /// them), on the chief alone in a data-parallel runner. None by default;
    /// [`MulticlassStats`](super::MulticlassStats) puts its confusion matrix.
    fn images(&mut self) -> Vec<(String, Image)> {
        Vec::new()
    }
    /// Replace this pass's state by `summed`, the element-wise sum over the ranks of what
    /// [`partial`](Self::partial) gave (the same length); [`after_inference`](Self::after_inference)
    /// follows. The default fails naming the inferencer: one that gives
    /// [`partial`](Self::partial) must implement this too.
    fn merge(&mut self, summed: &[f64]) -> Result<()> {
        let _ = summed;
        Err(crate::error::Error::invalid(format!(
            "{}: gives partial sums (Inferencer::partial) but does not implement Inferencer::merge to take the sums over the ranks back",
            self.name()
        )))
    }
}
