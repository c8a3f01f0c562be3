//! InferenceRunner and its inferencers: the true error over a whole set with batches of any size,
//! scalar means over datapoints, several inferencers in one pass with one transfer per batch,
//! precision / recall / F1, neon's per-class statistics, a user's inferencer, results in the
//! monitors; two named runners (a validation and a test set) with tensorpack's prefixes; and the
//! learning-rate schedule.

use std::sync::{Arc, Mutex};

use burn::nn::Linear;
use burn::tensor::{Tensor, TensorData};
use burn_stoker::inference::Inferencer;
use burn_stoker::inference::{BinaryClassificationStats, MultiLabelStats};
use burn_stoker::prelude::*;
use stoker_tests::{mse, scratch_dir, tiny_data, tiny_model};

type Seen = Arc<Mutex<Vec<(u64, Option<f64>, Option<f64>, f64)>>>;

/// Records, at each trigger, the validation results and the learning rate.
struct Observer(Seen, Order);

impl Callback<Linear> for Observer {
    fn order(&self) -> Order {
        self.1.clone()
    }
    fn trigger(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let monitors = ctx.monitors_ref();
        let entry = (
            ctx.epoch_num(),
            monitors.latest("validation_error"),
            monitors.latest("validation_cost"),
            ctx.learning_rate(),
        );
        self.0.lock().unwrap().push(entry);
        Ok(())
    }
}

/// Two validation batches of different sizes: 3 samples (1 wrong, cost 0.5) and 1 sample (1
/// wrong, cost 2.0). True error 2/4 = 0.5 (the mean of per-batch errors would be 2/3).
fn validation_batches() -> Vec<(Tensor<1>, Tensor<1>)> {
    let device = burn_stoker::device::cpu();
    let batch = |wrong: Vec<f32>, cost: f32| {
        let n = wrong.len();
        (
            Tensor::from_data(TensorData::new(wrong, [n]), &device),
            Tensor::from_data(TensorData::new(vec![cost], [1]), &device),
        )
    };
    vec![batch(vec![0.0, 1.0, 0.0], 0.5), batch(vec![1.0], 2.0)]
}

#[test]
fn classification_error_and_scalar_stats_weigh_batches_by_their_size() {
    let device = burn_stoker::device::cpu();
    let seen = Seen::default();
    let runner = InferenceRunner::new(
        validation_batches(),
        |_model: &Linear, (wrong, cost): (Tensor<1>, Tensor<1>), out: &mut Outputs| {
            out.put("wrong", wrong);
            out.put("cost", cost);
        },
    )
    .with(ClassificationError::new("wrong", "validation_error"))
    .with(ScalarStats::new(["cost"]));
    let counts = runner.counts();
    let (report, reads) = stoker_tests::reads::count_reads(|| {
        Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(2, &device))
            .max_epoch(2)
            .log_dir(scratch_dir("inference"))
            .default_callbacks(DefaultCallbacks::none())
            .callbacks((Observer(seen.clone(), Order::none().after("InferenceRunner")), runner))
            .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
            .unwrap()
    });
    assert_eq!(report.fetch_transfers, 0, "inference transfers are not training fetches");
    // Measured: both inferencers add their batches up on the device, so one read per validation
    // pass (2 batches, 2 passes), none per batch, none for training.
    assert_eq!(counts.transfers(), 2);
    assert_eq!(reads, 2, "device-to-host reads: one per validation pass");
    let seen = seen.lock().unwrap().clone();
    // The cost over the 4 samples: (3 x 0.5 + 1 x 2.0) / 4 (the mean of the batches would be 1.25).
    assert_eq!(seen, vec![(1, Some(0.5), Some(0.875), 1e-3), (2, Some(0.5), Some(0.875), 1e-3)]);
}

#[test]
fn an_inference_output_that_is_not_produced_is_a_named_error() {
    let device = burn_stoker::device::cpu();
    let runner = InferenceRunner::new(
        validation_batches(),
        |_model: &Linear, (wrong, _cost): (Tensor<1>, Tensor<1>), out: &mut Outputs| {
            out.put("wrong", wrong);
        },
    )
    .with(ScalarStats::new(["cost"]));
    let error =
        Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(2, &device))
            .log_dir(scratch_dir("inference-missing"))
            .default_callbacks(DefaultCallbacks::none())
            .callbacks(runner)
            .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
            .unwrap_err();
    assert_eq!(
        error.to_string(),
        "callback `InferenceRunner` failed in trigger_epoch: callback `InferenceRunner` asks for `cost`, which its forward function does not produce; it produces `wrong`"
    );
}

#[test]
fn the_schedule_sets_values_after_their_epochs_and_interpolates_without_extrapolating() {
    let schedule = ScheduledHyperParamSetter::new("learning_rate", [(2, 1.0), (6, 0.0)]).linear();
    let values: Vec<Option<f64>> = (0..9).map(|e| schedule.value_at(e, true)).collect();
    assert_eq!(values, vec![None, None, Some(1.0), Some(0.75), Some(0.5), Some(0.25), Some(0.0), None, None]);
    let steps = ScheduledHyperParamSetter::new("learning_rate", [(2, 1.0), (6, 0.0)]);
    let exact: Vec<Option<f64>> = (0..9).map(|e| steps.value_at(e, true)).collect();
    assert_eq!(exact, vec![None, None, Some(1.0), None, None, None, Some(0.0), None, None]);
    // At the beginning of a resumed run, the value in force is set even between points.
    let resumed: Vec<Option<f64>> = (0..9).map(|e| steps.value_at(e, false)).collect();
    assert_eq!(
        resumed,
        vec![None, None, Some(1.0), Some(1.0), Some(1.0), Some(1.0), Some(0.0), Some(0.0), Some(0.0)]
    );
}

#[test]
fn the_schedule_drives_the_learning_rate_of_a_run_including_a_resumed_one() {
    let run = |starting_epoch: u64| {
        let device = burn_stoker::device::cpu();
        let seen = Seen::default();
        Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(1, &device))
            .max_epoch(5)
            .starting_epoch(starting_epoch)
            .log_dir(scratch_dir("schedule"))
            .default_callbacks(DefaultCallbacks::none())
            .callbacks((
                Observer(seen.clone(), Order::none().after("ScheduledHyperParamSetter")),
                ScheduledHyperParamSetter::new("learning_rate", [(0, 0.5), (2, 0.1), (4, 0.0)]),
            ))
            .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
            .unwrap();
        let lrs: Vec<(u64, f64)> = seen.lock().unwrap().iter().map(|e| (e.0, e.3)).collect();
        lrs
    };
    // Observed at the end of each epoch, after the setter: the value for the next epoch.
    assert_eq!(run(1), vec![(1, 0.5), (2, 0.1), (3, 0.1), (4, 0.0), (5, 0.0)]);
    assert_eq!(run(4), vec![(4, 0.0), (5, 0.0)]);
}

/// The latest values of some scalars, at each trigger.
type Captured = Arc<Mutex<Vec<Vec<Option<f64>>>>>;

/// Records, at each trigger after the InferenceRunner, the latest value of each of its names.
struct Capture {
    names: Vec<String>,
    seen: Captured,
}

impl Capture {
    fn new<S: Into<String>>(names: impl IntoIterator<Item = S>) -> (Self, Captured) {
        let seen = Arc::default();
        (Capture { names: names.into_iter().map(Into::into).collect(), seen: Arc::clone(&seen) }, seen)
    }
}

impl Callback<Linear> for Capture {
    fn order(&self) -> Order {
        Order::none().after("InferenceRunner")
    }
    fn trigger(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let values = self.names.iter().map(|n| ctx.monitors_ref().latest(n)).collect();
        self.seen.lock().unwrap().push(values);
        Ok(())
    }
}

/// Train the tiny model for `epochs` epochs with an inference runner (and a capture).
fn validate<K, C: Callbacks<Linear, K>>(
    epochs: u64,
    callbacks: C,
) -> burn_stoker::Result<TrainReport<Linear>> {
    let device = burn_stoker::device::cpu();
    Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(1, &device))
        .max_epoch(epochs)
        .log_dir(scratch_dir("validate"))
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .callbacks(callbacks)
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .map_err(burn_stoker::Error::from)
}

fn vector(values: &[f32]) -> Tensor<1> {
    Tensor::from_data(TensorData::new(values.to_vec(), [values.len()]), &burn_stoker::device::cpu())
}

fn matrix(rows: &[[f32; 2]]) -> Tensor<2> {
    let flat: Vec<f32> = rows.iter().flatten().copied().collect();
    Tensor::from_data(TensorData::new(flat, [rows.len(), 2]), &burn_stoker::device::cpu())
}

/// 7 samples in batches of 3: 3, 3 and an uneven last batch of 1, with a mean cost per batch.
#[derive(Clone)]
struct Sample {
    cost: f32,
    top1: Vec<f32>,
    top5: Vec<f32>,
    predicted: Vec<f32>,
    label: Vec<f32>,
}

fn seven_samples() -> Vec<Sample> {
    let batch = |cost, top1: &[f32], top5: &[f32], predicted: &[f32], label: &[f32]| Sample {
        cost,
        top1: top1.to_vec(),
        top5: top5.to_vec(),
        predicted: predicted.to_vec(),
        label: label.to_vec(),
    };
    vec![
        batch(0.5, &[1.0, 0.0, 1.0], &[0.0, 0.0, 1.0], &[1.0, 1.0, 0.0], &[1.0, 0.0, 0.0]),
        batch(1.0, &[0.0, 0.0, 1.0], &[0.0, 0.0, 0.0], &[0.0, 1.0, 1.0], &[1.0, 1.0, 1.0]),
        batch(2.0, &[1.0], &[1.0], &[1.0], &[0.0]),
    ]
}

/// The forward function of [`seven_samples`]: every value as an output.
fn put_sample(_model: &Linear, sample: Sample, out: &mut Outputs) {
    out.put("cost", vector(&[sample.cost]));
    out.put("wrong-top1", vector(&sample.top1));
    out.put("wrong-top5", vector(&sample.top5));
    out.put("predicted", vector(&sample.predicted));
    out.put("label", vector(&sample.label));
}

/// A user's inferencer: counts the samples from the batch sizes the runner tells, and the passes.
struct SampleCounter {
    fetches: [Fetch; 1],
    samples: usize,
    batch_size: usize,
    passes: Arc<Mutex<u64>>,
}

impl Inferencer for SampleCounter {
    fn fetches(&self) -> &[Fetch] {
        &self.fetches
    }
    fn before_inference(&mut self) {
        self.samples = 0;
        *self.passes.lock().unwrap() += 1;
    }
    fn needs_batch_size(&self) -> bool {
        true
    }
    fn set_batch_size(&mut self, batch_size: usize) {
        self.batch_size = batch_size;
    }
    fn on_batch(&mut self, values: &Fetched<'_>) -> burn_stoker::Result<()> {
        let (labels, _) = values.host("label")?;
        assert_eq!(labels.len(), self.batch_size, "the runner tells the batch's size");
        self.samples += self.batch_size;
        Ok(())
    }
    fn after_inference(&mut self) -> Vec<(String, f64)> {
        vec![("val_samples".into(), self.samples as f64)]
    }
}

#[test]
fn several_inferencers_share_one_pass_and_one_transfer_per_batch() {
    let passes = Arc::new(Mutex::new(0));
    let runner = InferenceRunner::new(seven_samples(), put_sample)
        .with(ClassificationError::new("wrong-top1", "val-error-top1"))
        .with(ClassificationError::new("wrong-top5", "val-error-top5"))
        .with(ScalarStats::new(["cost"]))
        .with(BinaryClassificationStats::new("predicted", "label"))
        .with(SampleCounter {
            fetches: [Fetch::host("label")],
            samples: 0,
            batch_size: 0,
            passes: passes.clone(),
        });
    let counts = runner.counts();
    let (capture, seen) = Capture::new([
        "val-error-top1",
        "val-error-top5",
        "validation_cost",
        "val_precision",
        "val_recall",
        "val_f1",
        "val_samples",
    ]);
    let (report, reads) = stoker_tests::reads::count_reads(|| validate(2, (runner, capture)).unwrap());
    // Top-1: 4 of 7 wrong, top-5: 2 of 7; the cost over the samples (the mean of the batches
    // would be 3.5 / 3); TP 3, FP 2, FN 1 over the set (the mean of the batches' precisions would
    // be 0.5).
    let expected = vec![
        Some(4.0 / 7.0),
        Some(2.0 / 7.0),
        Some(6.5 / 7.0),
        Some(3.0 / 5.0),
        Some(3.0 / 4.0),
        Some(6.0 / 9.0),
        Some(7.0),
    ];
    assert_eq!(*seen.lock().unwrap(), vec![expected.clone(), expected]);
    // One read per batch for the inferencers that read each batch on the host
    // (BinaryClassificationStats checks that every value is 0 or 1; the test's counter), and one
    // per pass for the sums ClassificationError and ScalarStats add up on the device.
    assert_eq!((counts.passes(), counts.batches(), counts.transfers()), (2, 6, 8));
    assert_eq!(reads, 8, "device-to-host reads: one per validation batch, one per pass");
    assert_eq!(*passes.lock().unwrap(), 2);
    assert_eq!(report.fetch_transfers, 0);
}

#[test]
fn scalar_stats_take_the_batch_size_the_forward_function_returns() {
    // Only scalars: the size cannot be read off the outputs, the forward function tells it.
    let runner =
        InferenceRunner::new(seven_samples(), |_model: &Linear, sample: Sample, out: &mut Outputs| {
            out.put("cost", vector(&[sample.cost]));
            sample.top1.len()
        })
        .with(ScalarStats::new(["cost"]).prefix(""));
    let (capture, seen) = Capture::new(["cost"]);
    validate(1, (runner, capture)).unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![vec![Some((0.5 * 3.0 + 1.0 * 3.0 + 2.0) / 7.0)]]);
}

#[test]
fn a_batch_size_that_cannot_be_told_is_an_error_saying_how_to_give_it() {
    let scalars_only =
        InferenceRunner::new(seven_samples(), |_model: &Linear, sample: Sample, out: &mut Outputs| {
            out.put("cost", vector(&[sample.cost]));
        })
        .with(ScalarStats::new(["cost"]));
    assert_eq!(
        validate(1, scalars_only).unwrap_err().to_string(),
        "callback `InferenceRunner` failed in trigger_epoch: InferenceRunner: `ScalarStats` needs each batch's number of datapoints, which cannot be read off the forward function's outputs: each holds one value (`cost` [1]); return the batch size from the forward function (`|model, batch, out| { ...; batch_size }`)"
    );
    let mismatched =
        InferenceRunner::new(seven_samples(), |_model: &Linear, sample: Sample, out: &mut Outputs| {
            out.put("cost", vector(&[sample.cost]));
            out.put("wrong", vector(&sample.top1));
            out.put("per_class", vector(&[0.0, 1.0]));
        })
        .with(ScalarStats::new(["cost"]));
    assert_eq!(
        validate(1, mismatched).unwrap_err().to_string(),
        "callback `InferenceRunner` failed in trigger_epoch: InferenceRunner: `ScalarStats` needs each batch's number of datapoints, which cannot be read off the forward function's outputs: their first dimensions differ (`wrong` [3], `per_class` [2]); return the batch size from the forward function (`|model, batch, out| { ...; batch_size }`)"
    );
    // Without an inferencer that needs it, nothing is asked.
    let runner =
        InferenceRunner::new(seven_samples(), |_model: &Linear, sample: Sample, out: &mut Outputs| {
            out.put("wrong", vector(&sample.top1));
        })
        .with(ClassificationError::new("wrong", "validation_error"));
    validate(1, runner).unwrap();
}

#[test]
fn binary_statistics_are_zero_without_positives_and_refuse_values_other_than_0_and_1() {
    let none = vec![(vector(&[0.0, 0.0, 0.0]), vector(&[0.0, 0.0, 0.0])), (vector(&[0.0]), vector(&[0.0]))];
    let runner =
        InferenceRunner::new(none, |_model: &Linear, (p, l): (Tensor<1>, Tensor<1>), out: &mut Outputs| {
            out.put("p", p);
            out.put("l", l);
        })
        .with(BinaryClassificationStats::new("p", "l").prefix("test"));
    let (capture, seen) = Capture::new(["test_precision", "test_recall", "test_f1"]);
    validate(1, (runner, capture)).unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![vec![Some(0.0), Some(0.0), Some(0.0)]]);

    // Positive labels never predicted: precision 0 (nothing predicted), recall 0, F1 0.
    let missed = vec![(vector(&[0.0, 0.0]), vector(&[1.0, 0.0]))];
    let runner =
        InferenceRunner::new(missed, |_model: &Linear, (p, l): (Tensor<1>, Tensor<1>), out: &mut Outputs| {
            out.put("p", p);
            out.put("l", l);
        })
        .with(BinaryClassificationStats::new("p", "l").prefix(""));
    let (capture, seen) = Capture::new(["precision", "recall", "f1"]);
    validate(1, (runner, capture)).unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![vec![Some(0.0), Some(0.0), Some(0.0)]]);

    let scores = vec![(vector(&[0.75, 0.0]), vector(&[1.0, 0.0]))];
    let runner =
        InferenceRunner::new(scores, |_model: &Linear, (p, l): (Tensor<1>, Tensor<1>), out: &mut Outputs| {
            out.put("p", p);
            out.put("l", l);
        })
        .with(BinaryClassificationStats::new("p", "l"));
    assert_eq!(
        validate(1, runner).unwrap_err().to_string(),
        "callback `InferenceRunner` failed in trigger_epoch: BinaryClassificationStats: `p` holds 0.75, not 0 or 1"
    );
}

/// Two classes, batches of 3 and 1: predictions and labels, one column per class.
fn two_class_batches() -> Vec<(Tensor<2>, Tensor<2>)> {
    vec![
        (matrix(&[[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]), matrix(&[[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])),
        (matrix(&[[0.0, 0.0]]), matrix(&[[1.0, 1.0]])),
    ]
}

fn multi_label_names() -> Vec<String> {
    let mut names = Vec::new();
    for statistic in ["precision", "recall", "misclassification"] {
        for class in ["cat", "dog"] {
            names.push(format!("val_{statistic}/{class}"));
        }
        names.push(format!("val_{statistic}"));
    }
    names
}

fn multi_label(stats: MultiLabelStats, batches: Vec<(Tensor<2>, Tensor<2>)>) -> Vec<Option<f64>> {
    let runner = InferenceRunner::new(
        batches,
        |_model: &Linear, (p, l): (Tensor<2>, Tensor<2>), out: &mut Outputs| {
            out.put("predicted", p);
            out.put("labels", l);
        },
    )
    .with(stats);
    let (capture, seen) = Capture::new(multi_label_names());
    validate(1, (runner, capture)).unwrap();
    seen.lock().unwrap().pop().unwrap()
}

#[test]
fn multi_label_stats_count_each_class_over_the_whole_set() {
    // cat: TP 1 (row 1), FP 1 (row 2), FN 1 (last batch): precision 1/2, recall 1/2, 2 of 4 wrong.
    // dog: TP 2, FN 1: precision 2/2, recall 2/3, 1 of 4 wrong.
    let values =
        multi_label(MultiLabelStats::new("predicted", "labels", ["cat", "dog"]), two_class_batches());
    let expected =
        [0.5, 1.0, (0.5 + 1.0) / 2.0, 0.5, 2.0 / 3.0, (0.5 + 2.0 / 3.0) / 2.0, 0.5, 0.25, (0.5 + 0.25) / 2.0];
    assert_eq!(values, expected.map(Some).to_vec());
}

#[test]
fn multi_label_stats_reproduce_neons_per_batch_arithmetic() {
    // neon: per batch TP / (predicted + 1e-6), TP / (actual + 1e-6), averaged over the 2 batches.
    // cat: batch 1 TP 1, predicted 2, actual 1, 1 of 3 wrong; batch 2 TP 0, predicted 0, actual 1,
    // 1 of 1 wrong. dog: batch 1 TP 2, predicted 2, actual 2, none wrong; batch 2 as cat's.
    let e = 1e-6;
    let stats = MultiLabelStats::new("predicted", "labels", ["cat", "dog"]).mean_over_batches(true);
    let values = multi_label(stats, two_class_batches());
    let (cat_p, dog_p) = ((1.0 / (2.0 + e) + 0.0) / 2.0, (2.0 / (2.0 + e) + 0.0) / 2.0);
    let (cat_r, dog_r) = ((1.0 / (1.0 + e) + 0.0) / 2.0, (2.0 / (2.0 + e) + 0.0) / 2.0);
    let (cat_m, dog_m) = ((1.0 / 3.0 + 1.0) / 2.0, (0.0 + 1.0) / 2.0);
    let expected = [
        cat_p,
        dog_p,
        (cat_p + dog_p) / 2.0,
        cat_r,
        dog_r,
        (cat_r + dog_r) / 2.0,
        cat_m,
        dog_m,
        (cat_m + dog_m) / 2.0,
    ];
    assert_eq!(values, expected.map(Some).to_vec());
}

#[test]
fn multi_label_stats_binarize_scores_with_argmax() {
    // Scores whose row maxima give the 0/1 predictions of `two_class_batches` for single-label
    // rows: [0.9, 0.2] -> cat, [0.3, 0.6] -> dog, [0.5, 0.5] -> cat (the first of a tie).
    let batches = vec![
        (matrix(&[[0.9, 0.2], [0.3, 0.6], [0.5, 0.5]]), matrix(&[[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])),
        (matrix(&[[0.1, 0.7]]), matrix(&[[0.0, 1.0]])),
    ];
    // cat: predicted rows 1 and 3, TP 1; actual 1. dog: predicted rows 2 and 4, both right; actual 3.
    let values =
        multi_label(MultiLabelStats::new("predicted", "labels", ["cat", "dog"]).argmax(true), batches);
    assert_eq!(values[..2], [Some(0.5), Some(1.0)]);
    assert_eq!(values[3..5], [Some(1.0), Some(2.0 / 3.0)]);
    assert_eq!(values[6..8], [Some(0.25), Some(0.25)]);
}

#[test]
fn multi_label_stats_name_a_wrong_shape() {
    let runner = InferenceRunner::new(
        two_class_batches(),
        |_model: &Linear, (p, l): (Tensor<2>, Tensor<2>), out: &mut Outputs| {
            out.put("predicted", p);
            out.put("labels", l);
        },
    )
    .with(MultiLabelStats::new("predicted", "labels", ["cat", "dog", "bird"]));
    assert_eq!(
        validate(1, runner).unwrap_err().to_string(),
        "callback `InferenceRunner` failed in trigger_epoch: MultiLabelStats: `predicted` has shape [3, 2]; expected [batch, 3], one column per class (cat, dog, bird)"
    );
}

/// A test set unlike [`validation_batches`]: 4 samples (1 wrong, cost 1.0) and 1 sample (0
/// wrong, cost 6.0). True error 1/5 = 0.2; cost (4 x 1.0 + 1 x 6.0) / 5 = 2.0.
fn test_batches() -> Vec<(Tensor<1>, Tensor<1>)> {
    let device = burn_stoker::device::cpu();
    let batch = |wrong: Vec<f32>, cost: f32| {
        let n = wrong.len();
        (
            Tensor::from_data(TensorData::new(wrong, [n]), &device),
            Tensor::from_data(TensorData::new(vec![cost], [1]), &device),
        )
    };
    vec![batch(vec![1.0, 0.0, 0.0, 0.0], 1.0), batch(vec![0.0], 6.0)]
}

/// Records, at each trigger, the latest value of each of `NAMES` (in that order), ordered by
/// the constraints it is given.
struct Latest(Captured, Order);

const NAMES: [&str; 4] = ["validation_error", "validation_cost", "test_error", "test_cost"];

impl Callback<Linear> for Latest {
    fn name(&self) -> std::borrow::Cow<'static, str> {
        format!("Latest({:?})", self.1).into()
    }
    fn order(&self) -> Order {
        self.1.clone()
    }
    fn trigger(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let values = NAMES.iter().map(|n| ctx.monitors_ref().latest(n)).collect();
        self.0.lock().unwrap().push(values);
        Ok(())
    }
}

#[test]
fn named_runners_validate_and_test_on_two_sets_with_tensorpacks_prefixes() {
    let device = burn_stoker::device::cpu();
    let dir = scratch_dir("named-runners");
    let forward = |_model: &Linear, (wrong, cost): (Tensor<1>, Tensor<1>), out: &mut Outputs| {
        let n = wrong.dims()[0];
        out.put("wrong", wrong);
        out.put("cost", cost);
        n
    };
    // tensorpack's names: `validation_error` / `validation_<name>` by default, the test set's
    // with its own summary name and prefix.
    let validation = InferenceRunner::new(validation_batches(), forward)
        .with(ClassificationError::new("wrong", "validation_error"))
        .with(ScalarStats::new(["cost"]));
    let test = InferenceRunner::new(test_batches(), forward)
        .with(ClassificationError::new("wrong", "test_error"))
        .with(ScalarStats::new(["cost"]).prefix("test"))
        .named("test");
    assert_eq!(Callback::<Linear>::name(&test), "InferenceRunner(test)");
    let (validation_counts, test_counts) = (validation.counts(), test.inner().counts());
    // `InferenceRunner` designates both runners; `InferenceRunner(test)` the test runner alone.
    let (after_both, before_test) = (Captured::default(), Captured::default());
    let callbacks = (
        Latest(after_both.clone(), Order::none().after("InferenceRunner")),
        Latest(before_test.clone(), Order::none().before("InferenceRunner(test)")),
        validation,
        test,
    );
    Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(2, &device))
        .max_epoch(2)
        .log_dir(&dir)
        .default_callbacks(DefaultCallbacks {
            json: Some(burn_stoker::monitor::JsonWriter),
            ..DefaultCallbacks::none()
        })
        .callbacks(callbacks)
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .unwrap();
    assert_eq!((validation_counts.passes(), validation_counts.batches()), (2, 4));
    assert_eq!((test_counts.passes(), test_counts.batches()), (2, 4));
    let all = vec![Some(0.5), Some(0.875), Some(0.2), Some(2.0)];
    assert_eq!(*after_both.lock().unwrap(), vec![all.clone(), all.clone()]);
    // Ordered before the test runner (and registered before the validation runner): in epoch 1
    // it sees nothing yet, in epoch 2 the results of epoch 1.
    assert_eq!(*before_test.lock().unwrap(), vec![vec![None; 4], all]);

    // stats.json: each epoch's row holds both runners' results under their names.
    let stats: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("stats.json")).unwrap()).unwrap();
    for epoch in [1, 2] {
        let row = stats
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find(|row| row["epoch_num"] == epoch && row.get("test_cost").is_some())
            .unwrap_or_else(|| panic!("no row of epoch {epoch} with the test results: {stats}"));
        for (name, value) in
            [("validation_error", 0.5), ("validation_cost", 0.875), ("test_error", 0.2), ("test_cost", 2.0)]
        {
            assert_eq!(row[name].as_f64(), Some(value), "{name} in epoch {epoch}: {row}");
        }
        assert_eq!(row["global_step"], epoch * 2);
    }
}

#[test]
fn named_runners_without_names_are_refused_with_the_way_to_name_them() {
    let device = burn_stoker::device::cpu();
    let forward = |_model: &Linear, (wrong, _cost): (Tensor<1>, Tensor<1>), out: &mut Outputs| {
        out.put("wrong", wrong);
    };
    let runner =
        |batches| InferenceRunner::new(batches, forward).with(ClassificationError::new("wrong", "e"));
    let error =
        Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(2, &device))
            .log_dir(scratch_dir("named-runners-refused"))
            .default_callbacks(DefaultCallbacks::none())
            .callbacks((runner(validation_batches()), runner(test_batches())))
            .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
            .unwrap_err();
    assert_eq!(
        error.to_string(),
        "two callbacks are named `InferenceRunner`; give one another name with `.named(\"...\")` (`InferenceRunner(...)`: burn_stoker::callback::Named) so that checkpointed state, order constraints and errors can tell them apart"
    );
    // An empty label is refused at setup, naming the type.
    let error =
        Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(2, &device))
            .log_dir(scratch_dir("named-runners-empty"))
            .default_callbacks(DefaultCallbacks::none())
            .callbacks((runner(validation_batches()), runner(test_batches()).named(" ")))
            .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
            .unwrap_err();
    assert_eq!(
        error.to_string(),
        "callback `InferenceRunner( )` failed in setup: InferenceRunner: the label given to .named(...) must be a non-empty word, not \" \""
    );
}
