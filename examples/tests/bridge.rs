//! The burn-train bridge (feature `burn-train`): one `TrainStep`, two trainers — burn-train's
//! `Learner` and stoker's — give the same weights and the same metric values; burn-train's
//! Accuracy inside stoker's `InferenceRunner` is `ClassificationError`'s complement.

use std::path::Path;

use burn_stoker::burn_train::{LearnerStep, TrainMetric};
use burn_stoker::callback::Callback;
use burn_stoker::prelude::*;
use burn_train::ClassificationOutput;
use burn_train::metric::LossMetric;
use serde_json::Value as Json;
use stoker_examples::learner::{Setup, train_with_learner, train_with_stoker, validate_with_inference_step};
use stoker_examples::{DigitBatch, Mlp, load_digits, loader};
use stoker_tests::scratch_dir;

/// The digits with every batch full (1408 = 44 x 32 training samples, 320 = 5 x 64 validation
/// samples): burn-train's summary averages per-batch values, stoker's metrics weigh by batch size,
/// and with equal batches the two are the same number.
fn setup(epochs: u64) -> (Setup, Mlp) {
    let device = burn_stoker::device::cpu();
    let mut split = load_digits(11, 0.2);
    split.train.truncate(1408);
    split.valid.truncate(320);
    let setup = Setup {
        train: loader(split.train, 32, None, &device),
        valid: loader(split.valid, 64, None, &device),
        epochs,
        learning_rate: 1e-2,
    };
    device.seed(11);
    (setup, Mlp::new(32, &device))
}

fn stats(dir: &Path) -> Vec<Json> {
    serde_json::from_str(&std::fs::read_to_string(dir.join("stats.json")).unwrap()).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn bridge_one_train_step_two_trainers_same_weights_and_same_metric_values() {
    let (setup, model) = setup(2);
    let dir = scratch_dir("bridge-two-trainers");
    let initial = model.weights();
    let (by_learner, summary) = train_with_learner(model.clone(), &setup, &dir.join("learner")).unwrap();
    let report = train_with_stoker(model, &setup, &dir.join("stoker")).unwrap();
    assert_eq!(report.counters.global_step(), 2 * 44);

    let (a, b) = (by_learner.weights(), report.model.weights());
    assert_ne!(a, initial, "the Learner trained the model");
    for ((name, learner), (_, stoker)) in a.iter().zip(&b) {
        let largest = learner.iter().zip(stoker).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
        assert!(largest <= 1e-6, "{name}: the two trainers' weights differ by up to {largest}");
    }

    // The same metric values, epoch by epoch: the Learner's (read back from its logs by its own
    // summary) and stoker's (stats.json).
    let rows = stats(&dir.join("stoker"));
    assert_eq!(rows.len(), 2);
    let find = |split: &[burn_train::MetricSummary], name: &str| -> Vec<f64> {
        let metric =
            split.iter().find(|m| m.name == name).unwrap_or_else(|| panic!("the Learner logged {name}"));
        metric.entries.iter().map(|e| e.value).collect()
    };
    let learner_loss = find(&summary.metrics.train, "Loss");
    let learner_accuracy = find(&summary.metrics.valid, "Accuracy");
    assert_eq!((learner_loss.len(), learner_accuracy.len()), (2, 2), "{summary}");
    for (epoch, row) in rows.iter().enumerate() {
        let loss = row["Loss"].as_f64().expect("stoker logged the training Loss");
        let accuracy = row["Accuracy"].as_f64().expect("stoker logged the validation Accuracy");
        assert!(
            close(loss, learner_loss[epoch]),
            "epoch {}: Loss {loss} against the Learner's {}",
            epoch + 1,
            learner_loss[epoch]
        );
        assert!(
            close(accuracy, learner_accuracy[epoch]),
            "epoch {}: Accuracy {accuracy} against the Learner's {}",
            epoch + 1,
            learner_accuracy[epoch]
        );
    }
}

#[test]
fn bridge_burn_train_accuracy_in_an_inference_runner_is_classification_error_complement_on_the_digits() {
    // The real validation split, its last batch smaller (359 = 5 x 64 + 39): both weigh by samples.
    let device = burn_stoker::device::cpu();
    let split = load_digits(5, 0.2);
    let setup = Setup {
        train: loader(split.train, 32, Some(5), &device),
        valid: loader(split.valid, 64, None, &device),
        epochs: 2,
        learning_rate: 1e-2,
    };
    device.seed(5);
    let dir = scratch_dir("bridge-accuracy");
    train_with_stoker(Mlp::new(32, &device), &setup, &dir).unwrap();
    let rows = stats(&dir);
    assert_eq!(rows.len(), 2);
    for row in &rows {
        let accuracy = row["Accuracy"].as_f64().unwrap();
        let error = row["validation_error"].as_f64().unwrap();
        assert!(accuracy > 50.0, "the model learned something: {row}");
        assert!(
            (accuracy / 100.0 - (1.0 - error)).abs() < 1e-9,
            "burn-train's Accuracy {accuracy}% is not 1 - ClassificationError {error}: {row}"
        );
    }
}

#[test]
fn bridge_inference_step_alone_feeds_burn_train_metrics() {
    let (setup, model) = setup(1);
    let dir = scratch_dir("bridge-inference-step");
    Trainer::new(model, burn::optim::AdamConfig::new().init(), setup.train.clone())
        .max_epoch(1)
        .learning_rate(setup.learning_rate)
        .log_dir(&dir)
        .default_callbacks(DefaultCallbacks { progress: None, ..DefaultCallbacks::default() })
        .callbacks(validate_with_inference_step(setup.valid.clone()))
        .train_with(LearnerStep::new())
        .unwrap();
    let rows = stats(&dir);
    let accuracy = rows[0]["validation_accuracy"].as_f64().unwrap();
    let loss = rows[0]["validation_loss"].as_f64().unwrap();
    assert!((0.0..=100.0).contains(&accuracy) && accuracy > 50.0, "{}", rows[0]);
    assert!(loss.is_finite() && loss > 0.0, "{}", rows[0]);
}

/// A callback that would change the loss before backward.
struct ScaleLoss;

impl Callback<Mlp> for ScaleLoss {
    fn step_events(&self) -> burn_stoker::callback::StepEvents {
        burn_stoker::callback::StepEvents::LOSS
    }
}

#[test]
fn bridge_a_before_backward_callback_is_refused_with_a_train_step_that_runs_its_own_backward() {
    let (setup, model) = setup(1);
    let dir = scratch_dir("bridge-loss-hook");
    let error = Trainer::new(model, burn::optim::AdamConfig::new().init(), setup.train.clone())
        .max_epoch(1)
        .log_dir(&dir)
        .default_callbacks(DefaultCallbacks::none())
        .callbacks((ScaleLoss, TrainMetric::<_, ClassificationOutput>::new(LossMetric::new())))
        .train_with(LearnerStep::new())
        .map(|_| ())
        .expect_err("a loss hook cannot work on a step that ran backward");
    let text = error.error.to_string();
    assert!(
        text.contains("`ScaleLoss`") && text.contains("before_backward") && text.contains("after_backward"),
        "{text}"
    );
    assert_eq!(error.report.as_ref().map_or(0, |r| r.counters.global_step()), 0, "no step ran");
}

#[allow(dead_code)]
fn batch_type_is_the_train_step_input(batch: DigitBatch) -> <Mlp as burn_train::TrainStep>::Input {
    batch
}
