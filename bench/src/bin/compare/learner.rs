//! Case (f): burn-train's `Learner` on the same model, data and backend, with the loss metric
//! (burn-train registers no metric by default), no renderer, no checkpoints, no files.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use burn::data::dataloader::batcher::Batcher;
use burn::data::dataloader::{DataLoader, DataLoaderBuilder};
use burn::data::dataset::{Dataset, DatasetError};
use burn::module::{Module, ModuleDisplay};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::AdamConfig;
use burn::tensor::Device;
use burn::train::logger::{EvaluationProgressLogger, InMemoryMetricLogger, TrainingProgressLogger};
use burn::train::metric::{LossMetric, MetricDefinition};
use burn::train::renderer::{
    EvaluationName, MetricState, MetricsRenderer, MetricsRendererEvaluation, MetricsRendererTraining,
};
use burn::train::{
    ClassificationOutput, InferenceStep, Learner, LearnerSummary, SupervisedTraining, TrainOutput, TrainStep,
};
use stoker_bench::Classifier;
use stoker_examples::DigitBatch;

/// The model, wrapped so that burn-train's step traits can be implemented for it.
#[derive(Module, Debug)]
pub struct Net<M> {
    net: M,
}

impl<M: Classifier + ModuleDisplay> Net<M> {
    fn classify(&self, batch: DigitBatch) -> ClassificationOutput {
        let logits = self.net.logits(batch.images);
        let loss = CrossEntropyLossConfig::new()
            .init(&logits.device())
            .forward(logits.clone(), batch.labels.clone());
        ClassificationOutput::new(loss, logits, batch.labels)
    }
}

impl<M: Classifier + ModuleDisplay> TrainStep for Net<M> {
    type Input = DigitBatch;
    type Output = ClassificationOutput;
    fn step(&self, batch: DigitBatch) -> TrainOutput<ClassificationOutput> {
        let item = self.classify(batch);
        TrainOutput::new(self, item.loss.backward(), item)
    }
}

impl<M: Classifier + ModuleDisplay> InferenceStep for Net<M> {
    type Input = DigitBatch;
    type Output = ClassificationOutput;
    fn step(&self, batch: DigitBatch) -> ClassificationOutput {
        self.classify(batch)
    }
}

/// A renderer that shows nothing (burn-train's fallback prints every batch).
struct Silent;

impl MetricsRendererTraining for Silent {
    fn update_train(&mut self, _: MetricState) {}
    fn update_valid(&mut self, _: MetricState) {}
    fn on_train_end(&mut self, _: Option<LearnerSummary>) -> Result<(), Box<dyn core::error::Error>> {
        Ok(())
    }
}

impl MetricsRendererEvaluation for Silent {
    fn update_test(&mut self, _: EvaluationName, _: MetricState) {}
    fn on_test_end(&mut self, _: Option<LearnerSummary>) -> Result<(), Box<dyn core::error::Error>> {
        Ok(())
    }
}

impl TrainingProgressLogger for Silent {
    fn start(&mut self, _: usize, _: usize, _: Option<usize>, _: Option<&str>) {}
    fn update_epoch(&mut self, _: usize) {}
    fn start_split(&mut self, _: &str, _: usize) {}
    fn update_split(&mut self, _: usize) {}
    fn end_split(&mut self) {}
    fn end(&mut self) {}
    fn log_event_training(&mut self, _: String) {}
}

impl EvaluationProgressLogger for Silent {
    fn start_global_progress(&mut self, _: usize) {}
    fn start_test(&mut self, _: &str, _: usize) {}
    fn update_test_progress(&mut self, _: usize) {}
    fn end_test(&mut self) {}
    fn end_global_progress(&mut self) {}
    fn log_event_evaluation(&mut self, _: String) {}
}

impl MetricsRenderer for Silent {
    fn manual_close(&mut self) {}
    fn register_metric(&mut self, _: MetricDefinition) {}
}

/// `len` items cycling over prebuilt batches.
#[derive(Clone)]
struct Cycle(Arc<Vec<DigitBatch>>, usize);

impl Dataset<DigitBatch> for Cycle {
    fn get(&self, index: usize) -> Result<DigitBatch, DatasetError> {
        Ok(self.0[index % self.0.len()].clone())
    }
    fn len(&self) -> usize {
        self.1
    }
}

/// A batch of one prebuilt batch is that batch.
#[derive(Clone)]
struct Whole;

impl Batcher<DigitBatch, DigitBatch> for Whole {
    fn batch(&self, mut items: Vec<DigitBatch>, _: &Device) -> DigitBatch {
        items.pop().expect("batches of one")
    }
}

fn cycle(batches: &[DigitBatch], len: usize) -> Arc<dyn DataLoader<DigitBatch>> {
    DataLoaderBuilder::new(Whole).batch_size(1).build(Cycle(Arc::new(batches.to_vec()), len))
}

/// Seconds to train `steps` steps with the Learner, start-up and shutdown included.
fn fit<M: Classifier + ModuleDisplay>(data: &[DigitBatch], steps: usize, device: &Device) -> f64 {
    let start = Instant::now();
    let learner = Learner::new(Net { net: stoker_bench::fresh::<M>(device) }, AdamConfig::new().init(), 1e-3);
    let result = SupervisedTraining::<Net<M>>::new(Path::new("unused"), cycle(data, steps), cycle(&[], 0))
        .num_epochs(1)
        .metric_train_numeric(LossMetric::new())
        .renderer(Box::new(Silent))
        .with_application_logger(None)
        .with_metric_logger(InMemoryMetricLogger::new())
        .launch(learner);
    if let Some(error) = result.error {
        panic!("burn-train failed: {error}");
    }
    let _ = result.model.net.logits(data[0].images.clone()).into_data();
    start.elapsed().as_secs_f64()
}

/// Steps per second of the Learner's steady state: `steps` and `steps / 5` steps, difference of
/// steps over difference of times.
pub fn rate<M: Classifier + ModuleDisplay>(data: &[DigitBatch], steps: u64, device: &Device) -> f64 {
    let (long, short) = (steps as usize, (steps / 5) as usize);
    let long_time = fit::<M>(data, long, device);
    let short_time = fit::<M>(data, short, device);
    (long - short) as f64 / (long_time - short_time)
}

/// One run of `WARMUP + steps` steps (for counting instructions: the warm-up makes it the same
/// length as the other cases' runs).
pub fn run<M: Classifier + ModuleDisplay>(data: &[DigitBatch], steps: u64, device: &Device) -> f64 {
    fit::<M>(data, (super::WARMUP + steps) as usize, device)
}
