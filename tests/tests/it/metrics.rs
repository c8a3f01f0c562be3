//! The classification metrics on the device (issue 40): top-k accuracy, precision / recall / F1
//! (macro, micro, weighted) from the confusion matrix, AUROC (binary and one-vs-rest), each
//! compared with scikit-learn's value on the same predictions, through a real InferenceRunner
//! pass in a small training run, with one transfer per pass; the confusion matrix's image read
//! back with TensorBoard's own reader; the same results from a 2-rank threads world; and the test
//! phase after training (`Trainer::test`), run with the best weights EarlyStopping restored.

use std::path::Path;

use burn::nn::Linear;
use burn::optim::SgdConfig;
use burn::tensor::{Tensor, TensorData};
use burn_stoker::inference::{Auroc, MulticlassStats, TopKAccuracy};
use burn_stoker::monitor::{JsonWriter, TensorBoardWriter};
use burn_stoker::prelude::*;
use burn_stoker::state::Direction;
use burn_stoker::world::Threads;
use serde_json::Value as Json;
use stoker_tests::{mse, scratch_dir, tiny_data, tiny_model};

const CLASSES: usize = 4;
/// Batches of unequal sizes, 19 samples.
const SIZES: [usize; 5] = [5, 3, 4, 1, 6];
/// The scores of each sample are one of these rows (probabilities, exact in `f32`): ties across
/// a whole row, between classes 1 and 2, between classes 0 and 3; no row's first largest score
/// is class 3, so class 3 is never predicted (its precision is scikit-learn's `zero_division`).
const ROWS: [[f32; CLASSES]; 7] = [
    [0.25, 0.25, 0.25, 0.25],
    [0.125, 0.5, 0.25, 0.125],
    [0.125, 0.375, 0.375, 0.125],
    [0.5, 0.125, 0.125, 0.25],
    [0.125, 0.125, 0.625, 0.125],
    [0.375, 0.0, 0.25, 0.375],
    [0.25, 0.0, 0.5, 0.25],
];

/// Sample `i`'s scores and label (every class is some sample's label).
fn sample(i: usize) -> ([f32; CLASSES], usize) {
    (ROWS[(i * 5 + 1) % ROWS.len()], (i * 3 + i / 5) % CLASSES)
}

/// The class of the first largest score (NumPy's `argmax`).
fn first_max(scores: &[f32]) -> usize {
    let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    scores.iter().position(|&s| s == max).unwrap()
}

/// A validation batch: the scores `[n, 4]`, the labels and the predicted classes `[n]`.
type Batch = (Tensor<2>, Tensor<1>, Tensor<1>);

/// The batches of `SIZES`, on the CPU.
fn batches() -> Vec<Batch> {
    let device = burn_stoker::device::cpu();
    let mut start = 0;
    SIZES
        .iter()
        .map(|&n| {
            let samples: Vec<_> = (start..start + n).map(sample).collect();
            start += n;
            let scores: Vec<f32> = samples.iter().flat_map(|(s, _)| *s).collect();
            let labels: Vec<f32> = samples.iter().map(|&(_, l)| l as f32).collect();
            let predicted: Vec<f32> = samples.iter().map(|(s, _)| first_max(s) as f32).collect();
            (
                Tensor::from_data(TensorData::new(scores, [n, CLASSES]), &device),
                Tensor::from_data(TensorData::new(labels, [n]), &device),
                Tensor::from_data(TensorData::new(predicted, [n]), &device),
            )
        })
        .collect()
}

fn forward(_model: &Linear, (scores, label, predicted): Batch, out: &mut Outputs) {
    let n = label.dims()[0];
    out.put("binary_score", scores.clone().slice([0..n, 0..1]).reshape([n]));
    out.put("is_zero", label.clone().equal_elem(0.0).float());
    out.put("scores", scores);
    out.put("label", label);
    out.put("predicted", predicted);
}

type Forward = fn(&Linear, Batch, &mut Outputs);

/// Every metric, over `data`.
fn runner(data: Vec<Batch>) -> InferenceRunner<Vec<Batch>, Forward> {
    InferenceRunner::new(data, forward as Forward)
        .with(TopKAccuracy::new("scores", "label", 1))
        .with(TopKAccuracy::new("scores", "label", 2))
        .with(MulticlassStats::new("scores", "label", CLASSES))
        .with(MulticlassStats::new("predicted", "label", CLASSES).prefix("indices").confusion_image(false))
        .with(Auroc::binary("binary_score", "is_zero").prefix("binary"))
        .with(Auroc::one_vs_rest("scores", "label", CLASSES))
}

/// The names the runner puts, each compared with scikit-learn's value of the same name.
const NAMES: [&str; 15] = [
    "val_top1_accuracy",
    "val_top2_accuracy",
    "val_accuracy",
    "val_precision_macro",
    "val_recall_macro",
    "val_f1_macro",
    "val_precision_micro",
    "val_recall_micro",
    "val_f1_micro",
    "val_precision_weighted",
    "val_recall_weighted",
    "val_f1_weighted",
    "binary_auroc",
    "val_auroc",
    "val_auroc_weighted",
];

/// scikit-learn's values on the same scores and labels (and, with an event file, the confusion
/// matrix's image as TensorBoard's reader and PIL decode it: the grey at each cell's centre).
const SKLEARN: &str = r#"
import io, json, sys
import numpy as np
from sklearn import metrics as m
d = json.loads(sys.argv[1])
s, y = np.array(d["scores"], dtype=np.float64), np.array(d["labels"])
labels = list(range(s.shape[1]))
p = s.argmax(axis=1)
out = {"val_accuracy": m.accuracy_score(y, p)}
for k in (1, 2):
    out[f"val_top{k}_accuracy"] = m.top_k_accuracy_score(y, s, k=k, labels=labels)
for avg in ("macro", "micro", "weighted"):
    pr, rc, f1, _ = m.precision_recall_fscore_support(y, p, labels=labels, average=avg, zero_division=0)
    out[f"val_precision_{avg}"], out[f"val_recall_{avg}"], out[f"val_f1_{avg}"] = pr, rc, f1
out["binary_auroc"] = m.roc_auc_score((y == 0).astype(int), s[:, 0])
out["val_auroc"] = m.roc_auc_score(y, s, multi_class="ovr", average="macro", labels=labels)
out["val_auroc_weighted"] = m.roc_auc_score(y, s, multi_class="ovr", average="weighted", labels=labels)
out["confusion"] = m.confusion_matrix(y, p, labels=labels).tolist()
if len(sys.argv) > 2:
    from PIL import Image
    from tensorboard.backend.event_processing import event_file_loader
    images = []
    for event in event_file_loader.EventFileLoader(sys.argv[2]).Load():
        for v in event.summary.value:
            if v.tag == "val_confusion_matrix":
                png = v.image.encoded_image_string if v.HasField("image") else v.tensor.string_val[2]
                images.append(Image.open(io.BytesIO(png)))
    image = images[-1]
    cell = image.size[0] // len(labels)
    out["image_size"] = list(image.size)
    out["image"] = [[image.getpixel((j * cell + cell // 2, i * cell + cell // 2)) for j in labels] for i in labels]
print(json.dumps(out))
"#;

/// scikit-learn's results on the samples of `SIZES`; `events`: also the image in that file.
fn sklearn(events: Option<&Path>) -> serde_json::Map<String, Json> {
    let total: usize = SIZES.iter().sum();
    let samples: Vec<_> = (0..total).map(sample).collect();
    let input = serde_json::json!({
        "scores": samples.iter().map(|(s, _)| s.to_vec()).collect::<Vec<_>>(),
        "labels": samples.iter().map(|&(_, l)| l).collect::<Vec<_>>(),
    });
    let mut command = std::process::Command::new("python3");
    command.arg("-c").arg(SKLEARN).arg(input.to_string());
    if let Some(events) = events {
        command.arg(events);
    }
    let out = command.output().expect("python3 runs");
    assert!(
        out.status.success(),
        "scikit-learn's side failed (`python3 -m pip install scikit-learn tensorboard pillow`):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("scikit-learn's values as JSON")
}

/// The event file TensorBoardWriter wrote in `dir`.
fn event_file(dir: &Path) -> std::path::PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("events.out.tfevents"))
        .expect("an event file")
}

fn writers() -> DefaultCallbacks {
    DefaultCallbacks {
        tensorboard: Some(TensorBoardWriter::new()),
        json: Some(JsonWriter),
        ..DefaultCallbacks::none()
    }
}

#[test]
fn every_metric_equals_scikit_learns_on_the_same_predictions_with_one_transfer_per_pass() {
    let device = burn_stoker::device::cpu();
    let dir = scratch_dir("metrics-sklearn");
    let runner = runner(batches());
    let counts = runner.counts();
    let report = Trainer::new(tiny_model(&device), SgdConfig::new().init(), tiny_data(2, &device))
        .max_epoch(2)
        .log_dir(&dir)
        .handle_signals(false)
        .default_callbacks(writers())
        .callbacks(runner)
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .unwrap();
    // Two passes of 5 batches: every metric counts on the device, one read per pass.
    assert_eq!((counts.passes(), counts.batches(), counts.transfers()), (2, 10, 2));
    let expected = sklearn(Some(&event_file(&dir)));
    for name in NAMES {
        let value = report.latest(name).unwrap_or_else(|| panic!("`{name}` was not put"));
        let sklearn = expected[name].as_f64().unwrap();
        assert!((value - sklearn).abs() < 1e-6, "{name}: {value} here, {sklearn} in scikit-learn");
        // The class indices give what the scores give.
        if let Some(rest) = name.strip_prefix("val_")
            && !rest.starts_with("top")
            && !rest.starts_with("auroc")
        {
            assert_eq!(report.latest(&format!("indices_{rest}")), Some(value), "{name}");
        }
    }
    // Not trivial: ties decide some top-1 hits, class 3 is never predicted.
    assert!(expected["val_top1_accuracy"] != expected["val_accuracy"], "{expected:?}");
    let confusion: Vec<Vec<u64>> = serde_json::from_value(expected["confusion"].clone()).unwrap();
    assert!(
        confusion.iter().all(|row| row[3] == 0) && confusion.iter().all(|row| row.iter().sum::<u64>() > 0)
    );
    // The image: 4 cells of 32 pixels a side, each cell's grey its share of its row.
    assert_eq!(expected["image_size"], serde_json::json!([128, 128]));
    let image: Vec<Vec<u64>> = serde_json::from_value(expected["image"].clone()).unwrap();
    for (i, row) in confusion.iter().enumerate() {
        let total: u64 = row.iter().sum();
        for (j, &count) in row.iter().enumerate() {
            let grey = (255.0 * count as f64 / total as f64).round() as u64;
            assert_eq!(image[i][j], grey, "cell ({i}, {j}) of {confusion:?}");
        }
    }
    // stats.json has them under the same names.
    let rows: Vec<serde_json::Map<String, Json>> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("stats.json")).unwrap()).unwrap();
    assert!(rows.iter().all(|row| NAMES.iter().all(|name| row.contains_key(*name))), "{rows:?}");
}

#[test]
fn a_two_rank_world_gives_what_one_device_gives() {
    let single = {
        let device = burn_stoker::device::cpu();
        let report = Trainer::new(tiny_model(&device), SgdConfig::new().init(), tiny_data(2, &device))
            .log_dir(scratch_dir("metrics-single"))
            .handle_signals(false)
            .default_callbacks(DefaultCallbacks::none())
            .callbacks(runner(batches()))
            .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
            .unwrap();
        NAMES.map(|name| report.latest(name).unwrap())
    };
    let cpu = burn_stoker::device::cpu();
    let dir = scratch_dir("metrics-pair");
    let ranks = Threads::new([cpu.clone(), cpu])
        .run(|world| {
            let device = world.device().clone();
            // Every batch kept: rank 0 validates batches 0, 2, 4, rank 1 batches 1, 3.
            let rank = world.rank();
            let shard: Vec<Batch> = batches().into_iter().skip(rank).step_by(2).collect();
            let runner = runner(shard).data_parallel();
            let report = Trainer::new(
                tiny_model(&device),
                SgdConfig::new().init(),
                world.shard(tiny_data(2, &device)),
            )
            .log_dir(&dir)
            .handle_signals(false)
            .default_callbacks(DefaultCallbacks::none())
            .world(world)
            .callbacks(runner)
            .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))?;
            Ok::<_, burn_stoker::Error>(NAMES.map(|name| report.latest(name)))
        })
        .expect("two ranks");
    for (name, (one, chief)) in NAMES.iter().zip(single.iter().zip(&ranks[0])) {
        assert_eq!(Some(*one), *chief, "{name}: one device {one}, the chief of two ranks {chief:?}");
    }
    assert!(ranks[1].iter().all(Option::is_none), "rank 1 puts nothing: {:?}", ranks[1]);
}

/// The training step of the test phase's run: the loss `-(w0 + w1)`, so that each SGD step adds
/// `2 lr` to the weights' sum, which the validation cost watches from a target.
fn climb(model: &Linear, _batch: (Tensor<2>, Tensor<2>), _step: &mut Step<'_>) -> Tensor<1> {
    model.weight.val().sum().mul_scalar(-1.0)
}

/// The validation and test forward: the weights' sum, and its distance from `target`.
fn weight_sum(model: &Linear, target: f32, out: &mut Outputs) -> usize {
    let sum = model.weight.val().sum();
    out.put("weight_sum", sum.clone());
    out.put("cost", sum.sub_scalar(target).abs());
    1
}

#[test]
fn the_test_set_is_evaluated_after_training_with_the_best_weights_into_the_report_and_stats_json() {
    let device = burn_stoker::device::cpu();
    let dir = scratch_dir("metrics-test-phase");
    let model = tiny_model(&device);
    let start: f32 = stoker_tests::weights(&model)[0].iter().sum();
    // 2 steps of lr 0.1 per epoch: the sum grows by 0.4 an epoch; the target lies near the end of
    // epoch 3, so the validation cost is lowest there and grows in epochs 4 and 5.
    let target = start + 3.0 * 0.4 - 0.05;
    let one = || vec![Tensor::<1>::zeros([1], &burn_stoker::device::cpu())];
    let valid = InferenceRunner::new(one(), move |model: &Linear, _: Tensor<1>, out: &mut Outputs| {
        weight_sum(model, target, out)
    })
    .with(ScalarStats::new(["cost", "weight_sum"]));
    let test = InferenceRunner::new(one(), move |model: &Linear, _: Tensor<1>, out: &mut Outputs| {
        weight_sum(model, target, out)
    })
    .with(ScalarStats::new(["cost", "weight_sum"]).prefix("test"));
    let report = Trainer::new(model, SgdConfig::new().init(), tiny_data(2, &device))
        .max_epoch(5)
        .learning_rate(0.1)
        .log_dir(&dir)
        .handle_signals(false)
        .default_callbacks(writers())
        .callbacks((
            valid,
            EarlyStopping::new("validation_cost")
                .mode(Direction::Min)
                .patience(10)
                .restore_best_weights(true),
        ))
        .test(test)
        .train(climb)
        .unwrap();
    let best = start as f64 + 3.0 * 0.4;
    let last = start as f64 + 5.0 * 0.4;
    let tested = report.latest("test_weight_sum").expect("test_weight_sum in the report");
    assert!(
        (tested - best).abs() < 1e-4,
        "tested with {tested}: the best weights give {best}, the last {last}"
    );
    assert!((report.latest("validation_weight_sum").unwrap() - last).abs() < 1e-4);
    assert_eq!(
        report.test.iter().map(|(name, _)| name.as_str()).collect::<Vec<_>>(),
        ["test_cost", "test_weight_sum"]
    );
    assert_eq!(report.test[1].1, tested);
    assert!((report.test[0].1 - 0.05).abs() < 1e-4, "{:?}", report.test);
    // stats.json: the test results in a last row, under their names.
    let rows: Vec<serde_json::Map<String, Json>> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("stats.json")).unwrap()).unwrap();
    let with_test: Vec<_> = rows.iter().filter(|row| row.contains_key("test_weight_sum")).collect();
    assert_eq!(with_test.len(), 1, "{rows:?}");
    assert_eq!(with_test[0]["test_weight_sum"].as_f64(), Some(tested));

    // Without the restore the final weights are tested.
    let model = tiny_model(&device);
    let start: f32 = stoker_tests::weights(&model)[0].iter().sum();
    let test = InferenceRunner::new(one(), move |model: &Linear, _: Tensor<1>, out: &mut Outputs| {
        weight_sum(model, target, out)
    })
    .with(ScalarStats::new(["weight_sum"]).prefix("test"));
    let report = Trainer::new(model, SgdConfig::new().init(), tiny_data(2, &device))
        .max_epoch(5)
        .learning_rate(0.1)
        .log_dir(scratch_dir("metrics-test-final"))
        .handle_signals(false)
        .default_callbacks(DefaultCallbacks::none())
        .test(test)
        .train(climb)
        .unwrap();
    let tested = report.latest("test_weight_sum").unwrap();
    assert!((tested - (start as f64 + 2.0)).abs() < 1e-4, "{tested}");
}
