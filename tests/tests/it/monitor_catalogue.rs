//! The monitor catalogue: tensorpack's `MovingAverageSummary` and `SimpleMovingAverage`, the CSV
//! writer, tensorpack's `SendMonitorData` and `SendStat`, and neon's `Hist`, against
//! hand-computed expectations. The step puts an output `x` equal to its own global step (1, 2,
//! 3, ...), so every average has a value computable by hand.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use burn::nn::Linear;
use burn::tensor::{Tensor, TensorData};
use burn_stoker::fetch::{Fetch, FetchKind};
use burn_stoker::monitor::{
    CsvWriter, Hist, MovingAverageSummary, SendMonitorData, SendStat, SimpleMovingAverage, TensorBoardWriter,
    TrainCost, TrainLogger,
};
use burn_stoker::prelude::*;
use stoker_tests::{mse, scratch_dir, tiny_data, tiny_model, weights};

type Histories = Arc<Mutex<BTreeMap<String, Vec<(u64, f64)>>>>;

/// Copies the history of some scalars out of the run at `after_train`.
#[derive(Default)]
struct Recorder {
    names: Vec<&'static str>,
    seen: Histories,
}

impl Recorder {
    fn new(names: &[&'static str]) -> Self {
        Recorder { names: names.to_vec(), seen: Histories::default() }
    }
    fn history(&self, name: &str) -> Vec<(u64, f64)> {
        self.seen.lock().unwrap().get(name).cloned().unwrap_or_default()
    }
    fn handle(&self) -> Recorder {
        Recorder { names: self.names.clone(), seen: self.seen.clone() }
    }
}

impl Callback<Linear> for Recorder {
    fn after_train(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let mut seen = self.seen.lock().unwrap();
        for name in &self.names {
            seen.insert(name.to_string(), ctx.monitors_ref().history(name).to_vec());
        }
        Ok(())
    }
}

/// Puts `s` = global step at every step, `v` = 10 x epoch at every epoch, `late` = epoch from
/// epoch 2 on, `a,b` = 0.5 in epoch 1 only, and `w` = epoch / 3 in even epochs.
struct Putter;

impl Callback<Linear> for Putter {
    fn trigger_step(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let step = ctx.global_step() as f64;
        ctx.monitors().put_scalar("s", step);
        Ok(())
    }
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let epoch = ctx.epoch_num();
        let monitors = ctx.monitors();
        monitors.put_scalar("v", 10.0 * epoch as f64);
        if epoch >= 2 {
            monitors.put_scalar("late", epoch as f64);
        }
        if epoch == 1 {
            monitors.put_scalar("a,b", 0.5);
        }
        if epoch.is_multiple_of(2) {
            monitors.put_scalar("w", epoch as f64 / 3.0);
        }
        Ok(())
    }
}

fn trainer<K, C: Callbacks<Linear, K>>(
    dir: &Path,
    epochs: u64,
    steps: usize,
    callbacks: C,
) -> Trainer<Linear, Vec<(Tensor<2>, Tensor<2>)>, C, K> {
    let device = burn_stoker::device::cpu();
    Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(steps, &device))
        .max_epoch(epochs)
        .log_dir(dir)
        .handle_signals(false)
        .default_callbacks(DefaultCallbacks::none())
        .callbacks(callbacks)
}

/// The step: the MSE loss, and output `x` = this step's global step (1-based).
fn step(model: &Linear, batch: (Tensor<2>, Tensor<2>), step: &mut Step<'_>) -> Tensor<1> {
    let loss = mse(model, batch);
    let x = step.counters().global_step() as f32 + 1.0;
    step.output("x", Tensor::<1>::from_data(TensorData::new(vec![x], [1]), &loss.device()));
    loss
}

fn run<K, C: Callbacks<Linear, K>>(epochs: u64, steps: usize, callbacks: C) -> TrainReport<Linear> {
    trainer(&scratch_dir("catalogue"), epochs, steps, callbacks).train(step).unwrap()
}

fn assert_history(got: &[(u64, f64)], want: &[(u64, f64)]) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (&(gs, gv), &(ws, wv)) in got.iter().zip(want) {
        assert_eq!(gs, ws, "{got:?} vs {want:?}");
        assert!((gv - wv).abs() < 1e-12, "step {gs}: {gv} vs {wv} ({got:?})");
    }
}

// ---------------------------------------------------------------- MovingAverageSummary

#[test]
fn ema_with_decay_one_half_is_zero_debiased_and_reported_at_each_epoch_end() {
    let recorder = Recorder::new(&["x"]);
    let (report, reads) = stoker_tests::reads::count_reads(|| {
        run(2, 3, (MovingAverageSummary::new(["x"]).decay(0.5), recorder.handle()))
    });
    // Samples 1, 2, 3: biased 0.5, 1.25, 2.125; / (1 - 0.5^3) = 17/7.
    // Then 4, 5, 6: biased 3.0625, 4.03125, 5.015625; / (1 - 0.5^6) = 321/63 = 107/21.
    assert_history(&recorder.history("x"), &[(3, 17.0 / 7.0), (6, 107.0 / 21.0)]);
    // The samples stay on the device: no per-step transfer for fetches; the averages leave the
    // device once per epoch, when they are reported.
    assert_eq!(report.fetch_transfers, 0);
    assert_eq!(reads, 2, "one device-to-host read per epoch");
}

#[test]
fn ema_default_decay_is_tensorpacks_0_95() {
    let recorder = Recorder::new(&["x"]);
    run(1, 2, (MovingAverageSummary::new(["x"]), recorder.handle()));
    // biased: 0.05, then 0.95 * 0.05 + 0.05 * 2 = 0.1475; / (1 - 0.95^2) = 0.1475 / 0.0975 = 59/39.
    assert_history(&recorder.history("x"), &[(2, 59.0 / 39.0)]);
}

#[test]
fn ema_reports_every_k_steps_and_at_epoch_end_without_repeating_a_step() {
    let recorder = Recorder::new(&["x", "x/ema"]);
    run(
        1,
        4,
        (
            MovingAverageSummary::new(["x"]).decay(0.5).report_every_k_steps(2).suffix("/ema"),
            recorder.handle(),
        ),
    );
    // Step 2: biased 1.25, / 0.75 = 5/3. Step 4: 3.0625 / (1 - 1/16) = 49/15. The epoch ends at
    // step 4 too: reported once there.
    assert_history(&recorder.history("x/ema"), &[(2, 5.0 / 3.0), (4, 49.0 / 15.0)]);
    assert!(recorder.history("x").is_empty(), "the suffix names the scalar");
}

#[test]
fn ema_samples_only_the_steps_it_is_asked_for() {
    let recorder = Recorder::new(&["x"]);
    let ema = MovingAverageSummary::new(["x"]).decay(0.5).every_k_steps(2);
    assert_eq!(
        <MovingAverageSummary as Callback<Linear>>::fetches(&ema),
        &[Fetch { name: "x".into(), kind: FetchKind::Device }],
        "only the named output, as a device tensor"
    );
    run(1, 6, (ema, recorder.handle()));
    // Samples at steps 2, 4, 6 only: biased 1, 2.5, 4.25; / (1 - 1/8) = 34/7.
    assert_history(&recorder.history("x"), &[(6, 34.0 / 7.0)]);
}

#[test]
fn ema_of_two_outputs_keeps_them_apart() {
    let recorder = Recorder::new(&["x", "loss"]);
    run(1, 2, (MovingAverageSummary::new(["x", "loss"]).decay(0.0), recorder.handle()));
    // Decay 0: the average is the last sample.
    assert_history(&recorder.history("x"), &[(2, 2.0)]);
    let loss = recorder.history("loss");
    assert_eq!(loss.len(), 1);
    assert!(loss[0].1.is_finite() && loss[0].1 > 0.0, "{loss:?}");
}

#[test]
fn ema_rejects_bad_settings_at_setup() {
    let dir = scratch_dir("ema-bad");
    let error = |ema: MovingAverageSummary| trainer(&dir, 1, 1, ema).train(step).err().unwrap().to_string();
    assert!(error(MovingAverageSummary::new(["x"]).decay(1.0)).contains("decay must be in [0, 1)"));
    assert!(error(MovingAverageSummary::new(Vec::<String>::new())).contains("no output names"));
    assert!(error(MovingAverageSummary::new(["x", "x"])).contains("named twice"));
    assert!(
        error(MovingAverageSummary::new(["x"]).every_k_steps(0)).contains("every_k_steps must be at least 1")
    );
    let missing = error(MovingAverageSummary::new(["nope"]));
    assert!(missing.contains("nope"), "{missing}");
}

// ---------------------------------------------------------------- SimpleMovingAverage

#[test]
fn sma_is_the_mean_of_the_last_window_reported_every_window_steps() {
    let recorder = Recorder::new(&["x/SMA"]);
    run(1, 7, (SimpleMovingAverage::new(["x"], 3), recorder.handle()));
    // Step 3: mean(1, 2, 3) = 2. Step 6: mean(4, 5, 6) = 5. Step 7 is not a multiple of 3.
    assert_history(&recorder.history("x/SMA"), &[(3, 2.0), (6, 5.0)]);
}

#[test]
fn sma_before_the_window_is_full_averages_what_it_has() {
    let recorder = Recorder::new(&["x/SMA"]);
    run(2, 3, (SimpleMovingAverage::new(["x"], 4).report_every_k_steps(2), recorder.handle()));
    // Step 2: mean(1, 2); 4: mean(1..=4); 6: mean(3..=6). The window spans the epochs.
    assert_history(&recorder.history("x/SMA"), &[(2, 1.5), (4, 2.5), (6, 4.5)]);
}

#[test]
fn sma_at_epoch_end_and_sparse_sampling() {
    let recorder = Recorder::new(&["x/SMA"]);
    let sma = SimpleMovingAverage::new(["x"], 2)
        .every_k_steps(2)
        .report_every_k_steps(100)
        .report_at_epoch_end(true);
    run(2, 5, (sma, recorder.handle()));
    // Samples at steps 2, 4 (epoch 1 ends at 5: mean 3), then 6, 8, 10 (epoch 2 ends at 10:
    // window (8, 10), mean 9).
    assert_history(&recorder.history("x/SMA"), &[(5, 3.0), (10, 9.0)]);
}

#[test]
fn sma_rejects_a_zero_window() {
    let error = trainer(&scratch_dir("sma-bad"), 1, 1, SimpleMovingAverage::new(["x"], 0))
        .train(step)
        .err()
        .unwrap()
        .to_string();
    assert!(error.contains("window must be at least 1"), "{error}");
}

// ---------------------------------------------------------------- CsvWriter

fn python_csv_rows(path: &Path) -> Vec<BTreeMap<String, String>> {
    let output = std::process::Command::new("python3")
        .arg("-c")
        .arg("import csv, json, sys\nwith open(sys.argv[1], newline='') as f:\n    print(json.dumps(list(csv.DictReader(f))))")
        .arg(path)
        .output()
        .expect("python3 runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("python printed JSON")
}

fn row(cells: &[(&str, &str)]) -> BTreeMap<String, String> {
    cells.iter().map(|&(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn csv_has_one_row_per_epoch_and_python_reads_it_back() {
    let dir = scratch_dir("csv");
    trainer(&dir, 3, 2, (Putter, CsvWriter::new())).train(step).unwrap();
    let text = std::fs::read_to_string(dir.join("stats.csv")).unwrap();
    // `late` appears in epoch 2: the header widens and epoch 1 gets an empty cell; `a,b` is quoted.
    assert_eq!(
        text,
        "epoch,global_step,\"a,b\",late,s,v,w\n\
         1,2,0.5,,2.0,10.0,\n\
         2,4,,2.0,4.0,20.0,0.6666666666666666\n\
         3,6,,3.0,6.0,30.0,\n"
    );
    let rows = python_csv_rows(&dir.join("stats.csv"));
    assert_eq!(
        rows,
        vec![
            row(&[
                ("epoch", "1"),
                ("global_step", "2"),
                ("a,b", "0.5"),
                ("late", ""),
                ("s", "2.0"),
                ("v", "10.0"),
                ("w", "")
            ]),
            row(&[
                ("epoch", "2"),
                ("global_step", "4"),
                ("a,b", ""),
                ("late", "2.0"),
                ("s", "4.0"),
                ("v", "20.0"),
                ("w", "0.6666666666666666"),
            ]),
            row(&[
                ("epoch", "3"),
                ("global_step", "6"),
                ("a,b", ""),
                ("late", "3.0"),
                ("s", "6.0"),
                ("v", "30.0"),
                ("w", "")
            ]),
        ]
    );
    assert_eq!(rows[1]["w"].parse::<f64>().unwrap(), 2.0 / 3.0, "the value reads back exactly");
}

#[test]
fn csv_is_appended_to_by_a_run_that_continues_it_and_moved_aside_otherwise() {
    let dir = scratch_dir("csv-append");
    trainer(&dir, 2, 1, (Putter, CsvWriter::new())).train(step).unwrap();
    trainer(&dir, 3, 1, (Putter, CsvWriter::new())).starting_epoch(3).train(step).unwrap();
    let epochs: Vec<String> =
        python_csv_rows(&dir.join("stats.csv")).iter().map(|r| r["epoch"].clone()).collect();
    assert_eq!(epochs, ["1", "2", "3"]);
    // A fresh run from epoch 1 does not continue that file: it is moved aside.
    trainer(&dir, 1, 1, (Putter, CsvWriter::new())).train(step).unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.join("stats.csv")).unwrap(),
        "epoch,global_step,\"a,b\",s,v\n1,1,0.5,1.0,10.0\n"
    );
    let backups = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with("stats.csv.bak-"))
        .count();
    assert_eq!(backups, 1);
}

/// The callbacks of the resume experiment: EMA of `x` (decay 0.5), the putter, the CSV, and a
/// checkpoint at every epoch.
fn resumable() -> (MovingAverageSummary, Putter, CsvWriter, PeriodicTrigger<ModelSaver>) {
    (
        MovingAverageSummary::new(["x"]).decay(0.5),
        Putter,
        CsvWriter::new(),
        PeriodicTrigger::new(ModelSaver::new(100)).every_k_epochs(1),
    )
}

/// The zero-debiased EMA (decay 0.5) of 1, 2, ..., t.
fn ema_of_steps(t: u64) -> f64 {
    let mut biased = 0.0;
    for x in 1..=t {
        biased = 0.5 * biased + 0.5 * x as f64;
    }
    biased / (1.0 - 0.5f64.powi(t as i32))
}

#[test]
fn csv_and_ema_continue_across_a_resume_as_if_never_stopped() {
    let straight = scratch_dir("csv-straight");
    trainer(&straight, 4, 2, resumable()).train(step).unwrap();
    // A run that logged epochs 1 to 3 but whose last checkpoint is lost: resume from epoch 2's.
    let dir = scratch_dir("csv-resumed");
    trainer(&dir, 3, 2, resumable()).train(step).unwrap();
    std::fs::remove_dir_all(dir.join("checkpoints/step-6")).unwrap();
    trainer(&dir, 4, 2, resumable()).resume_from(dir.join("checkpoints/step-4")).train(step).unwrap();

    let text = std::fs::read_to_string(dir.join("stats.csv")).unwrap();
    assert_eq!(text, std::fs::read_to_string(straight.join("stats.csv")).unwrap());
    let rows = python_csv_rows(&dir.join("stats.csv"));
    let epochs: Vec<&str> = rows.iter().map(|r| r["epoch"].as_str()).collect();
    assert_eq!(epochs, ["1", "2", "3", "4"], "epoch 3 once: the crashed run's row was dropped");
    for (i, r) in rows.iter().enumerate() {
        let step = 2 * (i as u64 + 1);
        assert_eq!(r["global_step"], step.to_string());
        let ema: f64 = r["x"].parse().unwrap();
        assert!((ema - ema_of_steps(step)).abs() < 1e-12, "epoch {}: {ema} vs {}", i + 1, ema_of_steps(step));
    }
    // By hand: 1, 2 -> 1.25 / 0.75 = 5/3; 1..=8 -> 7.00390625 / (1 - 1/256) = 1793/255.
    assert!((ema_of_steps(2) - 5.0 / 3.0).abs() < 1e-12);
    assert!((ema_of_steps(8) - 1793.0 / 255.0).abs() < 1e-12);
    let backups = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with("stats.csv.bak-"))
        .count();
    assert_eq!(backups, 0, "the file's first rows agreed with the checkpoint");
}

// ---------------------------------------------------------------- SendMonitorData, SendStat

fn shell_quote(path: &Path) -> String {
    format!("'{}'", path.display())
}

#[test]
fn send_monitor_data_runs_once_every_name_has_a_value() {
    let dir = scratch_dir("send");
    let out = dir.join("sent.txt");
    let send = SendMonitorData::new(
        format!("echo {{epoch_num}} {{global_step}} {{v}} {{w:.2f}} >> {}", shell_quote(&out)),
        ["v", "w"],
    )
    .unwrap();
    trainer(&dir, 4, 2, (Putter, send)).train(step).unwrap();
    // `w` is put in even epochs only; `v` of epoch 1 is replaced by epoch 2's before the send.
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "2 4 20.0 0.67\n4 8 40.0 1.33\n");
}

#[test]
fn a_failing_command_is_a_warning_not_an_error() {
    let dir = scratch_dir("send-fail");
    let out = dir.join("sent.txt");
    let send = SendMonitorData::new(format!("echo {{v}} >> {}; exit 3", shell_quote(&out)), ["v"]).unwrap();
    let missing = SendMonitorData::new("/nonexistent/command {v}", ["v"]).unwrap().named("missing");
    let report = trainer(&dir, 2, 1, (Putter, send, missing)).train(step).unwrap();
    assert_eq!(report.outcome, Outcome::Finished);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "10.0\n20.0\n");
}

#[test]
fn send_stat_runs_at_its_trigger_with_the_latest_values() {
    let dir = scratch_dir("send-stat");
    let out = dir.join("stat.txt");
    let stat = SendStat::new(format!("echo {{epoch_num}} {{v}} {{s}} >> {}", shell_quote(&out)), ["v", "s"])
        .unwrap()
        .wait_at_end(Duration::from_secs(10));
    trainer(&dir, 4, 3, (Putter, PeriodicTrigger::new(stat).every_k_epochs(2))).train(step).unwrap();
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "2 20.0 6.0\n4 40.0 12.0\n");
}

#[test]
fn send_stat_skips_a_name_without_a_value() {
    let dir = scratch_dir("send-stat-missing");
    let out = dir.join("stat.txt");
    // `w` has no value in epoch 1; in epoch 2 it has one.
    let stat =
        SendStat::new(format!("echo {{epoch_num}} {{w:.1f}} >> {}", shell_quote(&out)), ["w"]).unwrap();
    trainer(&dir, 3, 1, (Putter, stat)).train(step).unwrap();
    // Epoch 3 sends the latest value, epoch 2's.
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "2 0.7\n3 0.7\n");
}

#[test]
fn bad_templates_are_errors_at_construction() {
    let error = SendMonitorData::new("echo {nope}", ["v"]).unwrap_err().to_string();
    assert!(error.contains("`{nope}` names none of the scalars `v`"), "{error}");
    let error = SendStat::new("echo {v:x}", ["v"]).unwrap_err().to_string();
    assert!(error.contains("only `{name}` and `{name:.Nf}`"), "{error}");
}

// ---------------------------------------------------------------- Hist

/// Every histogram in `dir` as TensorBoard's own reader reads it:
/// `{tag: [[step, min, max, num, sum, sum_squares, [limits], [counts]], ...]}`.
fn tensorboard_histograms(dir: &Path) -> serde_json::Value {
    let script = "\
import json, sys
from tensorboard.backend.event_processing import event_accumulator
acc = event_accumulator.EventAccumulator(sys.argv[1], size_guidance={'histograms': 0})
acc.Reload()
out = {}
for tag in acc.Tags()['histograms']:
    out[tag] = [[e.step, e.histogram_value.min, e.histogram_value.max, e.histogram_value.num,
                 e.histogram_value.sum, e.histogram_value.sum_squares,
                 list(e.histogram_value.bucket_limit), list(e.histogram_value.bucket)]
                for e in acc.Histograms(tag)]
print(json.dumps(out))
";
    let output =
        std::process::Command::new("python3").arg("-c").arg(script).arg(dir).output().expect("python3 runs");
    assert!(
        output.status.success(),
        "TensorBoard's reader failed (install it with `python3 -m pip install tensorboard`): {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("python printed JSON")
}

#[test]
fn hist_writes_weight_histograms_every_k_epochs_that_tensorboard_reads() {
    let dir = scratch_dir("hist");
    let report = trainer(&dir, 4, 2, Hist::new().every_k_epochs(2).buckets(2))
        .default_callbacks(DefaultCallbacks {
            tensorboard: Some(TensorBoardWriter::new()),
            ..DefaultCallbacks::none()
        })
        .train(step)
        .unwrap();
    let histograms = tensorboard_histograms(&dir);
    let tags: Vec<&String> = histograms.as_object().unwrap().keys().collect();
    // neon/callbacks/callbacks.py, HistCallback: filter_key=['W'] takes the weights and the
    // biases (neon's Bias layer keeps its values in `W`).
    assert_eq!(tags, ["param/bias", "param/weight"], "the weights and biases, as neon's filter_key=['W']");
    let entries = histograms["param/weight"].as_array().unwrap();
    let steps: Vec<u64> = entries.iter().map(|e| e[0].as_u64().unwrap()).collect();
    assert_eq!(steps, [4, 8], "epochs 2 and 4 end at global steps 4 and 8");
    // The last one holds the final weights: 2 values, one in each of 2 buckets.
    let w = &weights(&report.model)[0];
    assert_eq!(w.len(), 2);
    let (lo, hi) = (f64::from(w[0].min(w[1])), f64::from(w[0].max(w[1])));
    let last = &entries[1];
    assert_eq!(last[1].as_f64().unwrap(), lo);
    assert_eq!(last[2].as_f64().unwrap(), hi);
    assert_eq!(last[3].as_f64().unwrap(), 2.0);
    assert!((last[4].as_f64().unwrap() - (lo + hi)).abs() < 1e-12);
    assert!((last[5].as_f64().unwrap() - (lo * lo + hi * hi)).abs() < 1e-12);
    let limits: Vec<f64> = last[6].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    assert_eq!(limits.len(), 2);
    assert!((limits[0] - (lo + hi) / 2.0).abs() < 1e-12 && limits[1] == hi, "{limits:?}");
    assert_eq!(last[7], serde_json::json!([1.0, 1.0]));
}

#[test]
fn hist_of_all_parameters_under_a_periodic_trigger() {
    let dir = scratch_dir("hist-all");
    let hist = PeriodicTrigger::new(Hist::new().all_parameters().prefix("p/")).every_k_steps(3);
    trainer(&dir, 2, 3, hist)
        .default_callbacks(DefaultCallbacks {
            tensorboard: Some(TensorBoardWriter::new()),
            ..DefaultCallbacks::none()
        })
        .train(step)
        .unwrap();
    let histograms = tensorboard_histograms(&dir);
    let tags: Vec<&String> = histograms.as_object().unwrap().keys().collect();
    assert_eq!(tags, ["p/bias", "p/weight"]);
    for tag in ["p/bias", "p/weight"] {
        let steps: Vec<u64> =
            histograms[tag].as_array().unwrap().iter().map(|e| e[0].as_u64().unwrap()).collect();
        assert_eq!(steps, [3, 6], "{tag}");
    }
    assert_eq!(histograms["p/bias"][0][3], serde_json::json!(1.0), "one bias value");
}

#[test]
fn hist_rejects_bad_settings() {
    let dir = scratch_dir("hist-bad");
    let error = |hist: Hist| trainer(&dir, 1, 1, hist).train(step).err().unwrap().to_string();
    for (hist, says) in [
        (Hist::new().every_k_epochs(0), "every_k_epochs must be at least 1"),
        (Hist::new().buckets(0), "buckets must be at least 1"),
        (Hist::new().filter(Vec::<String>::new()), "empty filter"),
    ] {
        let error = error(hist);
        assert!(error.contains(says), "{error:?} does not say {says:?}");
    }
}

// ---------------------------------------------------------------- neon's TrainCost, TrainLogger

#[test]
fn train_cost_of_x_is_the_epoch_mean_read_once_per_epoch() {
    let recorder = Recorder::new(&["train_x"]);
    let (report, reads) = stoker_tests::reads::count_reads(|| {
        run(2, 3, (TrainCost::new().output("x").scalar_name("train_x"), recorder.handle()))
    });
    // x = 1, 2, 3 in epoch 1 and 4, 5, 6 in epoch 2.
    assert_history(&recorder.history("train_x"), &[(3, 2.0), (6, 5.0)]);
    assert_eq!(report.fetch_transfers, 0, "the losses stay on the device");
    assert_eq!(reads, 2, "one device-to-host read per epoch");
}

#[test]
fn train_cost_equals_the_mean_of_the_losses_a_hand_loop_reads() {
    // Alone, TrainCost reads the device once per epoch: 3 epochs of 4 steps.
    let (_, reads) = stoker_tests::reads::count_reads(|| run(3, 4, TrainCost::new()));
    assert_eq!(reads, 3, "one read per epoch");
    // Beside it, the step reads each loss to the host by hand.
    let recorder = Recorder::new(&["train_cost"]);
    let losses = Arc::new(Mutex::new(Vec::<f64>::new()));
    let seen = losses.clone();
    trainer(&scratch_dir("train-cost-hand"), 3, 4, (TrainCost::new(), recorder.handle()))
        .train(move |model: &Linear, batch, _step: &mut Step<'_>| {
            let loss = mse(model, batch);
            seen.lock().unwrap().push(f64::from(loss.clone().into_scalar::<f32>()));
            loss
        })
        .unwrap();
    let losses = losses.lock().unwrap().clone();
    assert_eq!(losses.len(), 12);
    let got = recorder.history("train_cost");
    assert_eq!(got.iter().map(|&(s, _)| s).collect::<Vec<_>>(), [4, 8, 12]);
    for (epoch, &(_, mean)) in got.iter().enumerate() {
        let want = losses[epoch * 4..epoch * 4 + 4].iter().sum::<f64>() / 4.0;
        assert!((mean - want).abs() <= 1e-6 * want.abs().max(1e-3), "epoch {}: {mean} vs {want}", epoch + 1);
    }
}

#[test]
fn train_cost_of_a_non_scalar_output_is_an_error_naming_it() {
    let err = trainer(&scratch_dir("train-cost-shape"), 1, 2, TrainCost::new().output("pair"))
        .train(|model: &Linear, batch, step: &mut Step<'_>| {
            let loss = mse(model, batch);
            step.output(
                "pair",
                Tensor::<1>::from_data(TensorData::new(vec![1.0f32, 2.0], [2]), &loss.device()),
            );
            loss
        })
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(err.contains("TrainCost") && err.contains("`pair`") && err.contains("[2]"), "{err}");
}

/// A `Write` that appends to a shared buffer.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Registers a `TrainLogger`'s sink writing to a shared buffer.
struct LoggerTo(TrainLogger, Shared);

impl Callback<Linear> for LoggerTo {
    fn setup(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let sink = self.0.sink(Box::new(self.1.clone()))?;
        ctx.monitors().add_sink(sink);
        Ok(())
    }
}

#[test]
fn train_logger_prints_one_line_every_k_epochs_with_the_train_and_eval_costs() {
    let out = Shared::default();
    let logger = TrainLogger::new().every_k_epochs(2).train_cost("train_x").eval_cost("v");
    // Putter puts v = 10 x epoch; TrainCost puts train_x = the epoch's mean of x.
    run(4, 2, (TrainCost::new().output("x").scalar_name("train_x"), Putter, LoggerTo(logger, out.clone())));
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    // x = 3, 4 in epoch 2 and 7, 8 in epoch 4.
    assert_eq!(
        text,
        "Epoch 2 complete. Train cost 3.5. Eval cost 20.\nEpoch 4 complete. Train cost 7.5. Eval cost 40.\n"
    );
    let err = TrainLogger::new().every_k_epochs(0).sink(Box::new(Shared::default())).unwrap_err().to_string();
    assert_eq!(err, "TrainLogger: every_k_epochs must be at least 1, not 0");
}

#[test]
fn train_cost_is_one_line_away_in_the_default_callbacks() {
    assert!(DefaultCallbacks::default().train_cost.is_none(), "not a default: it adds work to every step");
    assert!(DefaultCallbacks::default().train_logger.is_none());
    let recorder = Recorder::new(&["train_cost"]);
    let device = burn_stoker::device::cpu();
    Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(3, &device))
        .max_epoch(2)
        .log_dir(scratch_dir("train-cost-default"))
        .handle_signals(false)
        .default_callbacks(DefaultCallbacks {
            train_cost: Some(TrainCost::new()),
            ..DefaultCallbacks::none()
        })
        .callbacks(recorder.handle())
        .train(step)
        .unwrap();
    let got = recorder.history("train_cost");
    assert_eq!(got.iter().map(|&(s, _)| s).collect::<Vec<_>>(), [3, 6]);
    assert!(got.iter().all(|&(_, v)| v.is_finite() && v > 0.0), "{got:?}");
}
