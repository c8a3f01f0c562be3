//! A bridge from burn-train (feature `burn-train`): a model written for burn-train's `Learner`
//! trains under stoker unchanged, and burn-train's metrics run as stoker inferencers and training
//! metrics.
//!
//! - [`LearnerStep`] runs the model's [`TrainStep`] as the trainer's step
//!   ([`Trainer::train_with`](crate::trainer::Trainer::train_with)): its forward and backward, then
//!   its [`TrainStep::optimize`] with stoker's optimizer and learning rate. The trainer's callbacks
//!   see the step's item as named outputs ([`LearnerOutput`]), `"loss"` among them.
//! - [`inference_step`] is the model's [`InferenceStep`] as an
//!   [`InferenceRunner`](crate::inference::InferenceRunner)'s forward function.
//! - [`BurnMetric`] is any burn-train [`Metric`] + [`Numeric`] (accuracy, top-k accuracy,
//!   precision, recall, F-beta, AUROC, loss, perplexity, Hamming score, ...) as an
//!   [`Inferencer`]; [`TrainMetric`] is one over the training steps, as a callback.
//!
//! ```
//! # use burn::tensor::Tensor;
//! use burn_stoker::burn_train::{BurnMetric, TrainMetric, inference_step};
//! use burn_stoker::inference::InferenceRunner;
//! use burn_train::ClassificationOutput;
//! use burn_train::metric::{AccuracyMetric, LossMetric};
//!
//! # fn valid() -> Vec<Tensor<2>> { Vec::new() }
//! # #[derive(burn::module::Module, Debug)] struct Model { layer: burn::nn::Linear }
//! # impl burn_train::InferenceStep for Model {
//! #     type Input = Tensor<2>;
//! #     type Output = ClassificationOutput;
//! #     fn step(&self, x: Tensor<2>) -> ClassificationOutput { unimplemented!() }
//! # }
//! // Validation with burn-train's metrics, on the model's own InferenceStep.
//! let validation = InferenceRunner::new(valid(), inference_step::<Model>())
//!     .with(BurnMetric::<_, ClassificationOutput>::new(AccuracyMetric::new()).scalar_name("validation_accuracy"))
//!     .with(BurnMetric::<_, ClassificationOutput>::new(LossMetric::new()).scalar_name("validation_loss"));
//! // Accuracy over each epoch's training steps, as `train_accuracy`.
//! let train_accuracy = TrainMetric::<_, ClassificationOutput>::new(AccuracyMetric::new()).scalar_name("train_accuracy");
//! ```
//!
//! ## What differs from the `Learner`
//!
//! - burn-train depends on burn-flex with its default features, so this feature turns on
//!   burn-flex's `rayon` for the whole build, and CPU training on burn-flex is then no longer
//!   bit-reproducible: two runs of one seed differ in the last bits, and a resumed run does not end
//!   with exactly the weights of an uninterrupted one (the README has the measurement).
//! - burn-train's metrics read their values back to the host at every update (`Metric::update`
//!   returns the batch's formatted value): a [`TrainMetric`] costs that device-to-host transfer at
//!   every step, which stoker's own callbacks avoid (they fetch a value only at the steps they ask
//!   for it). For validation it is one transfer per batch and metric.
//! - A [`LearnerStep`] runs backward itself, so a callback that takes the loss in
//!   `before_backward` is refused; `after_backward` callbacks (clipping, accumulation) see and may
//!   change its gradients.
//! - Integer targets travel as float tensors between the step and the metrics (stoker's outputs
//!   are float tensors): exact for class indices below 2^24.
//! - The metrics' state is burn-train's and cannot be summed over ranks: a data-parallel
//!   [`InferenceRunner`](crate::inference::InferenceRunner) refuses a [`BurnMetric`], and a
//!   [`TrainMetric`] measures the chief's batches. Nor is it saved in a checkpoint: a run resumed
//!   in the middle of an epoch gives that epoch's [`TrainMetric`] value over the steps after the
//!   resume.

use std::borrow::Cow;
use std::marker::PhantomData;

use ::burn_train::ItemLazy;
use ::burn_train::TrainOutput;
use ::burn_train::metric::{Adaptor, Metric, MetricMetadata, Numeric};
use ::burn_train::{
    ClassificationOutput, InferenceStep, MultiLabelClassificationOutput, RegressionOutput, TrainStep,
};
use burn::data::dataloader::Progress;
use burn::module::Module;
use burn::optim::{GradientsParams, ModuleOptimizer};
use burn::tensor::Tensor;

use crate::callback::{Callback, Context, Counters};
use crate::error::{Error, Result};
use crate::fetch::{Fetch, Fetched, Outputs};
use crate::inference::Inferencer;
use crate::trainer::{Step, StepOutput, TrainingStep};

/// A burn-train step's item (its `TrainStep::Output` / `InferenceStep::Output`) as stoker's named
/// outputs, and back: what lets the trainer's callbacks and burn-train's metrics see it.
///
/// Implemented for burn-train's [`ClassificationOutput`], [`MultiLabelClassificationOutput`] and
/// [`RegressionOutput`] (`"loss"`, `"output"`, `"targets"`); implement it for an item of your own.
pub trait LearnerOutput: ItemLazy + Sized {
    /// The names [`put`](LearnerOutput::put) puts, `"loss"` first.
    const NAMES: &'static [&'static str];
    /// The loss (the trainer puts it as `"loss"`).
    fn loss(&self) -> Tensor<1>;
    /// The number of datapoints in the batch.
    fn batch_size(&self) -> usize;
    /// Put every tensor under its name.
    fn put(self, outputs: &mut Outputs);
    /// Rebuild the item from the tensors [`put`](LearnerOutput::put) put, fetched as device
    /// tensors.
    fn take(values: &Fetched<'_>) -> Result<Self>;
}

/// `LearnerOutput` for an item of `loss`, `output` and `targets`, the targets travelling as the
/// float tensor `$targets` (`|t| to float`, `|t| back`).
macro_rules! learner_output {
    ($item:ty, $targets:ty, |$f:ident| $to_float:expr, |$t:ident| $back:expr) => {
        impl LearnerOutput for $item {
            const NAMES: &'static [&'static str] = &["loss", "output", "targets"];
            fn loss(&self) -> Tensor<1> {
                self.loss.clone()
            }
            fn batch_size(&self) -> usize {
                self.output.dims()[0]
            }
            fn put(self, outputs: &mut Outputs) {
                outputs.put("loss", self.loss);
                outputs.put("output", self.output);
                let $f = self.targets;
                outputs.put("targets", $to_float);
            }
            fn take(values: &Fetched<'_>) -> Result<Self> {
                let $t: $targets = values.get("targets")?;
                Ok(Self { loss: values.get("loss")?, output: values.get("output")?, targets: $back })
            }
        }
    };
}

learner_output!(ClassificationOutput, Tensor<1>, |t| t.float(), |t| t.int());
learner_output!(MultiLabelClassificationOutput, Tensor<2>, |t| t.float(), |t| t.int());
learner_output!(RegressionOutput, Tensor<2>, |t| t, |t| t);

/// A model's burn-train [`TrainStep`] as the trainer's step:
/// `Trainer::new(model, optimizer, data).train_with(LearnerStep::new())`.
///
/// Each step runs `TrainStep::step` (forward and backward), puts its item's tensors as named
/// outputs ([`LearnerOutput`]: `"loss"`, `"output"`, `"targets"` for burn-train's items), and
/// applies the gradients with `TrainStep::optimize`, the learning rate being stoker's
/// (`learning_rate`, set by its schedules). The data's batches are the model's `TrainStep::Input`.
pub struct LearnerStep<M>(PhantomData<fn(&M)>);

impl<M> LearnerStep<M> {
    /// The step of `M`'s [`TrainStep`].
    pub fn new() -> Self {
        LearnerStep(PhantomData)
    }
}

impl<M> Default for LearnerStep<M> {
    fn default() -> Self {
        Self::new()
    }
}

impl<M> std::fmt::Debug for LearnerStep<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LearnerStep")
    }
}

impl<M> TrainingStep<M, <M as TrainStep>::Input> for LearnerStep<M>
where
    M: TrainStep + Module,
    M::Output: LearnerOutput,
{
    const OWN_BACKWARD: bool = true;

    #[inline]
    fn step(&mut self, model: &M, batch: <M as TrainStep>::Input, step: &mut Step<'_>) -> StepOutput {
        let TrainOutput { grads, item } = TrainStep::step(model, batch);
        let loss = item.loss();
        item.put(step.outputs());
        StepOutput::Gradients { loss, grads }
    }

    #[inline]
    fn optimize(
        &mut self,
        model: M,
        optimizer: &mut ModuleOptimizer,
        learning_rate: f64,
        grads: GradientsParams,
    ) -> M {
        model.optimize(optimizer, learning_rate.into(), grads)
    }
}

/// A model's burn-train [`InferenceStep`] as an
/// [`InferenceRunner`](crate::inference::InferenceRunner)'s forward function: puts the item's
/// tensors ([`LearnerOutput`]) and returns the batch size.
pub fn inference_step<M>() -> impl FnMut(&M, <M as InferenceStep>::Input, &mut Outputs) -> usize + Clone
where
    M: InferenceStep,
    M::Output: LearnerOutput,
{
    |model: &M, batch, outputs: &mut Outputs| {
        let item = InferenceStep::step(model, batch);
        let size = item.batch_size();
        item.put(outputs);
        size
    }
}

/// The device fetches of an item's tensors.
fn item_fetches<O: LearnerOutput>() -> Vec<Fetch> {
    O::NAMES.iter().map(|&name| Fetch::device(name)).collect()
}

/// Update `metric` with the item rebuilt from `values`.
fn update<Me, O>(metric: &mut Me, values: &Fetched<'_>, metadata: &MetricMetadata) -> Result<()>
where
    Me: Metric,
    O: LearnerOutput + Adaptor<Me::Input>,
{
    let item = O::take(values)?;
    let item =
        item.sync().map_err(|e| Error::context(format!("burn-train metric `{}`", metric.name()), e))?;
    metric
        .update(&item.adapt(), metadata)
        .map_err(|e| Error::context(format!("burn-train metric `{}` reading its value", metric.name()), e))?;
    Ok(())
}

/// The metric's value over what it was updated with since its last `clear`.
fn final_value<Me: Metric + Numeric>(metric: &mut Me) -> Result<f64> {
    metric.compute().map_err(|e| {
        Error::context(format!("burn-train metric `{}` computing its value", metric.name()), e)
    })?;
    Ok(metric.final_value().current())
}

fn metadata(counters: Option<&Counters>, items: usize, lr: Option<f64>) -> MetricMetadata {
    MetricMetadata {
        progress: Progress {
            items_processed: items,
            items_total: counters.map_or(0, |c| c.steps_per_epoch() as usize),
            unit: None,
        },
        iteration: counters.map(|c| c.global_step() as usize),
        lr: lr.map(Into::into),
    }
}

/// A burn-train metric over an inference pass, as an [`Inferencer`]: the metric is cleared before
/// each pass, updated with every batch's item (rebuilt from the forward function's outputs, `O`
/// saying which item: `ClassificationOutput` for [`AccuracyMetric`](burn_train::metric::AccuracyMetric)
/// on a classifier), and its value over the pass is put as a scalar, named after the metric
/// (`"Accuracy"`) unless [`scalar_name`](BurnMetric::scalar_name) says otherwise.
///
/// Percent metrics stay in percent, as burn-train reports them (`Accuracy` 93.5 is 6.5% error).
pub struct BurnMetric<Me, O> {
    metric: Me,
    name: Option<String>,
    fetches: Vec<Fetch>,
    batches: usize,
    item: PhantomData<fn(O)>,
}

impl<Me: Metric, O: LearnerOutput> BurnMetric<Me, O> {
    /// `metric` over the items of type `O`.
    pub fn new(metric: Me) -> Self {
        BurnMetric { metric, name: None, fetches: item_fetches::<O>(), batches: 0, item: PhantomData }
    }

    /// The name of the scalar it puts (the metric's own name by default).
    pub fn scalar_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    fn scalar(&self) -> String {
        self.name.clone().unwrap_or_else(|| self.metric.name().to_string())
    }
}

impl<Me, O> Inferencer for BurnMetric<Me, O>
where
    Me: Metric + Numeric + 'static,
    O: LearnerOutput + Adaptor<Me::Input> + 'static,
{
    fn name(&self) -> Cow<'static, str> {
        Cow::Owned(format!("BurnMetric({})", self.scalar()))
    }

    fn fetches(&self) -> &[Fetch] {
        &self.fetches
    }

    fn before_inference(&mut self) {
        self.metric.clear();
        self.batches = 0;
    }

    fn on_batch(&mut self, values: &Fetched<'_>) -> Result<()> {
        self.batches += 1;
        update::<Me, O>(&mut self.metric, values, &metadata(None, self.batches, None))
    }

    fn after_inference(&mut self) -> Vec<(String, f64)> {
        let value = match final_value(&mut self.metric) {
            Ok(value) => value,
            Err(error) => {
                crate::logging::error!("{error}; the scalar is NaN");
                f64::NAN
            }
        };
        vec![(self.scalar(), value)]
    }
}

/// A burn-train metric over each epoch's training steps, as a callback: updated with every step's
/// item (rebuilt from the step's outputs, which [`LearnerStep`] puts; `O` says which item), and its
/// value over the epoch put as a scalar at the epoch's end, named after the metric unless
/// [`scalar_name`](TrainMetric::scalar_name) says otherwise. The learning rate is stoker's, for
/// [`LearningRateMetric`](burn_train::metric::LearningRateMetric).
///
/// It fetches the item's tensors at every step and burn-train's metric reads its value back at
/// every update: a device-to-host transfer per step, the price burn-train's `Learner` pays too.
/// On the chief alone in a data-parallel run.
pub struct TrainMetric<Me, O> {
    inner: BurnMetric<Me, O>,
}

impl<Me: Metric, O: LearnerOutput> TrainMetric<Me, O> {
    /// `metric` over the training items of type `O`.
    pub fn new(metric: Me) -> Self {
        TrainMetric { inner: BurnMetric::new(metric) }
    }

    /// The name of the scalar it puts (the metric's own name by default).
    pub fn scalar_name(mut self, name: impl Into<String>) -> Self {
        self.inner = self.inner.scalar_name(name);
        self
    }
}

impl<M, Me, O> Callback<M> for TrainMetric<Me, O>
where
    Me: Metric + Numeric + 'static,
    O: LearnerOutput + Adaptor<Me::Input> + 'static,
{
    fn name(&self) -> Cow<'static, str> {
        Cow::Owned(format!("TrainMetric({})", self.inner.scalar()))
    }

    fn fetches(&self) -> &[Fetch] {
        &self.inner.fetches
    }

    fn chief_only(&self) -> bool {
        true
    }

    fn before_epoch(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        self.inner.before_inference();
        Ok(())
    }

    fn after_step(&mut self, ctx: &mut Context<'_, M>, values: &Fetched<'_>) -> Result<()> {
        self.inner.batches += 1;
        let metadata = metadata(Some(ctx.counters()), self.inner.batches, Some(ctx.learning_rate()));
        update::<Me, O>(&mut self.inner.metric, values, &metadata)
    }

    fn after_epoch(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if self.inner.batches == 0 {
            return Ok(());
        }
        let value = final_value(&mut self.inner.metric)?;
        ctx.monitors().put_scalar(&self.inner.scalar(), value);
        Ok(())
    }
}
