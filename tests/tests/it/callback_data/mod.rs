//! neon's `callback_data` file (feature `hdf5`): every group, dataset and attribute read back by
//! h5py, with its shape, type and values, against what the run did.

mod deconv;

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use burn::nn::Linear;
use burn_stoker::monitor::CallbackDataWriter;
use burn_stoker::prelude::*;
use serde_json::{Value as Json, json};
use stoker_tests::{mse, scratch_dir, tiny_data, tiny_model};

/// Asks for a validation pass at every epoch's end, which puts `validation_cost` = 100 + epoch
/// and `validation_accuracy` = epoch / 10.
struct Validator;

impl Callback<Linear> for Validator {
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        ctx.request_validation()
    }
    fn validate(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let epoch = ctx.epoch_num() as f64;
        std::thread::sleep(std::time::Duration::from_millis(20));
        ctx.monitors().put_scalar("validation_cost", 100.0 + epoch);
        ctx.monitors().put_scalar("validation_accuracy", epoch / 10.0);
        Ok(())
    }
}

/// Every object of the file, by path: its kind, attributes (each with its type), and for a
/// dataset its type, shape and values, as h5py reads them.
fn read_with_h5py(path: &Path) -> Json {
    let program = r#"
import h5py, json, sys
out = {}
def attr(v):
    if hasattr(v, "dtype"):
        return [str(v.dtype), v.tolist()]
    return [type(v).__name__, v]
def visit(name, obj):
    entry = {"attrs": {k: attr(v) for k, v in obj.attrs.items()}}
    if isinstance(obj, h5py.Dataset):
        entry.update(kind="dataset", dtype=str(obj.dtype), shape=list(obj.shape), values=obj[...].tolist())
    else:
        entry["kind"] = "group"
    out[name] = entry
with h5py.File(sys.argv[1], "r") as f:
    f.visititems(visit)
print(json.dumps(out))
"#;
    let output = h5py_command(program).arg(path).output().unwrap();
    assert!(output.status.success(), "h5py: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

/// `python3 -c program`. The tests of this module run at once, each starting a python: the
/// writer marks libhdf5's descriptors close-on-exec, else a python started by one test would hold
/// another test's file open, with HDF5's lock, and h5py's own lock there fails with EAGAIN.
fn h5py_command(program: &str) -> std::process::Command {
    let mut command = std::process::Command::new("python3");
    command.arg("-c").arg(program);
    command
}

fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
}

/// A dataset's entry without its values, and its values.
fn dataset(file: &Json, name: &str) -> (Json, Vec<f64>) {
    let mut entry = file[name].clone();
    let values = entry["values"].as_array().unwrap_or_else(|| panic!("{name}: {entry}")).clone();
    entry.as_object_mut().unwrap().remove("values");
    (entry, values.iter().map(|v| v.as_f64().unwrap()).collect())
}

#[test]
fn callback_data_file_holds_neons_layout_read_back_by_h5py() {
    let dir = scratch_dir("callback-data");
    let device = burn_stoker::device::cpu();
    let mut losses = Vec::new();
    let writer =
        CallbackDataWriter::new("data.h5").eval_freq(2).loss("validation_cost").metric("validation_accuracy");
    assert!(Callback::<Linear>::chief_only(&writer), "the chief alone writes the file");
    let started = now();
    Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(3, &device))
        .max_epoch(4)
        .log_dir(&dir)
        .default_callbacks(DefaultCallbacks::none())
        .callbacks((Validator, writer))
        .train(|model: &Linear, batch, _step: &mut Step<'_>| {
            let loss = mse(model, batch);
            losses.push(f64::from(loss.clone().into_scalar::<f32>()));
            loss
        })
        .unwrap();
    let ended = now();
    let file = read_with_h5py(&dir.join("data.h5"));

    let mut names: Vec<&String> = file.as_object().unwrap().keys().collect();
    names.sort();
    let expected = [
        "config",
        "cost",
        "cost/loss",
        "cost/train",
        "metrics",
        "metrics/validation_accuracy",
        "time",
        "time/loss",
        "time/train",
        "time/train/end_time",
        "time/train/start_time",
        "time_markers",
        "time_markers/minibatch",
    ];
    assert_eq!(names, expected);

    // Callbacks.on_train_begin: the run's size.
    let config =
        json!({"kind": "group", "attrs": {"total_minibatches": ["int64", 12], "total_epochs": ["int64", 4]}});
    assert_eq!(file["config"], config);
    // Callbacks.on_epoch_end: the minibatches done at each epoch's end.
    let markers = json!({"kind": "group", "attrs": {"epochs_complete": ["int64", 4], "minibatches_complete": ["int64", 12]}});
    assert_eq!(file["time_markers"], markers);
    let (entry, values) = dataset(&file, "time_markers/minibatch");
    assert_eq!(entry, json!({"kind": "dataset", "attrs": {}, "dtype": "float32", "shape": [4]}));
    assert_eq!(values, [3.0, 6.0, 9.0, 12.0]);

    // TrainCostCallback: the mean of the last 10 costs at every minibatch, as float32.
    let (entry, values) = dataset(&file, "cost/train");
    let attrs = json!({"time_markers": ["str", "minibatch"]});
    assert_eq!(entry, json!({"kind": "dataset", "attrs": attrs, "dtype": "float32", "shape": [12]}));
    assert_eq!(losses.len(), 12);
    let means: Vec<f64> = (0..12usize)
        .map(|i| {
            let window = &losses[i.saturating_sub(9)..=i];
            f64::from((window.iter().sum::<f64>() / window.len() as f64) as f32)
        })
        .collect();
    assert_eq!(values, means);

    // LossCallback and MetricCallback every 2 epochs: epochs 2 and 4 at indices 0 and 1 (the
    // passes at epochs 1 and 3 have no place in neon's layout).
    let evaluation = json!({"time_markers": ["str", "epoch_freq"], "epoch_freq": ["int64", 2]});
    let (entry, values) = dataset(&file, "cost/loss");
    assert_eq!(entry, json!({"kind": "dataset", "attrs": evaluation, "dtype": "float32", "shape": [2]}));
    assert_eq!(values, [102.0, 104.0]);
    let (entry, values) = dataset(&file, "metrics/validation_accuracy");
    assert_eq!(entry, json!({"kind": "dataset", "attrs": evaluation, "dtype": "float32", "shape": [2]}));
    assert_eq!(values, [f64::from(0.2f32), f64::from(0.4f32)]);
    let (entry, values) = dataset(&file, "time/loss");
    assert_eq!(entry, json!({"kind": "dataset", "attrs": {}, "dtype": "float32", "shape": [2]}));
    assert!(values.iter().all(|&t| (0.02..5.0).contains(&t)), "each pass sleeps 20 ms: {values:?}");

    // RunTimerCallback: the wall clock at the start and at the end.
    let seconds = json!({"units": ["str", "seconds"]});
    let (entry, start) = dataset(&file, "time/train/start_time");
    assert_eq!(entry, json!({"kind": "dataset", "attrs": seconds, "dtype": "float64", "shape": [1]}));
    let (entry, end) = dataset(&file, "time/train/end_time");
    assert_eq!(entry, json!({"kind": "dataset", "attrs": seconds, "dtype": "float64", "shape": [1]}));
    assert!(
        started <= start[0] && start[0] <= end[0] && end[0] <= ended,
        "{started} {start:?} {end:?} {ended}"
    );
    assert_eq!(file["time/train"], json!({"kind": "group", "attrs": {}}));
}

#[test]
fn callback_data_file_at_a_bad_path_is_an_error_at_setup_naming_it() {
    let dir = scratch_dir("callback-data-bad");
    let device = burn_stoker::device::cpu();
    std::fs::create_dir_all(dir.join("a-folder")).unwrap();
    std::fs::write(dir.join("a-file"), b"not a folder").unwrap();
    for (path, says) in [("a-folder", "is a folder, not a file"), ("a-file/data.h5", "a-file")] {
        let mut steps = 0;
        let error =
            Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(2, &device))
                .log_dir(&dir)
                .default_callbacks(DefaultCallbacks::none())
                .callbacks(CallbackDataWriter::new(path))
                .train(|model: &Linear, batch, _step: &mut Step<'_>| {
                    steps += 1;
                    mse(model, batch)
                })
                .map(|_| ())
                .unwrap_err()
                .to_string();
        assert!(error.contains("CallbackDataWriter") && error.contains(says), "{path}: {error}");
        assert_eq!(steps, 0, "no step runs");
    }
}

/// The weights and the bias of the `Linear` model, as two lists of values, at each epoch's end,
/// or after each step.
struct WeightLog {
    per_step: bool,
    seen: std::sync::Arc<std::sync::Mutex<Vec<[Vec<f32>; 2]>>>,
}

impl WeightLog {
    fn record(&self, model: &Linear) {
        let bias = model.bias.as_ref().expect("a bias").val().into_data().iter::<f32>().collect();
        let weight = model.weight.val().into_data().iter::<f32>().collect();
        self.seen.lock().unwrap().push([bias, weight]);
    }
}

impl Callback<Linear> for WeightLog {
    fn trigger_step(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        if self.per_step {
            self.record(ctx.model());
        }
        Ok(())
    }
    fn after_epoch(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        if !self.per_step {
            self.record(ctx.model());
        }
        Ok(())
    }
}

/// The `hist` group of the file, and the histograms neon's own rule gives for `columns` (by
/// dataset name, one list of values per column), both as h5py and numpy compute them:
/// `Tensor.hist` of neon's CPU backend, `numpy.histogram(rint(log2(|x|)), bins=arange(65) - 48
/// with -inf first)`.
fn hist_with_numpy(path: &Path, columns: &Json) -> Json {
    let program = r#"
import h5py, json, sys
import numpy as np
columns = json.loads(sys.argv[2])
bins = np.arange(64 + 1) + float(-48)
bins[0] = -float('Inf')
expected = {}
with np.errstate(divide='ignore'):
    for name, values in columns.items():
        expected[name] = []
        for w in values:
            h, _ = np.histogram(np.rint(np.log2(np.abs(np.array(w, dtype=np.float32)))), density=False, bins=bins)
            expected[name].append(h.tolist())
with h5py.File(sys.argv[1], "r") as f:
    group = f["hist"]
    attrs = {k: [str(v.dtype), v.tolist()] if hasattr(v, "dtype") else [type(v).__name__, v] for k, v in group.attrs.items()}
    sets = {name: {"dtype": str(d.dtype), "shape": list(d.shape), "columns": d[...].T.tolist()} for name, d in group.items()}
print(json.dumps({"attrs": attrs, "datasets": sets, "expected": expected}))
"#;
    let output = h5py_command(program).arg(path).arg(columns.to_string()).output().unwrap();
    assert!(output.status.success(), "h5py: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

/// neon/callbacks/callbacks.py, `HistCallback` with its default `filter_key=['W']`: the weights
/// and the biases (neon's `Bias` layer keeps its values in `W`).
#[test]
fn callback_data_hist_group_holds_neons_histograms_of_the_weights() {
    for per_minibatch in [false, true] {
        let dir = scratch_dir("callback-data-hist");
        let device = burn_stoker::device::cpu();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = WeightLog { per_step: per_minibatch, seen: seen.clone() };
        // 2 -> 16: a weight of 32 values and a bias of 16, spread over several exponents as
        // they train.
        let model = burn::nn::LinearConfig::new(2, 16).init(&device);
        Trainer::new(model, burn::optim::SgdConfig::new().init(), tiny_data(3, &device))
            .max_epoch(2)
            .learning_rate(0.3)
            .log_dir(&dir)
            .default_callbacks(DefaultCallbacks::none())
            .callbacks((log, CallbackDataWriter::new("data.h5").hist(per_minibatch)))
            .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
            .unwrap();
        let seen = seen.lock().unwrap().clone();
        let steps = if per_minibatch { 6 } else { 2 };
        assert_eq!(seen.len(), steps);
        let columns = json!({
            "bias": seen.iter().map(|[bias, _]| bias.clone()).collect::<Vec<_>>(),
            "weight": seen.iter().map(|[_, weight]| weight.clone()).collect::<Vec<_>>(),
        });
        let hist = hist_with_numpy(&dir.join("data.h5"), &columns);
        let markers = if per_minibatch { "minibatch" } else { "epoch" };
        let attrs = json!({
            "bins": ["int64", 64],
            "offset": ["int64", -48],
            "time_markers": ["str", markers],
            "time_steps": ["int64", steps],
        });
        assert_eq!(hist["attrs"], attrs, "per_minibatch {per_minibatch}");
        // The weight and the bias, named by their paths.
        let datasets = hist["datasets"].as_object().unwrap();
        assert_eq!(datasets.keys().collect::<Vec<_>>(), ["bias", "weight"], "{hist}");
        for (name, count) in [("bias", 16), ("weight", 32)] {
            let set = &datasets[name];
            assert_eq!(set["dtype"], "int32");
            assert_eq!(set["shape"], json!([64, steps]));
            // Column by column, what numpy computes from the values by neon's rule.
            assert_eq!(set["columns"], hist["expected"][name], "{name}, per_minibatch {per_minibatch}");
            let counted: i64 =
                set["columns"][0].as_array().unwrap().iter().map(|c| c.as_i64().unwrap()).sum();
            assert_eq!(counted, count, "every value of {name} is counted");
        }
    }
}

/// A run of `max_epoch` epochs of 3 steps into `dir` writing `writer`, a checkpoint at each
/// epoch's end, stopped at global step `stop_at` (if any); `resume`: the log directory's latest
/// checkpoint is resumed.
fn run_writer(
    dir: &Path,
    max_epoch: u64,
    stop_at: Option<u64>,
    resume: bool,
    writer: CallbackDataWriter,
) -> burn_stoker::Result<()> {
    let device = burn_stoker::device::cpu();
    let saver = PeriodicTrigger::new(ModelSaver::new(100)).every_k_epochs(1);
    Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(3, &device))
        .max_epoch(max_epoch)
        .log_dir(dir)
        .auto_resume(resume)
        .handle_signals(false)
        .default_callbacks(DefaultCallbacks::none())
        .callbacks((saver, stop_at.map(stoker_tests::StopAt), writer))
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .map(|_| ())
        .map_err(burn_stoker::Error::from)
}

/// The entries of `dir` whose names start with `prefix`.
fn named(dir: &Path, prefix: &str) -> Vec<std::path::PathBuf> {
    let mut found: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .collect();
    found.sort();
    found
}

#[test]
fn callback_data_file_is_never_created_through_a_planted_symlink() {
    let dir = scratch_dir("callback-data-symlink");
    let victim = dir.join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    std::os::unix::fs::symlink(&victim, dir.join("data.h5")).unwrap();
    run_writer(&dir, 2, None, false, CallbackDataWriter::new("data.h5")).unwrap();
    let victim_now = std::fs::read(&victim).unwrap();
    assert!(
        victim_now == b"precious",
        "the file was written through the symlink: {} bytes there now",
        victim_now.len()
    );
    let kind = std::fs::symlink_metadata(dir.join("data.h5")).unwrap().file_type();
    assert!(kind.is_file(), "data.h5 is a new regular file in the symlink's place: {kind:?}");
    let (_, costs) = dataset(&read_with_h5py(&dir.join("data.h5")), "cost/train");
    assert_eq!(costs.len(), 6);
}

#[test]
fn callback_data_file_that_is_a_fifo_is_an_error_on_resume_not_a_hang() {
    let dir = scratch_dir("callback-data-fifo");
    run_writer(&dir, 4, Some(6), false, CallbackDataWriter::new("data.h5")).unwrap();
    std::fs::remove_file(dir.join("data.h5")).unwrap();
    let made = std::process::Command::new("mkfifo").arg(dir.join("data.h5")).status().unwrap();
    assert!(made.success());
    let (tx, rx) = std::sync::mpsc::channel();
    let run_dir = dir.clone();
    std::thread::spawn(move || {
        let _ = tx.send(
            run_writer(&run_dir, 4, None, true, CallbackDataWriter::new("data.h5"))
                .map_err(|e| e.to_string()),
        );
    });
    let result = rx.recv_timeout(std::time::Duration::from_secs(60)).expect("the resume hung on the FIFO");
    let error = result.expect_err("a FIFO is no HDF5 file");
    assert!(error.contains("data.h5") && error.contains("not a regular file"), "{error}");
}

#[test]
fn callback_data_file_damaged_by_a_crash_is_moved_aside_and_the_resume_goes_on() {
    let dir = scratch_dir("callback-data-damaged");
    run_writer(&dir, 4, Some(6), false, CallbackDataWriter::new("data.h5")).unwrap();
    // What a crash in the middle of a write can leave: the file cut short.
    let path = dir.join("data.h5");
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 3]).unwrap();
    run_writer(&dir, 4, None, true, CallbackDataWriter::new("data.h5")).unwrap();
    let aside = named(&dir, "data.h5.bak-");
    assert_eq!(aside.len(), 1, "the damaged file is moved aside: {aside:?}");
    assert_eq!(std::fs::read(&aside[0]).unwrap(), &bytes[..bytes.len() / 3]);
    let file = read_with_h5py(&path);
    assert_eq!(file["config"]["attrs"]["total_minibatches"], json!(["int64", 12]));
    let (_, costs) = dataset(&file, "cost/train");
    assert_eq!(costs.len(), 12);
    // The resumed run's minibatches (7 to 12) are in the new file.
    assert!(costs[6..].iter().all(|&c| c > 0.0), "{costs:?}");
}

#[test]
fn callback_data_with_max_epoch_u64_max_overflows_nothing() {
    let dir = scratch_dir("callback-data-unbounded");
    let writer = CallbackDataWriter::new("data.h5").hist(true);
    run_writer(&dir, u64::MAX, Some(6), false, writer).unwrap();
    let file = read_with_h5py(&dir.join("data.h5"));
    // No total fits in int64: said as -1, and the datasets hold what was written.
    let config = json!({"kind": "group", "attrs": {"total_minibatches": ["int64", -1], "total_epochs": ["int64", -1]}});
    assert_eq!(file["config"], config);
    let (entry, costs) = dataset(&file, "cost/train");
    assert_eq!(entry["shape"], json!([6]));
    assert!(costs.iter().all(|&c| c > 0.0), "{costs:?}");
    let (entry, markers) = dataset(&file, "time_markers/minibatch");
    assert_eq!(entry["shape"], json!([2]));
    assert_eq!(markers, [3.0, 6.0]);
    assert_eq!(file["hist/weight"]["shape"], json!([64, 6]));
    assert_eq!(file["hist"]["attrs"]["time_steps"], json!(["int64", -1]));
}

#[test]
fn callback_data_file_takes_space_as_it_is_written_not_up_front() {
    let dir = scratch_dir("callback-data-space");
    // 100,000 epochs of 3 steps planned, one run: a per-minibatch histogram of 64 x 300,000
    // int32 (77 MB) allocated up front, were it.
    let writer = CallbackDataWriter::new("data.h5").hist(true);
    run_writer(&dir, 100_000, Some(3), false, writer).unwrap();
    let size = std::fs::metadata(dir.join("data.h5")).unwrap().len();
    assert!(size < 1 << 20, "data.h5 takes {size} bytes after 3 steps");
    // neon's shapes all the same (its readers check `len(cost/train) == total_minibatches`),
    // growable: chunked, with no maximum.
    let program = r#"
import h5py, json, sys
with h5py.File(sys.argv[1], "r") as f:
    out = {n: [list(f[n].shape), list(f[n].maxshape), f[n].chunks is not None, f[n][..., :3].tolist()] for n in ["cost/train", "hist/weight"]}
print(json.dumps(out))
"#;
    let output = h5py_command(program).arg(dir.join("data.h5")).output().unwrap();
    assert!(output.status.success(), "h5py: {}", String::from_utf8_lossy(&output.stderr));
    let shapes: Json = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(shapes["cost/train"][0], json!([300_000]));
    assert_eq!(shapes["cost/train"][1], json!([null]));
    assert_eq!(shapes["cost/train"][2], json!(true));
    assert!(
        shapes["cost/train"][3].as_array().unwrap().iter().all(|c| c.as_f64().unwrap() > 0.0),
        "{shapes}"
    );
    assert_eq!(shapes["hist/weight"][0], json!([64, 300_000]));
    assert_eq!(shapes["hist/weight"][1], json!([64, null]));
    assert_eq!(shapes["hist/weight"][2], json!(true));
}
