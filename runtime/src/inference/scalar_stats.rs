//! [`ScalarStats`]: means of scalar outputs over the datapoints of a pass.

#[cfg(doc)]
use super::{ClassificationError, InferenceRunner};
use super::{Inferencer, merged_len, prefixed};
use crate::error::{Error, Result};
use burn::tensor::Tensor;

use crate::fetch::{Fetch, Fetched, Outputs};

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
            Error::invalid(
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
    /// Each output's sum of batch value × batch size, then the number of datapoints.
    fn sums_on_device(&self) -> bool {
        true
    }
    fn batch_sums(&mut self, outputs: &Outputs) -> Result<Tensor<1>> {
        let n = self.batch_size.take().ok_or_else(|| {
            Error::invalid(
                "ScalarStats: the batch's number of datapoints is unknown: InferenceRunner tells it \
                 (call set_batch_size before batch_sums)",
            )
        })?;
        let mut parts = Vec::with_capacity(self.fetches.len());
        for fetch in &self.fetches {
            let tensor = outputs.get(&fetch.name).ok_or_else(|| {
                Error::fetch(format!("ScalarStats: `{}` was not produced by this batch", fetch.name))
            })?;
            if tensor.num_elements() != 1 {
                return Err(Error::fetch(format!(
                    "`{}` has shape {:?}, not a scalar: ScalarStats averages one value per batch",
                    fetch.name,
                    tensor.dims()
                )));
            }
            parts.push(tensor.flat() * n as f32);
        }
        self.datapoints += n as u64;
        Ok(crate::fetch::joined(&mut parts))
    }
    fn device_sums(&mut self, sums: &[f64]) -> Result<()> {
        merged_len("ScalarStats", sums, self.sums.len())?;
        self.sums.copy_from_slice(sums);
        Ok(())
    }
    fn partial(&self) -> Option<Vec<f64>> {
        Some(self.sums.iter().copied().chain([self.datapoints as f64]).collect())
    }
    fn merge(&mut self, summed: &[f64]) -> Result<()> {
        merged_len("ScalarStats", summed, self.sums.len() + 1)?;
        let (sums, datapoints) = summed.split_at(self.sums.len());
        self.sums.copy_from_slice(sums);
        self.datapoints = datapoints[0] as u64;
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
