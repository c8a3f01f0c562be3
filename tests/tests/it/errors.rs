//! Errors keep their causes: `source()` returns burn's record error for a checkpoint that does
//! not load, the data loader's error, the operating system's error (and every I/O error names
//! its path), and a callback's own error.

use std::error::Error as _;
use std::path::Path;
use std::sync::Arc;

use burn::data::dataloader::batcher::Batcher;
use burn::data::dataloader::{DataLoader, DataLoaderBuilder};
use burn::data::dataset::{Dataset, DatasetError};
use burn::nn::{Linear, LinearConfig};
use burn::optim::AdamConfig;
use burn::store::RecordError;
use burn::tensor::{Device, Tensor, TensorData};
use burn_stoker::monitor::TensorBoardWriter;
use burn_stoker::prelude::*;
use burn_stoker::saver::Checkpoint;
use burn_stoker::state::{KeepPolicy, MonitorSink, Record};
use burn_stoker::track::{GpuMemory, GpuMemoryTracker, GpuSource, GpuUtilizationTracker};
use burn_stoker::trainer::LogDirPolicy;
use burn_stoker::{CheckpointError, Error};
use stoker_tests::{FillDisk, mse, scratch_dir, tiny_data, tiny_model};

type Batch = (Tensor<2>, Tensor<2>);

fn step_fn(model: &Linear, batch: Batch, _step: &mut Step<'_>) -> Tensor<1> {
    mse(model, batch)
}

/// A trainer of `model` on 3 batches, no default callback, no signal handling.
fn trainer(model: Linear, dir: &Path) -> Trainer<Linear, Vec<Batch>> {
    let device = burn_stoker::device::cpu();
    Trainer::new(model, AdamConfig::new().init(), tiny_data(3, &device))
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .max_epoch(1)
        .log_dir(dir)
}

/// The error's chain of sources, the error itself first.
fn chain<'a>(error: &'a (dyn std::error::Error + 'static)) -> Vec<&'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(error), |&e| e.source()).collect()
}

#[test]
fn error_checkpoint_of_another_model_has_burns_record_error_as_source() {
    let dir = scratch_dir("errors-architecture");
    let device = burn_stoker::device::cpu();
    trainer(tiny_model(&device), &dir).callbacks(ModelSaver::new(3)).train(step_fn).unwrap();
    // A model 2 -> 3 cannot take the weights of the model 2 -> 1 in the checkpoint.
    let other = LinearConfig::new(2, 3).init(&device);
    let error = trainer(other, &dir.join("second")).resume_from(&dir).train(step_fn).unwrap_err().error;
    let text = error.to_string();
    assert!(text.starts_with("loading the model of checkpoint "), "{text}");
    assert!(text.contains("is it the same architecture"), "{text}");
    let source = error.source().expect("the error keeps burn's error");
    let record = source.downcast_ref::<RecordError>().expect("the source is burn's RecordError");
    assert!(matches!(record, RecordError::Validation(_)), "{record:?}");
    // The message quotes burn's error once, readably (its Display, not its Debug).
    assert!(text.contains(&record.to_string()), "{text}");
}

#[derive(Clone, Debug)]
struct PairBatcher;

impl Batcher<[f32; 3], Batch> for PairBatcher {
    fn batch(&self, items: Vec<[f32; 3]>, device: &Device) -> Batch {
        let n = items.len();
        let xs: Vec<f32> = items.iter().flat_map(|p| [p[0], p[1]]).collect();
        let ys: Vec<f32> = items.iter().map(|p| p[2]).collect();
        (
            Tensor::from_data(TensorData::new(xs, [n, 2]), device),
            Tensor::from_data(TensorData::new(ys, [n, 1]), device),
        )
    }
}

/// Items 0..8, of which item 5 cannot be read.
struct Failing;

impl Dataset<[f32; 3]> for Failing {
    fn get(&self, index: usize) -> Result<[f32; 3], DatasetError> {
        if index == 5 {
            return Err(DatasetError::new(std::io::Error::other("item 5 is unreadable")));
        }
        Ok([index as f32, 1.0, 2.0])
    }
    fn len(&self) -> usize {
        8
    }
}

#[test]
fn error_of_the_data_loader_is_the_data_errors_source() {
    let device = burn_stoker::device::cpu();
    let data: Arc<dyn DataLoader<Batch>> =
        DataLoaderBuilder::new(PairBatcher).batch_size(2).set_device(device.clone()).build(Failing);
    let error = Trainer::new(tiny_model(&device), AdamConfig::new().init(), data)
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .max_epoch(1)
        .log_dir(scratch_dir("errors-data"))
        .train(step_fn)
        .unwrap_err()
        .error;
    assert!(matches!(error, Error::Data { .. }), "{error:?}");
    assert_eq!(error.to_string(), "the data loader failed: item 5 is unreadable");
    let chain = chain(&error);
    assert!(chain[1].downcast_ref::<DatasetError>().is_some(), "{:?}", chain[1]);
    let io = chain.last().unwrap().downcast_ref::<std::io::Error>().expect("the dataset's own error");
    assert_eq!(io.to_string(), "item 5 is unreadable");
}

#[test]
fn error_io_of_a_log_dir_under_a_file_names_the_path_and_keeps_the_os_error() {
    let scratch = scratch_dir("errors-log-dir");
    std::fs::write(scratch.join("file"), b"not a directory").unwrap();
    let log = scratch.join("file/log");
    let error = trainer(tiny_model(&burn_stoker::device::cpu()), &log).train(step_fn).unwrap_err().error;
    assert!(error.to_string().starts_with(&format!("{}: ", log.display())), "{error}");
    let io = error.source().and_then(|s| s.downcast_ref::<std::io::Error>()).expect("the OS error");
    assert_eq!(io.raw_os_error(), Some(libc::ENOTDIR));
}

#[test]
fn error_io_of_a_checkpoint_written_under_a_file_names_the_path_and_keeps_the_os_error() {
    // The log directory is fine, but `checkpoints/step-3` cannot be created: a file is in the way.
    let log = scratch_dir("errors-checkpoint-io");
    std::fs::create_dir_all(log.join("checkpoints")).unwrap();
    let error = trainer(tiny_model(&burn_stoker::device::cpu()), &log)
        .callbacks(Breaker { root: log.join("checkpoints") })
        .train(step_fn)
        .unwrap_err()
        .error;
    let text = error.to_string();
    assert!(text.contains(&log.join("checkpoints").display().to_string()), "{text}");
    let io = chain(&error)
        .into_iter()
        .find_map(|e| e.downcast_ref::<std::io::Error>())
        .unwrap_or_else(|| panic!("no io::Error in the chain of {error:?}"));
    assert!(text.contains(&io.to_string()), "{text}");
}

/// Asks for a checkpoint at the end of the first step after replacing `checkpoints/` with a file.
struct Breaker {
    root: std::path::PathBuf,
}

impl Callback<Linear> for Breaker {
    fn trigger_step(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        std::fs::remove_dir_all(&self.root).map_err(|e| Error::io(&self.root, e))?;
        std::fs::write(&self.root, b"in the way").map_err(|e| Error::io(&self.root, e))?;
        ctx.request_checkpoint(KeepPolicy::default());
        Ok(())
    }
}

/// The callback's own error type.
#[derive(Debug)]
struct Upload(&'static str);

impl std::fmt::Display for Upload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the tracker refused the upload: {}", self.0)
    }
}

impl std::error::Error for Upload {}

struct Uploader;

impl Callback<Linear> for Uploader {
    fn trigger_epoch(&mut self, _ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        Err(Error::context("Uploader: sending the epoch's scalars", Upload("HTTP 503")))
    }
}

#[test]
fn error_of_a_callback_has_the_callbacks_error_as_source() {
    let log = scratch_dir("errors-callback");
    let error = trainer(tiny_model(&burn_stoker::device::cpu()), &log)
        .callbacks(Uploader)
        .train(step_fn)
        .unwrap_err()
        .error;
    assert_eq!(
        error.to_string(),
        "callback `Uploader` failed in trigger_epoch: Uploader: sending the epoch's scalars: the tracker refused the upload: HTTP 503"
    );
    let chain = chain(&error);
    assert!(matches!(chain[1].downcast_ref::<Error>(), Some(Error::Other { .. })), "{:?}", chain[1]);
    let upload = chain[2].downcast_ref::<Upload>().expect("the callback's own error");
    assert_eq!(upload.0, "HTTP 503");
    assert_eq!(chain.len(), 3);

    // `Error::other` keeps the error's own message.
    let other = Error::other(Upload("quota"));
    assert_eq!(other.to_string(), "the tracker refused the upload: quota");
    assert!(other.source().and_then(|s| s.downcast_ref::<Upload>()).is_some());
}

// ---------- corrupt checkpoints ----------

/// One epoch of 3 steps saved as `checkpoints/step-3`; its folder.
fn one_checkpoint(name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = scratch_dir(name);
    trainer(tiny_model(&burn_stoker::device::cpu()), &dir)
        .callbacks(ModelSaver::new(3))
        .train(step_fn)
        .unwrap();
    let step = dir.join("checkpoints/step-3");
    assert!(step.join("manifest.json").is_file());
    (dir, step)
}

/// The first error of type `T` in `error`'s chain.
fn find<'a, T: std::error::Error + 'static>(error: &'a (dyn std::error::Error + 'static)) -> &'a T {
    chain(error)
        .into_iter()
        .find_map(|e| e.downcast_ref::<T>())
        .unwrap_or_else(|| panic!("no {} in the chain of {error:?}", std::any::type_name::<T>()))
}

#[test]
fn errors_corrupt_manifest_keeps_serdes_error_and_names_the_checkpoint() {
    let (dir, step) = one_checkpoint("errors-corrupt-manifest");
    let manifest = step.join("manifest.json");
    let bytes = std::fs::read(&manifest).unwrap();
    std::fs::write(&manifest, &bytes[..bytes.len() / 2]).unwrap();

    // Reading that checkpoint: the message names it and the file, the source is serde's error.
    let error = Checkpoint::read(&step).unwrap_err();
    let text = error.to_string();
    assert!(matches!(error, Error::Checkpoint(CheckpointError::Damaged { .. })), "{error:?}");
    assert!(
        text.starts_with(&format!(
            "checkpoint {} is incomplete or corrupt: manifest.json is malformed: ",
            step.display()
        )),
        "{text}"
    );
    let json = error.source().and_then(|s| s.downcast_ref::<serde_json::Error>()).expect("serde's error");
    assert!(json.is_eof(), "{json:?}");
    assert!(text.ends_with(&json.to_string()), "{text}");

    // Looking for the latest one (no other to fall back on): the same cause, down the chain.
    let error = Checkpoint::latest(&dir).unwrap_err();
    let text = error.to_string();
    assert!(
        text.starts_with(&format!("no complete checkpoint in {}: ", dir.join("checkpoints").display())),
        "{text}"
    );
    assert!(text.contains(&step.display().to_string()), "{text}");
    assert!(find::<serde_json::Error>(&error).is_eof());

    // And resuming from it.
    let error = trainer(tiny_model(&burn_stoker::device::cpu()), &dir.join("second"))
        .resume_from(&dir)
        .train(step_fn)
        .unwrap_err()
        .error;
    assert!(error.to_string().contains(&step.display().to_string()), "{error}");
    assert!(find::<serde_json::Error>(&error).is_eof());
}

#[test]
fn errors_checkpoint_missing_file_keeps_the_not_found_error() {
    let (_, step) = one_checkpoint("errors-missing-model");
    std::fs::remove_file(step.join("model.bpk")).unwrap();
    let error = Checkpoint::read(&step).unwrap_err();
    let text = error.to_string();
    assert!(
        text.starts_with(&format!("checkpoint {} is incomplete or corrupt: model.bpk: ", step.display())),
        "{text}"
    );
    let io = error.source().and_then(|s| s.downcast_ref::<std::io::Error>()).expect("the OS error");
    assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
}

#[test]
fn errors_malformed_trainer_state_under_a_valid_manifest_keeps_serdes_error() {
    let (_, step) = one_checkpoint("errors-malformed-trainer");
    // trainer.json replaced by bytes that are not JSON, the manifest updated and sealed again as
    // stoker seals it (CRC-32C of the bytes before the checksum's line): only the parse fails.
    let garbled = b"{\"epoch_num\": ";
    std::fs::write(step.join("trainer.json"), garbled).unwrap();
    stoker_tests::reseal(&step, "trainer.json", garbled);

    let error = Checkpoint::read(&step).unwrap_err();
    let text = error.to_string();
    assert!(text.contains(&format!("{}", step.display())), "{text}");
    assert!(text.contains("trainer.json is malformed: "), "{text}");
    let json = error.source().and_then(|s| s.downcast_ref::<serde_json::Error>()).expect("serde's error");
    assert!(json.is_eof(), "{json:?}");
}

// ---------- monitor writers ----------

/// A writer whose every write fails with an I/O error.
struct FullDisk;

impl MonitorSink for FullDisk {
    fn name(&self) -> &str {
        "FullDisk"
    }
    fn write(&mut self, _records: &[Record]) -> std::io::Result<()> {
        Err(std::io::Error::new(std::io::ErrorKind::StorageFull, "the disk is full"))
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Adds [`FullDisk`] at setup and puts a scalar at every step.
struct AddFullDisk;

impl Callback<Linear> for AddFullDisk {
    fn setup(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        ctx.monitors().add_sink(FullDisk);
        Ok(())
    }
    fn trigger_step(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        ctx.monitors().put_scalar("x", 1.0);
        Ok(())
    }
}

#[test]
fn errors_writer_failure_keeps_the_writers_io_error() {
    let report = trainer(tiny_model(&burn_stoker::device::cpu()), &scratch_dir("errors-writer"))
        .callbacks(AddFullDisk)
        .train(step_fn)
        .expect("a failing writer does not fail training");
    let [failure] = report.writer_failures.as_slice() else {
        panic!("one writer failure expected: {:?}", report.writer_failures)
    };
    // Printed as before.
    assert_eq!(failure.to_string(), "writer FullDisk failed at global step 1 (epoch 1): the disk is full");
    assert_eq!(failure.error.to_string(), "the disk is full");
    // The writer's own error, reachable.
    let io = failure.error.source().and_then(|s| s.downcast_ref::<std::io::Error>()).expect("the io::Error");
    assert_eq!(io.kind(), std::io::ErrorKind::StorageFull);
    assert_eq!(find::<std::io::Error>(failure).kind(), std::io::ErrorKind::StorageFull);
}

// ---------- GPU trackers ----------

/// One GPU whose every reading fails with an I/O error.
struct BrokenGpu;

fn fell_off() -> Error {
    Error::context("reading the fake GPU", std::io::Error::other("the GPU fell off the bus"))
}

impl GpuSource for BrokenGpu {
    fn device_count(&mut self) -> burn_stoker::Result<u32> {
        Ok(1)
    }
    fn utilization(&mut self, _device: u32) -> burn_stoker::Result<f64> {
        Err(fell_off())
    }
    fn memory(&mut self, _device: u32) -> burn_stoker::Result<GpuMemory> {
        Err(fell_off())
    }
}

#[test]
fn errors_gpu_trackers_keep_the_error_that_turned_them_off() {
    let mut utilization =
        GpuUtilizationTracker::new().source(BrokenGpu).interval(std::time::Duration::from_millis(1));
    let mut memory = GpuMemoryTracker::new().source(BrokenGpu);
    trainer(tiny_model(&burn_stoker::device::cpu()), &scratch_dir("errors-gpu"))
        .callbacks((&mut utilization, &mut memory))
        .train(step_fn)
        .unwrap();
    for (tracker, failure) in [("utilization", utilization.failure()), ("memory", memory.failure())] {
        let error = failure.unwrap_or_else(|| panic!("the {tracker} tracker keeps its failure"));
        assert_eq!(error.to_string(), "reading the fake GPU: the GPU fell off the bus", "{tracker}");
        assert_eq!(find::<std::io::Error>(error).to_string(), "the GPU fell off the bus", "{tracker}");
    }

    // Without NVML: the loader's error is kept, as NVML's error's source.
    let missing = "/nonexistent/libnvidia-ml.so.1";
    let mut utilization = GpuUtilizationTracker::new().nvml_library(missing);
    let mut memory = GpuMemoryTracker::new().nvml_library(missing);
    trainer(tiny_model(&burn_stoker::device::cpu()), &scratch_dir("errors-gpu-nvml"))
        .callbacks((&mut utilization, &mut memory))
        .train(step_fn)
        .unwrap();
    for (tracker, failure) in [("utilization", utilization.failure()), ("memory", memory.failure())] {
        let error = failure.unwrap_or_else(|| panic!("the {tracker} tracker keeps its failure"));
        assert!(error.to_string().starts_with("NVML could not be loaded: "), "{tracker}: {error}");
        assert!(error.source().is_some(), "{tracker}: NVML's error is kept: {error:?}");
    }
}

// ---------- the log directory's policy ----------

/// The OS error in `error`'s chain: EBUSY, as a mount point gives to rename and rmdir.
fn assert_busy(error: &Error) {
    let io = find::<std::io::Error>(error);
    assert_eq!(io.raw_os_error(), Some(libc::EBUSY), "{error:?}");
    assert!(error.to_string().contains(&io.to_string()), "{error}");
}

#[test]
fn errors_log_dir_backup_that_cannot_move_the_earlier_run_keeps_the_os_error() {
    // The log directory is a mount point: it cannot be renamed (EBUSY).
    let log = scratch_dir("errors-backup").join("log");
    let _tmpfs = stoker_tests::Tmpfs::mount(&log, 1024);
    std::fs::write(log.join("stats.json"), b"[]").unwrap();
    let error = trainer(tiny_model(&burn_stoker::device::cpu()), &log)
        .log_dir_policy(LogDirPolicy::Backup)
        .train(step_fn)
        .unwrap_err()
        .error;
    let text = error.to_string();
    assert!(
        text.starts_with(&format!("moving the earlier run in the log directory {} aside to ", log.display())),
        "{text}"
    );
    assert!(text.contains("; nothing was moved."), "{text}");
    assert_busy(&error);
}

#[test]
fn errors_log_dir_delete_that_cannot_delete_the_earlier_run_keeps_the_os_error() {
    // `checkpoints/` inside the log directory is a mount point: it cannot be removed (EBUSY).
    let log = scratch_dir("errors-delete");
    std::fs::write(log.join("stats.json"), b"[]").unwrap();
    let checkpoints = log.join("checkpoints");
    let _tmpfs = stoker_tests::Tmpfs::mount(&checkpoints, 1024);
    let error = trainer(tiny_model(&burn_stoker::device::cpu()), &log)
        .log_dir_policy(LogDirPolicy::Delete)
        .train(step_fn)
        .unwrap_err()
        .error;
    let text = error.to_string();
    assert!(
        text.starts_with(&format!(
            "deleting the earlier run in the log directory {} failed at {}: ",
            log.display(),
            checkpoints.display()
        )),
        "{text}"
    );
    assert_busy(&error);
}

#[test]
fn errors_writer_failure_of_tensorboard_on_a_full_disk_names_the_event_file() {
    let log = scratch_dir("errors-writer-full-disk").join("tmpfs");
    let _tmpfs = stoker_tests::Tmpfs::mount(&log, 256);
    let defaults =
        DefaultCallbacks { tensorboard: Some(TensorBoardWriter::new()), ..DefaultCallbacks::none() };
    let report = trainer(tiny_model(&burn_stoker::device::cpu()), &log)
        .default_callbacks(defaults)
        .callbacks(FillDisk)
        .train(step_fn)
        .expect("a full disk under TensorBoard does not fail training");
    let [failure] = report.writer_failures.as_slice() else {
        panic!("one writer failure expected: {:?}", report.writer_failures)
    };
    let events: Vec<_> = std::fs::read_dir(&log)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("events.out.tfevents."))
        .collect();
    let [event_file] = events.as_slice() else { panic!("one event file expected: {events:?}") };
    let text = failure.error.to_string();
    assert!(text.starts_with(&format!("{}: ", event_file.display())), "{text}");
    // The operating system's error, down the chain.
    let os = chain(failure)
        .into_iter()
        .filter_map(|e| e.downcast_ref::<std::io::Error>())
        .find_map(std::io::Error::raw_os_error)
        .unwrap_or_else(|| panic!("no OS error in the chain of {failure:?}"));
    assert_eq!(os, libc::ENOSPC);
}
