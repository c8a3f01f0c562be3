//! The digits MLP written for burn-train's `Learner` (a [`TrainStep`] and an [`InferenceStep`]
//! returning burn-train's [`ClassificationOutput`]), trained both with the `Learner` and with
//! stoker from the same `TrainStep`, burn-train's metrics in both (feature `burn-train`; the
//! `learner` program runs both and compares them).
//!
//! The stoker side is what moving from the `Learner` takes: the model's code does not change;
//! `SupervisedTraining::new(dir, train, valid).num_epochs(n)` becomes
//! `Trainer::new(model, optimizer, train).max_epoch(n).log_dir(dir)`, the validation loader goes to
//! an [`InferenceRunner`] over [`inference_step`], and `metric_valid_numeric(m)` /
//! `metric_train_numeric(m)` become [`BurnMetric`] / [`TrainMetric`].

use std::path::Path;
use std::sync::Arc;

use burn::data::dataloader::DataLoader;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::AdamConfig;
use burn_stoker::burn_train::{BurnMetric, LearnerOutput, LearnerStep, TrainMetric, inference_step};
use burn_stoker::prelude::*;
use burn_stoker::{Error, Result};
use burn_train::metric::{AccuracyMetric, LossMetric};
use burn_train::{
    ClassificationOutput, InferenceStep, Learner, LearnerSummary, SupervisedTraining, TrainOutput, TrainStep,
};

use crate::{DigitBatch, Mlp};

impl Mlp {
    /// The forward pass and the cross-entropy loss, as burn-train's classification item.
    pub fn forward_classification(&self, batch: DigitBatch) -> ClassificationOutput {
        let logits = self.forward(batch.images);
        let loss = CrossEntropyLossConfig::new()
            .init(&logits.device())
            .forward(logits.clone(), batch.labels.clone());
        ClassificationOutput::new(loss, logits, batch.labels)
    }
}

impl Mlp {
    /// Every parameter by name, as host values (to compare two trainings: burn's parameter ids
    /// differ between processes and runs).
    pub fn weights(&self) -> Vec<(&'static str, Vec<f32>)> {
        let host = |t: burn::tensor::Tensor<2>| t.into_data().try_to_vec::<f32>().expect("f32 weights");
        let host1 = |t: burn::tensor::Tensor<1>| t.into_data().try_to_vec::<f32>().expect("f32 weights");
        let bias = |l: &burn::nn::Linear| l.bias.as_ref().map(|b| host1(b.val())).unwrap_or_default();
        vec![
            ("hidden.weight", host(self.hidden.weight.val())),
            ("hidden.bias", bias(&self.hidden)),
            ("output.weight", host(self.output.weight.val())),
            ("output.bias", bias(&self.output)),
        ]
    }
}

impl TrainStep for Mlp {
    type Input = DigitBatch;
    type Output = ClassificationOutput;

    fn step(&self, batch: DigitBatch) -> TrainOutput<ClassificationOutput> {
        let item = self.forward_classification(batch);
        TrainOutput::new(self, item.loss.backward(), item)
    }
}

impl InferenceStep for Mlp {
    type Input = DigitBatch;
    type Output = ClassificationOutput;

    fn step(&self, batch: DigitBatch) -> ClassificationOutput {
        self.forward_classification(batch)
    }
}

/// The data and settings both trainers get.
pub struct Setup {
    /// The training batches (in a fixed order: both trainers must see the same).
    pub train: Arc<dyn DataLoader<DigitBatch>>,
    /// The validation batches.
    pub valid: Arc<dyn DataLoader<DigitBatch>>,
    /// Epochs.
    pub epochs: u64,
    /// Adam's constant learning rate.
    pub learning_rate: f64,
}

/// Train `model` with burn-train's `Learner` (training loss and validation accuracy as its
/// metrics), writing its logs to `dir`. Returns the trained model and the `Learner`'s summary of
/// its metrics (per epoch, read back from its log files).
pub fn train_with_learner(model: Mlp, setup: &Setup, dir: &Path) -> Result<(Mlp, LearnerSummary)> {
    let learner = Learner::new(model, AdamConfig::new().init(), setup.learning_rate);
    let result = SupervisedTraining::new(dir, setup.train.clone(), setup.valid.clone())
        .num_epochs(setup.epochs as usize)
        .metric_train_numeric(LossMetric::new())
        .metric_valid_numeric(AccuracyMetric::new())
        .with_application_logger(None)
        .launch(learner);
    let summary = LearnerSummary::new(dir, &["Loss", "Accuracy"]).map_err(Error::msg)?;
    Ok((result.model, summary))
}

/// Train `model` with stoker from the same `TrainStep` ([`LearnerStep`]), with burn-train's
/// training loss ([`TrainMetric`], as `"Loss"`) and validation accuracy ([`BurnMetric`], as
/// `"Accuracy"`), and stoker's [`ClassificationError`] next to it (as `"validation_error"`), over
/// the model's `InferenceStep` (what [`inference_step`] runs, plus the per-sample `"wrong"` vector
/// stoker's inferencer reads).
pub fn train_with_stoker(model: Mlp, setup: &Setup, dir: &Path) -> Result<TrainReport<Mlp>> {
    let forward = |model: &Mlp, batch: DigitBatch, out: &mut Outputs| {
        let item = InferenceStep::step(model, batch);
        let wrong = item.output.clone().argmax(1).squeeze_dim::<1>(1).not_equal(item.targets.clone()).float();
        out.put("wrong", wrong);
        let size = item.batch_size();
        item.put(out);
        size
    };
    let report = Trainer::new(model, AdamConfig::new().init(), setup.train.clone())
        .max_epoch(setup.epochs)
        .learning_rate(setup.learning_rate)
        .log_dir(dir)
        .log_dir_policy(LogDirPolicy::Delete)
        .default_callbacks(DefaultCallbacks { progress: None, ..DefaultCallbacks::default() })
        .callbacks((
            TrainMetric::<_, ClassificationOutput>::new(LossMetric::new()),
            InferenceRunner::new(setup.valid.clone(), forward)
                .with(BurnMetric::<_, ClassificationOutput>::new(AccuracyMetric::new()))
                .with(ClassificationError::new("wrong", "validation_error")),
        ))
        .train_with(LearnerStep::new())?;
    Ok(report)
}

/// [`train_with_stoker`] with validation over the model's `InferenceStep` alone
/// ([`inference_step`], no code of stoker's in the forward function).
pub fn validate_with_inference_step(valid: Arc<dyn DataLoader<DigitBatch>>) -> impl Callback<Mlp> {
    InferenceRunner::new(valid, inference_step::<Mlp>())
        .with(
            BurnMetric::<_, ClassificationOutput>::new(AccuracyMetric::new())
                .scalar_name("validation_accuracy"),
        )
        .with(BurnMetric::<_, ClassificationOutput>::new(LossMetric::new()).scalar_name("validation_loss"))
}
