//! [`InferenceRunner`]: the callback that runs the model over another data set and hands each
//! batch to its inferencers.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use burn::module::Module;

use super::Inferencer;
#[cfg(doc)]
use super::ScalarStats;
use crate::callback::{Callback, Context};
use crate::error::{Error, Result};
use crate::fetch::{FetchPlan, Outputs};
use crate::trainer::{BatchIter, TrainData};

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
