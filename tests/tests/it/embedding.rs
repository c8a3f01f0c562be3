//! Training embedded in an application: a run stopped from another thread through its
//! `StopHandle` (as a Ctrl-C stops it: at a step boundary, with a checkpoint, and a resume
//! finishes it), a world stopped by one rank's handle, results read from the report without
//! files, the errors a caller branches on by variant, and `LogDirPolicy::NewVersion`.

use std::path::Path;
use std::sync::mpsc::{Sender, channel};

use burn::nn::Linear;
use burn::optim::SgdConfig;
use burn_stoker::prelude::*;
use burn_stoker::trainer::{LogDirPolicy, StopHandle};
use burn_stoker::world::Threads;
use stoker_tests::{mse, scratch_dir, tiny_data, tiny_model};

/// Says at each `trigger_step` which global step just ended, then waits for a go-ahead: the test
/// decides, from another thread, at which step the handle is used.
struct Pace {
    ended: Sender<u64>,
    go_on: std::sync::mpsc::Receiver<()>,
}

impl Callback<Linear> for Pace {
    fn trigger_step(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let _ = self.ended.send(ctx.global_step());
        let _ = self.go_on.recv();
        Ok(())
    }
}

/// A trainer of 3 epochs of 4 steps into `dir`, with no default callbacks and no signal handler
/// (the handle works without one), put a scalar `loss_seen` at every step.
fn trainer(
    dir: &std::path::Path,
) -> Trainer<Linear, Vec<(burn::tensor::Tensor<2>, burn::tensor::Tensor<2>)>> {
    let device = burn_stoker::device::cpu();
    Trainer::new(tiny_model(&device), SgdConfig::new().init(), tiny_data(4, &device))
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .max_epoch(3)
        .log_dir(dir)
}

#[test]
fn a_stop_handle_stops_at_a_step_boundary_with_a_checkpoint_and_a_resume_finishes() {
    let dir = scratch_dir("stop-handle");
    let (ended_tx, ended) = channel();
    let (go_on, go_on_rx) = channel();
    let (handle_tx, handle_rx) = channel();
    let run_dir = dir.clone();
    // The trainer is made on the thread that trains (with the `mpi` feature a `Trainer` is not
    // `Send`); the handle, which is, comes back.
    let run = std::thread::spawn(move || {
        let stopped = trainer(&run_dir);
        handle_tx.send(stopped.stop_handle()).unwrap();
        stopped
            .callbacks(Pace { ended: ended_tx, go_on: go_on_rx })
            .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
            .map_err(burn_stoker::Error::from)
    });
    let handle: StopHandle = handle_rx.recv().unwrap();
    // Steps 1-5 run; during step 6's trigger_step the application asks to stop.
    for expected in 1..=6 {
        assert_eq!(ended.recv().unwrap(), expected);
        if expected == 6 {
            handle.clone().stop();
        }
        go_on.send(()).unwrap();
    }
    let report = run.join().unwrap().expect("a stopped run returns its report");
    assert!(handle.is_stopped());
    let Outcome::Interrupted { signal, checkpoint } = &report.outcome else {
        panic!("outcome {:?}", report.outcome)
    };
    assert_eq!(signal, "StopHandle");
    assert_eq!(report.counters.global_step(), 6, "stopped at the boundary after step 6");
    let checkpoint = checkpoint.as_ref().expect("a checkpoint was written at the stop");
    assert!(checkpoint.ends_with("step-6"), "{}", checkpoint.display());

    // The resumed run finishes the 12 steps.
    let resumed = trainer(&dir)
        .auto_resume(true)
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .expect("the resume finishes");
    assert_eq!(resumed.outcome, Outcome::Finished);
    assert_eq!(resumed.counters.global_step(), 12);
}

/// Two ranks of the threads transport train 3 epochs of the tiny model in a scratch folder
/// `name`, each with the callback `callback` makes of its trainer's stop handle and its rank.
fn stop_handle_world<C: Callback<Linear> + 'static>(
    name: &str,
    callback: impl Fn(StopHandle, usize) -> C + Sync,
) -> Vec<TrainReport<Linear>> {
    let dir = scratch_dir(name);
    let device = burn_stoker::device::cpu();
    Threads::new(vec![device.clone(), device.clone()])
        .run(|world| {
            let rank = world.rank();
            let device = world.device().clone();
            let data = world.shard(tiny_data(8, &device));
            let trainer = Trainer::new(tiny_model(&device), SgdConfig::new().init(), data)
                .default_callbacks(DefaultCallbacks::none())
                .handle_signals(false)
                .max_epoch(3)
                .log_dir(&dir)
                .world(world);
            let handle = trainer.stop_handle();
            trainer
                .callbacks(callback(handle, rank))
                .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        })
        .expect("the world stops cleanly")
}

#[test]
fn one_ranks_stop_handle_stops_every_rank_of_a_world_at_the_same_step() {
    // Rank 1 (not the chief) asks to stop during step 3.
    let reports = stop_handle_world("stop-handle-world", |handle, rank| StopAtStep { handle, rank, at: 3 });
    for (rank, report) in reports.iter().enumerate() {
        assert!(matches!(report.outcome, Outcome::Interrupted { .. }), "rank {rank}: {:?}", report.outcome);
        assert_eq!(report.counters.global_step(), reports[0].counters.global_step(), "rank {rank}");
    }
    assert!(reports[0].counters.global_step() < 12, "the world stopped early");
    let Outcome::Interrupted { checkpoint, .. } = &reports[0].outcome else { unreachable!() };
    assert!(checkpoint.is_some(), "the chief wrote a checkpoint");
}

/// On every rank: rank 1 alone uses its trainer's `handle` at global step `at`.
struct Rank1Stops {
    handle: StopHandle,
    at: u64,
}

impl Callback<Linear> for Rank1Stops {
    fn chief_only(&self) -> bool {
        false
    }
    fn trigger_step(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        if ctx.rank() == 1 && ctx.global_step() == self.at {
            self.handle.stop();
        }
        Ok(())
    }
}

#[test]
fn in_a_world_the_rank_whose_stop_handle_stopped_it_reports_stop_handle() {
    // The stop travels to the other ranks as a SIGTERM does; the rank that asked reported it as a
    // SIGTERM too.
    let reports = stop_handle_world("stop-handle-world-name", |handle, _| Rank1Stops { handle, at: 3 });
    let signal = |report: &TrainReport<Linear>| match &report.outcome {
        Outcome::Interrupted { signal, .. } => signal.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(signal(&reports[1]), "StopHandle", "the rank that asked");
    assert_eq!(signal(&reports[0]), "SIGTERM", "the others see it as a SIGTERM");
}

/// Uses `handle` on rank `rank` at global step `at`.
struct StopAtStep {
    handle: StopHandle,
    rank: usize,
    at: u64,
}

impl Callback<Linear> for StopAtStep {
    fn trigger_step(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        if ctx.rank() == self.rank && ctx.global_step() == self.at {
            self.handle.stop();
        }
        Ok(())
    }
}

/// Puts `cost` = 5 - step (best last) and `accuracy` = step % 3 (best at step 2) at each step.
struct PutScalars;

impl Callback<Linear> for PutScalars {
    fn trigger_step(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let step = ctx.global_step() as f64;
        ctx.monitors().put_scalar("cost", 5.0 - step);
        ctx.monitors().put_scalar("accuracy", step % 3.0);
        Ok(())
    }
}

#[test]
fn the_report_answers_latest_and_best_without_reading_files() {
    let dir = scratch_dir("report-latest-best");
    let report = trainer(&dir)
        .max_epoch(1)
        .callbacks(PutScalars)
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .expect("training succeeds");
    assert_eq!(report.latest("cost"), Some(1.0));
    assert_eq!(report.latest("accuracy"), Some(1.0));
    let best = report.best("cost").expect("cost improves downwards");
    assert_eq!((best.value, best.global_step), (1.0, 4));
    let best = report.best("accuracy").expect("accuracy improves upwards");
    assert_eq!((best.value, best.global_step), (2.0, 2));
    assert_eq!(report.latest("nothing"), None);
    assert!(report.best("nothing").is_none());
}

#[test]
fn errors_a_caller_branches_on_have_variants_of_their_own() {
    let dir = scratch_dir("error-variants");
    let train = |policy: LogDirPolicy| {
        trainer(&dir)
            .max_epoch(1)
            .log_dir_policy(policy)
            .callbacks(ModelSaver::new(3))
            .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
            .map_err(burn_stoker::Error::from)
    };
    train(LogDirPolicy::Refuse).expect("the first run");
    let error = train(LogDirPolicy::Refuse).expect_err("an earlier run is refused");
    let burn_stoker::Error::LogDir(burn_stoker::LogDirError::EarlierRun { dir: at, found }) = error.root()
    else {
        panic!("{error}")
    };
    assert_eq!(at, &dir);
    assert!(found.iter().any(|f| f.starts_with("checkpoints/")), "{found:?}");
    assert!(error.to_string().contains("holds an earlier run"), "{error}");
}

/// A run of `epochs` epochs under `LogDirPolicy::NewVersion` in `dir`, resuming when `resume`.
fn versioned_run(dir: &Path, resume: bool, epochs: u64) -> TrainReport<Linear> {
    trainer(dir)
        .max_epoch(epochs)
        .log_dir_policy(LogDirPolicy::NewVersion)
        .auto_resume(resume)
        .callbacks(ModelSaver::new(3))
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .expect("a versioned run never refuses")
}

#[test]
fn new_version_trains_each_run_in_a_new_folder_and_auto_resume_continues_the_newest() {
    let dir = scratch_dir("log-dir-versions");
    let run = |resume: bool, epochs: u64| versioned_run(&dir, resume, epochs);
    let first = run(false, 1);
    assert_eq!(first.summary.log_dir, dir.join("version_0"));
    let second = run(false, 1);
    assert_eq!(second.summary.log_dir, dir.join("version_1"));
    assert!(dir.join("version_0/checkpoints").is_dir(), "the first run is untouched");
    // A resume continues the newest, to 2 epochs.
    let resumed = run(true, 2);
    assert_eq!(resumed.summary.log_dir, dir.join("version_1"));
    assert_eq!(resumed.counters.global_step(), 8);
    assert!(!dir.join("version_2").exists());
}

#[test]
fn auto_resume_skips_newer_versions_without_a_checkpoint_and_resumes_the_newest_with_one() {
    // Before, a resume took the newest `version_N` whatever it held: a run that failed in setup
    // or was killed before its first checkpoint left an empty one, and the resume silently
    // started from step 0 there, leaving the previous version's checkpoints behind.
    let dir = scratch_dir("log-dir-versions-empty");
    let run = |resume: bool, epochs: u64| versioned_run(&dir, resume, epochs);
    assert_eq!(run(false, 1).summary.log_dir, dir.join("version_0"));
    // A run that died before its first checkpoint, and a folder that is no version.
    std::fs::create_dir_all(dir.join("version_1/checkpoints")).unwrap();
    std::fs::create_dir_all(dir.join("version_+5")).unwrap();
    let resumed = run(true, 2);
    assert_eq!(resumed.summary.log_dir, dir.join("version_0"));
    assert_eq!(resumed.counters.global_step(), 8, "continued from version_0's step 4");
    assert!(dir.join("version_1").is_dir(), "the empty folder is left as it is");
    // A fresh run takes the number after the highest version, not after `version_+5`.
    assert_eq!(run(false, 1).summary.log_dir, dir.join("version_2"));
}
