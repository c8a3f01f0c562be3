//! Summaries: the model summary at the start (parameters per tensor and per module, bytes from
//! each tensor's own dtype, `model_summary.txt` in the log directory) and the end-of-training
//! summary (outcome, steps, each scalar's last and best value and where the best was, the log
//! directory and the latest checkpoint), both on by default, each off when its field of
//! `DefaultCallbacks` is `None`, neither reading anything from the device. What they print on
//! stdout is read from a child process running one test.

use std::path::{Path, PathBuf};
use std::process::Command;

use burn::module::{Module, Param};
use burn::nn::{Linear, LinearConfig};
use burn::optim::SgdConfig;
use burn::tensor::{DType, Device, Tensor, TensorData};
use burn_stoker::prelude::*;
use burn_stoker::state::Better;
use burn_stoker::state::Direction;
use burn_stoker::track::{ModelParams, ModelSummary};
use burn_stoker::trainer::TrainSummaryPrinter;
use stoker_tests::reads::count_reads;
use stoker_tests::{StopAt, scratch_dir, tiny_data};

/// Steps per epoch in every run here.
const STEPS: usize = 4;

/// Two linear layers and a float64 vector: 3 -> 4 -> 1 on its own weights' dtype.
#[derive(Module, Debug)]
struct Net {
    fc1: Linear,
    fc2: Linear,
    scale: Param<Tensor<1>>,
}

impl Net {
    fn new(device: &Device) -> Net {
        let scale = Tensor::<1>::from_data(TensorData::new(vec![1.0f64; 5], [5]), device).cast(DType::F64);
        Net {
            fc1: LinearConfig::new(2, 4).init(device),
            fc2: LinearConfig::new(4, 1).init(device),
            scale: Param::from_tensor(scale),
        }
    }
    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        self.fc2.forward(self.fc1.forward(x))
    }
}

fn net_mse(model: &Net, (x, y): (Tensor<2>, Tensor<2>), _step: &mut Step<'_>) -> Tensor<1> {
    (model.forward(x) - y).powi_scalar(2).mean()
}

/// A trainer of [`Net`] for `epochs` epochs of [`STEPS`] steps in `dir`, with `defaults`.
fn trainer(dir: &Path, epochs: u64, defaults: DefaultCallbacks) -> Trainer<Net, Vec<(Tensor<2>, Tensor<2>)>> {
    let device = burn_stoker::device::cpu();
    Trainer::new(Net::new(&device), SgdConfig::new().init(), tiny_data(STEPS, &device))
        .max_epoch(epochs)
        .log_dir(dir)
        .handle_signals(false)
        .default_callbacks(defaults)
}

/// Only the two summaries among the default callbacks.
fn summaries_only() -> DefaultCallbacks {
    DefaultCallbacks {
        model_summary: Some(ModelSummary::new()),
        train_summary: Some(TrainSummaryPrinter::new()),
        ..DefaultCallbacks::none()
    }
}

// ---------- the model summary ----------

#[test]
fn summary_model_params_count_each_tensor_by_path_module_and_dtype() {
    let net = Net::new(&burn_stoker::device::cpu());
    let params = ModelParams::of(&net);
    let rows: Vec<(&str, Vec<usize>, DType, usize, usize)> = params
        .tensors
        .iter()
        .map(|t| (t.path.as_str(), t.shape.clone(), t.dtype, t.params, t.bytes))
        .collect();
    assert_eq!(
        rows,
        vec![
            ("fc1.weight", vec![2, 4], DType::F32, 8, 32),
            ("fc1.bias", vec![4], DType::F32, 4, 16),
            ("fc2.weight", vec![4, 1], DType::F32, 4, 16),
            ("fc2.bias", vec![1], DType::F32, 1, 4),
            ("scale", vec![5], DType::F64, 5, 40),
        ]
    );
    let modules: Vec<(String, usize, usize)> =
        params.modules().into_iter().map(|m| (m.name, m.params, m.bytes)).collect();
    let expected = [("fc1", 12, 48), ("fc2", 5, 20), ("scale", 5, 40)];
    assert_eq!(modules, expected.map(|(name, params, bytes)| (name.to_string(), params, bytes)));
    assert_eq!((params.total_params(), params.total_bytes()), (22, 108));
    assert_eq!(params.total_params(), net.num_params(), "the total is burn's num_params");
    assert!(params.model.ends_with("Net"), "{}", params.model);
}

#[test]
fn summary_model_params_display_lists_every_tensor_each_module_and_the_total() {
    let params = ModelParams::of(&Net::new(&burn_stoker::device::cpu()));
    let text = params.to_string();
    let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(lines[0], ["model", "summary:", "Net"]);
    assert_eq!(lines[1], ["parameter", "shape", "dtype", "params", "bytes"]);
    assert_eq!(lines[2], ["fc1.weight", "[2,", "4]", "f32", "8", "32"]);
    assert_eq!(lines[3], ["fc1.bias", "[4]", "f32", "4", "16"]);
    assert_eq!(lines[4], ["fc1", "12", "48"]);
    assert_eq!(lines[5], ["fc2.weight", "[4,", "1]", "f32", "4", "16"]);
    assert_eq!(lines[6], ["fc2.bias", "[1]", "f32", "1", "4"]);
    assert_eq!(lines[7], ["fc2", "5", "20"]);
    assert_eq!(lines[8], ["scale", "[5]", "f64", "5", "40"]);
    assert_eq!(lines[9], ["total", "22", "108", "(108", "B)"]);
    assert_eq!(lines.len(), 10, "{text}");
}

#[test]
fn summary_model_summary_is_written_to_the_log_dir_by_default() {
    assert!(DefaultCallbacks::default().model_summary.is_some(), "on by default");
    let dir = scratch_dir("summary-file");
    let defaults = DefaultCallbacks { progress: None, printer: None, ..DefaultCallbacks::default() };
    let report = trainer(&dir, 1, defaults).train(net_mse).unwrap();
    let written = std::fs::read_to_string(dir.join(ModelSummary::FILE)).expect("model_summary.txt");
    assert_eq!(written, ModelParams::of(&report.model).to_string());
    // A summary lent to the trainer keeps the table of the model it saw at before_train.
    let mut summary = ModelSummary::new().print(false);
    let defaults = DefaultCallbacks { model_summary: None, ..DefaultCallbacks::none() };
    let dir = scratch_dir("summary-lent");
    trainer(&dir, 1, defaults).callbacks(&mut summary).train(net_mse).unwrap();
    assert_eq!(summary.params().map(|p| p.total_params()), Some(22));
    assert!(dir.join(ModelSummary::FILE).exists());
}

#[test]
fn summary_model_summary_off_writes_nothing() {
    let dir = scratch_dir("summary-off");
    let defaults = DefaultCallbacks { model_summary: None, ..summaries_only() };
    trainer(&dir, 1, defaults).train(net_mse).unwrap();
    assert!(!dir.join(ModelSummary::FILE).exists());
    let dir = scratch_dir("summary-none");
    trainer(&dir, 1, DefaultCallbacks::none()).train(net_mse).unwrap();
    assert!(!dir.join(ModelSummary::FILE).exists());
}

// ---------- the end-of-training summary ----------

/// Puts `val_loss`, `accuracy`, `score` and `lr_seen` at each epoch's trigger, from fixed lists.
struct History;

const VAL_LOSS: [f64; 3] = [3.0, 1.0, 2.0];
const ACCURACY: [f64; 3] = [0.5, 0.9, 0.7];
/// Neither lower nor higher by its name: `EarlyStopping`'s `Direction::Max` below says higher.
const SCORE: [f64; 3] = [7.0, 4.0, 5.0];
/// Neither by its name, and declared by nobody: no best.
const LR_SEEN: [f64; 3] = [0.1, 0.2, 0.3];

impl<M> Callback<M> for History {
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        let e = ctx.epoch_num() as usize - 1;
        let monitors = ctx.monitors();
        monitors.put_scalar("val_loss", VAL_LOSS[e]);
        monitors.put_scalar("accuracy", ACCURACY[e]);
        monitors.put_scalar("score", SCORE[e]);
        monitors.put_scalar("lr_seen", LR_SEEN[e]);
        Ok(())
    }
}

#[test]
fn summary_end_summary_reports_last_and_best_values_and_where() {
    let dir = scratch_dir("summary-end");
    let watch = EarlyStopping::new("score").mode(Direction::Max).patience(10);
    let report = trainer(&dir, 3, summaries_only()).callbacks((History, watch)).train(net_mse).unwrap();
    let summary = &report.summary;
    assert_eq!(summary.outcome, Outcome::Finished);
    assert_eq!((summary.steps, summary.global_step, summary.epoch_num), (12, 12, 3));
    assert!(summary.wall_time.as_secs_f64() > 0.0);
    assert_eq!(summary.steps_per_second(), 12.0 / summary.wall_time.as_secs_f64());
    assert_eq!(summary.log_dir, dir);
    assert_eq!(summary.checkpoint, None);
    let scalar =
        |name: &str| summary.scalars.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("{name}"));
    let best = |name: &str| scalar(name).best.map(|b| (b.value, b.global_step, b.epoch_num, b.better));
    assert_eq!((scalar("val_loss").last, scalar("val_loss").last_step), (2.0, 12));
    assert_eq!(best("val_loss"), Some((1.0, 8, 2, Better::Lower)));
    assert_eq!(best("accuracy"), Some((0.9, 8, 2, Better::Higher)));
    assert_eq!(best("score"), Some((7.0, 4, 1, Better::Higher)), "EarlyStopping declared Direction::Max");
    assert_eq!((scalar("lr_seen").last, best("lr_seen")), (0.3, None));
    let text = summary.to_string();
    let line = |start: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(start))
            .unwrap_or_else(|| panic!("{start} in\n{text}"))
    };
    assert!(
        text.starts_with("stoker: training finished after epoch 3 (global step 12): 12 steps in "),
        "{text}"
    );
    assert!(line("val_loss").split_whitespace().eq(["val_loss", "2", "1", "(step", "8,", "epoch", "2)"]));
    assert!(line("accuracy").split_whitespace().eq(["accuracy", "0.7", "0.9", "(step", "8,", "epoch", "2)"]));
    assert!(line("lr_seen").split_whitespace().eq(["lr_seen", "0.3", "-"]));
    assert_eq!(line("logs:").trim(), format!("logs: {}", dir.display()));
    assert_eq!(line("latest checkpoint:").trim(), "latest checkpoint: none");
}

#[test]
fn summary_end_summary_names_the_stop_and_the_latest_checkpoint() {
    let dir = scratch_dir("summary-stop");
    let report =
        trainer(&dir, 3, summaries_only()).callbacks((StopAt(8), ModelSaver::new(5))).train(net_mse).unwrap();
    let summary = &report.summary;
    assert_eq!(summary.outcome, Outcome::Stopped("stopped at an epoch's end by the test".into()));
    assert_eq!((summary.steps, summary.epoch_num), (8, 2));
    let latest: PathBuf = dir.join("checkpoints").join("step-8");
    assert_eq!(summary.checkpoint.as_deref(), Some(latest.as_path()));
    let text = summary.to_string();
    assert!(
        text.starts_with("stoker: training stopped (stopped at an epoch's end by the test) after epoch 2 (global step 8): 8 steps in "),
        "{text}"
    );
    assert!(text.contains(&format!("latest checkpoint: {}", latest.display())), "{text}");
}

#[test]
fn summary_end_summary_is_in_the_report_with_the_printer_off() {
    let dir = scratch_dir("summary-report");
    let report = trainer(&dir, 1, DefaultCallbacks::none()).callbacks(History).train(net_mse).unwrap();
    assert_eq!(report.summary.steps, 4);
    assert_eq!(
        report.summary.scalars.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["accuracy", "lr_seen", "score", "val_loss"]
    );
}

// ---------- what is printed, and that neither costs a read ----------

const CHILD: &str = "STOKER_SUMMARY_TEST_CHILD";

/// Run test `name` alone in a child process and return what it wrote on stdout.
fn stdout_of(name: &str) -> String {
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &stoker_tests::test_path(module_path!(), name), "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .expect("running the test binary");
    assert!(
        output.status.success(),
        "child test {name} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn summary_child_trains_with_both_summaries() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    trainer(&scratch_dir("summary-child-on"), 1, summaries_only()).train(net_mse).unwrap();
}

#[test]
fn summary_child_trains_with_neither_summary() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let defaults = DefaultCallbacks { model_summary: None, train_summary: None, ..summaries_only() };
    trainer(&scratch_dir("summary-child-off"), 1, defaults).train(net_mse).unwrap();
}

#[test]
fn summary_both_are_printed_by_default_and_neither_when_off() {
    let on = stdout_of("summary_child_trains_with_both_summaries");
    assert!(on.contains("model summary: "), "{on}");
    let total = on.lines().find(|l| l.trim_start().starts_with("total ")).unwrap_or_else(|| panic!("{on}"));
    assert!(total.split_whitespace().eq(["total", "22", "108", "(108", "B)"]), "{total}");
    assert!(on.contains("stoker: training finished after epoch 1 (global step 4): 4 steps in "), "{on}");
    let off = stdout_of("summary_child_trains_with_neither_summary");
    assert!(!off.contains("model summary") && !off.contains("stoker: training"), "{off}");
}

#[test]
fn summary_neither_summary_fetches_or_reads_anything() {
    assert!(Callback::<Net>::fetches(&ModelSummary::new()).is_empty());
    assert!(Callback::<Net>::fetches(&TrainSummaryPrinter::new()).is_empty());
    let (report, with) = count_reads(|| {
        trainer(&scratch_dir("summary-reads-on"), 2, summaries_only())
            .callbacks(History)
            .train(net_mse)
            .unwrap()
    });
    let (without_report, without) = count_reads(|| {
        trainer(&scratch_dir("summary-reads-off"), 2, DefaultCallbacks::none())
            .callbacks(History)
            .train(net_mse)
            .unwrap()
    });
    assert_eq!((report.fetch_transfers, with), (without_report.fetch_transfers, without));
    assert_eq!(with, 0, "a run that fetches nothing reads nothing, summaries included");
}
