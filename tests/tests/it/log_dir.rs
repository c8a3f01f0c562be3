//! One run at a time in a log directory: a second trainer started while a first one trains in the
//! same directory stops before training with an error naming the first; once the first ends, the
//! directory is free again. A fresh run into a directory that holds an earlier run follows its
//! `LogDirPolicy` (refuse by default, back up, delete, keep) and never mixes with it unasked; a
//! resume keeps the directory, however the path it resumes from is spelled.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};

use burn::nn::Linear;
use burn::optim::SgdConfig;
use burn_stoker::monitor::{JsonWriter, TensorBoardWriter};
use burn_stoker::prelude::*;
use burn_stoker::saver::Checkpoint;
use burn_stoker::trainer::LogDirPolicy;
use burn_stoker::world::Threads;
use stoker_tests::{mse, scratch_dir, tiny_data, tiny_model};

/// Says "started" at `before_train`, then waits until told to go on.
struct Hold {
    started: Sender<()>,
    go_on: Arc<Mutex<Receiver<()>>>,
}

impl Callback<Linear> for Hold {
    fn before_train(&mut self, _ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.started.send(()).unwrap();
        self.go_on.lock().unwrap().recv().unwrap();
        Ok(())
    }
}

fn train(dir: &std::path::Path) -> burn_stoker::Result<TrainReport<Linear>> {
    let device = burn_stoker::device::cpu();
    Trainer::new(tiny_model(&device), SgdConfig::new().init(), tiny_data(4, &device))
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .log_dir(dir)
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .map_err(burn_stoker::Error::from)
}

#[test]
fn a_second_run_in_a_held_log_directory_is_refused_naming_the_first() {
    let dir = scratch_dir("log-dir-held");
    let (started_tx, started) = channel();
    let (go_on, go_on_rx) = channel();
    let hold = Hold { started: started_tx, go_on: Arc::new(Mutex::new(go_on_rx)) };
    let first_dir = dir.clone();
    let first = std::thread::spawn(move || {
        let device = burn_stoker::device::cpu();
        Trainer::new(tiny_model(&device), SgdConfig::new().init(), tiny_data(4, &device))
            .default_callbacks(DefaultCallbacks::none())
            .handle_signals(false)
            .log_dir(&first_dir)
            .callbacks(hold)
            .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
    });
    started.recv().unwrap();
    let error = train(&dir).expect_err("the directory is held");
    assert!(
        matches!(error.root(), burn_stoker::Error::LogDir(burn_stoker::LogDirError::InUse { dir: at, .. }) if *at == dir),
        "{error}"
    );
    let error = error.to_string();
    assert!(error.contains("is in use by another run"), "{error}");
    assert!(error.contains(&format!("process {}", std::process::id())), "{error}");
    go_on.send(()).unwrap();
    let report = first.join().unwrap().expect("the first run is not disturbed");
    assert_eq!(report.counters.global_step(), 4);
    // Free again once the first run ended.
    assert_eq!(train(&dir).expect("a free directory").counters.global_step(), 4);
}

/// Steps per epoch of the runs below (4 batches).
const STEPS: u64 = 4;

/// How a run below starts.
enum Start {
    /// A fresh run under this policy (`None`: the default).
    Fresh(Option<LogDirPolicy>),
    /// `auto_resume(true)`.
    Auto,
    /// `resume_from(path)`.
    From(PathBuf),
}

/// Puts the global step as the scalar `step` at every epoch's end, for the writers.
struct PutStep;

impl Callback<Linear> for PutStep {
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let step = ctx.global_step() as f64;
        ctx.monitors().put_scalar("step", step);
        Ok(())
    }
}

/// `epochs` epochs of the tiny model into `dir` with the two file writers (TensorBoard,
/// `stats.json`), the scalar `step` at each epoch's end, and a `ModelSaver` keeping the last
/// `keep` checkpoints.
fn run(dir: &Path, epochs: u64, keep: usize, start: Start) -> burn_stoker::Result<TrainReport<Linear>> {
    let device = burn_stoker::device::cpu();
    let trainer =
        Trainer::new(tiny_model(&device), SgdConfig::new().init(), tiny_data(STEPS as usize, &device))
            .default_callbacks(DefaultCallbacks {
                tensorboard: Some(TensorBoardWriter::new()),
                json: Some(JsonWriter),
                ..DefaultCallbacks::none()
            })
            .handle_signals(false)
            .max_epoch(epochs)
            .log_dir(dir)
            .callbacks((PutStep, ModelSaver::new(keep)));
    let trainer = match start {
        Start::Fresh(Some(policy)) => trainer.log_dir_policy(policy),
        Start::Fresh(None) => trainer,
        Start::Auto => trainer.auto_resume(true),
        Start::From(path) => trainer.resume_from(path),
    };
    trainer
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .map_err(burn_stoker::Error::from)
}

/// Every file under `dir` (its relative path and bytes) but the top-level `.lock`, whose text
/// each run holding the directory rewrites.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let relative = path.strip_prefix(root).unwrap().to_path_buf();
            if relative == Path::new(".lock") {
                continue;
            }
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                out.insert(relative, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// The `step-N` checkpoints in `dir/checkpoints`, by step (abandoned ones not included).
fn checkpoint_steps(dir: &Path) -> Vec<u64> {
    let mut steps: Vec<u64> = std::fs::read_dir(dir.join("checkpoints"))
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str()?.strip_prefix("step-")?.parse().ok())
        .collect();
    steps.sort();
    steps
}

/// `(latest, checkpoints)` of `dir/checkpoints/index.json`.
fn index(dir: &Path) -> (String, Vec<String>) {
    let text = std::fs::read(dir.join("checkpoints").join("index.json")).unwrap();
    let index: serde_json::Value = serde_json::from_slice(&text).unwrap();
    let names = index["checkpoints"].as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_string());
    (index["latest"].as_str().unwrap().to_string(), names.collect())
}

fn event_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with("events.out.tfevents."))
        .count()
}

fn stats_epochs(dir: &Path) -> usize {
    let stats: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("stats.json")).unwrap()).unwrap();
    stats.as_array().unwrap().len()
}

/// The sibling folders of `dir` named `<name>.backup-*`.
fn backups(dir: &Path) -> Vec<PathBuf> {
    let prefix = format!("{}.backup-", dir.file_name().unwrap().to_string_lossy());
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(&prefix))
        .collect();
    found.sort();
    found
}

/// The first run: 10 epochs of 4 steps, the last 3 checkpoints kept (steps 32, 36, 40).
fn earlier_run(name: &str) -> (PathBuf, BTreeMap<PathBuf, Vec<u8>>) {
    let dir = scratch_dir(name).join("run");
    let report = run(&dir, 10, 3, Start::Fresh(None)).expect("the first run");
    assert_eq!(report.counters.global_step(), 40);
    assert_eq!(checkpoint_steps(&dir), [32, 36, 40]);
    let before = snapshot(&dir);
    (dir, before)
}

/// The second, fresh run of 3 epochs kept its own three checkpoints (steps 4, 8, 12), the index
/// names them, its one event file and its 3 epochs of statistics are alone in `dir`, and a resume
/// continues it (from step 12, to step 16), not the earlier run.
fn assert_new_run_alone(dir: &Path) {
    assert_eq!(checkpoint_steps(dir), [4, 8, 12], "the new run's checkpoints survive its keep-3");
    assert_eq!(index(dir), ("step-12".to_string(), vec!["step-4".into(), "step-8".into(), "step-12".into()]));
    let latest = Checkpoint::latest(dir).unwrap().expect("a checkpoint");
    assert_eq!(latest.dir().file_name().unwrap(), "step-12", "Checkpoint::latest agrees with index.json");
    assert_eq!(event_files(dir), 1, "one TensorBoard event file: one run");
    assert_eq!(stats_epochs(dir), 3, "stats.json holds the new run's 3 epochs only");
    let resumed = run(dir, 4, 3, Start::Auto).expect("resuming the new run");
    assert_eq!(resumed.counters.global_step(), 16, "resumed from the new run's step 12");
}

#[test]
fn log_dir_a_fresh_run_into_an_earlier_run_is_refused_by_default_and_nothing_changes() {
    let (dir, before) = earlier_run("log-dir-refuse");
    let error = run(&dir, 3, 3, Start::Fresh(None)).expect_err("the default policy refuses").to_string();
    assert!(error.contains(&format!("the log directory {} holds an earlier run", dir.display())), "{error}");
    assert!(error.contains("checkpoints/ with 3 checkpoints, the newest step-40"), "{error}");
    assert!(error.contains("stats.json"), "{error}");
    for remedy in ["auto_resume", "LogDirPolicy::Backup", "LogDirPolicy::Delete", "LogDirPolicy::Keep"] {
        assert!(error.contains(remedy), "the error names the remedy {remedy}: {error}");
    }
    assert_eq!(snapshot(&dir), before, "a refused run changes nothing");
    assert!(backups(&dir).is_empty());
    // Refuse is also what naming it does.
    let error = run(&dir, 3, 3, Start::Fresh(Some(LogDirPolicy::Refuse))).expect_err("refused").to_string();
    assert!(error.contains("holds an earlier run"), "{error}");
    assert_eq!(snapshot(&dir), before);
    // A resume is not a fresh run: it continues the earlier run (from step 40, two more epochs).
    let resumed = run(&dir, 12, 3, Start::Auto).expect("resuming the earlier run");
    assert_eq!(resumed.counters.global_step(), 48);
    assert_eq!(checkpoint_steps(&dir), [40, 44, 48]);
}

#[test]
fn log_dir_backup_moves_the_earlier_run_aside_intact_and_the_new_run_keeps_its_checkpoints() {
    let (dir, before) = earlier_run("log-dir-backup");
    let report = run(&dir, 3, 3, Start::Fresh(Some(LogDirPolicy::Backup))).expect("backing up");
    assert_eq!(report.counters.global_step(), 12);
    let backups = backups(&dir);
    assert_eq!(backups.len(), 1, "{backups:?}");
    let name = backups[0].file_name().unwrap().to_string_lossy().into_owned();
    // run.backup-YYYYMMDD-HHMMSS
    let stamp = name.strip_prefix("run.backup-").unwrap();
    assert!(stamp.len() == 15 && stamp.as_bytes()[8] == b'-', "{name}");
    assert_eq!(snapshot(&backups[0]), before, "the earlier run is intact in {}", backups[0].display());
    assert_eq!(Checkpoint::latest(&backups[0]).unwrap().unwrap().global_step(), 40);
    assert_new_run_alone(&dir);
}

#[test]
fn log_dir_delete_removes_the_earlier_run() {
    let (dir, _) = earlier_run("log-dir-delete");
    let report = run(&dir, 3, 3, Start::Fresh(Some(LogDirPolicy::Delete))).expect("deleting");
    assert_eq!(report.counters.global_step(), 12);
    assert!(backups(&dir).is_empty());
    assert_new_run_alone(&dir);
}

#[test]
fn log_dir_keep_writes_the_fresh_run_beside_the_earlier_one() {
    let (dir, before) = earlier_run("log-dir-keep");
    run(&dir, 3, 10, Start::Fresh(Some(LogDirPolicy::Keep))).expect("keeping");
    let after = snapshot(&dir);
    for (path, bytes) in &before {
        if path.starts_with("checkpoints") || path == Path::new("stats.json") {
            continue;
        }
        assert_eq!(after.get(path), Some(bytes), "{} is kept as it was", path.display());
    }
    assert_eq!(checkpoint_steps(&dir), [4, 8, 12, 32, 36, 40], "both runs' checkpoints, as asked");
    assert_eq!(event_files(&dir), 2);
}

#[test]
fn log_dir_an_empty_directory_or_one_holding_only_files_put_there_before_the_run_is_not_an_earlier_run() {
    let dir = scratch_dir("log-dir-empty").join("run");
    std::fs::create_dir_all(&dir).unwrap();
    run(&dir, 1, 3, Start::Fresh(None)).expect("an empty directory");
    let dir = scratch_dir("log-dir-lock-only");
    std::fs::write(dir.join(".lock"), "process 1 since unix time 0").unwrap();
    run(&dir, 1, 3, Start::Fresh(None)).expect("a directory holding only its lock file");
    // A person's files (HumanHyperParamSetter's hyper.txt, an InjectShell trigger, notes) and an
    // empty checkpoints folder are no run.
    let dir = scratch_dir("log-dir-prepared");
    std::fs::write(dir.join("hyper.txt"), "learning_rate:0.1\n").unwrap();
    std::fs::write(dir.join("notes.md"), "a run to try").unwrap();
    std::fs::create_dir(dir.join("checkpoints")).unwrap();
    run(&dir, 1, 3, Start::Fresh(None)).expect("a directory prepared for the run");
    assert_eq!(std::fs::read(dir.join("notes.md")).unwrap(), b"a run to try");
    let dir = scratch_dir("log-dir-missing").join("not").join("yet");
    run(&dir, 1, 3, Start::Fresh(None)).expect("a directory that does not exist yet");
    assert_eq!(checkpoint_steps(&dir), [4]);
}

#[test]
fn log_dir_auto_resume_keeps_the_directory_even_when_it_finds_no_checkpoint() {
    // A run killed before its first checkpoint left its statistics, its event file and a
    // checkpoints folder holding no step-N.
    let dir = scratch_dir("log-dir-auto-nothing");
    std::fs::write(dir.join("stats.json"), "[]").unwrap();
    std::fs::write(dir.join("events.out.tfevents.1.host"), "").unwrap();
    std::fs::create_dir_all(dir.join("checkpoints/min-validation_error")).unwrap();
    let error = run(&dir, 1, 3, Start::Fresh(None)).expect_err("a fresh run is refused").to_string();
    assert!(
        error.contains(
            "holds an earlier run (checkpoints/ holding min-validation_error, stats.json, events.out.tfevents.1.host)"
        ),
        "{error}"
    );
    // auto_resume (the example's --resume) starts that run again in its directory.
    let report = run(&dir, 1, 3, Start::Auto).expect("auto_resume keeps the directory");
    assert_eq!(report.counters.global_step(), STEPS);
    assert!(dir.join("events.out.tfevents.1.host").exists());
    assert_eq!(checkpoint_steps(&dir), [4]);
}

#[test]
fn log_dir_only_the_chief_acts_on_the_directory() {
    let dir = scratch_dir("log-dir-world").join("run");
    let train = |policy: LogDirPolicy| {
        Threads::new([burn_stoker::device::cpu(), burn_stoker::device::cpu()]).run(|world| {
            let data = world.shard(tiny_data(2 * STEPS as usize, world.device()));
            Trainer::new(tiny_model(world.device()), SgdConfig::new().init(), data)
                .default_callbacks(DefaultCallbacks { json: Some(JsonWriter), ..DefaultCallbacks::none() })
                .handle_signals(false)
                .max_epoch(2)
                .log_dir(&dir)
                .log_dir_policy(policy)
                .callbacks(ModelSaver::new(3))
                .world(world)
                .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
                .map(|report| report.counters.global_step())
        })
    };
    assert_eq!(train(LogDirPolicy::Refuse).expect("a fresh directory"), [8, 8]);
    let before = snapshot(&dir);
    let error = train(LogDirPolicy::Refuse).expect_err("the chief refuses, every rank stops").to_string();
    assert!(error.contains("holds an earlier run"), "{error}");
    assert_eq!(snapshot(&dir), before);
    assert_eq!(train(LogDirPolicy::Backup).expect("backing up"), [8, 8]);
    let backups = backups(&dir);
    assert_eq!(backups.len(), 1, "one backup, made by the chief alone: {backups:?}");
    assert_eq!(snapshot(&backups[0]), before);
    assert_eq!(checkpoint_steps(&dir), [4, 8]);
}

/// The item 3: a run of 10 epochs keeping every checkpoint, resumed from its step-20
/// through `spelling` (another spelling of `dir/checkpoints/step-20`), for one more epoch than
/// step 20 ends: the checkpoints newer than step 20 (those of the run it abandons) are set aside
/// as `.abandoned`, and the latest is the resumed run's step 24.
fn resume_through(dir: &Path, spelling: &Path) {
    run(dir, 10, 10, Start::Fresh(None)).expect("the first run");
    assert_eq!(checkpoint_steps(dir), [4, 8, 12, 16, 20, 24, 28, 32, 36, 40]);
    let old_24 = std::fs::read(dir.join("checkpoints/step-24/model.bpk")).unwrap();
    let report = run(dir, 6, 10, Start::From(spelling.to_path_buf())).expect("resuming from step 20");
    assert_eq!(report.counters.global_step(), 24);
    assert_eq!(
        checkpoint_steps(dir),
        [4, 8, 12, 16, 20, 24],
        "the abandoned run's newer checkpoints are set aside"
    );
    for step in [24, 28, 32, 36, 40] {
        let abandoned = dir.join(format!("checkpoints/step-{step}.abandoned"));
        assert!(abandoned.is_dir(), "{} exists", abandoned.display());
    }
    assert_eq!(std::fs::read(dir.join("checkpoints/step-24.abandoned/model.bpk")).unwrap(), old_24);
    assert_eq!(Checkpoint::latest(dir).unwrap().unwrap().global_step(), 24);
    assert_eq!(index(dir).0, "step-24");
}

#[test]
fn log_dir_resume_from_a_symlink_to_the_log_directory_sets_aside_the_newer_checkpoints() {
    let scratch = scratch_dir("log-dir-symlink");
    let dir = scratch.join("run");
    let link = scratch.join("link");
    std::os::unix::fs::symlink(&dir, &link).unwrap();
    resume_through(&dir, &link.join("checkpoints").join("step-20"));
}

#[test]
fn log_dir_resume_from_a_relative_dot_dot_spelling_sets_aside_the_newer_checkpoints() {
    let scratch = scratch_dir("log-dir-dot-dot");
    let dir = scratch.join("run");
    std::fs::create_dir_all(scratch.join("a")).unwrap();
    // ./../../<...>/a/../run/checkpoints/step-20, relative to the current directory.
    let cwd = std::env::current_dir().unwrap();
    let mut spelling = PathBuf::from(".");
    for _ in cwd.components().skip(1) {
        spelling.push("..");
    }
    spelling.push(scratch.strip_prefix("/").unwrap());
    spelling.push("a/../run/checkpoints/step-20");
    assert!(spelling.is_relative());
    resume_through(&dir, &spelling);
}

// ---------------------------------------------------------------- shared and hostile directories

/// A file of someone else that a planted symlink points at.
fn victim(scratch: &Path) -> PathBuf {
    let victim = scratch.join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    victim
}

/// `f` on a thread of its own, its result if it ends within `secs` seconds; a panic naming `what`
/// when it hangs (the thread is left behind).
fn within<T: Send + 'static>(secs: u64, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(secs)).unwrap_or_else(|_| panic!("{what} hung"))
}

/// A FIFO at `path`.
fn fifo(path: &Path) {
    let made = std::process::Command::new("mkfifo").arg(path).status().unwrap();
    assert!(made.success());
}

/// A run of one epoch into `dir` with `callbacks`, the default JSON writer, without a lock of
/// another run in the way.
fn run_with<C: burn_stoker::callback::Callbacks<Linear, K>, K>(
    dir: &Path,
    epochs: u64,
    callbacks: C,
    auto: bool,
) -> burn_stoker::Result<TrainReport<Linear>> {
    let device = burn_stoker::device::cpu();
    Trainer::new(tiny_model(&device), SgdConfig::new().init(), tiny_data(STEPS as usize, &device))
        .default_callbacks(DefaultCallbacks { json: Some(JsonWriter), ..DefaultCallbacks::none() })
        .handle_signals(false)
        .max_epoch(epochs)
        .log_dir(dir)
        .auto_resume(auto)
        .callbacks(callbacks)
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .map_err(burn_stoker::Error::from)
}

#[test]
fn log_dir_a_lock_file_planted_as_a_symlink_is_refused_and_its_target_kept() {
    let scratch = scratch_dir("log-dir-lock-symlink");
    let victim = victim(&scratch);
    let dir = scratch.join("run");
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(&victim, dir.join(".lock")).unwrap();
    let result = run_with(&dir, 1, (), false);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n", "the symlink's target is untouched");
    let error = result.expect_err("a lock file that is a symlink").to_string();
    assert!(error.contains(".lock") && error.contains("symbolic link"), "{error}");
}

#[test]
fn log_dir_a_lock_file_planted_as_a_hard_link_to_a_file_of_the_user_is_refused_and_the_file_kept() {
    // The owner check passes (the file is the user's own): before, the lock's holder line was
    // written into it, cutting it, where hard links to files of others are allowed (macOS,
    // `fs.protected_hardlinks=0`) or the user made one.
    let scratch = scratch_dir("log-dir-lock-hardlink");
    let victim = victim(&scratch);
    let dir = scratch.join("run");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::hard_link(&victim, dir.join(".lock")).unwrap();
    let result = run_with(&dir, 1, (), false);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n", "the other name's file is untouched");
    let error = result.expect_err("a lock file with two names").to_string();
    assert!(error.contains(".lock") && error.contains("2 names"), "{error}");
}

#[test]
fn log_dir_a_new_hyper_txt_is_not_written_through_a_planted_temporary_symlink() {
    use burn_stoker::param::HumanHyperParamSetter;
    let scratch = scratch_dir("log-dir-hyper-symlink");
    let victim = victim(&scratch);
    let dir = scratch.join("run");
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(&victim, dir.join("hyper.tmp-stoker")).unwrap();
    run_with(&dir, 1, HumanHyperParamSetter::new("learning_rate"), false).expect("the run");
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "precious\n",
        "the temporary's symlink is not followed"
    );
    assert!(std::fs::read_to_string(dir.join("hyper.txt")).unwrap().starts_with("learning_rate:"));
}

#[test]
fn log_dir_hyper_txt_is_not_appended_through_a_planted_symlink() {
    use burn_stoker::param::HumanHyperParamSetter;
    // hyper.txt itself, a symlink to a file without the parameter's line.
    let scratch = scratch_dir("log-dir-hyper-append-symlink");
    let victim = victim(&scratch);
    let dir = scratch.join("run");
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(&victim, dir.join("hyper.txt")).unwrap();
    run_with(&dir, 1, HumanHyperParamSetter::new("learning_rate"), false).expect("a warning, not an error");
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "precious\n",
        "nothing appended through the symlink"
    );
}

/// Replaces `stats.csv` by a symlink to `victim` at the end of epoch 3, once the CSV writer
/// wrote epoch 2's row and before it appends epoch 3's.
struct PlantCsvLink {
    dir: PathBuf,
    victim: PathBuf,
}

impl Callback<Linear> for PlantCsvLink {
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let step = ctx.global_step() as f64;
        ctx.monitors().put_scalar("step", step);
        if ctx.epoch_num() == 3 {
            let csv = self.dir.join("stats.csv");
            // The writer's thread has written epoch 2's row (the file is its own again).
            let started = std::time::Instant::now();
            while !std::fs::read_to_string(&csv).unwrap_or_default().lines().any(|l| l.starts_with("2,")) {
                assert!(started.elapsed().as_secs() < 30, "epoch 2's row was never written");
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            std::fs::remove_file(&csv).unwrap();
            std::os::unix::fs::symlink(&self.victim, &csv).unwrap();
        }
        Ok(())
    }
}

#[test]
fn log_dir_the_csv_writer_never_appends_through_a_planted_symlink() {
    use burn_stoker::monitor::CsvWriter;
    let scratch = scratch_dir("log-dir-csv-symlink");
    let victim = victim(&scratch);
    let dir = scratch.join("run");
    let plant = PlantCsvLink { dir: dir.clone(), victim: victim.clone() };
    let _ = run_with(&dir, 4, (plant, CsvWriter::new()), false);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n", "no row appended to the victim");
}

#[test]
fn log_dir_a_fifo_named_stats_json_is_an_error_at_once_not_a_hang() {
    let dir = scratch_dir("log-dir-fifo-stats");
    fifo(&dir.join("stats.json"));
    let run_dir = dir.clone();
    let error = within(30, "setup with a FIFO named stats.json", move || run_with(&run_dir, 1, (), true))
        .expect_err("a FIFO is no stats.json")
        .to_string();
    assert!(error.contains("stats.json") && error.contains("not a regular file"), "{error}");
}

#[test]
fn log_dir_a_link_to_dev_zero_named_stats_json_is_an_error_not_an_endless_read() {
    let dir = scratch_dir("log-dir-zero-stats");
    std::os::unix::fs::symlink("/dev/zero", dir.join("stats.json")).unwrap();
    let run_dir = dir.clone();
    let error = within(30, "setup with stats.json -> /dev/zero", move || run_with(&run_dir, 1, (), true))
        .expect_err("a device is no stats.json")
        .to_string();
    assert!(error.contains("stats.json") && error.contains("not a regular file"), "{error}");
}

#[test]
fn log_dir_a_fifo_named_index_json_does_not_hang_the_checkpoint_write() {
    let dir = scratch_dir("log-dir-fifo-index");
    std::fs::create_dir_all(dir.join("checkpoints")).unwrap();
    fifo(&dir.join("checkpoints/index.json"));
    let run_dir = dir.clone();
    within(30, "a checkpoint write beside a FIFO named index.json", move || {
        run_with(&run_dir, 1, ModelSaver::new(3), true)
    })
    .expect("the checkpoint is written");
    assert!(std::fs::symlink_metadata(dir.join("checkpoints/index.json")).unwrap().is_file());
    assert_eq!(index(&dir).0, "step-4");
}

#[test]
fn log_dir_a_fifo_in_a_checkpoint_is_a_damaged_checkpoint_not_a_hang() {
    let dir = scratch_dir("log-dir-fifo-checkpoint");
    run_with(&dir, 1, ModelSaver::new(3), false).expect("the first run");
    let model = dir.join("checkpoints/step-4/model.bpk");
    std::fs::remove_file(&model).unwrap();
    fifo(&model);
    let run_dir = dir.clone();
    let error = within(30, "a resume from a checkpoint holding a FIFO", move || {
        run_with(&run_dir, 2, ModelSaver::new(3), true)
    })
    .expect_err("no complete checkpoint")
    .to_string();
    assert!(error.contains("model.bpk") && error.contains("not a regular file"), "{error}");
}

#[test]
fn log_dir_a_checkpoint_file_longer_than_its_manifest_says_is_refused_before_it_is_read() {
    let dir = scratch_dir("log-dir-sparse-checkpoint");
    run_with(&dir, 1, ModelSaver::new(3), false).expect("the first run");
    // A sparse file of a terabyte: read whole, it would take hours and all the memory.
    let model =
        std::fs::OpenOptions::new().write(true).open(dir.join("checkpoints/step-4/model.bpk")).unwrap();
    model.set_len(1 << 40).unwrap();
    let run_dir = dir.clone();
    let error = within(30, "a resume from a checkpoint with a sparse terabyte", move || {
        Checkpoint::latest(&run_dir).map(|c| c.map(|c| c.global_step()))
    })
    .expect_err("a damaged checkpoint")
    .to_string();
    assert!(error.contains(&format!("model.bpk is {} bytes long, the manifest says", 1u64 << 40)), "{error}");
}

/// Puts `score` = 10 - epoch at each epoch's end: every epoch beats the one before.
struct FallingScore;

impl Callback<Linear> for FallingScore {
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let score = 10.0 - ctx.epoch_num() as f64;
        ctx.monitors().put_scalar("score", score);
        Ok(())
    }
}

#[test]
fn log_dir_a_rollback_sets_aside_the_best_copy_of_the_abandoned_timeline() {
    use burn_stoker::saver::MinSaver;
    let dir = scratch_dir("log-dir-rollback-copy");
    let savers = || (FallingScore, ModelSaver::new(10), MinSaver::new("score"));
    run_with(&dir, 5, savers(), false).expect("the first run");
    let copy = dir.join("checkpoints/min-score");
    assert_eq!(Checkpoint::read(&copy).unwrap().global_step(), 20, "the best is epoch 5's");
    let best_model = std::fs::read(copy.join("model.bpk")).unwrap();
    // Back to step 8 (epoch 2, best 8), one more epoch: epoch 3's 7 beats the restored best.
    let device = burn_stoker::device::cpu();
    Trainer::new(tiny_model(&device), SgdConfig::new().init(), tiny_data(STEPS as usize, &device))
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .max_epoch(3)
        .log_dir(&dir)
        .resume_from(dir.join("checkpoints/step-8"))
        .callbacks(savers())
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .expect("the resumed run");
    assert_eq!(Checkpoint::read(&copy).unwrap().global_step(), 12, "the resumed timeline's best");
    let aside = dir.join("checkpoints/min-score.abandoned");
    assert!(
        std::fs::read(aside.join("model.bpk")).ok() == Some(best_model),
        "the abandoned timeline's better copy is set aside, not overwritten ({} exists: {})",
        aside.display(),
        aside.exists()
    );
    assert_eq!(Checkpoint::read(&aside).unwrap().global_step(), 20);
}

/// The `step-N` checkpoints directly in `folder`, by step.
fn steps_in(folder: &Path) -> Vec<u64> {
    let mut steps: Vec<u64> = std::fs::read_dir(folder)
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str()?.strip_prefix("step-")?.parse().ok())
        .collect();
    steps.sort();
    steps
}

#[test]
fn log_dir_a_checkpoint_dir_outside_the_log_directory_holding_another_run_is_refused_not_pruned() {
    let scratch = scratch_dir("log-dir-saver-folder");
    let archive = scratch.join("archive");
    let saver = || ModelSaver::new(1).checkpoint_dir(&archive);
    // An earlier run, in its own log directory, leaves step-20 in the shared archive.
    run_with(&scratch.join("first"), 5, saver(), false).expect("the first run");
    assert_eq!(steps_in(&archive), [20]);
    // A new run in a new log directory, the same archive: it would prune its own step-4 at once
    // (keep 1, and 20 is higher) and a resume would take the earlier run's step-20.
    let result = run_with(&scratch.join("second"), 1, saver(), false);
    assert_eq!(steps_in(&archive), [20], "the earlier run's checkpoint is left alone");
    let error = result.expect_err("the archive holds another run").to_string();
    assert!(error.contains(&archive.display().to_string()) && error.contains("another run"), "{error}");
    assert!(error.contains("checkpoint_dir"), "the error says what to do: {error}");
    // Delete, asked for, empties the archive first; the new run's checkpoint is then kept.
    let device = burn_stoker::device::cpu();
    Trainer::new(tiny_model(&device), SgdConfig::new().init(), tiny_data(STEPS as usize, &device))
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .max_epoch(1)
        .log_dir(scratch.join("third"))
        .log_dir_policy(LogDirPolicy::Delete)
        .callbacks(saver())
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .expect("the archive emptied");
    assert_eq!(steps_in(&archive), [4]);
    // The archive is held as the log directory is: a second run cannot write into it meanwhile.
    let (started_tx, started) = channel();
    let (go_on, go_on_rx) = channel();
    let hold = Hold { started: started_tx, go_on: Arc::new(Mutex::new(go_on_rx)) };
    let (first_dir, first_saver) = (scratch.join("fourth"), saver());
    let first = std::thread::spawn(move || {
        let device = burn_stoker::device::cpu();
        Trainer::new(tiny_model(&device), SgdConfig::new().init(), tiny_data(STEPS as usize, &device))
            .default_callbacks(DefaultCallbacks::none())
            .handle_signals(false)
            .max_epoch(1)
            .log_dir(first_dir)
            .log_dir_policy(LogDirPolicy::Delete)
            .callbacks((hold, first_saver))
            .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
            .map(|_| ())
    });
    started.recv().unwrap();
    let error = run_with(&scratch.join("fifth"), 1, saver(), false).expect_err("held").to_string();
    assert!(error.contains("is in use by another run"), "{error}");
    go_on.send(()).unwrap();
    first.join().unwrap().expect("the fourth run, which emptied the archive");
    // The fourth run's log directory holds no checkpoint: `auto_resume` there starts a new run,
    // which the archive refuses (the fourth run's step-4 is not its own) instead of mixing.
    let error = run_with(&scratch.join("fourth"), 2, saver(), true).expect_err("a new run").to_string();
    assert!(error.contains("another run"), "{error}");
    // Resumed from the archive (into a new log directory), the fourth run continues there.
    let device = burn_stoker::device::cpu();
    let report =
        Trainer::new(tiny_model(&device), SgdConfig::new().init(), tiny_data(STEPS as usize, &device))
            .default_callbacks(DefaultCallbacks::none())
            .handle_signals(false)
            .max_epoch(2)
            .log_dir(scratch.join("sixth"))
            .resume_from(&archive)
            .callbacks(saver())
            .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
            .expect("the archive is this run's");
    assert_eq!(report.counters.global_step(), 8);
    assert_eq!(steps_in(&archive), [8]);
}

#[test]
fn log_dir_keep_n_never_prunes_the_checkpoint_just_written() {
    let scratch = scratch_dir("log-dir-keep-own");
    let archive = scratch.join("archive");
    run_with(&scratch.join("first"), 5, ModelSaver::new(1).checkpoint_dir(&archive), false).unwrap();
    // Mixing asked for: the new run's step-4 is the latest, and stays.
    let device = burn_stoker::device::cpu();
    Trainer::new(tiny_model(&device), SgdConfig::new().init(), tiny_data(STEPS as usize, &device))
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .max_epoch(1)
        .log_dir(scratch.join("second"))
        .log_dir_policy(LogDirPolicy::Keep)
        .callbacks(ModelSaver::new(1).checkpoint_dir(&archive))
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .expect("kept beside the earlier run");
    assert!(
        steps_in(&archive).contains(&4),
        "the checkpoint just written survives keep-1: {:?}",
        steps_in(&archive)
    );
}

/// This host's name as a temporary's name carries it (`.` becomes `_`).
#[cfg(target_os = "linux")]
fn host_tag() -> String {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    kernel
        .trim()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' })
        .take(40)
        .collect()
}

/// The temporaries `write_atomic` leaves in the log directory when a run dies between a write
/// and its rename are removed when the next run starts there, by the leftovers' rule: this
/// host's once their process has ended, another host's (or an earlier version's, whose name
/// carries no host) once they have not changed for a day; a live writer's stays.
#[cfg(target_os = "linux")]
#[test]
fn a_run_removes_the_temporaries_that_write_atomic_left_in_its_log_directory() {
    let dir = scratch_dir("log-dir-temporaries");
    std::fs::create_dir_all(&dir).unwrap();
    // Above Linux's largest pid_max (2^22): no process here has it.
    let dead = (1u32 << 22) + 7;
    let host = host_tag();
    let mine_dead = format!("stats.json.{dead}-0-{host}.tmp");
    let mine_live = format!("stats.json.{}-0-{host}.tmp", std::process::id());
    let other_fresh = format!("stats.json.{dead}-1-another-host.tmp");
    let old_aged = format!("loss.png.{dead}-2.tmp");
    for name in [&mine_dead, &mine_live, &other_fresh, &old_aged] {
        std::fs::write(dir.join(name), b"half-written").unwrap();
    }
    let two_days_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(2 * 24 * 3600);
    std::fs::File::options()
        .write(true)
        .open(dir.join(&old_aged))
        .unwrap()
        .set_modified(two_days_ago)
        .unwrap();
    let device = burn_stoker::device::cpu();
    Trainer::new(tiny_model(&device), SgdConfig::new().init(), tiny_data(4, &device))
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .log_dir(&dir)
        .log_dir_policy(LogDirPolicy::Keep)
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .unwrap();
    let present = |name: &str| dir.join(name).exists();
    assert!(!present(&mine_dead), "this host's temporary of an ended process is removed");
    assert!(!present(&old_aged), "an earlier version's temporary unchanged for a day is removed");
    assert!(present(&mine_live), "a live writer's temporary stays");
    assert!(present(&other_fresh), "another host's temporary written just now stays");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 39, item 5: a base log directory holding a run of its own and, in a `version_N` folder,
/// a run training now. `LogDirPolicy::Delete` or `Backup` of the base would delete or move that
/// live folder from under its run (whose lock is inside it): both are refused while it trains,
/// the folder untouched, and act once it has ended. Before: the base was emptied or moved with
/// the live run's folder in it.
#[test]
fn log_dir_delete_and_backup_of_a_base_wait_for_its_live_version_runs() {
    let base = scratch_dir("log-dir-live-version");
    // The base's own run, trained there with the default policy.
    run_with(&base, 1, (), false).expect("the base's own run");
    let (started_tx, started) = channel();
    let (go_on, go_on_rx) = channel();
    let hold = Hold { started: started_tx, go_on: Arc::new(Mutex::new(go_on_rx)) };
    let versioned_base = base.clone();
    let live = std::thread::spawn(move || {
        let device = burn_stoker::device::cpu();
        Trainer::new(tiny_model(&device), SgdConfig::new().init(), tiny_data(STEPS as usize, &device))
            .default_callbacks(DefaultCallbacks::none())
            .handle_signals(false)
            .max_epoch(1)
            .log_dir(&versioned_base)
            .log_dir_policy(LogDirPolicy::NewVersion)
            .callbacks((hold, ModelSaver::new(1)))
            .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
            .map(|report| report.summary.log_dir.clone())
    });
    started.recv().unwrap();
    let acting = |policy| {
        let device = burn_stoker::device::cpu();
        Trainer::new(tiny_model(&device), SgdConfig::new().init(), tiny_data(STEPS as usize, &device))
            .default_callbacks(DefaultCallbacks::none())
            .handle_signals(false)
            .max_epoch(1)
            .log_dir(&base)
            .log_dir_policy(policy)
            .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
            .map_err(burn_stoker::Error::from)
    };
    for policy in [LogDirPolicy::Delete, LogDirPolicy::Backup] {
        let error = acting(policy).expect_err("a version run is live").to_string();
        assert!(error.contains("version_N") && error.contains("Nothing was changed"), "{policy:?}: {error}");
        assert!(
            base.join("version_0").is_dir() && base.join("stats.json").is_file(),
            "{policy:?}: untouched"
        );
    }
    go_on.send(()).unwrap();
    let live_dir = live.join().unwrap().expect("the live version run ends as it would have");
    assert_eq!(live_dir, base.join("version_0"));
    assert!(base.join("version_0/checkpoints/step-4").is_dir(), "its checkpoint is in its folder");
    // Ended: the base can be deleted now.
    acting(LogDirPolicy::Delete).expect("no live version run");
    assert!(!base.join("version_0").exists());
}

/// Issue 39, item 4: a fresh run's `create_dir` of its new `version_N` and the lock it then takes
/// were two acts, so a `--resume` started at that moment could take the new folder first (and
/// the fresh run failed on its lock). Choosing a folder and locking it is now one act under the
/// base's `.versions.choose`: a run choosing while another one holds it (this test, standing in
/// for a run caught between the two acts) waits, and creates nothing until it may. Before: the
/// fresh run created `version_0` at once.
#[test]
fn log_dir_a_run_choosing_its_version_folder_waits_for_another_run_choosing_at_that_moment() {
    let base = scratch_dir("log-dir-choosing");
    std::fs::create_dir_all(&base).unwrap();
    let choosing = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(base.join(".versions.choose"))
        .unwrap();
    choosing.lock().unwrap();
    let fresh_base = base.clone();
    let fresh = std::thread::spawn(move || {
        let device = burn_stoker::device::cpu();
        Trainer::new(tiny_model(&device), SgdConfig::new().init(), tiny_data(STEPS as usize, &device))
            .default_callbacks(DefaultCallbacks::none())
            .handle_signals(false)
            .max_epoch(1)
            .log_dir(&fresh_base)
            .log_dir_policy(LogDirPolicy::NewVersion)
            .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
            .map(|report| report.summary.log_dir.clone())
    });
    std::thread::sleep(std::time::Duration::from_millis(600));
    assert!(!base.join("version_0").exists(), "the run chose its folder while another run was choosing");
    drop(choosing);
    let dir = fresh.join().unwrap().expect("the run trains once the other has chosen");
    assert_eq!(dir, base.join("version_0"));
}
