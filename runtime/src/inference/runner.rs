//! [`InferenceRunner`]: the callback that runs the model over another data set and hands each
//! batch to its inferencers.

mod batch_size;
mod forward;
mod pass;
mod results;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use burn::module::Module;

use super::Inferencer;
#[cfg(doc)]
use super::ScalarStats;
use crate::callback::{Callback, Context};
use crate::error::{Error, Result};
use crate::fetch::{FetchPlan, Outputs};
use crate::trainer::TrainData;
pub use forward::{InferenceForward, PredThenScore};
use pass::Pass;
use results::DeviceTotal;

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
/// **A phase of the trainer's loop; fastai's batch events.** The runner asks the trainer for a
/// pass from its `trigger` and hands it its data, forward function and inferencers; the trainer
/// runs the pass (every callback receives `before_validate`, then each batch, then
/// `after_validate`) and hands them back. Before each batch, the callbacks that take the batch
/// ([`StepEvents::batch`](crate::callback::StepEvents::batch)) receive it in `before_batch`, with
/// [`Context::training`] `false`, and may replace it: `forward` runs on what they leave. A forward
/// function computes the outputs in one call, so `after_pred` has no place in it: give the runner
/// a prediction and a scoring function instead ([`pred_then_score`](Self::pred_then_score)), and
/// the callbacks that take the model's output receive it between the two. When the outputs hold
/// one named `loss`, the callbacks that take the loss receive it (flattened) in `after_loss`
/// (`before_backward`) and may replace it, before the inferencers read the outputs. Any of these
/// callbacks may cancel as in fastai: `Flow::CancelBatch` skips the rest of that batch (the
/// inferencers do not see it; every callback receives `after_cancel_batch`), `Flow::CancelValid`
/// ends the pass (the batches run so far make the results; every callback receives
/// `after_cancel_validate`).
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
    /// Its data, forward function and inferencers: handed to the trainer for a pass, back after
    /// it.
    pass: Option<Box<Pass<D, F>>>,
}

/// What an [`InferenceRunner`] keeps from pass to pass beside its data and forward function.
struct Inference {
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
    /// The plan's transfers when the pass started.
    transfers_at_start: u64,
}
crate::kind::kind!(InferenceRunner<D, F>);

impl<D, F> InferenceRunner<D, F> {
    /// Inference over `data` with `forward`.
    pub fn new(data: D, forward: F) -> Self {
        let inference = Inference {
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
            transfers_at_start: 0,
        };
        InferenceRunner { pass: Some(Box::new(Pass { data, forward, inference })) }
    }
    /// What the runner runs a pass with; absent only while the trainer runs one.
    fn parts(&self) -> &Inference {
        &self.pass.as_ref().expect("the runner holds its pass between passes").inference
    }
    fn parts_mut(&mut self) -> &mut Inference {
        &mut self.pass.as_mut().expect("the runner holds its pass between passes").inference
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
        self.parts_mut().data_parallel = true;
        self
    }
    /// Add an inferencer.
    pub fn with(mut self, inferencer: impl Inferencer + 'static) -> Self {
        self.parts_mut().inferencers.push(Box::new(inferencer));
        self
    }
    /// A handle on this runner's counts (passes, batches, transfers), which stays readable after
    /// the trainer took the runner.
    pub fn counts(&self) -> InferenceCounts {
        self.parts().counts.clone()
    }
}

impl<D, P, S> InferenceRunner<D, PredThenScore<P, S>> {
    /// Inference over `data` with the forward function in two parts, so that fastai's
    /// `after_pred` is delivered between them ([`PredThenScore`]): `predict` computes the model's
    /// output from the batch, the callbacks that take it
    /// ([`StepEvents::pred`](crate::callback::StepEvents::pred)) read and may replace it, with
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
    D: TrainData + 'static,
    F: InferenceForward<M, D::Batch> + 'static,
{
    /// Chief-only, unless [`data_parallel`](InferenceRunner::data_parallel).
    fn chief_only(&self) -> bool {
        !self.parts().data_parallel
    }

    fn setup(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        self.parts_mut().setup()
    }

    /// Asks the trainer for a validation pass, handing it the data, the forward function and the
    /// inferencers: every callback receives `before_validate`, the trainer runs the batches with
    /// their events, the results go to the monitors, then every callback receives
    /// `after_validate`.
    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        match self.pass.take() {
            Some(pass) => {
                ctx.request_validation_pass(pass);
                Ok(())
            }
            None => Err(Error::msg(
                "InferenceRunner: its data and inferencers were lost in an earlier failed pass",
            )),
        }
    }

    /// The pass is over: the runner takes back its data, forward function and inferencers (the
    /// trainer ran the batches and put the results). Under fastai's
    /// [`ShortEpochCallback`](crate::stop::ShortEpochCallback) with `short_valid`, the trainer
    /// stopped it after the batch whose 0-based index reaches `pct` of the pass's length
    /// (fastai's `iter / n_iter >= pct`) and put the results of the batches run; every callback
    /// then receives `after_cancel_validate`. A signal stops it before the next batch.
    fn validate(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let Some(pass) = ctx.take_validation_pass() else {
            return Err(Error::misuse(
                "InferenceRunner's validate is the end of a pass the trainer runs: ask for one with its trigger",
            ));
        };
        let pass = pass.into_any().downcast::<Pass<D, F>>().map_err(|_| {
            Error::msg("InferenceRunner: the trainer handed back another callback's validation pass")
        })?;
        self.pass = Some(pass);
        Ok(())
    }
}

impl Inference {
    /// The inferencers' fetches declared, and what their passes need, checked.
    fn setup(&mut self) -> Result<()> {
        if self.inferencers.is_empty() {
            return Err(Error::invalid("InferenceRunner has no inferencer: add one with .with(...)"));
        }
        if self.data_parallel {
            let unmergeable: Vec<String> = self
                .inferencers
                .iter()
                .filter(|i| i.partial().is_none())
                .map(|i| format!("`{}`", i.name()))
                .collect();
            if !unmergeable.is_empty() {
                return Err(Error::invalid(format!(
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
}
