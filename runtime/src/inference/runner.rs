//! [`InferenceRunner`]: the callback that runs the model over another data set and hands each
//! batch to its inferencers.

mod batch_size;
mod forward;
mod results;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use batch_size::inferred_batch_size;
use burn::module::Module;

use super::Inferencer;
#[cfg(doc)]
use super::ScalarStats;
use crate::callback::{Callback, Context};
use crate::error::{Error, Result};
use crate::fetch::{FetchPlan, Outputs};
use crate::trainer::{BatchIter, TrainData};
pub use forward::{InferenceForward, PredThenScore};
use results::{DeviceTotal, PassEnd};

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
/// **Across the ranks of a data-parallel world** ([`data_parallel`](Self::data_parallel), as
/// tensorpack's `DataParallelInferenceRunner`): every rank runs the pass over its own shard of
/// the data, the inferencers' partial sums ([`Inferencer::partial`]) are added up over the ranks
/// in one [`Context::sum_over_ranks`], and the chief alone puts the results, those of the whole
/// set, to its monitors. Without it the runner is `chief_only`: the chief runs the whole set while
/// the other ranks wait at the next step.
///
/// **fastai's batch events.** Before each batch, the callbacks that take the batch
/// ([`StepHooks::batch`](crate::callback::StepHooks::batch)) receive it in `before_batch`, with
/// [`Context::training`] `false`, and may replace it: `forward` runs on what they leave. A forward
/// function computes the outputs in one call, so `after_pred` has no place in it: give the runner
/// a prediction and a scoring function instead ([`pred_then_score`](Self::pred_then_score)), and
/// the callbacks that take the model's output receive it between the two.
///
/// **Signals.** When the trainer handles signals, a SIGINT or SIGTERM during a pass stops it
/// before the next batch: its partial results are not put to the monitors (the log names them,
/// with the epoch and the number of batches run), the pass is not counted in
/// [`InferenceCounts::passes`], and training stops at the boundary after the event. In a
/// data-parallel runner every rank still takes part in the one exchange, and a pass cut short on
/// any rank puts nothing on any rank.
///
/// **Several runners** (a validation set and a test set, tensorpack's runners of two
/// `tower_name`s): the names of a run's callbacks are unique, so name the second one,
/// `.named("test")` ([`CallbackExt::named`](crate::callback::CallbackExt::named)), which makes it
/// `InferenceRunner(test)`. The scalars are named by the inferencers, as tensorpack names them:
/// [`ScalarStats`] prefixes `validation_` by default (`.prefix("test")` for `test_cost`),
/// [`ClassificationError`](super::ClassificationError) takes its summary name
/// (`validation_error`, tensorpack's `val-error-top1`...), and
/// [`BinaryClassificationStats`](super::BinaryClassificationStats) prefixes `val_`; two runners
/// whose inferencers put the same name put that scalar twice, so give the test set's its own
/// prefix.
///
/// The parameters' defaults let an order target name the bare type: `#[order(after = InferenceRunner)]`,
/// which designates every runner, named or not (`InferenceRunner(test)` designates that one alone).
#[doc(alias = "validation_step")]
#[doc(alias = "validation_data")]
#[doc(alias = "InferenceStep")]
pub struct InferenceRunner<D = (), F = ()> {
    data: D,
    forward: F,
    inferencers: Vec<Box<dyn Inferencer>>,
    plan: FetchPlan,
    mask: u64,
    /// The slots of the inferencers that read each batch on the host.
    host_mask: u64,
    /// Per inferencer: whether it adds its batches up on the device, and its running total (or
    /// its batches' values kept, for one that joins them: [`Inferencer::concatenates_on_device`]).
    on_device: Vec<bool>,
    totals: Vec<DeviceTotal>,
    outputs: Outputs,
    needs_batch_size: bool,
    /// The outputs whose first dimension is the batch size, learnt on the first batch.
    per_sample: Vec<&'static str>,
    counts: InferenceCounts,
    /// Every rank runs its shard; the inferencers' partial sums are summed over the ranks.
    data_parallel: bool,
}
crate::kind::kind!(InferenceRunner<D, F>);

impl<D, F> InferenceRunner<D, F> {
    /// Inference over `data` with `forward`.
    pub fn new(data: D, forward: F) -> Self {
        InferenceRunner {
            data,
            forward,
            inferencers: Vec::new(),
            plan: FetchPlan::default(),
            mask: 0,
            host_mask: 0,
            on_device: Vec::new(),
            totals: Vec::new(),
            outputs: Outputs::new(),
            needs_batch_size: false,
            per_sample: Vec::new(),
            counts: InferenceCounts::default(),
            data_parallel: false,
        }
    }
    /// Run on every rank of a data-parallel world, each over its own shard of the validation
    /// data, and combine the inferencers' results over the ranks (tensorpack's
    /// `DataParallelInferenceRunner`): the chief's monitors receive the statistics of the whole
    /// set — equal to those one rank computes over all of it — and the other ranks' monitors
    /// receive nothing, so every writer sees each value once.
    ///
    /// - **Data.** The runner is given this rank's shard, as the trainer is: `world.shard(batches)`
    ///   (see [`Shard`](crate::world::Shard)). The shards need not be of equal length — only
    ///   sums travel, once, after the pass — so a shard that keeps every batch is right here:
    ///   [`World::shard`](crate::world::World::shard) leaves out the last `len % size` batches,
    ///   which `batches.into_iter().skip(rank).step_by(size).collect()` keeps.
    /// - **Inferencers.** Each must give partial sums ([`Inferencer::partial`] and
    ///   [`Inferencer::merge`]); every built-in one does (sums and counts, never ratios, so the
    ///   result is exact). A runner with one that does not fails at setup, naming it.
    /// - **Cost.** One [`Context::sum_over_ranks`] per pass: the number of ranks' batches, then
    ///   every inferencer's partial sums (32 values per exchange).
    /// - **Triggers.** Every rank must run the pass at the same events: keep the default trigger
    ///   or a periodic one, the same on every rank.
    ///
    /// In a run without a world, the runner behaves as a plain one (the sums are their own).
    /// [`counts`](Self::counts) count this rank's batches.
    ///
    /// ```no_run
    /// # use burn_stoker::prelude::*;
    /// # use burn_stoker::world::Threads;
    /// # use burn::nn::{Linear, LinearConfig};
    /// # use burn::optim::SgdConfig;
    /// # use burn::tensor::{Device, Tensor};
    /// # fn batches(device: &Device) -> Vec<(Tensor<2>, Tensor<2>)> { Vec::new() }
    /// let devices = vec![Device::default().autodiff(), Device::default().autodiff()];
    /// Threads::new(devices).run(|world| {
    ///     let device = world.device().clone();
    ///     let model: Linear = LinearConfig::new(4, 1).init(&device);
    ///     let validation = InferenceRunner::new(
    ///         world.shard(batches(&device)), // this rank's part of the validation set
    ///         |model: &Linear, (x, y): (Tensor<2>, Tensor<2>), out: &mut Outputs| {
    ///             let n = x.dims()[0];
    ///             out.put("cost", (model.forward(x) - y).powi_scalar(2).mean());
    ///             n
    ///         },
    ///     )
    ///     .with(ScalarStats::new(["cost"]))
    ///     .data_parallel();
    ///     Trainer::new(model, SgdConfig::new().init(), world.shard(batches(&device)))
    ///         .world(world)
    ///         .callbacks(validation)
    ///         .train(|model: &Linear, (x, y): (Tensor<2>, Tensor<2>), _step: &mut Step<'_>| {
    ///             (model.forward(x) - y).powi_scalar(2).mean()
    ///         })
    /// })?;
    /// # Ok::<(), burn_stoker::Error>(())
    /// ```
    pub fn data_parallel(mut self) -> Self {
        self.data_parallel = true;
        self
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

impl<D, P, S> InferenceRunner<D, PredThenScore<P, S>> {
    /// Inference over `data` with the forward function in two parts, so that fastai's
    /// `after_pred` is delivered between them ([`PredThenScore`]): `predict` computes the model's
    /// output from the batch, the callbacks that take it
    /// ([`StepHooks::pred`](crate::callback::StepHooks::pred)) read and may replace it, with
    /// [`Context::training`] `false`, and `score` puts the outputs from what they left and the
    /// batch, returning `()` or the batch size as `forward` does.
    ///
    /// ```
    /// use burn::nn::Linear;
    /// use burn::tensor::Tensor;
    /// use burn_stoker::prelude::*;
    ///
    /// let validation: Vec<(Tensor<2>, Tensor<2>)> = Vec::new();
    /// let runner = InferenceRunner::pred_then_score(
    ///     validation,
    ///     |model: &Linear, (x, _): &(Tensor<2>, Tensor<2>)| model.forward(x.clone()),
    ///     |pred: Tensor<2>, (x, y): (Tensor<2>, Tensor<2>), out: &mut Outputs| {
    ///         out.put("cost", (pred - y).powi_scalar(2).mean());
    ///         x.dims()[0]
    ///     },
    /// )
    /// .with(ScalarStats::new(["cost"]));
    /// # let _ = runner;
    /// ```
    pub fn pred_then_score(data: D, predict: P, score: S) -> Self {
        InferenceRunner::new(data, PredThenScore { predict, score })
    }
}

impl<M, D, F> Callback<M> for InferenceRunner<D, F>
where
    M: Module,
    D: TrainData,
    F: InferenceForward<M, D::Batch>,
{
    /// Chief-only, unless [`data_parallel`](InferenceRunner::data_parallel).
    fn chief_only(&self) -> bool {
        !self.data_parallel
    }

    fn setup(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        if self.inferencers.is_empty() {
            return Err(Error::msg("InferenceRunner has no inferencer: add one with .with(...)"));
        }
        if self.data_parallel {
            let unmergeable: Vec<String> = self
                .inferencers
                .iter()
                .filter(|i| i.partial().is_none())
                .map(|i| format!("`{}`", i.name()))
                .collect();
            if !unmergeable.is_empty() {
                return Err(Error::msg(format!(
                    "a data-parallel InferenceRunner cannot combine the results of {} over the ranks: it gives no partial sums; implement Inferencer::partial and Inferencer::merge, or validate on the chief alone (an InferenceRunner without .data_parallel() over the whole set)",
                    unmergeable.join(", ")
                )));
            }
        }
        self.on_device = self.inferencers.iter().map(|i| i.sums_on_device()).collect();
        self.totals = self.inferencers.iter().map(|i| DeviceTotal::new(i.concatenates_on_device())).collect();
        for (inferencer, &on_device) in self.inferencers.iter().zip(&self.on_device) {
            for fetch in inferencer.fetches() {
                let bit = self.plan.declare(fetch, "InferenceRunner")?;
                self.mask |= bit;
                if !on_device {
                    self.host_mask |= bit;
                }
            }
        }
        self.needs_batch_size = self.inferencers.iter().any(|i| i.needs_batch_size());
        Ok(())
    }

    /// Asks the trainer for a validation pass: every callback receives `before_validate`, this
    /// runner runs the pass in [`validate`](Callback::validate), then every callback receives
    /// `after_validate`.
    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        ctx.request_validation()
    }

    /// The pass: every batch through the forward function and the inferencers, then their
    /// results to the monitors. A signal stops it before the next batch. Under fastai's
    /// [`ShortEpochCallback`](crate::stop::ShortEpochCallback) with `short_valid`, it stops after
    /// the batch whose 0-based index reaches `pct` of the pass's length (fastai's
    /// `iter / n_iter >= pct`), puts the results of the batches run, and returns
    /// `Flow::CancelValid`'s cancel: every callback then receives `after_cancel_validate`.
    fn validate(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let model = ctx.model().valid();
        self.inferencers.iter_mut().for_each(|i| i.before_inference());
        self.totals.iter_mut().for_each(DeviceTotal::clear);
        let transfers = self.plan.transfers();
        let mut pass = self.data.pass();
        let short = if self.data_parallel { None } else { ctx.short_validation() };
        let length = pass.batches_hint();
        let mut batches = 0u64;
        // A signal cuts the pass short (checked before each batch: one atomic load).
        let mut cut_short = None;
        let mut cancelled = false;
        loop {
            if let Some(signal) = ctx.signal_received() {
                cut_short = Some(signal);
                break;
            }
            let Some(batch) = pass.next_batch() else { break };
            self.outputs.clear();
            // fastai's `before_batch` for a validation batch, to the callbacks that take it.
            let batch = ctx.before_batch(batch?)?;
            let returned = self.forward.run_batch(&model, batch, &mut self.outputs, ctx)?.batch_size();
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
            // The host inferencers' values in one transfer; nothing when every inferencer sums on
            // the device.
            if self.host_mask != 0 {
                self.plan.fill(&self.outputs, self.host_mask, batches)?;
            }
            let values = self.plan.view();
            for ((inferencer, &on_device), total) in
                self.inferencers.iter_mut().zip(&self.on_device).zip(&mut self.totals)
            {
                if let Some(size) = batch_size {
                    inferencer.set_batch_size(size);
                }
                if on_device {
                    total.add(inferencer.batch_sums(&self.outputs)?);
                } else {
                    inferencer.on_batch(&values)?;
                }
            }
            batches += 1;
            if let Some(pct) = short
                && crate::stop::short_epoch_ends(pct, batches - 1, length)
            {
                cancelled = true;
                break;
            }
        }
        drop(pass);
        self.end_pass(ctx, PassEnd { batches, cut_short, cancelled, transfers })
    }
}
