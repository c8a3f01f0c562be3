//! Checkpoints under damage: a truncated or altered file is detected, named, and the checkpoint
//! before it is used; a log directory that cannot be written fails before any step; a full disk
//! leaves the earlier checkpoints intact and no half-written one; a NaN loss is never saved;
//! MinSaver / MaxSaver keep the best across a resume, named ones each their own;
//! keep_every_n_hours keeps checkpoints forever by tf.train.Saver's rule on a manual clock; two
//! ModelSavers write into their own folders.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use burn::nn::{Linear, LinearConfig};
use burn::optim::AdamConfig;
use burn::tensor::{Device, Tensor, TensorData};
use burn_stoker::debug::TerminateOnNaN;
use burn_stoker::prelude::*;
use burn_stoker::saver::{Checkpoint, OnWriteError};
use burn_stoker::state::ManualClock;
use burn_stoker::{CheckpointError, Error};
use serde_json::Value as Json;
use stoker_tests::reads::count_reads;
use stoker_tests::{checkpoint_weights, entries, mse, scratch_dir, tiny_data, tiny_model};

type Batch = (Tensor<2>, Tensor<2>);

/// Batches per epoch of every run here.
const STEPS: usize = 5;

/// A trainer of the tiny model on 5 batches, Adam, no default callback, no signal handling.
fn trainer(dir: &Path, max_epoch: u64) -> Trainer<Linear, Vec<Batch>> {
    let device = burn_stoker::device::cpu();
    Trainer::new(tiny_model(&device), AdamConfig::new().init(), tiny_data(STEPS, &device))
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .max_epoch(max_epoch)
        .log_dir(dir)
}

fn step_fn(model: &Linear, batch: Batch, _step: &mut Step<'_>) -> Tensor<1> {
    mse(model, batch)
}

/// Counts the steps that ran and records the global step seen in `before_train`.
#[derive(Clone, Default)]
struct Probe {
    steps: Arc<AtomicU64>,
    start: Arc<AtomicU64>,
}

impl Probe {
    fn steps(&self) -> u64 {
        self.steps.load(Ordering::SeqCst)
    }
    fn start(&self) -> u64 {
        self.start.load(Ordering::SeqCst)
    }
}

impl<M> Callback<M> for Probe {
    fn before_train(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        self.start.store(ctx.global_step(), Ordering::SeqCst);
        Ok(())
    }
    fn after_step(&mut self, _ctx: &mut Context<'_, M>, _values: &Fetched<'_>) -> burn_stoker::Result<()> {
        self.steps.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// The `step-N` folders in `dir`, by increasing N.
fn step_dirs(dir: &Path) -> Vec<String> {
    let mut names: Vec<(u64, String)> = entries(dir)
        .into_iter()
        .filter_map(|n| n.strip_prefix("step-").and_then(|s| s.parse().ok()).map(|s| (s, n.clone())))
        .collect();
    names.sort();
    names.into_iter().map(|(_, n)| n).collect()
}

/// Every path under `dir` (recursively) whose name ends with `.tmp`.
fn tmp_leftovers(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.to_string_lossy().ends_with(".tmp") {
            found.push(path.clone());
        }
        if path.is_dir() {
            found.extend(tmp_leftovers(&path));
        }
    }
    found
}

/// Flip the bits of the byte at `at` in `path` (`at` = `None`: the middle byte).
fn flip_byte(path: &Path, at: Option<usize>, mask: u8) {
    let mut bytes = std::fs::read(path).unwrap();
    let at = at.unwrap_or(bytes.len() / 2);
    bytes[at] ^= mask;
    std::fs::write(path, bytes).unwrap();
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).len()
}

fn read_json(path: &Path) -> Json {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn names(value: &Json) -> Vec<String> {
    value.as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect()
}

/// A run of 3 epochs saving every epoch: checkpoints step-5, step-10, step-15.
fn three_epochs(name: &str) -> PathBuf {
    let dir = scratch_dir(name);
    let report = trainer(&dir, 3).callbacks(ModelSaver::new(5)).train(step_fn).unwrap();
    assert_eq!(report.counters.global_step(), 15);
    let root = dir.join("checkpoints");
    assert_eq!(step_dirs(&root), ["step-5", "step-10", "step-15"]);
    dir
}

/// Resume `dir` (its latest good checkpoint) up to epoch 4; returns the final global step and
/// the number of steps that ran.
fn resume_to_epoch_4(dir: &Path) -> (u64, u64) {
    let probe = Probe::default();
    let report = trainer(dir, 4)
        .auto_resume(true)
        .callbacks((ModelSaver::new(5), probe.clone()))
        .train(step_fn)
        .unwrap();
    assert_eq!(report.outcome, Outcome::Finished);
    (report.counters.global_step(), probe.steps())
}

#[test]
fn a_truncated_file_is_named_and_the_checkpoint_before_it_is_resumed_from() {
    let dir = three_epochs("truncated");
    let root = dir.join("checkpoints");
    let model = root.join("step-15/model.bpk");
    let full = file_len(&model);
    let file = std::fs::OpenOptions::new().write(true).open(&model).unwrap();
    file.set_len(full / 2).unwrap();
    drop(file);

    let error = Checkpoint::read(root.join("step-15")).unwrap_err();
    let text = error.to_string();
    assert!(matches!(error, Error::Checkpoint(CheckpointError::Damaged { .. })), "{error:?}");
    assert!(text.contains(&root.join("step-15").display().to_string()), "{text}");
    assert!(text.contains("incomplete or corrupt"), "{text}");
    assert!(
        text.contains(&format!("model.bpk is {} bytes long, the manifest says {full}", full / 2)),
        "{text}"
    );
    // The others are intact.
    assert_eq!(Checkpoint::read(root.join("step-10")).unwrap().global_step(), 10);

    let latest = Checkpoint::latest(&dir).unwrap().expect("a checkpoint");
    assert_eq!(latest.global_step(), 10);
    assert_eq!(latest.dir(), root.join("step-10"));
    assert_eq!(latest.epoch_num(), 2);

    // Resumed from step-10: epochs 3 and 4 run again (10 steps), ending at step 20.
    let (global_step, steps) = resume_to_epoch_4(&dir);
    assert_eq!((global_step, steps), (20, 10));
    // The stale step-15 is set aside as it was, not deleted; a new step-15 replaced it.
    let abandoned = root.join("step-15.abandoned");
    assert!(abandoned.is_dir(), "{:?}", entries(&root));
    assert_eq!(file_len(&abandoned.join("model.bpk")), full / 2);
    assert_eq!(step_dirs(&root), ["step-5", "step-10", "step-15", "step-20"]);
    assert_eq!(Checkpoint::read(root.join("step-15")).unwrap().global_step(), 15);
    assert_eq!(Checkpoint::latest(&dir).unwrap().unwrap().global_step(), 20);
}

#[test]
fn a_flipped_byte_fails_the_checksum_and_the_checkpoint_before_it_is_used() {
    let dir = three_epochs("flipped");
    let root = dir.join("checkpoints");
    flip_byte(&root.join("step-15/optimizer.bpk"), None, 0x10);

    let error = Checkpoint::read(root.join("step-15")).unwrap_err();
    let text = error.to_string();
    assert!(matches!(error, Error::Checkpoint(CheckpointError::Damaged { .. })), "{error:?}");
    assert!(text.contains(&root.join("step-15").display().to_string()), "{text}");
    assert!(text.contains("optimizer.bpk fails its checksum (CRC-32C"), "{text}");
    assert_eq!(Checkpoint::latest(&root).unwrap().unwrap().global_step(), 10);

    let (global_step, steps) = resume_to_epoch_4(&dir);
    assert_eq!((global_step, steps), (20, 10));
    assert!(root.join("step-15.abandoned").is_dir(), "{:?}", entries(&root));

    // The manifest itself: a flipped byte in the newest checkpoint's manifest is detected too.
    let manifest = root.join("step-20/manifest.json");
    flip_byte(&manifest, None, 0x01);
    let error = Checkpoint::read(root.join("step-20")).unwrap_err();
    let text = error.to_string();
    assert!(matches!(error, Error::Checkpoint(CheckpointError::Damaged { .. })), "{error:?}");
    assert!(text.contains(&root.join("step-20").display().to_string()), "{text}");
    assert!(text.contains("incomplete or corrupt"), "{text}");
    let latest = Checkpoint::latest(&dir).unwrap().unwrap();
    assert_eq!(latest.dir(), root.join("step-15"));
    assert_eq!(latest.global_step(), 15);
}

#[test]
fn when_every_checkpoint_is_corrupt_resuming_is_an_error_naming_each() {
    let dir = scratch_dir("all-corrupt");
    trainer(&dir, 2).callbacks(ModelSaver::new(5)).train(step_fn).unwrap();
    let root = dir.join("checkpoints");
    assert_eq!(step_dirs(&root), ["step-5", "step-10"]);
    std::fs::remove_file(root.join("step-5/model.bpk")).unwrap();
    flip_byte(&root.join("step-10/trainer.json"), None, 0x01);

    for auto in [false, true] {
        let probe = Probe::default();
        let builder = trainer(&dir, 4).callbacks((ModelSaver::new(5), probe.clone()));
        let builder = if auto { builder.auto_resume(true) } else { builder.resume_from(&dir) };
        let error = builder.train(step_fn).expect_err("an error").error;
        let text = error.to_string();
        assert!(matches!(error, Error::Checkpoint(CheckpointError::Damaged { .. })), "{error:?}");
        assert!(text.contains(&format!("no complete checkpoint in {}", root.display())), "{text}");
        assert!(text.contains(&root.join("step-10").display().to_string()), "{text}");
        assert!(text.contains("trainer.json fails its checksum"), "{text}");
        assert!(text.contains(&root.join("step-5").display().to_string()), "{text}");
        assert!(text.contains("model.bpk: No such file or directory"), "{text}");
        assert_eq!(probe.steps(), 0, "auto = {auto}");
        // Nothing was set aside or written.
        assert_eq!(entries(&root), ["index.json", "step-10", "step-5"]);
    }

    // resume_from a directory without any checkpoint is an error naming it.
    let empty = scratch_dir("no-checkpoint");
    let probe = Probe::default();
    let error = trainer(&empty, 2)
        .resume_from(&empty)
        .callbacks((ModelSaver::new(5), probe.clone()))
        .train(step_fn)
        .expect_err("an error")
        .error;
    assert!(
        matches!(&error, Error::Checkpoint(CheckpointError::NotFound { dir }) if *dir == empty),
        "{error:?}"
    );
    assert_eq!(error.to_string(), format!("no checkpoint to resume from in {}", empty.display()));
    assert_eq!(probe.steps(), 0);

    // auto_resume without any checkpoint starts afresh.
    let probe = Probe::default();
    probe.start.store(u64::MAX, Ordering::SeqCst);
    let report = trainer(&empty, 2)
        .auto_resume(true)
        .callbacks((ModelSaver::new(5), probe.clone()))
        .train(step_fn)
        .unwrap();
    assert_eq!(probe.start(), 0);
    assert_eq!(probe.steps(), 10);
    assert_eq!(report.counters.global_step(), 10);
    assert_eq!(step_dirs(&empty.join("checkpoints")), ["step-5", "step-10"]);
}

#[test]
fn an_unwritable_log_directory_fails_before_any_step_naming_the_path() {
    // We run as root: permissions do not stop writes, a regular file in the path does.
    let scratch = scratch_dir("unwritable");
    std::fs::write(scratch.join("file"), b"not a directory").unwrap();
    let log = scratch.join("file/log");
    let probe = Probe::default();
    let error = trainer(&log, 2)
        .callbacks((ModelSaver::new(5), probe.clone()))
        .train(step_fn)
        .expect_err("an error")
        .error;
    assert_eq!(probe.steps(), 0);
    match &error {
        Error::Io { path, source } => {
            assert_eq!(path, &log);
            assert_eq!(source.raw_os_error(), Some(20), "ENOTDIR: {source}");
        }
        other => panic!("expected Error::Io, got {other:?}"),
    }
    assert!(error.to_string().starts_with(&format!("{}: ", log.display())), "{error}");

    // The log directory is fine but its `checkpoints` is a regular file: ModelSaver's setup fails.
    let log = scratch_dir("checkpoints-is-a-file");
    let file = log.join("checkpoints");
    std::fs::write(&file, b"not a directory").unwrap();
    let probe = Probe::default();
    let error = trainer(&log, 2)
        .callbacks((ModelSaver::new(5), probe.clone()))
        .train(step_fn)
        .expect_err("an error")
        .error;
    assert_eq!(probe.steps(), 0);
    let text = error.to_string();
    match &error {
        Error::Callback { callback, event, source } => {
            assert_eq!((callback.as_str(), *event), ("ModelSaver", "setup"));
            assert!(matches!(**source, Error::Io { ref path, .. } if path == &file), "{source:?}");
        }
        other => panic!("expected Error::Callback, got {other:?}"),
    }
    assert!(text.contains("callback `ModelSaver` failed in setup"), "{text}");
    assert!(text.contains(&file.display().to_string()), "{text}");
    assert_eq!(std::fs::read(&file).unwrap(), b"not a directory");
}

/// A tmpfs mounted for the life of the guard.
struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    fn mount(dir: &Path, kib: u64) -> Result<Tmpfs, String> {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        let output = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(dir)
            .output()
            .map_err(|e| e.to_string())?;
        if output.status.success() {
            Ok(Tmpfs { dir: dir.to_path_buf() })
        } else {
            Err(format!("{}: {}", output.status, String::from_utf8_lossy(&output.stderr).trim()))
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let status = Command::new("umount").arg(&self.dir).status();
        if !status.as_ref().is_ok_and(|s| s.success()) {
            eprintln!("warning: could not unmount {}: {status:?}", self.dir.display());
        }
    }
}

/// 5 batches of 4 points of 64 features to 64 targets.
fn wide_data(device: &Device) -> Vec<Batch> {
    (0..STEPS)
        .map(|b| {
            let xs: Vec<f32> = (0..4 * 64).map(|i| ((b * 256 + i) as f32 * 0.37).sin()).collect();
            let ys: Vec<f32> = (0..4 * 64).map(|i| ((b * 256 + i) as f32 * 0.11).cos()).collect();
            (
                Tensor::from_data(TensorData::new(xs, [4, 64]), device),
                Tensor::from_data(TensorData::new(ys, [4, 64]), device),
            )
        })
        .collect()
}

fn wide_trainer(dir: &Path, max_epoch: u64) -> Trainer<Linear, Vec<Batch>> {
    let device = burn_stoker::device::cpu();
    Trainer::new(LinearConfig::new(64, 64).init(&device), AdamConfig::new().init(), wide_data(&device))
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .max_epoch(max_epoch)
        .log_dir(dir)
}

/// The 4 KiB pages a checkpoint's files take on a tmpfs.
fn pages(dir: &Path) -> u64 {
    entries(dir).iter().map(|f| file_len(&dir.join(f)).div_ceil(4096)).sum()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The 4 KiB pages that step-5, step-10 and step-15 of the 64x64 model take, from a run on the
/// ordinary disk.
fn wide_checkpoint_pages() -> [u64; 3] {
    let reference = scratch_dir("full-disk-reference");
    wide_trainer(&reference, 3).callbacks(ModelSaver::new(100)).train(step_fn).unwrap();
    let pages = ["step-5", "step-10", "step-15"].map(|n| pages(&reference.join("checkpoints").join(n)));
    assert!(pages.iter().all(|&p| p >= 10), "a checkpoint of the 64x64 model takes {pages:?} pages");
    pages
}

/// The environment variable that lets the full-disk tests pass without running where no tmpfs
/// can be mounted (not root, a container without `CAP_SYS_ADMIN`): `STOKER_SKIP_TMPFS=1`.
const SKIP_TMPFS: &str = "STOKER_SKIP_TMPFS";

/// Trains the 64x64 model for 4 epochs, saving every epoch, on a tmpfs of `kib` KiB; returns the
/// guard, the log directory, the error and the steps run. When the tmpfs cannot be mounted the
/// test fails, unless [`SKIP_TMPFS`] is `1` (then `None`, after saying so).
fn train_on_tmpfs(name: &str, kib: u64) -> Option<(Tmpfs, PathBuf, Error, u64)> {
    train_on_tmpfs_at(&scratch_dir(name).join("mnt"), kib)
}

fn train_on_tmpfs_at(mount_point: &Path, kib: u64) -> Option<(Tmpfs, PathBuf, Error, u64)> {
    // Plus one page for the run's lock file (`LOG_DIR/.lock`, a few bytes).
    let tmpfs = tmpfs_or_skip(mount_point, Tmpfs::mount(mount_point, kib + 4), std::env::var_os(SKIP_TMPFS))?;
    let log = tmpfs.dir.join("log");
    let probe = Probe::default();
    let error = wide_trainer(&log, 4)
        .callbacks((ModelSaver::new(100).on_write_error(OnWriteError::Fail), probe.clone()))
        .train(step_fn)
        .expect_err("the disk fills up")
        .error;
    Some((tmpfs, log, error, probe.steps()))
}

#[test]
fn a_full_disk_is_logged_and_training_goes_on_by_default_keeping_the_earlier_checkpoints() {
    // Room for step-5, step-10, the index (and its temporary copy) and half of step-15: step-15
    // and step-20 cannot be written.
    let [first, second, third] = wide_checkpoint_pages();
    let mount_point = scratch_dir("full-disk-goes-on").join("mnt");
    let kib = 4 * (first + second + 2 + third / 2);
    let Some(tmpfs) =
        tmpfs_or_skip(&mount_point, Tmpfs::mount(&mount_point, kib + 4), std::env::var_os(SKIP_TMPFS))
    else {
        return;
    };
    let log = tmpfs.dir.join("log");
    let probe = Probe::default();
    // tensorpack's ModelSaver: "Exception in ModelSaver!", and the run goes on.
    let report = wide_trainer(&log, 4)
        .callbacks((ModelSaver::new(100), probe.clone()))
        .train(step_fn)
        .expect("a checkpoint that cannot be written does not end the run");
    assert_eq!(report.outcome, Outcome::Finished);
    assert_eq!(probe.steps(), 20);
    let root = log.join("checkpoints");
    // The earlier checkpoints, intact; the latest is the last complete one; nothing half-written.
    assert_eq!(tmp_leftovers(&tmpfs.dir), Vec::<PathBuf>::new());
    assert_eq!(entries(&root), ["index.json", "step-10", "step-5"]);
    assert_eq!(read_json(&root.join("index.json"))["latest"], "step-10");
    assert_eq!(Checkpoint::latest(&log).unwrap().unwrap().global_step(), 10);
}

/// The mounted tmpfs; or, when mounting failed, a panic that says why and how to opt out, or
/// `None` when `skip` (the value of [`SKIP_TMPFS`]) is `1`. A full-disk test runs or fails: it
/// never passes without running unless someone asked for it.
fn tmpfs_or_skip(
    mount_point: &Path,
    mounted: Result<Tmpfs, String>,
    skip: Option<std::ffi::OsString>,
) -> Option<Tmpfs> {
    match mounted {
        Ok(tmpfs) => Some(tmpfs),
        Err(e) if skip.as_deref() == Some(std::ffi::OsStr::new("1")) => {
            eprintln!("skipped ({SKIP_TMPFS}=1): cannot mount a tmpfs on {}: {e}", mount_point.display());
            None
        }
        Err(e) => panic!(
            "cannot mount a tmpfs on {}: {e}; the full-disk tests need one (run them as root, or with CAP_SYS_ADMIN), or set {SKIP_TMPFS}=1 to skip them knowingly",
            mount_point.display()
        ),
    }
}

#[test]
fn checkpoint_full_disk_tests_fail_when_no_tmpfs_can_be_mounted() {
    // A mount point below a regular file cannot be created, so the mount fails.
    let dir = scratch_dir("no-tmpfs");
    std::fs::write(dir.join("file"), b"not a directory").unwrap();
    let mount_point = dir.join("file").join("mnt");
    // The environment's STOKER_SKIP_TMPFS is left out: this is what happens without it.
    let attempt =
        std::panic::catch_unwind(|| tmpfs_or_skip(&mount_point, Tmpfs::mount(&mount_point, 64), None));
    let message = match attempt {
        Ok(_) => panic!("a full-disk test must fail, not pass, when its tmpfs cannot be mounted"),
        Err(panic) => panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default(),
    };
    assert!(message.contains("cannot mount a tmpfs"), "{message}");
    assert!(message.contains(&dir.join("file").join("mnt").display().to_string()), "{message}");
    assert!(message.contains("STOKER_SKIP_TMPFS=1"), "{message}");

    // Skipping is a choice made with STOKER_SKIP_TMPFS=1, and only with that value.
    let failed = || Err("mount: permission denied".to_string());
    assert!(tmpfs_or_skip(&mount_point, failed(), Some("1".into())).is_none());
    for value in [None, Some("0".into()), Some("".into())] {
        let attempt = std::panic::catch_unwind(|| tmpfs_or_skip(&mount_point, failed(), value.clone()));
        assert!(attempt.is_err(), "{SKIP_TMPFS}={value:?} does not skip");
    }
}

#[test]
fn a_full_disk_fails_the_checkpoint_and_leaves_the_earlier_ones_intact() {
    // Room for step-5, step-10, the index (and its temporary copy) and half of step-15.
    let [first, second, third] = wide_checkpoint_pages();
    let Some((tmpfs, log, error, steps)) = train_on_tmpfs("full-disk", 4 * (first + second + 2 + third / 2))
    else {
        return;
    };
    let root = log.join("checkpoints");
    let text = error.to_string();
    assert!(matches!(error, Error::Checkpoint(CheckpointError::Write { source: Some(_), .. })), "{error:?}");
    assert!(text.contains("writing checkpoint step-15 failed"), "{text}");
    assert!(text.contains(&format!("writing into {}", root.display())), "{text}");
    assert!(text.contains("No space left on device"), "{text}");
    assert!(text.contains("the checkpoints written before are intact"), "{text}");
    // Training stopped at the checkpoint that failed.
    assert_eq!(steps, 15);

    // No half-written checkpoint (or index) is left behind.
    assert_eq!(tmp_leftovers(&tmpfs.dir), Vec::<PathBuf>::new());
    assert_eq!(entries(&root), ["index.json", "step-10", "step-5"]);
    assert_eq!(read_json(&root.join("index.json"))["latest"], "step-10");
    for (name, step) in [("step-5", 5), ("step-10", 10)] {
        assert_eq!(Checkpoint::read(root.join(name)).unwrap().global_step(), step);
    }
    assert_eq!(Checkpoint::latest(&log).unwrap().unwrap().global_step(), 10);

    // Resume from the last complete checkpoint, on a copy with room to write.
    let copy = scratch_dir("full-disk-copy");
    copy_dir(&log, &copy);
    drop(tmpfs);
    let probe = Probe::default();
    let report = wide_trainer(&copy, 4)
        .auto_resume(true)
        .callbacks((ModelSaver::new(100), probe.clone()))
        .train(step_fn);
    let report = report.unwrap();
    assert_eq!(probe.start(), 10);
    assert_eq!(probe.steps(), 10);
    assert_eq!(report.counters.global_step(), 20);
    assert_eq!(step_dirs(&copy.join("checkpoints")), ["step-5", "step-10", "step-15", "step-20"]);
}

#[test]
fn a_full_disk_while_writing_the_index_keeps_the_old_index_and_the_new_checkpoint() {
    // Room for step-5, step-10, the index and step-15, not for the index's temporary copy.
    let [first, second, third] = wide_checkpoint_pages();
    let Some((tmpfs, log, error, steps)) = train_on_tmpfs("full-index", 4 * (first + second + 1 + third))
    else {
        return;
    };
    let root = log.join("checkpoints");
    let text = error.to_string();
    assert!(matches!(error, Error::Checkpoint(CheckpointError::Write { source: Some(_), .. })), "{error:?}");
    assert!(text.contains("checkpoint step-15 is complete, but updating"), "{text}");
    assert!(text.contains(&root.join("index.json").display().to_string()), "{text}");
    assert!(text.contains("No space left on device"), "{text}");
    assert_eq!(steps, 15);
    // The index was replaced atomically or not at all: it still names step-10.
    assert_eq!(read_json(&root.join("index.json"))["latest"], "step-10");
    // step-15 itself was complete before the index was written: it is the latest checkpoint.
    assert_eq!(step_dirs(&root), ["step-5", "step-10", "step-15"]);
    assert_eq!(Checkpoint::read(root.join("step-15")).unwrap().global_step(), 15);
    assert_eq!(Checkpoint::latest(&log).unwrap().unwrap().global_step(), 15);
    // No half-written checkpoint folder.
    assert_eq!(tmp_leftovers(&tmpfs.dir), Vec::<PathBuf>::new(), "no temporary folder or file is left");
}

/// Trains 3 epochs saving every step, with a loss that is NaN from global step 7 (from step
/// `nan_from` + 1) on: training stops cleanly at the first NaN.
fn nan_run<K, C: Callbacks<Linear, K>>(dir: &Path, nan_from: u64, callbacks: C) -> TrainReport<Linear> {
    trainer(dir, 3)
        .callbacks(callbacks)
        .train(move |model: &Linear, batch: Batch, step: &mut Step<'_>| {
            let loss = mse(model, batch);
            // `global_step` counts the steps before this one.
            if step.counters().global_step() >= nan_from { loss.mul_scalar(f32::NAN) } else { loss }
        })
        .expect("a NaN loss stops training without an error")
}

/// The outcome of a run stopped by a non-finite number: (reason, global step, checkpoint).
fn non_finite(report: &TrainReport<Linear>) -> (&str, u64, Option<&Path>) {
    match &report.outcome {
        Outcome::NonFinite { reason, global_step, checkpoint } => {
            (reason.as_str(), *global_step, checkpoint.as_deref())
        }
        other => panic!("expected Outcome::NonFinite, got {other:?}"),
    }
}

fn every_step_saver() -> PeriodicTrigger<ModelSaver> {
    PeriodicTrigger::new(ModelSaver::new(100)).every_k_steps(1)
}

/// Step 6 is the latest checkpoint, with finite weights; there is no step-7.
fn assert_saved_up_to_step_6(dir: &Path) {
    let root = dir.join("checkpoints");
    assert_eq!(step_dirs(&root), ["step-1", "step-2", "step-3", "step-4", "step-5", "step-6"]);
    assert_eq!(tmp_leftovers(&root), Vec::<PathBuf>::new());
    let latest = Checkpoint::latest(dir).unwrap().unwrap();
    assert_eq!(latest.global_step(), 6);
    assert_eq!(read_json(&root.join("index.json"))["latest"], "step-6");
    let weights = checkpoint_weights(tiny_model(&burn_stoker::device::cpu()), &root.join("step-6"));
    assert!(!weights.is_empty());
    assert!(weights.iter().flatten().all(|w| w.is_finite()), "{weights:?}");
}

#[test]
fn nan_loss_at_checkpoint_time_stops_cleanly_and_is_never_checkpointed() {
    let dir = scratch_dir("nan");
    let probe = Probe::default();
    let report = nan_run(&dir, 6, (every_step_saver(), probe.clone()));
    let last = dir.join("checkpoints/step-6");
    assert_eq!(non_finite(&report), ("the loss is NaN at global step 7 (epoch 2)", 7, Some(last.as_path())));
    assert_eq!(report.counters.global_step(), 7);
    assert_eq!(probe.steps(), 7);
    assert_saved_up_to_step_6(&dir);

    // NaN from the first step: nothing was ever saved.
    let dir = scratch_dir("nan-first");
    let report = nan_run(&dir, 0, every_step_saver());
    assert_eq!(non_finite(&report), ("the loss is NaN at global step 1 (epoch 1)", 1, None));
    assert_eq!(step_dirs(&dir.join("checkpoints")), Vec::<String>::new());
}

#[test]
fn checkpoint_reads_the_nan_check_included_are_counted_where_they_happen() {
    // Nobody fetches: the report's own count of fetch transfers is 0, and a run without a
    // checkpoint reads nothing from the device.
    let (report, reads) = count_reads(|| trainer(&scratch_dir("reads-none"), 1).train(step_fn).unwrap());
    assert_eq!((report.fetch_transfers, reads), (0, 0));
    // One checkpoint, at the end of the epoch: the NaN check reads the loss and the count of
    // non-finite weights (2 reads), and serializing the model and the optimizer's state reads
    // each of their tensors. The fetch count cannot see any of them; the read count does.
    let (report, reads) = count_reads(|| {
        trainer(&scratch_dir("reads-checkpoint"), 1).callbacks(ModelSaver::new(5)).train(step_fn).unwrap()
    });
    assert_eq!(report.fetch_transfers, 0);
    let (_, model_reads) =
        count_reads(|| burn::module::Module::into_record(report.model.clone()).into_bytes().unwrap());
    assert_eq!(model_reads, 2, "the weight and the bias");
    assert_eq!(reads, 2 + model_reads + OPTIMIZER_READS, "device-to-host reads of one checkpoint");
}

/// Reads that serializing Adam's state for the tiny model makes (measured: 4, the first and
/// second moments of the weight and of the bias).
const OPTIMIZER_READS: u64 = 4;

/// Makes every weight of the model NaN in `trigger_step` of global step `at`: after the step
/// computed its (finite) loss, before the checkpoint of that step.
struct PoisonWeightsAt(u64);

impl Callback<Linear> for PoisonWeightsAt {
    fn trigger_step(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        if ctx.global_step() == self.0 {
            let model = ctx.model_mut();
            model.weight = model.weight.clone().map(|w| w.mul_scalar(f32::NAN));
        }
        Ok(())
    }
}

#[test]
fn nan_weights_with_a_finite_loss_are_never_checkpointed() {
    let dir = scratch_dir("nan-weights");
    let probe = Probe::default();
    // The poison runs before the saver (registration order): the checkpoint of step 7 would hold
    // NaN weights, although step 7's loss was finite.
    let report = trainer(&dir, 3)
        .callbacks((PoisonWeightsAt(7), every_step_saver(), probe.clone()))
        .train(step_fn)
        .expect("NaN weights stop training without an error");
    // The reason names the weights, not the loss (which was finite), and the last good
    // checkpoint stays the latest.
    let last = dir.join("checkpoints/step-6");
    assert_eq!(
        non_finite(&report),
        ("2 weights are not finite at global step 7 (epoch 2)", 7, Some(last.as_path()))
    );
    assert_eq!(probe.steps(), 7);
    assert_saved_up_to_step_6(&dir);
}

#[test]
fn nan_loss_with_terminate_on_nan_stops_at_the_nan_step_before_its_checkpoint() {
    let dir = scratch_dir("terminate-on-nan");
    let probe = Probe::default();
    let report = nan_run(&dir, 6, (every_step_saver(), TerminateOnNaN::new(), probe.clone()));
    let last = dir.join("checkpoints/step-6");
    assert_eq!(non_finite(&report), ("the loss is NaN at global step 7 (epoch 2)", 7, Some(last.as_path())));
    // A stop lets the rest of the step's events run (the probe comes after TerminateOnNaN);
    // no step after it.
    assert_eq!(probe.steps(), 7);
    assert_eq!(report.counters.global_step(), 7);
    assert_saved_up_to_step_6(&dir);
}

/// Puts the scalar `val` at the end of each epoch, from a fixed list (epoch 1 first).
struct PutVal(&'static [f64]);

impl<M> Callback<M> for PutVal {
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        let value = self.0[ctx.epoch_num() as usize - 1];
        ctx.monitors().put_scalar("val", value);
        Ok(())
    }
}

const VALS: [f64; 6] = [5.0, 3.0, 4.0, 1.0, 2.0, 1.5];

#[test]
fn min_and_max_savers_keep_the_best_across_a_resume() {
    let dir = scratch_dir("best-savers");
    let root = dir.join("checkpoints");
    let savers = || (PutVal(&VALS), ModelSaver::new(10), MinSaver::new("val"), MaxSaver::new("val"));
    trainer(&dir, 5).callbacks(savers()).train(step_fn).unwrap();

    let min = Checkpoint::read(root.join("min-val")).unwrap();
    let max = Checkpoint::read(root.join("max-val")).unwrap();
    assert_eq!((min.epoch_num(), min.global_step()), (4, 20));
    assert_eq!((max.epoch_num(), max.global_step()), (1, 5));
    // Each copy is the checkpoint of its epoch, byte for byte.
    assert_eq!(min.model_bytes(), Checkpoint::read(root.join("step-20")).unwrap().model_bytes());
    assert_eq!(max.model_bytes(), Checkpoint::read(root.join("step-5")).unwrap().model_bytes());
    let latest = Checkpoint::latest(&dir).unwrap().unwrap();
    assert_eq!(latest.global_step(), 25);
    assert_eq!(latest.callback_state("MinSaver(val)"), Some(&serde_json::json!({ "best": 1.0 })));
    assert_eq!(latest.callback_state("MaxSaver(val)"), Some(&serde_json::json!({ "best": 5.0 })));

    // Resume for epoch 6, whose 1.5 beats no best: the copies stay those of epochs 4 and 1.
    trainer(&dir, 6).auto_resume(true).callbacks(savers()).train(step_fn).unwrap();
    let latest = Checkpoint::latest(&dir).unwrap().unwrap();
    assert_eq!(latest.global_step(), 30);
    assert_eq!(latest.callback_state("MinSaver(val)"), Some(&serde_json::json!({ "best": 1.0 })));
    let min = Checkpoint::read(root.join("min-val")).unwrap();
    let max = Checkpoint::read(root.join("max-val")).unwrap();
    assert_eq!((min.epoch_num(), min.global_step()), (4, 20));
    assert_eq!((max.epoch_num(), max.global_step()), (1, 5));
    assert_eq!(tmp_leftovers(&root), Vec::<PathBuf>::new());
}

/// The values of `val` for the named savers' test (epoch 1 first).
const NAMED_VALS: [f64; 6] = [5.0, 3.0, 1.0, 2.0, 4.0, 1.5];

/// Puts `val` at each trigger, before every MinSaver (however named): the DSL's order target
/// designates `MinSaver(val)` and `MinSaver(even)` alike.
#[callback(on = trigger)]
#[order(before = MinSaver)]
fn put_named_val<M>(ctx: &mut Context<'_, M>) {
    let value = NAMED_VALS[ctx.epoch_num() as usize - 1];
    ctx.monitors().put_scalar("val", value);
}

/// Two MinSavers of one statistic: the best of every epoch, and (named `even`) the best of the
/// even epochs, in a `#[derive(Callbacks)]` struct; registered before the callback that puts
/// the statistic, which its order constraint moves ahead of both.
#[derive(Callbacks)]
struct NamedSavers {
    saver: ModelSaver,
    best: MinSaver,
    even: Named<PeriodicTrigger<MinSaver>>,
    put: PutNamedVal,
}

fn named_savers() -> NamedSavers {
    NamedSavers {
        saver: ModelSaver::new(10),
        best: MinSaver::new("val"),
        even: PeriodicTrigger::new(MinSaver::new("val").copy_name("min-val-even"))
            .every_k_epochs(2)
            .named("even"),
        put: PutNamedVal,
    }
}

#[test]
fn named_savers_of_one_statistic_keep_their_state_apart_across_a_resume() {
    let dir = scratch_dir("named-savers");
    let root = dir.join("checkpoints");
    trainer(&dir, 5).callbacks(named_savers()).train(step_fn).unwrap();
    // Best of all (5, 3, 1, 2, 4): 1.0 in epoch 3; of the even epochs (3, 2): 2.0 in epoch 4.
    let latest = Checkpoint::latest(&dir).unwrap().unwrap();
    assert_eq!(latest.global_step(), 25);
    assert_eq!(latest.callback_state("MinSaver(val)"), Some(&serde_json::json!({ "best": 1.0 })));
    assert_eq!(latest.callback_state("MinSaver(even)"), Some(&serde_json::json!({ "best": 2.0 })));
    let copy = |name: &str| {
        let c = Checkpoint::read(root.join(name)).unwrap();
        (c.epoch_num(), c.global_step())
    };
    assert_eq!((copy("min-val"), copy("min-val-even")), ((3, 15), (4, 20)));

    // Epoch 6 puts 1.5: better than the even epochs' 2.0, not than 1.0. Each saver resumed with
    // its own best, so only the even copy moves.
    trainer(&dir, 6).auto_resume(true).callbacks(named_savers()).train(step_fn).unwrap();
    let latest = Checkpoint::latest(&dir).unwrap().unwrap();
    assert_eq!(latest.global_step(), 30);
    assert_eq!(latest.callback_state("MinSaver(val)"), Some(&serde_json::json!({ "best": 1.0 })));
    assert_eq!(latest.callback_state("MinSaver(even)"), Some(&serde_json::json!({ "best": 1.5 })));
    assert_eq!((copy("min-val"), copy("min-val-even")), ((3, 15), (6, 30)));
}

/// Sleeps at the end of each epoch.
struct Sleep(Duration);

impl<M> Callback<M> for Sleep {
    fn trigger_epoch(&mut self, _ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        std::thread::sleep(self.0);
        Ok(())
    }
}

fn manifest_time(dir: &Path) -> f64 {
    read_json(&dir.join("manifest.json"))["time"].as_f64().unwrap()
}

/// Moves a manual clock: 7 minutes in `before_train`, then 20 minutes at the end of each epoch
/// (before the savers' trigger), so that epoch `e`'s checkpoint is written `7 + 20 e` minutes
/// after the start: 27, 47, 67, 87, 107, 127, 147, 167.
struct Minutes(ManualClock);

#[callback]
#[order(before = ModelSaver)]
impl Minutes {
    #[on(before_train)]
    fn start(&mut self) {
        self.0.advance(Duration::from_secs(7 * 60));
    }
    #[on(trigger_epoch)]
    fn epoch(&mut self) {
        self.0.advance(Duration::from_secs(20 * 60));
    }
}

/// Train 8 epochs (5 steps each) with `saver` on a manual clock moved by [`Minutes`]; the
/// checkpoint folders left in `checkpoints/` and the index's list of those kept forever.
fn hourly_run(
    name: &str,
    saver: impl FnOnce(ModelSaver) -> ModelSaver,
) -> (PathBuf, Vec<String>, Vec<String>) {
    let dir = scratch_dir(name);
    let root = dir.join("checkpoints");
    let clock = ManualClock::new();
    let saver = saver(ModelSaver::new(1)).clock(clock.clone());
    trainer(&dir, 8).callbacks((Minutes(clock), saver)).train(step_fn).unwrap();
    let index = read_json(&root.join("index.json"));
    assert_eq!(index["latest"], "step-40");
    assert_eq!(names(&index["checkpoints"]), step_dirs(&root), "the index lists what is on disk");
    (dir, step_dirs(&root), names(&index["kept_forever"]))
}

#[test]
fn checkpoint_keep_every_n_hours_is_half_an_hour_by_default_with_tensorflows_rule() {
    // tensorpack's default, 0.5 hours: the threshold starts 30 minutes after the start and moves
    // 30 minutes on with each checkpoint kept. Pushed out by the next one (max_to_keep 1):
    // 27 > 30? no; 47 > 30 kept (next 60); 67 > 60 kept (90); 87 > 90? no; 107 > 90 kept (120);
    // 127 > 120 kept (150); 147 > 150? no. Kept: epochs 2, 3, 5, 6.
    let (dir, on_disk, kept) = hourly_run("keep-default", |saver| saver);
    assert_eq!(kept, ["step-10", "step-15", "step-25", "step-30"]);
    assert_eq!(on_disk, ["step-10", "step-15", "step-25", "step-30", "step-40"]);
    // Each written when its saver's clock says: 20 minutes apart, from the manifests.
    let root = dir.join("checkpoints");
    let minutes =
        |name: &str| (manifest_time(&root.join(name)) - manifest_time(&root.join("step-10"))) / 60.0;
    for (name, expected) in [("step-15", 20.0), ("step-25", 60.0), ("step-30", 80.0), ("step-40", 120.0)] {
        assert!((minutes(name) - expected).abs() < 1e-3, "{name}: {} minutes after step-10", minutes(name));
    }
    for name in &kept {
        assert!(root.join(name).join("keep").is_file(), "{name} carries its keep mark");
        Checkpoint::read(root.join(name)).unwrap();
    }

    // One hour: thresholds 60, 120, 180. 47 no; 67 > 60 kept (120); 87, 107 no; 127 > 120 kept
    // (180); 147 no.
    let (_, on_disk, kept) = hourly_run("keep-one-hour", |saver| saver.keep_every_n_hours(1.0));
    assert_eq!(kept, ["step-15", "step-30"]);
    assert_eq!(on_disk, ["step-15", "step-30", "step-40"]);

    // Infinity keeps none beyond the most recent (TensorFlow's 10,000 hours).
    let (dir, on_disk, kept) = hourly_run("keep-never", |saver| saver.keep_every_n_hours(f64::INFINITY));
    assert_eq!((on_disk, kept), (vec!["step-40".to_string()], Vec::<String>::new()));
    // The kept marks outlive the index: after a run that keeps, a resumed run without the index
    // and with no hourly keeping still leaves them alone.
    let (dir_kept, _, kept) = hourly_run("keep-marks", |saver| saver);
    std::fs::remove_file(dir_kept.join("checkpoints/index.json")).unwrap();
    trainer(&dir_kept, 9)
        .auto_resume(true)
        .callbacks(ModelSaver::new(1).keep_every_n_hours(f64::INFINITY))
        .train(step_fn)
        .unwrap();
    let index = read_json(&dir_kept.join("checkpoints/index.json"));
    assert_eq!(names(&index["kept_forever"]), kept);
    assert_eq!(
        step_dirs(&dir_kept.join("checkpoints")),
        ["step-10", "step-15", "step-25", "step-30", "step-45"]
    );
    let _ = dir;
}

#[test]
fn checkpoint_keep_every_n_hours_must_be_positive() {
    let error = trainer(&scratch_dir("keep-zero"), 1)
        .callbacks(ModelSaver::new(1).keep_every_n_hours(0.0))
        .train(step_fn)
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "callback `ModelSaver` failed in setup: ModelSaver: keep_every_n_hours must be positive, not 0"
    );
}

#[test]
fn checkpoint_two_model_savers_write_into_their_own_folders() {
    let dir = scratch_dir("two-savers");
    let root = dir.join("checkpoints");
    let archive_dir = dir.join("archive");
    let savers = || {
        (
            ModelSaver::new(2),
            PeriodicTrigger::new(ModelSaver::new(10).checkpoint_dir(&archive_dir))
                .every_k_epochs(2)
                .named("archive"),
        )
    };
    trainer(&dir, 5).callbacks(savers()).train(step_fn).unwrap();
    // Every epoch, the last 2; every second epoch, all of them, in the archive.
    assert_eq!(step_dirs(&root), ["step-20", "step-25"]);
    assert_eq!(step_dirs(&archive_dir), ["step-10", "step-20"]);
    assert_eq!(read_json(&archive_dir.join("index.json"))["latest"], "step-20");
    assert_eq!(read_json(&root.join("index.json"))["latest"], "step-25");
    // One content, written twice.
    assert_eq!(
        Checkpoint::read(archive_dir.join("step-20")).unwrap().model_bytes(),
        Checkpoint::read(root.join("step-20")).unwrap().model_bytes()
    );
    // Resume from the archive (epoch 5 again): the default saver writes step-25 anew, the
    // archive is not due.
    let probe = Probe::default();
    trainer(&dir, 5).resume_from(&archive_dir).callbacks((savers(), probe.clone())).train(step_fn).unwrap();
    assert_eq!((probe.start(), probe.steps()), (20, 5));
    assert_eq!(step_dirs(&root), ["step-20", "step-25"]);
    assert_eq!(step_dirs(&archive_dir), ["step-10", "step-20"]);

    // Two savers in one folder would prune each other's checkpoints: refused at setup.
    let other = scratch_dir("two-savers-one-folder");
    let error = trainer(&other, 1)
        .callbacks((
            ModelSaver::new(2),
            ModelSaver::new(3).checkpoint_dir(other.join("checkpoints")).named("b"),
        ))
        .train(step_fn)
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("callback `ModelSaver(b)` failed in setup: ModelSaver: another ModelSaver of this run writes into ")
            && error.ends_with("give one a folder of its own with .checkpoint_dir(...)"),
        "{error}"
    );
}

#[test]
fn an_altered_manifest_header_fails_the_manifest_checksum() {
    let dir = three_epochs("manifest-header");
    let manifest = dir.join("checkpoints/step-15/manifest.json");
    let mut json = read_json(&manifest);
    json["global_step"] = Json::from(14);
    std::fs::write(&manifest, serde_json::to_vec_pretty(&json).unwrap()).unwrap();
    let error = Checkpoint::read(dir.join("checkpoints/step-15")).unwrap_err().to_string();
    assert!(error.contains("step-15") && error.contains("manifest.json fails its own checksum"), "{error}");
    assert_eq!(Checkpoint::latest(&dir).unwrap().unwrap().global_step(), 10);
}

// ---- issue 15: storage (temporary names, pruning, read errors, the manifest's checksum, the
// `.old` window, copy names) ----

/// The checkpoints' folder of a run of 1 epoch with `ModelSaver::new(5)` and `JsonWriter`, after
/// `prepare` has set up `dir` and `dir/checkpoints` (created empty before it runs); the run
/// writes beside what `prepare` put there (`LogDirPolicy::Keep`).
fn one_epoch_after(name: &str, prepare: impl FnOnce(&Path, &Path)) -> (PathBuf, PathBuf) {
    let dir = scratch_dir(name);
    let root = dir.join("checkpoints");
    std::fs::create_dir_all(&root).unwrap();
    prepare(&dir, &root);
    let report = trainer(&dir, 1)
        .log_dir_policy(burn_stoker::trainer::LogDirPolicy::Keep)
        .callbacks((ModelSaver::new(5), burn_stoker::monitor::JsonWriter))
        .train(step_fn)
        .expect("one epoch");
    assert_eq!(report.counters.global_step(), 5);
    (dir, root)
}

fn is_symlink(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

fn is_regular_file(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file())
}

#[test]
fn checkpoint_temporary_files_have_unique_names_and_never_follow_a_symlink() {
    // Symlinks planted at the names the writers used to use for their temporary files: writing
    // through them would overwrite files outside the log directory.
    let outside = scratch_dir("tmp-symlink-victims");
    let victims = [outside.join("index"), outside.join("stats")];
    for victim in &victims {
        std::fs::write(victim, b"precious").unwrap();
    }
    let (dir, root) = one_epoch_after("tmp-symlinks", |dir, root| {
        std::os::unix::fs::symlink(&victims[0], root.join("index.json.tmp")).unwrap();
        std::os::unix::fs::symlink(&victims[1], dir.join("stats.json.tmp")).unwrap();
    });
    for victim in &victims {
        assert_eq!(std::fs::read(victim).unwrap(), b"precious", "{} was written through", victim.display());
    }
    for file in [root.join("index.json"), dir.join("stats.json")] {
        assert!(is_regular_file(&file), "{} is not a regular file", file.display());
    }
    // Not stoker's: left alone.
    assert!(is_symlink(&root.join("index.json.tmp")));
    assert!(is_symlink(&dir.join("stats.json.tmp")));
    assert_eq!(read_json(&root.join("index.json"))["latest"], "step-5");
}

/// A pid no process can have: above Linux's largest `pid_max` (2^22).
const DEAD_PID: u32 = (1 << 22) + 7;

#[test]
fn checkpoint_leftovers_are_removed_only_when_stoker_left_them_and_their_writer_is_gone() {
    let (_, root) = one_epoch_after("leftovers", |_, root| {
        let make_dir = |name: &str| {
            std::fs::create_dir(root.join(name)).unwrap();
            std::fs::write(root.join(name).join("model.bpk"), b"half").unwrap();
        };
        // A live process's temporaries (pid 1 is always there).
        make_dir("step-7.1-0.tmp");
        std::fs::write(root.join("index.json.1-3.tmp"), b"{").unwrap();
        // A dead process's of this host: removed.
        let host = host_tag();
        make_dir(&format!("step-8.{DEAD_PID}-0-{host}.tmp"));
        std::fs::write(root.join(format!("index.json.{DEAD_PID}-1-{host}.tmp")), b"{").unwrap();
        // An earlier version's (no host: maybe another host's), changed less than a day ago: kept.
        make_dir(&format!("step-6.{DEAD_PID}-0.tmp"));
        std::fs::write(root.join(format!("index.json.{DEAD_PID}-2.tmp")), b"{").unwrap();
        // What an earlier version left (one writer per directory then too).
        make_dir("step-9.tmp");
        make_dir("step-2.deleting");
        // The user's own folders, which merely end like stoker's.
        make_dir("notes.tmp");
        make_dir("scratch.deleting");
    });
    let dead = |name: &str| name.replace("DEAD", &DEAD_PID.to_string());
    assert_eq!(
        entries(&root),
        [
            "index.json".to_string(),
            "index.json.1-3.tmp".into(),
            dead("index.json.DEAD-2.tmp"),
            "notes.tmp".into(),
            "scratch.deleting".into(),
            "step-5".into(),
            dead("step-6.DEAD-0.tmp"),
            "step-7.1-0.tmp".into(),
        ]
    );
}

/// This host as stoker's temporaries name it: the host name, characters other than letters,
/// digits and `-` as `_`, at most 40.
fn host_tag() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is writable for its whole length, which is passed.
    assert_eq!(unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) }, 0);
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let name = String::from_utf8_lossy(&buf[..end]).trim().to_string();
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).take(40).collect()
}

/// Clears the immutable flag of every file under a folder when dropped.
struct Unpin(PathBuf);

impl Drop for Unpin {
    fn drop(&mut self) {
        fn walk(dir: &Path) {
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    walk(&path);
                } else {
                    let _ = Command::new("chattr").arg("-i").arg(&path).status();
                }
            }
        }
        walk(&self.0);
    }
}

#[test]
fn checkpoint_an_old_checkpoint_that_cannot_be_removed_is_a_warning_and_training_goes_on() {
    train_past_an_unremovable_checkpoint(&scratch_dir("undeletable"));
}

/// Train one epoch in `dir` with keep-1, make its checkpoint unremovable (an immutable file),
/// resume for two more epochs, and check that the run finished and set the old one aside.
pub(crate) fn train_past_an_unremovable_checkpoint(dir: &Path) {
    let dir = dir.to_path_buf();
    let root = dir.join("checkpoints");
    trainer(&dir, 1).callbacks(ModelSaver::new(1)).train(step_fn).unwrap();
    // An immutable file stops even root from deleting it (EPERM), as a busy `.nfs*` file or a
    // file of another user does.
    let pinned = root.join("step-5/model.bpk");
    let _unpin = Unpin(root.clone());
    let chattr = Command::new("chattr").arg("+i").arg(&pinned).output().expect("running chattr");
    assert!(
        chattr.status.success(),
        "chattr +i {} failed ({}): this test needs root on a filesystem with immutable files (ext4, xfs, btrfs)",
        pinned.display(),
        String::from_utf8_lossy(&chattr.stderr).trim()
    );
    assert!(std::fs::remove_file(&pinned).is_err(), "{} is still deletable", pinned.display());

    let probe = Probe::default();
    let report = trainer(&dir, 3)
        .auto_resume(true)
        .callbacks((ModelSaver::new(1), probe.clone()))
        .train(step_fn)
        .expect("an old checkpoint that cannot be removed does not stop training");
    assert_eq!(report.outcome, Outcome::Finished);
    assert_eq!((report.counters.global_step(), probe.steps()), (15, 10));
    assert_eq!(step_dirs(&root), ["step-15"]);
    assert_eq!(Checkpoint::latest(&dir).unwrap().unwrap().global_step(), 15);
    let index = read_json(&root.join("index.json"));
    assert_eq!(index["latest"], "step-15");
    assert_eq!(names(&index["checkpoints"]), ["step-15"]);
    // What could not be removed is out of the way, under a name no reader takes for a checkpoint.
    let left: Vec<String> = entries(&root).into_iter().filter(|n| n.ends_with(".deleting")).collect();
    assert_eq!(left.len(), 1, "{:?}", entries(&root));
    assert!(left[0].starts_with("step-5."), "{left:?}");
    assert!(root.join(&left[0]).join("model.bpk").is_file());
}

/// Make `path` a symlink to `/proc/self/mem`, whose read(2) at offset 0 fails with EIO.
fn fail_reads_with_eio(path: &Path) {
    std::fs::remove_file(path).unwrap();
    std::os::unix::fs::symlink("/proc/self/mem", path).unwrap();
    let error = std::fs::read(path).expect_err("reading /proc/self/mem at 0 fails");
    assert_eq!(error.raw_os_error(), Some(libc::EIO), "{error}");
}

#[test]
fn checkpoint_a_read_error_is_not_corruption_it_is_returned_and_nothing_is_set_aside() {
    let dir = three_epochs("read-error");
    let root = dir.join("checkpoints");
    for file in ["model.bpk", "manifest.json"] {
        let path = root.join("step-15").join(file);
        let saved = std::fs::read(&path).unwrap();
        fail_reads_with_eio(&path);
        let check = |error: &Error| {
            let text = error.to_string();
            assert!(
                matches!(error, Error::Checkpoint(CheckpointError::Read { path: read, .. }) if *read == path),
                "{error:?}"
            );
            assert!(text.contains(&path.display().to_string()), "{text}");
            assert!(text.contains("Input/output error"), "{text}");
            assert!(!text.contains("corrupt"), "{text}");
            assert!(text.contains("nothing was set aside"), "{text}");
        };
        check(&Checkpoint::read(root.join("step-15")).unwrap_err());
        check(&Checkpoint::latest(&dir).expect_err("a read error is returned, not skipped"));

        let before = entries(&root);
        let probe = Probe::default();
        let error = trainer(&dir, 4)
            .auto_resume(true)
            .callbacks((ModelSaver::new(5), probe.clone()))
            .train(step_fn)
            .expect_err("resuming fails")
            .error;
        check(&error);
        assert_eq!(probe.steps(), 0);
        assert_eq!(entries(&root), before, "nothing renamed or removed");

        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, saved).unwrap();
        assert_eq!(Checkpoint::latest(&dir).unwrap().unwrap().global_step(), 15);
    }
}

#[test]
fn checkpoint_a_second_rollback_keeps_the_first_abandoned_checkpoint() {
    let dir = three_epochs("second-rollback");
    let root = dir.join("checkpoints");
    let model = root.join("step-15/model.bpk");
    let full = file_len(&model);
    std::fs::OpenOptions::new().write(true).open(&model).unwrap().set_len(full / 2).unwrap();
    assert_eq!(resume_to_epoch_4(&dir), (20, 10));
    assert_eq!(file_len(&root.join("step-15.abandoned/model.bpk")), full / 2);

    // The new step-15 and step-20 are damaged in turn: the next resume goes back to step-10 again.
    flip_byte(&root.join("step-15/optimizer.bpk"), None, 0x10);
    flip_byte(&root.join("step-20/optimizer.bpk"), None, 0x10);
    assert_eq!(resume_to_epoch_4(&dir), (20, 10));
    // The first abandoned step-15 is still there, as it was; the second has a name of its own.
    assert_eq!(file_len(&root.join("step-15.abandoned/model.bpk")), full / 2);
    let abandoned: Vec<String> = entries(&root).into_iter().filter(|n| n.ends_with(".abandoned")).collect();
    assert_eq!(abandoned.len(), 3, "{abandoned:?}");
    assert!(abandoned.contains(&"step-20.abandoned".to_string()), "{abandoned:?}");
    let second = abandoned.iter().find(|n| n.starts_with("step-15.") && *n != "step-15.abandoned");
    let second = root.join(second.expect("a second abandoned step-15"));
    assert_eq!(file_len(&second.join("model.bpk")), full);
    assert!(Checkpoint::read(&second).unwrap_err().to_string().contains("optimizer.bpk fails its checksum"));
    assert_eq!(step_dirs(&root), ["step-5", "step-10", "step-15", "step-20"]);
}

#[test]
fn checkpoint_the_manifest_checksum_covers_its_bytes_as_written() {
    let dir = three_epochs("manifest-bytes");
    let checkpoint = dir.join("checkpoints/step-15");
    let path = checkpoint.join("manifest.json");
    let json = read_json(&path);
    // The manifest with its keys in another order, as a build where some crate enables
    // serde_json's `preserve_order` would write them, checksummed as written: everything before
    // the last member, `"checksum"`, on a line of its own.
    let mut body = String::from("{\n");
    for key in ["time", "files", "global_step", "format", "epoch_num"] {
        body.push_str(&format!("  {}: {},\n", Json::from(key), json[key]));
    }
    let sealed =
        |body: &str| format!("{body}  \"checksum\": {}\n}}\n", stoker_tests::crc32c(body.as_bytes()));
    std::fs::write(&path, sealed(&body)).unwrap();
    let read = Checkpoint::read(&checkpoint).expect("reordered keys, checksummed as written, verify");
    assert_eq!((read.global_step(), read.epoch_num()), (15, 3));

    // One byte changed after the checksum was taken fails it.
    let altered = sealed(&body).replacen("\"global_step\": 15", "\"global_step\": 16", 1);
    assert!(altered.contains("\"global_step\": 16"));
    std::fs::write(&path, altered).unwrap();
    let error = Checkpoint::read(&checkpoint).unwrap_err().to_string();
    assert!(error.contains("manifest.json fails its own checksum"), "{error}");
}

#[test]
fn checkpoint_a_reader_takes_the_old_window_of_a_replaced_checkpoint_for_that_checkpoint() {
    let dir = three_epochs("old-window");
    let root = dir.join("checkpoints");
    // A writer replacing step-15 set it aside as step-15.old and was killed before it put the
    // new one in place.
    std::fs::rename(root.join("step-15"), root.join("step-15.old")).unwrap();
    let latest = Checkpoint::latest(&dir).unwrap().expect("a checkpoint");
    assert_eq!(latest.global_step(), 15);
    assert_eq!(latest.dir(), root.join("step-15.old"));
    assert_eq!(Checkpoint::read(root.join("step-15")).unwrap().global_step(), 15);
    assert_eq!(Checkpoint::latest(root.join("step-15")).unwrap().unwrap().global_step(), 15);

    // A resumed run continues from it, and its first write puts it back in place.
    let probe = Probe::default();
    let report = trainer(&dir, 4)
        .auto_resume(true)
        .callbacks((ModelSaver::new(5), probe.clone()))
        .train(step_fn)
        .unwrap();
    assert_eq!((probe.start(), probe.steps(), report.counters.global_step()), (15, 5, 20));
    assert_eq!(entries(&root), ["index.json", "step-10", "step-15", "step-20", "step-5"]);

    // Both there: the writer had put the new one in place, which is the one read; when that one
    // is damaged, the one it replaced is next.
    copy_dir(&root.join("step-20"), &root.join("step-20.old"));
    assert_eq!(Checkpoint::latest(&dir).unwrap().unwrap().dir(), root.join("step-20"));
    flip_byte(&root.join("step-20/model.bpk"), None, 0x01);
    assert_eq!(Checkpoint::latest(&dir).unwrap().unwrap().dir(), root.join("step-20.old"));

    // A damaged window newer than the checkpoint a run resumes from is set aside with the newer
    // checkpoints, as they are: the next write neither puts it back nor deletes it.
    let dir = three_epochs("old-window-damaged");
    let root = dir.join("checkpoints");
    copy_dir(&root.join("step-15"), &root.join("step-20.old"));
    flip_byte(&root.join("step-20.old/model.bpk"), None, 0x01);
    assert_eq!(resume_to_epoch_4(&dir), (20, 5));
    assert!(root.join("step-20.old.abandoned/model.bpk").is_file(), "{:?}", entries(&root));
    assert_eq!(
        entries(&root),
        ["index.json", "step-10", "step-15", "step-20", "step-20.old.abandoned", "step-5"]
    );
    assert_eq!(Checkpoint::read(root.join("step-20")).unwrap().global_step(), 20);
}

/// Copy names that are not a plain folder name of their own inside `checkpoints/`.
const BAD_COPY_NAMES: [&str; 15] = [
    "index.json",
    "x.tmp",
    "x.old",
    "x.deleting",
    "x.abandoned",
    "a\0b",
    "a\\b",
    "",
    ".",
    "..",
    "../x",
    "a/b",
    "/abs",
    ".hidden",
    "step-3",
];

/// Asks for a checkpoint copy under each of its names at setup, and records each answer.
struct RequestCopies(Vec<&'static str>, Arc<std::sync::Mutex<Vec<String>>>);

impl<M> Callback<M> for RequestCopies {
    fn setup(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        for name in &self.0 {
            let answer = match ctx.request_checkpoint_copy(*name) {
                Ok(()) => "ok".to_string(),
                Err(e) => e.to_string(),
            };
            self.1.lock().unwrap().push(answer);
        }
        Ok(())
    }
}

#[test]
fn checkpoint_copy_names_that_are_not_plain_folder_names_are_refused() {
    for bad in BAD_COPY_NAMES {
        let dir = scratch_dir("copy-name");
        let probe = Probe::default();
        let error = trainer(&dir, 1)
            .callbacks((PutVal(&VALS), MinSaver::new("val").copy_name(bad), probe.clone()))
            .train(step_fn)
            .expect_err(&format!("the copy name {bad:?}"))
            .error;
        let text = error.to_string();
        assert!(text.contains("failed in setup"), "{bad:?}: {text}");
        assert!(text.contains(&format!("copy name {bad:?}")), "{bad:?}: {text}");
        assert_eq!(probe.steps(), 0, "{bad:?}");
        assert_eq!(entries(&dir), [".lock"], "{bad:?}: nothing written");
    }
    // The default name comes from the statistic: a `/` in it needs a name of its own.
    let dir = scratch_dir("copy-name-default");
    let error =
        trainer(&dir, 1).callbacks(MinSaver::new("validation/loss")).train(step_fn).expect_err("a `/`").error;
    let text = error.to_string();
    assert!(text.contains("copy name \"min-validation/loss\"") && text.contains(".copy_name("), "{text}");

    // request_checkpoint_copy answers at the request.
    let dir = scratch_dir("copy-request");
    let answers = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut asked: Vec<&'static str> = BAD_COPY_NAMES.to_vec();
    asked.push("best");
    trainer(&dir, 1).callbacks(RequestCopies(asked.clone(), answers.clone())).train(step_fn).unwrap();
    let answers = answers.lock().unwrap();
    for (name, answer) in asked.iter().zip(answers.iter()) {
        if *name == "best" {
            assert_eq!(answer, "ok");
        } else {
            assert!(answer.contains(&format!("copy name {name:?}")), "{name:?}: {answer}");
        }
    }
    assert_eq!(answers.len(), asked.len());
    let root = dir.join("checkpoints");
    assert_eq!(entries(&root), ["best"]);
    assert_eq!(Checkpoint::read(root.join("best")).unwrap().global_step(), 0);
    assert_eq!(entries(&dir), [".lock", "checkpoints", "history"]);
}

/// The log directory [`durability_probe`] trains into, from the environment (set by
/// [`checkpoint_new_folders_and_the_keep_mark_are_synced_into_their_parents`]).
const PROBE_DIR: &str = "STOKER_DURABILITY_PROBE_DIR";

/// Trains into a log directory that does not exist yet, with checkpoints kept forever, so that
/// the syscalls of creating `LOG_DIR`, `LOG_DIR/checkpoints` and the keep marks can be traced.
#[test]
#[ignore = "run under strace by checkpoint_new_folders_and_the_keep_mark_are_synced_into_their_parents"]
fn durability_probe() {
    let log = PathBuf::from(std::env::var_os(PROBE_DIR).expect("the probe's log directory"));
    assert!(!log.exists(), "{} must not exist yet", log.display());
    trainer(&log, 4)
        .callbacks((Sleep(Duration::from_millis(5)), ModelSaver::new(1).keep_every_n_hours(1e-9)))
        .train(step_fn)
        .unwrap();
}

/// One traced syscall: its thread, name, arguments and result.
#[derive(Debug)]
struct Syscall {
    pid: String,
    name: String,
    args: String,
    result: String,
}

/// Parse `strace -f` output, joining calls that another thread's call interrupted
/// (`<unfinished ...>` ... `<... name resumed>`).
fn syscalls(trace: &str) -> Vec<Syscall> {
    let mut pending: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    let mut calls = Vec::new();
    for line in trace.lines() {
        let Some((pid, rest)) = line.split_once(' ') else { continue };
        let rest = rest.trim_start();
        let full = if let Some(start) = rest.strip_suffix(" <unfinished ...>") {
            pending.insert(pid.to_string(), start.to_string());
            continue;
        } else if let Some(resumed) = rest.strip_prefix("<... ") {
            let Some((_, tail)) = resumed.split_once(" resumed>") else { continue };
            format!("{}{tail}", pending.remove(pid).unwrap_or_default())
        } else {
            rest.to_string()
        };
        let (Some(open), Some(eq)) = (full.find('('), full.rfind(" = ")) else { continue };
        let Some(close) = full[..eq].rfind(')') else { continue };
        calls.push(Syscall {
            pid: pid.to_string(),
            name: full[..open].to_string(),
            args: full[open + 1..close].to_string(),
            result: full[eq + 3..].split_whitespace().next().unwrap_or("").to_string(),
        });
    }
    calls
}

/// Whether, after call `from`, the same thread opens `dir` and syncs it before any failure.
fn synced_after(calls: &[Syscall], from: usize, dir: &Path) -> bool {
    let quoted = format!("\"{}\"", dir.display());
    let thread = &calls[from].pid;
    let mut fd = None;
    for call in calls[from + 1..].iter().filter(|c| &c.pid == thread) {
        match (call.name.as_str(), &fd) {
            ("openat", None) if call.args.split(", ").nth(1) == Some(quoted.as_str()) => {
                fd = Some(call.result.clone());
            }
            ("fsync", Some(fd)) if &call.args == fd => return call.result == "0",
            ("close", Some(fd)) if &call.args == fd => return false,
            _ => {}
        }
    }
    false
}

#[test]
fn checkpoint_new_folders_and_the_keep_mark_are_synced_into_their_parents() {
    let scratch = scratch_dir("durability");
    let log = scratch.join("new/log");
    let trace_file = scratch.join("strace.out");
    let output = Command::new("strace")
        .args(["-f", "-e", "trace=mkdir,mkdirat,openat,fsync,close", "-o"])
        .arg(&trace_file)
        .arg(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            &stoker_tests::test_path(module_path!(), "durability_probe"),
            "--test-threads=1",
        ])
        .env(PROBE_DIR, &log)
        .output()
        .unwrap_or_else(|e| {
            panic!("running strace ({e}): this test needs strace (`apt-get install strace`)")
        });
    assert!(
        output.status.success(),
        "the probe under strace failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let trace = std::fs::read_to_string(&trace_file).unwrap();
    let calls = syscalls(&trace);
    let made = |dir: &Path| {
        let quoted = format!("\"{}\"", dir.display());
        calls
            .iter()
            .position(|c| c.name == "mkdir" && c.args.starts_with(&quoted) && c.result == "0")
            .unwrap_or_else(|| panic!("no mkdir of {} in the trace", dir.display()))
    };
    // Each new folder, then its parent synced.
    for dir in [scratch.join("new"), log.clone(), log.join("checkpoints")] {
        let at = made(&dir);
        assert!(
            synced_after(&calls, at, dir.parent().unwrap()),
            "{} is not synced into its parent",
            dir.display()
        );
    }
    // Each keep mark: created new, synced, then its folder synced.
    let marks: Vec<usize> = calls
        .iter()
        .enumerate()
        .filter(|(_, c)| c.name == "openat" && c.args.contains("/keep\"") && c.args.contains("O_EXCL"))
        .map(|(i, _)| i)
        .collect();
    assert!(!marks.is_empty(), "no keep mark was written");
    for at in marks {
        let call = &calls[at];
        let path = call.args.split('"').nth(1).unwrap();
        let fd = &call.result;
        let thread = &call.pid;
        assert!(
            calls[at + 1..]
                .iter()
                .filter(|c| &c.pid == thread)
                .take_while(|c| !(c.name == "close" && &c.args == fd))
                .any(|c| c.name == "fsync" && &c.args == fd && c.result == "0"),
            "{path} is not synced"
        );
        assert!(synced_after(&calls, at, Path::new(path).parent().unwrap()), "{path}'s folder is not synced");
    }
}

/// Puts a scalar at every step.
struct PutEveryStep;

impl<M> Callback<M> for PutEveryStep {
    fn trigger_step(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        let step = ctx.global_step() as f64;
        ctx.monitors().put_scalar("per_step", step);
        Ok(())
    }
}

/// What a checkpoint writes does not grow with the steps recorded before it: the monitors'
/// histories (a scalar put at every step, a row of stats.json at each) and `Recorder`'s loss and
/// learning rate of every step go into the journal beside the checkpoints, each checkpoint
/// appending what is new. The checkpoint at step 800 is about as large as the one at step 200
/// (the statistics of 6 more epochs), where holding the histories whole made it 4 times larger.
#[test]
fn checkpoint_size_does_not_grow_with_the_recorded_history() {
    let dir = scratch_dir("history-growth");
    trainer(&dir, 8)
        .steps_per_epoch(100)
        .callbacks((PutEveryStep, burn_stoker::track::Recorder::new().plots(false), ModelSaver::new(100)))
        .train(step_fn)
        .unwrap();
    let size = |step: u64| -> u64 {
        let checkpoint = dir.join("checkpoints").join(format!("step-{step}"));
        ["monitors.json", "trainer.json"]
            .iter()
            .map(|file| std::fs::metadata(checkpoint.join(file)).unwrap().len())
            .sum()
    };
    let (early, late) = (size(200), size(800));
    assert!(
        late < early + 2000,
        "the checkpoint at step 800 writes {late} bytes, the one at step 200 {early}"
    );
    // Every value is still restored: a resume sees the whole history.
    let seen = Arc::new(AtomicU64::new(0));
    let seen_in = seen.clone();
    trainer(&dir, 9)
        .steps_per_epoch(100)
        .auto_resume(true)
        .callbacks((
            PutEveryStep,
            burn_stoker::track::Recorder::new().plots(false),
            burn_stoker::debug::CallbackFactory::new().before_train(move |ctx| {
                seen_in.store(ctx.monitors_ref().history("per_step").len() as u64, Ordering::SeqCst);
            }),
        ))
        .train(step_fn)
        .unwrap();
    assert_eq!(seen.load(Ordering::SeqCst), 800);
}

/// At the end of epoch `0`, before the savers that follow it: fills the log directory's
/// filesystem with `LOG/filler`.
struct FillAt(u64);

impl<M> Callback<M> for FillAt {
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        use std::io::Write;
        if ctx.epoch_num() == self.0 {
            let mut filler = std::fs::File::create(ctx.log_dir().join("filler")).unwrap();
            let page = [0u8; 4096];
            while filler.write_all(&page).is_ok() {}
        }
        Ok(())
    }
}

#[test]
fn a_full_disk_under_a_best_copy_and_the_journal_is_logged_and_training_goes_on_by_default() {
    // Before, only the checkpoint's own files followed `OnWriteError::Log` (the default): the
    // best copy (MinSaver's) and the monitors' journal on a full disk failed the run.
    let mount_point = scratch_dir("full-disk-copy").join("mnt");
    let Some(tmpfs) =
        tmpfs_or_skip(&mount_point, Tmpfs::mount(&mount_point, 2048), std::env::var_os(SKIP_TMPFS))
    else {
        return;
    };
    let log = tmpfs.dir.join("log");
    let report = wide_trainer(&log, 4)
        .callbacks((PutVal(&VALS), FillAt(2), ModelSaver::new(10), MinSaver::new("val")))
        .train(step_fn)
        .expect("a copy that cannot be written does not end the run");
    assert_eq!(report.outcome, Outcome::Finished);
    assert_eq!(report.counters.global_step(), 20);
    let root = log.join("checkpoints");
    // Epoch 1's checkpoint and copy; epochs 2 to 4 (val 3, then 1: better) could write neither.
    assert_eq!(Checkpoint::read(root.join("min-val")).unwrap().global_step(), 5);
    assert_eq!(Checkpoint::latest(&log).unwrap().unwrap().global_step(), 5);
    assert_eq!(tmp_leftovers(&tmpfs.dir), Vec::<PathBuf>::new());
}
