//! Monitors: the history, stats.json (tensorpack's layout, atomic, appended on resume), the
//! scalar printer's filters, TensorBoard's own reader on our event files, and setup errors.

use std::io::Write;
use std::sync::{Arc, Mutex};

use burn::nn::Linear;
use burn_stoker::prelude::*;
use burn_stoker::state::{Image, Record, Value};
use burn_stoker::{
    monitor::{JsonWriter, ScalarPrinter, TensorBoardWriter},
    state::MonitorSink,
};
use serde_json::Value as Json;
use stoker_tests::{FillDisk, mse, scratch_dir, tiny_data, tiny_model};

/// Puts `epoch_value` = 10 * epoch at each trigger_epoch and `step_value` = global_step at each
/// trigger_step, and records the history it reads at after_train.
#[derive(Default)]
struct Putter {
    seen_history: Arc<Mutex<Vec<(u64, f64)>>>,
}

impl Callback<Linear> for Putter {
    fn trigger_step(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let step = ctx.global_step() as f64;
        ctx.monitors().put_scalar("step_value", step);
        Ok(())
    }
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let epoch = ctx.epoch_num() as f64;
        let monitors = ctx.monitors();
        monitors.put_scalar("epoch_value", 10.0 * epoch);
        if epoch == 1.0 {
            monitors.put_image(
                "sample",
                Image { height: 2, width: 2, channels: 1, pixels: vec![0, 85, 170, 255] },
            );
            monitors.put_histogram("spread", &[0.5, 1.0, 1.5, 3.0], 4);
            monitors.put_text("note", "first epoch");
        }
        Ok(())
    }
    fn after_train(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        *self.seen_history.lock().unwrap() = ctx.monitors_ref().history("epoch_value").to_vec();
        Ok(())
    }
}

fn writers() -> DefaultCallbacks {
    DefaultCallbacks {
        progress: None,
        tensorboard: Some(TensorBoardWriter::new()),
        json: Some(JsonWriter),
        printer: None,
        ..DefaultCallbacks::none()
    }
}

fn train(
    dir: &std::path::Path,
    starting_epoch: u64,
    max_epoch: u64,
    putter: Putter,
) -> burn_stoker::Result<()> {
    let device = burn_stoker::device::cpu();
    Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(2, &device))
        .max_epoch(max_epoch)
        .starting_epoch(starting_epoch)
        .log_dir(dir)
        // The writers' own handling of a directory an earlier run wrote into is under test here.
        .log_dir_policy(burn_stoker::trainer::LogDirPolicy::Keep)
        .default_callbacks(writers())
        .callbacks(putter)
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .map(|_| ())
        .map_err(burn_stoker::Error::from)
}

fn read_stats(dir: &std::path::Path) -> Vec<Json> {
    let text = std::fs::read_to_string(dir.join("stats.json")).expect("stats.json exists");
    serde_json::from_str(&text).expect("stats.json is a JSON list")
}

#[test]
fn stats_json_has_a_row_per_step_that_put_and_per_epoch_with_the_scalars_and_counters() {
    let dir = scratch_dir("stats");
    let putter = Putter::default();
    let history = putter.seen_history.clone();
    train(&dir, 1, 3, putter).unwrap();
    let stats = read_stats(&dir);
    // 2 steps per epoch: a row at the first step of each epoch, and one at its end holding the
    // last step's value with the epoch's.
    assert_eq!(stats.len(), 6);
    for (i, entry) in stats.iter().enumerate() {
        let step = i as u64 + 1;
        let epoch = step.div_ceil(2);
        assert_eq!(entry["epoch_num"], Json::from(epoch));
        assert_eq!(entry["global_step"], Json::from(step));
        assert_eq!(entry["step_value"], Json::from(step as f64));
        if step.is_multiple_of(2) {
            assert_eq!(entry["epoch_value"], Json::from(10.0 * epoch as f64));
            assert_eq!(entry.as_object().unwrap().len(), 4, "{entry}");
        } else {
            assert_eq!(entry.as_object().unwrap().len(), 3, "{entry}");
        }
    }
    assert_eq!(*history.lock().unwrap(), vec![(2, 10.0), (4, 20.0), (6, 30.0)]);
    let temporaries: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".tmp"))
        .collect();
    assert!(temporaries.is_empty(), "every temporary file was renamed: {temporaries:?}");
}

/// Puts `start` in before_train, `epoch_start` = epoch in before_epoch, `every3` = global_step
/// at every third step, `every5` = global_step at every fifth (the last step of each 5-step
/// epoch), `epoch_value` = 10 * epoch in trigger_epoch and `final` in after_train.
struct EveryKSteps;

impl Callback<Linear> for EveryKSteps {
    fn before_train(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        ctx.monitors().put_scalar("start", 1.0);
        Ok(())
    }
    fn before_epoch(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let epoch = ctx.epoch_num() as f64;
        ctx.monitors().put_scalar("epoch_start", epoch);
        Ok(())
    }
    fn trigger_step(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let step = ctx.global_step();
        if step.is_multiple_of(3) {
            ctx.monitors().put_scalar("every3", step as f64);
        }
        if step.is_multiple_of(5) {
            ctx.monitors().put_scalar("every5", step as f64);
        }
        Ok(())
    }
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let epoch = ctx.epoch_num() as f64;
        ctx.monitors().put_scalar("epoch_value", 10.0 * epoch);
        Ok(())
    }
    fn after_train(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        ctx.monitors().put_scalar("final", 1.0);
        Ok(())
    }
}

#[test]
fn stats_json_has_a_row_at_every_step_where_scalars_were_put_as_tensorpack() {
    let dir = scratch_dir("stats-rows");
    let device = burn_stoker::device::cpu();
    Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(5, &device))
        .max_epoch(2)
        .log_dir(&dir)
        .default_callbacks(writers())
        .callbacks(EveryKSteps)
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .unwrap();
    // 5 steps per epoch, 2 epochs. tensorpack's JSONWriter: a row in before_train (epoch 0),
    // then one after the callbacks' trigger_step at every step where something was put since
    // the last row (what before_epoch put makes a row at the epoch's first step), except the
    // epoch's last step, whose scalars join the row written after trigger_epoch. What
    // after_train puts joins the row of the global step it is put at (tensorpack writes it
    // nowhere).
    let expected = serde_json::json!([
        {"start": 1.0, "epoch_num": 0, "global_step": 0},
        {"epoch_start": 1.0, "epoch_num": 1, "global_step": 1},
        {"every3": 3.0, "epoch_num": 1, "global_step": 3},
        {"every5": 5.0, "epoch_value": 10.0, "epoch_num": 1, "global_step": 5},
        {"epoch_start": 2.0, "every3": 6.0, "epoch_num": 2, "global_step": 6},
        {"every3": 9.0, "epoch_num": 2, "global_step": 9},
        {"every5": 10.0, "epoch_value": 20.0, "final": 1.0, "epoch_num": 2, "global_step": 10},
    ]);
    assert_eq!(Json::Array(read_stats(&dir)), expected);
}

#[test]
fn writer_history_file_holds_every_scalar_put_with_its_step_and_epoch_for_python() {
    let dir = scratch_dir("history-file");
    let device = burn_stoker::device::cpu();
    Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(5, &device))
        .max_epoch(2)
        .log_dir(&dir)
        .default_callbacks(DefaultCallbacks::none())
        .callbacks((EveryKSteps, burn_stoker::monitor::HistoryWriter::new()))
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .unwrap();
    // neon's output_file: every value put, read back by Python's json module line by line.
    let program = "import json, sys; print(json.dumps([json.loads(l) for l in open(sys.argv[1])]))";
    let output = std::process::Command::new("python3")
        .args(["-c", program])
        .arg(dir.join("history.jsonl"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let read: Json = serde_json::from_slice(&output.stdout).unwrap();
    // EveryKSteps over 2 epochs of 5 steps, by global step, then epoch, then name.
    let line = |name: &str, step: u64, epoch: u64, value: f64| serde_json::json!({"name": name, "global_step": step, "epoch_num": epoch, "value": value});
    let expected = Json::Array(vec![
        line("start", 0, 0, 1.0),
        line("epoch_start", 0, 1, 1.0),
        line("every3", 3, 1, 3.0),
        line("epoch_value", 5, 1, 10.0),
        line("every5", 5, 1, 5.0),
        line("epoch_start", 5, 2, 2.0),
        line("every3", 6, 2, 6.0),
        line("every3", 9, 2, 9.0),
        line("epoch_value", 10, 2, 20.0),
        line("every5", 10, 2, 10.0),
        line("final", 10, 2, 1.0),
    ]);
    assert_eq!(read, expected);
}

#[test]
fn stats_json_is_appended_to_when_the_run_continues_its_last_epoch() {
    let dir = scratch_dir("append");
    train(&dir, 1, 2, Putter::default()).unwrap();
    train(&dir, 3, 4, Putter::default()).unwrap();
    let stats = read_stats(&dir);
    // Two rows per epoch of 2 steps (see above).
    let epochs: Vec<u64> = stats.iter().map(|e| e["epoch_num"].as_u64().unwrap()).collect();
    assert_eq!(epochs, vec![1, 1, 2, 2, 3, 3, 4, 4]);
    let backups = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with("stats.json.bak"))
        .count();
    assert_eq!(backups, 0);
}

#[test]
fn stats_json_that_does_not_precede_the_run_is_moved_aside() {
    let dir = scratch_dir("backup");
    train(&dir, 1, 2, Putter::default()).unwrap();
    train(&dir, 1, 1, Putter::default()).unwrap();
    let stats = read_stats(&dir);
    assert_eq!(stats.len(), 2, "one epoch of 2 steps");
    let backups: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("stats.json.bak-"))
        .collect();
    assert_eq!(backups.len(), 1);
    let old: Vec<Json> = serde_json::from_str(&std::fs::read_to_string(&backups[0]).unwrap()).unwrap();
    assert_eq!(old.len(), 4, "the backup holds the earlier run");
}

#[test]
fn an_unwritable_log_dir_fails_at_setup_before_any_step() {
    let dir = scratch_dir("unwritable");
    let file = dir.join("a-file");
    std::fs::write(&file, b"not a directory").unwrap();
    let device = burn_stoker::device::cpu();
    let mut steps = 0;
    let result =
        Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(2, &device))
            .log_dir(file.join("logs"))
            .default_callbacks(writers())
            .train(|model: &Linear, batch, _step: &mut Step<'_>| {
                steps += 1;
                mse(model, batch)
            });
    let error = result.expect_err("the log directory cannot be created");
    assert_eq!(steps, 0, "no step ran");
    let message = error.to_string();
    assert!(message.contains("a-file/logs"), "the message names the path: {message}");
}

#[derive(Clone, Default)]
struct SharedBuffer(Arc<Mutex<Vec<u8>>>);

impl Write for SharedBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn scalar(name: &str, value: f64, step: u64) -> Record {
    Record {
        name: Arc::from(name),
        value: Value::Scalar(value),
        global_step: step,
        epoch_num: 1,
        wall_time: 0.0,
    }
}

#[test]
fn scalar_printer_prints_whitelisted_names_not_blacklisted_sorted_at_epoch_end() {
    let out = SharedBuffer::default();
    let mut sink = ScalarPrinter::new()
        .whitelist(["^validation_", "cost$"])
        .blacklist(["_raw"])
        .sink(Box::new(out.clone()))
        .unwrap();
    sink.write(&[
        scalar("validation_error", 0.0412345, 10),
        scalar("train_cost", 1.5, 10),
        scalar("validation_raw", 3.0, 10),
        scalar("learning_rate", 0.001, 10),
        scalar("validation_error", 0.03, 20),
    ])
    .unwrap();
    assert!(out.0.lock().unwrap().is_empty(), "nothing printed before the epoch ends");
    let stats = burn_stoker::state::EpochStats {
        epoch_num: 1,
        global_step: 20,
        scalars: [
            ("validation_error", 0.03),
            ("train_cost", 1.5),
            ("validation_raw", 3.0),
            ("learning_rate", 0.001),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
    };
    sink.end_epoch(&stats).unwrap();
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    assert_eq!(text, "epoch 1 (global step 20):\n  train_cost: 1.5\n  validation_error: 0.03\n");
}

#[test]
fn scalar_printer_rejects_an_invalid_pattern_by_name() {
    let error = ScalarPrinter::new().whitelist(["(unclosed"]).sink(Box::new(std::io::sink())).err().unwrap();
    assert!(error.to_string().contains("`(unclosed`"), "{error}");
}

#[test]
fn tensorboard_reads_the_event_file_a_run_writes() {
    let dir = scratch_dir("tensorboard");
    train(&dir, 1, 3, Putter::default()).unwrap();
    let expected = serde_json::json!({
        "epoch_value": [[2, 10.0], [4, 20.0], [6, 30.0]],
        "step_value": [[1, 1.0], [2, 2.0], [3, 3.0], [4, 4.0], [5, 5.0], [6, 6.0]],
    });
    let expect_file = dir.join("expected.json");
    std::fs::write(&expect_file, expected.to_string()).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/check_tensorboard.py");
    let output = std::process::Command::new("python3")
        .arg(script)
        .arg(&dir)
        .arg(&expect_file)
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "TensorBoard's reader disagrees (install it with `python3 -m pip install tensorboard`):\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("ok: 9 scalars in 2 tags"), "{stdout}");
    // The image, histogram and text plugins' records are read too (stats.json keeps scalars only).
    assert!(
        stdout.contains("also read: {'images': ['sample'], 'histograms': ['spread'], 'tensors': ['note']}"),
        "{stdout}"
    );
}

#[test]
fn writer_tensorboard_split_files_writes_one_event_file_per_epoch_that_tensorboard_reads() {
    let dir = scratch_dir("tensorboard-split");
    let device = burn_stoker::device::cpu();
    let defaults = DefaultCallbacks {
        tensorboard: Some(TensorBoardWriter::new().split_files(true)),
        ..DefaultCallbacks::none()
    };
    Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(2, &device))
        .max_epoch(3)
        .log_dir(&dir)
        .default_callbacks(defaults)
        .callbacks(Putter::default())
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .unwrap();
    // tensorpack's TFEventWriter(split_files=True): a new file after each epoch's end; stoker
    // opens it at the first event after it, so the last epoch leaves no empty file.
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("events.out.tfevents."))
        .collect();
    files.sort();
    assert_eq!(files.len(), 3, "{files:?}");
    // Each file, read alone by TensorBoard's own loader, holds its epoch's steps.
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/read_records.py");
    for (i, file) in files.iter().enumerate() {
        let output =
            std::process::Command::new("python3").arg(script).arg("events").arg(file).output().unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let read: Json = serde_json::from_slice(&output.stdout).unwrap();
        let steps: Vec<u64> = read["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e[1] == "step_value")
            .map(|e| e[0].as_u64().unwrap())
            .collect();
        let first = 2 * i as u64 + 1;
        assert_eq!(steps, [first, first + 1], "{}", file.display());
    }
    // And the directory, read as `tensorboard --logdir` does, has every scalar once.
    let expected = serde_json::json!({
        "epoch_value": [[2, 10.0], [4, 20.0], [6, 30.0]],
        "step_value": [[1, 1.0], [2, 2.0], [3, 3.0], [4, 4.0], [5, 5.0], [6, 6.0]],
    });
    let expect_file = dir.join("expected.json");
    std::fs::write(&expect_file, expected.to_string()).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/check_tensorboard.py");
    let output =
        std::process::Command::new("python3").arg(script).arg(&dir).arg(&expect_file).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success() && stdout.contains("ok: 9 scalars in 2 tags"), "{stdout}");
}

/// A writer that fails at the first records of global step `fail_at` or later, like a disk
/// that fills up then, and counts what reaches it.
struct FailingSink {
    fail_at: u64,
    writes: Arc<Mutex<Vec<u64>>>,
}

impl MonitorSink for FailingSink {
    fn name(&self) -> &str {
        "Failing"
    }
    fn write(&mut self, records: &[Record]) -> std::io::Result<()> {
        let step = records[0].global_step;
        self.writes.lock().unwrap().push(step);
        if step >= self.fail_at {
            return Err(std::io::Error::new(std::io::ErrorKind::StorageFull, "the disk is full"));
        }
        Ok(())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Adds a [`FailingSink`] at setup and puts `step_value` at every step.
struct AddFailing(Option<FailingSink>);

impl Callback<Linear> for AddFailing {
    fn setup(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        if let Some(sink) = self.0.take() {
            ctx.monitors().add_sink(sink);
        }
        Ok(())
    }
    fn trigger_step(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let step = ctx.global_step() as f64;
        ctx.monitors().put_scalar("step_value", step);
        Ok(())
    }
}

#[test]
fn writer_failure_is_reported_and_disabled_while_training_goes_on_to_the_end() {
    let dir = scratch_dir("writer-failure");
    let writes = Arc::new(Mutex::new(Vec::new()));
    let device = burn_stoker::device::cpu();
    // 3 epochs of 2 steps; the writer fails at global step 3 (epoch 2).
    let report =
        Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(2, &device))
            .max_epoch(3)
            .log_dir(&dir)
            .handle_signals(false)
            .default_callbacks(writers())
            .callbacks(AddFailing(Some(FailingSink { fail_at: 3, writes: writes.clone() })))
            .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
            .expect("a failing writer does not fail training");
    assert_eq!(report.outcome, Outcome::Finished);
    assert_eq!((report.counters.epoch_num(), report.counters.global_step()), (3, 6), "every epoch ran");
    let [failure] = report.writer_failures.as_slice() else {
        panic!("one writer failure expected: {:?}", report.writer_failures)
    };
    assert_eq!((failure.writer.as_str(), failure.global_step, failure.epoch_num), ("Failing", 3, 2));
    assert_eq!(failure.error.to_string(), "the disk is full");
    // Disabled at its first error: nothing after step 3 reached it.
    assert_eq!(*writes.lock().unwrap(), [1, 2, 3]);
    // The other writers wrote everything: stats.json a row at every step (3 epochs of 2).
    assert_eq!(read_stats(&dir).len(), 6);
    assert!(report.dropped.is_empty());
}

/// A writer whose first write blocks until the test releases it, and which records the global
/// step of every batch it receives.
struct StalledSink {
    name: String,
    entered: std::sync::mpsc::SyncSender<()>,
    release: std::sync::mpsc::Receiver<()>,
    steps: Arc<Mutex<Vec<u64>>>,
}

const STALLED_CAPACITY: usize = 4;

impl MonitorSink for StalledSink {
    fn name(&self) -> &str {
        &self.name
    }
    fn queue_capacity(&self) -> usize {
        STALLED_CAPACITY
    }
    fn write(&mut self, records: &[Record]) -> std::io::Result<()> {
        let mut steps = self.steps.lock().unwrap();
        steps.extend(records.iter().map(|r| r.global_step));
        if steps.len() == 1 {
            drop(steps);
            self.entered.send(()).unwrap();
            self.release.recv().unwrap();
        }
        Ok(())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Adds the stalled writer at setup (handing its queue to the test); puts one scalar per step
/// and counts the steps; before step 2, waits until the writer holds step 1's batch.
struct Feeder {
    sink: Option<StalledSink>,
    queue: std::sync::mpsc::Sender<burn_stoker::state::WriterQueue>,
    entered: std::sync::mpsc::Receiver<()>,
    progress: Arc<std::sync::atomic::AtomicU64>,
}

impl Callback<Linear> for Feeder {
    fn setup(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let queue = ctx.monitors().add_sink(self.sink.take().expect("one setup"));
        self.queue.send(queue).unwrap();
        Ok(())
    }
    fn before_step(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        if ctx.global_step() == 1 {
            self.entered.recv().unwrap();
        }
        Ok(())
    }
    fn trigger_step(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let step = ctx.global_step();
        self.progress.store(step, std::sync::atomic::Ordering::SeqCst);
        ctx.monitors().put_scalar("step", step as f64);
        Ok(())
    }
}

#[test]
fn writer_queue_full_makes_training_wait_for_the_writer_and_loses_nothing() {
    train_behind_a_stalled_writer("Stalled", &scratch_dir("writer-queue"));
}

/// Train one epoch in `dir` with a writer named `name` that stalls on its first batch until
/// training found its queue full (its warning said), and check that nothing was lost.
pub(crate) fn train_behind_a_stalled_writer(name: &str, dir: &std::path::Path) {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::mpsc::{channel, sync_channel};
    const STEPS: usize = 3 * STALLED_CAPACITY;
    let (entered_tx, entered_rx) = sync_channel(1);
    let (release_tx, release_rx) = sync_channel(1);
    let (queue_tx, queue_rx) = channel();
    let steps = Arc::new(Mutex::new(Vec::new()));
    let progress = Arc::new(AtomicU64::new(0));
    let feeder = Feeder {
        sink: Some(StalledSink {
            name: name.to_string(),
            entered: entered_tx,
            release: release_rx,
            steps: steps.clone(),
        }),
        queue: queue_tx,
        entered: entered_rx,
        progress: progress.clone(),
    };
    let dir = dir.to_path_buf();
    let training = std::thread::spawn(move || {
        let device = burn_stoker::device::cpu();
        // One epoch: the only batches are the steps' (no epoch-end statistics in between).
        Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(STEPS, &device))
            .max_epoch(1)
            .log_dir(&dir)
            .handle_signals(false)
            .default_callbacks(DefaultCallbacks::none())
            .callbacks(feeder)
            .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
            .map(|report| (report.writer_failures, report.dropped, report.counters.global_step()))
            .map_err(burn_stoker::Error::from)
    });
    let queue = queue_rx.recv().expect("the writer's queue");
    assert_eq!((queue.name(), queue.capacity()), (name, STALLED_CAPACITY));
    // The writer holds step 1's batch; steps 2..=5 fill its queue; step 6 finds it full and
    // training waits there. Wait (with a bound that fails the test instead of hanging) for that.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while queue.waits() == 0 {
        assert!(std::time::Instant::now() < deadline, "training never found the queue full");
        std::thread::yield_now();
    }
    assert_eq!(progress.load(Ordering::SeqCst), STALLED_CAPACITY as u64 + 2, "training waits at step 6");
    assert_eq!(*steps.lock().unwrap(), [1], "the writer still holds the first batch");
    release_tx.send(()).unwrap();
    let (failures, dropped, global_step) = training.join().unwrap().expect("training finishes");
    assert_eq!(global_step, STEPS as u64);
    // Nothing was lost or reordered, nothing was dropped, and the writer did not fail.
    assert_eq!(*steps.lock().unwrap(), (1..=STEPS as u64).collect::<Vec<_>>());
    assert!(failures.is_empty() && dropped.is_empty(), "{failures:?} {dropped:?}");
    assert_eq!(queue.dropped(), 0);
    assert!(queue.waits() >= 1);
}

/// Puts `x` at every step; opens `fifo` for writing at step 1 (which waits until the first
/// command reads it: that command is then running) and closes it at step `last`.
struct HoldFifo {
    fifo: std::path::PathBuf,
    last: u64,
    open: Option<std::fs::File>,
}

impl Callback<Linear> for HoldFifo {
    fn after_step(
        &mut self,
        ctx: &mut Context<'_, Linear>,
        _values: &Fetched<'_>,
    ) -> burn_stoker::Result<()> {
        let step = ctx.global_step();
        ctx.monitors().put_scalar("x", step as f64);
        Ok(())
    }
    fn trigger_step(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        if ctx.global_step() == 1 {
            self.open = Some(std::fs::OpenOptions::new().write(true).open(&self.fifo).unwrap());
        }
        if ctx.global_step() == self.last {
            self.open = None;
        }
        Ok(())
    }
}

#[test]
fn writer_queue_of_commands_drops_and_counts_what_does_not_fit_and_never_stalls_training() {
    use burn_stoker::monitor::{COMMAND_QUEUE_CAPACITY, SendStat};
    let dir = scratch_dir("command-queue");
    let fifo = dir.join("fifo");
    let ran = dir.join("ran.txt");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    // The first command blocks reading the FIFO until the last step; the others are quick.
    let command = format!(
        "if [ {{global_step}} = 1 ]; then cat '{}' > /dev/null; fi; echo {{global_step}} >> '{}'",
        fifo.display(),
        ran.display()
    );
    let extra = 5;
    let steps = 1 + COMMAND_QUEUE_CAPACITY as u64 + extra;
    let send = SendStat::new(command, ["x"]).unwrap().wait_at_end(std::time::Duration::from_secs(300));
    let hold = HoldFifo { fifo, last: steps, open: None };
    let device = burn_stoker::device::cpu();
    let report = Trainer::new(
        tiny_model(&device),
        burn::optim::SgdConfig::new().init(),
        tiny_data(steps as usize, &device),
    )
    .max_epoch(1)
    .log_dir(&dir)
    .handle_signals(false)
    .default_callbacks(DefaultCallbacks::none())
    .callbacks((PeriodicTrigger::new(send).every_k_steps(1), hold))
    .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
    .expect("training never waits for the commands");
    assert_eq!(report.counters.global_step(), steps);
    // Command 1 ran while commands 2..=65 waited; those of the last `extra` steps were dropped.
    assert_eq!(
        report.dropped,
        [burn_stoker::state::DroppedWork {
            queue: "SendStat(x)".into(),
            dropped: extra,
            capacity: COMMAND_QUEUE_CAPACITY,
        }]
    );
    let ran: Vec<u64> = std::fs::read_to_string(&ran).unwrap().lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(ran, (1..=1 + COMMAND_QUEUE_CAPACITY as u64).collect::<Vec<_>>());
    assert!(report.writer_failures.is_empty());
}

#[test]
fn writer_failure_of_tensorboard_on_a_full_disk_at_epoch_1_keeps_training_and_the_model() {
    let scratch = scratch_dir("writer-full-disk");
    let dir = scratch.join("tmpfs");
    std::fs::create_dir_all(&dir).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
        .arg(&dir)
        .status()
        .expect("running mount");
    assert!(mounted.success(), "mount -t tmpfs failed (these tests run as root): {mounted}");
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(dir.clone());
    let device = burn_stoker::device::cpu();
    let defaults =
        DefaultCallbacks { tensorboard: Some(TensorBoardWriter::new()), ..DefaultCallbacks::none() };
    let report =
        Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(2, &device))
            .max_epoch(3)
            .log_dir(&dir)
            .handle_signals(false)
            .default_callbacks(defaults)
            .callbacks(FillDisk)
            .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
            .expect("a full disk under TensorBoard does not fail training");
    assert_eq!((report.counters.epoch_num(), report.counters.global_step()), (3, 6), "every epoch ran");
    assert!(
        stoker_tests::weights(&report.model).iter().flatten().all(|w| w.is_finite()),
        "the model came back"
    );
    let [failure] = report.writer_failures.as_slice() else {
        panic!("one writer failure expected: {:?}", report.writer_failures)
    };
    assert_eq!((failure.writer.as_str(), failure.global_step, failure.epoch_num), ("TensorBoard", 1, 1));
    assert!(failure.error.to_string().contains("No space left on device"), "{failure}");
}
