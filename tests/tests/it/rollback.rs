//! A run sent back: resumed from a saver's own folder (a `checkpoint_dir` archive, the guide's
//! second saver) or from an older checkpoint. Everything a resume reads is read before a
//! log-directory policy acts, a saver's folder holds the history its checkpoints name, a
//! missing history is a warning and a shorter history, and the abandoned timeline's newer
//! checkpoints and best copies are set aside rather than kept as the latest or overwritten.

use std::path::Path;
use std::sync::{Arc, Mutex};

use burn::nn::Linear;
use burn::optim::SgdConfig;
use burn_stoker::prelude::*;
use burn_stoker::saver::{Checkpoint, SaveBestState};
use burn_stoker::trainer::LogDirPolicy;
use stoker_tests::{entries, mse, scratch_dir, tiny_data, tiny_model, weights};

/// Steps per epoch of the runs below.
const STEPS: u64 = 4;

/// Puts `x` = the global step at every step, and keeps the history of `x` the monitors hold
/// when training ends (a resumed run's includes what it restored).
#[derive(Clone, Default)]
struct StepHistory(Arc<Mutex<Vec<(u64, f64)>>>);

impl Callback<Linear> for StepHistory {
    fn trigger_step(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let step = ctx.global_step() as f64;
        ctx.monitors().put_scalar("x", step);
        Ok(())
    }
    fn after_train(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        *self.0.lock().unwrap() = ctx.monitors_ref().history("x").to_vec();
        Ok(())
    }
}

impl StepHistory {
    fn values(&self) -> Vec<(u64, f64)> {
        self.0.lock().unwrap().clone()
    }
}

/// The guide's two savers: the last 2 in `<log dir>/checkpoints`, every second epoch in
/// `archive`, all of them.
fn savers(archive: &Path) -> (ModelSaver, Named<PeriodicTrigger<ModelSaver>>) {
    (
        ModelSaver::new(2),
        PeriodicTrigger::new(ModelSaver::new(usize::MAX).checkpoint_dir(archive))
            .every_k_epochs(2)
            .named("archive"),
    )
}

/// A run of the tiny model to `epochs` in `log_dir` under `policy`, from `resume` when given.
fn run<K>(
    log_dir: &Path,
    policy: LogDirPolicy,
    epochs: u64,
    resume: Option<&Path>,
    callbacks: impl Callbacks<Linear, K>,
) -> burn_stoker::Result<TrainReport<Linear>> {
    let device = burn_stoker::device::cpu();
    let trainer =
        Trainer::new(tiny_model(&device), SgdConfig::new().init(), tiny_data(STEPS as usize, &device))
            .default_callbacks(DefaultCallbacks::none())
            .handle_signals(false)
            .max_epoch(epochs)
            .log_dir(log_dir)
            .log_dir_policy(policy);
    let trainer = match resume {
        Some(from) => trainer.resume_from(from),
        None => trainer,
    };
    trainer
        .callbacks(callbacks)
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .map_err(burn_stoker::Error::from)
}

/// Issue 39, item 6: the guide shows a run resumed from its archive. Under every policy it now
/// continues to the uninterrupted run's weights with its whole history. The log directory holds
/// that run (its index and its journal say so), so the run goes back there as from one of its
/// own checkpoints: the checkpoints newer than the archive's are set aside, whatever the policy
/// (a policy acts on another run's directory); under `NewVersion` the run continues in a new
/// version folder. Before: refuse refused the directory, delete and backup removed the journal
/// first ("the journal is not there"), keep left step-24 of the abandoned timeline in place.
#[test]
fn a_run_resumes_from_its_archive_under_every_policy_with_its_whole_history() {
    use LogDirPolicy::{Backup, Delete, Keep, NewVersion, Refuse};
    for policy in [Refuse, Keep, Backup, Delete, NewVersion] {
        let scratch = scratch_dir(&format!("rollback-archive-{policy:?}"));
        let (log_dir, archive) = (scratch.join("log"), scratch.join("archive"));
        let straight = StepHistory::default();
        let first =
            run(&log_dir, policy, 6, None, (savers(&archive), straight.clone())).expect("the first run");
        let archived: Vec<String> =
            entries(&archive).into_iter().filter(|n| n.starts_with("step-")).collect();
        assert_eq!(archived, ["step-16", "step-24", "step-8"], "{policy:?}");
        // Sent back to epoch 4's end, from the archive.
        let resumed = StepHistory::default();
        let report =
            run(&log_dir, policy, 6, Some(&archive.join("step-16")), (savers(&archive), resumed.clone()))
                .unwrap_or_else(|e| panic!("{policy:?}: resuming from the archive: {e}"));
        assert_eq!(report.counters.global_step(), 24, "{policy:?}");
        assert_eq!(
            weights(&report.model),
            weights(&first.model),
            "{policy:?}: the uninterrupted run's weights"
        );
        assert_eq!(resumed.values(), straight.values(), "{policy:?}: the whole history");
        assert_eq!(straight.values().len(), 24);
        if policy != NewVersion {
            let names = entries(&log_dir.join("checkpoints"));
            assert!(
                names.contains(&"step-24.abandoned".to_string()) && names.contains(&"step-24".to_string()),
                "{policy:?}: the abandoned timeline's step-24 set aside, the resumed run's written: {names:?}"
            );
        }
    }
}

/// Issue 39, item 6: a saver's folder is self-contained. With the log directory that wrote it
/// gone, a run resumes from the archive into a new log directory with its whole history (the
/// archive holds a copy of the journal its checkpoints name). Before: "reading the monitors'
/// history ... the journal is not there".
#[test]
fn an_archive_resumes_without_the_log_directory_that_wrote_it() {
    let scratch = scratch_dir("rollback-archive-alone");
    let archive = scratch.join("archive");
    let straight = StepHistory::default();
    let first =
        run(&scratch.join("log"), LogDirPolicy::Refuse, 6, None, (savers(&archive), straight.clone()))
            .expect("the first run");
    std::fs::remove_dir_all(scratch.join("log")).unwrap();
    let resumed = StepHistory::default();
    let report = run(
        &scratch.join("elsewhere"),
        LogDirPolicy::Refuse,
        6,
        Some(&archive.join("step-16")),
        (savers(&archive), resumed.clone()),
    )
    .expect("resumed from the archive alone");
    assert_eq!(weights(&report.model), weights(&first.model));
    assert_eq!(resumed.values(), straight.values());
}

/// Issue 39, item 6: a journal that is gone is a warning and a shorter history, never a
/// checkpoint that cannot be resumed: the run continues to the uninterrupted run's weights, with
/// the values put from the checkpoint on. Before: the resume failed ("the journal is not there").
#[test]
fn a_missing_journal_is_a_shorter_history_not_an_unresumable_checkpoint() {
    let scratch = scratch_dir("rollback-no-journal");
    let log_dir = scratch.join("log");
    let first = run(&log_dir, LogDirPolicy::Refuse, 5, None, (ModelSaver::new(3), StepHistory::default()))
        .expect("the first run");
    std::fs::remove_dir_all(log_dir.join("history")).unwrap();
    let resumed = StepHistory::default();
    let from = log_dir.join("checkpoints/step-16");
    let report = run(&log_dir, LogDirPolicy::Refuse, 5, Some(&from), (ModelSaver::new(3), resumed.clone()))
        .expect("resumed without its journal");
    assert_eq!(weights(&report.model), weights(&first.model));
    let steps: Vec<u64> = resumed.values().iter().map(|&(step, _)| step).collect();
    assert_eq!(steps, [17, 18, 19, 20], "the history from the checkpoint on");
    // The next resume reads the new journal: the history the run holds since.
    let again = StepHistory::default();
    run(
        &log_dir,
        LogDirPolicy::Refuse,
        6,
        Some(&log_dir.join("checkpoints")),
        (ModelSaver::new(3), again.clone()),
    )
    .expect("resumed from the new journal");
    let steps: Vec<u64> = again.values().iter().map(|&(step, _)| step).collect();
    assert_eq!(steps, (17..=24).collect::<Vec<u64>>());
}

/// Puts `val_loss` = `values[epoch - 1]` at each epoch's end.
struct Losses(Vec<f64>);

impl Callback<Linear> for Losses {
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        if let Some(&value) = self.0.get(ctx.epoch_num() as usize - 1) {
            ctx.monitors().put_scalar("val_loss", value);
        }
        Ok(())
    }
}

/// Issue 39, item 9: SaveBestState's best state written after the checkpoint a run is sent back
/// to is the abandoned timeline's best: set aside as `best.abandoned` (as MinSaver's copies are),
/// not replaced by the resumed run's worse improvement. Before: overwritten.
#[test]
fn save_best_state_sets_the_abandoned_timelines_best_aside_on_a_rollback() {
    let log_dir = scratch_dir("rollback-best-state");
    let best = || SaveBestState::new("best", "val_loss");
    let callbacks = |values: &[f64]| (Losses(values.to_vec()), best(), ModelSaver::new(10));
    run(&log_dir, LogDirPolicy::Refuse, 4, None, callbacks(&[1.0, 0.5, 0.9, 0.4])).expect("the first run");
    let abandoned_best = std::fs::read(log_dir.join("best/model.bpk")).unwrap();
    assert_eq!(Checkpoint::read(log_dir.join("best")).unwrap().global_step(), 16);
    // Sent back to epoch 2's end (best 0.5); epoch 4 improves on it, less than the lost 0.4 did.
    let from = log_dir.join("checkpoints/step-8");
    run(&log_dir, LogDirPolicy::Refuse, 4, Some(&from), callbacks(&[1.0, 0.5, 0.9, 0.45])).expect("resumed");
    let aside = log_dir.join("best.abandoned");
    assert!(aside.is_dir(), "the abandoned timeline's best is set aside: {:?}", entries(&log_dir));
    assert_eq!(std::fs::read(aside.join("model.bpk")).unwrap(), abandoned_best);
    let best_now = Checkpoint::read(log_dir.join("best")).unwrap();
    assert_eq!(best_now.callback_state("SaveBestState(val_loss)").unwrap()["best"], 0.45);
}
