//! What a resume refuses, and what it no longer refuses: a checkpoint whose data position names
//! other samples (passes of another length; a world of another size is in `world.rs`) unless
//! the run resumes inexactly, counters read from disk that no run could have written, and a run
//! trained "until stopped" (`max_epoch(u64::MAX)`) resumed.

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use burn::nn::Linear;
use burn::optim::SgdConfig;
use burn::tensor::Tensor;
use burn_stoker::prelude::*;
use stoker_tests::world::{B, batches, fixed_model, mse};
use stoker_tests::{CheckpointAndStop, latest_checkpoint, rewrite_checkpoint_json, scratch_dir};

/// A trainer on `n` batches, `max_epoch` epochs, in `dir`.
fn trainer(dir: &Path, n: usize, max_epoch: u64) -> Trainer<Linear, Vec<(Tensor<2>, Tensor<2>)>> {
    let device = burn_stoker::device::cpu();
    Trainer::new(fixed_model(&device), SgdConfig::new().init(), batches(n, B, &device))
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .max_epoch(max_epoch)
        .log_dir(dir)
}

fn stopped_at(dir: &Path, n: usize, max_epoch: u64, stop_at: u64) {
    trainer(dir, n, max_epoch).callbacks(CheckpointAndStop(stop_at)).train(mse).expect("the first run");
}

#[test]
fn a_resume_over_passes_of_another_length_is_refused_unless_inexact() {
    let dir = scratch_dir("resume-other-data");
    stopped_at(&dir, 8, 3, 5);
    let error = trainer(&dir, 10, 3).auto_resume(true).train(mse).expect_err("refused").to_string();
    assert!(
        error.contains("was written with 8 batches in each rank's pass over the data, this run has 10"),
        "{error}"
    );
    assert!(error.contains("Trainer::resume_inexact(true)"), "{error}");
    let report = trainer(&dir, 10, 3).auto_resume(true).resume_inexact(true).train(mse).expect("inexact");
    // The checkpoint's 8 steps per epoch carry on: the rest of epoch 1, then epochs 2 and 3.
    assert_eq!(report.counters.global_step(), 24);
}

#[test]
fn a_run_trained_until_stopped_resumes() {
    let dir = scratch_dir("resume-until-stopped");
    stopped_at(&dir, 4, u64::MAX, 6);
    let report = trainer(&dir, 4, u64::MAX)
        .auto_resume(true)
        .callbacks(CheckpointAndStop(10))
        .train(mse)
        .expect("resumes at epoch 2 of u64::MAX");
    assert_eq!(report.counters.global_step(), 10);
}

/// Train from `dir`'s latest checkpoint with its trainer state changed by `change`, on another
/// thread; the error, or a panic if it takes more than 60 s (the run replays or counts forever).
fn resumed_from_crafted(name: &str, change: impl FnOnce(&mut serde_json::Value)) -> String {
    let dir = scratch_dir(name);
    stopped_at(&dir, 4, 3, 6);
    rewrite_checkpoint_json(&latest_checkpoint(&dir), "trainer.json", change);
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        let result = trainer(&dir, 4, 3).auto_resume(true).train(mse);
        let _ = send.send(result.err().map(|e| e.to_string()));
    });
    match receive.recv_timeout(Duration::from_secs(60)) {
        Ok(error) => error.expect("the crafted checkpoint is refused"),
        Err(_) => panic!("the run resumed from a crafted checkpoint was still going after 60 s"),
    }
}

#[test]
fn a_checkpoint_whose_data_position_no_run_could_reach_is_refused() {
    let error = resumed_from_crafted("resume-huge-passes", |trainer| {
        trainer["data"]["passes"] = 1_000_000_000_000_000u64.into();
    });
    assert!(error.contains("is malformed: its data position (pass 1000000000000000, batch"), "{error}");
    assert!(error.contains("cannot follow from global step 6"), "{error}");
}

#[test]
fn a_checkpoint_whose_global_step_leaves_no_room_to_count_is_refused() {
    let error = resumed_from_crafted("resume-huge-step", |trainer| {
        trainer["counters"]["global_step"] = (u64::MAX - 1).into();
    });
    assert!(error.contains(&format!("is malformed: global step {} leaves no room", u64::MAX - 1)), "{error}");
}

/// The manifest of the checkpoint in `step` with its run id set to `run`, sealed again.
fn set_manifest_run(step: &Path, run: &str) {
    let path = step.join("manifest.json");
    let mut manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    manifest["run"] = serde_json::json!(run);
    std::fs::write(&path, serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
    // Sealed as stoker seals it: `trainer.json` recorded again as it is.
    let trainer = std::fs::read(step.join("trainer.json")).unwrap();
    stoker_tests::reseal(step, "trainer.json", &trainer);
}

#[test]
fn a_checkpoint_whose_run_id_is_a_path_is_damaged_and_touches_no_file_outside_its_journals() {
    let dir = scratch_dir("resume-run-id-path");
    stopped_at(&dir, 4, 3, 6);
    let step = latest_checkpoint(&dir);
    let journal = std::fs::read_dir(dir.join("history"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("monitors-"))
        .expect("the monitors' journal");
    // A file of the user's, two folders above the journals, that a crafted run id reaches:
    // `history/monitors-x/../../victim.jsonl`. It starts with the journal's lines, so that a
    // reader that follows the path finds them and then cuts what follows.
    let victim = dir.join("victim.jsonl");
    let mut contents = std::fs::read(&journal).unwrap();
    contents.extend_from_slice(b"{\"the user's\": \"data\"}\n");
    std::fs::write(&victim, &contents).unwrap();
    std::fs::create_dir_all(dir.join("history/monitors-x")).unwrap();
    set_manifest_run(&step, "x/../../victim");
    let error = trainer(&dir, 4, 3).auto_resume(true).train(mse).expect_err("refused").to_string();
    assert!(error.contains("run id \"x/../../victim\" is not one stoker writes"), "{error}");
    assert_eq!(std::fs::read(&victim).unwrap(), contents, "the user's file is untouched");
}
