//! Data-parallel training over MPI: each test starts `mpirun --allow-run-as-root --oversubscribe
//! -n 2` on the `mpi_worker` binary (one rank per process, on the CPU) and checks what the ranks
//! wrote: two ranks with batch b train the weights one rank with batch 2b trains (SGD and Adam),
//! the replicas are bit-identical, chief-only callbacks ran once and the others twice, one writer
//! of each file, a stop asked on rank 1 stops both at the same step, SIGINT to `mpirun` then a
//! resume ends equal to an uninterrupted run, and a panic on rank 1 ends the run with an error
//! naming rank 1 within 30 s.
#![cfg(feature = "mpi")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use burn::optim::{AdamConfig, ModuleOptimizer, SgdConfig};
use burn_stoker::prelude::*;
use serde_json::Value as Json;
use stoker_tests::world::{from_bits, joined, max_diff, mse};
use stoker_tests::{scratch_dir, weights};

/// The number of ranks a scenario runs with.
fn ranks(scenario: &str) -> usize {
    if scenario == "far" { 3 } else { 2 }
}

fn mpirun(scenario: &str, log_dir: &Path, out: &Path, resume: bool) -> Command {
    let mut command = Command::new("mpirun");
    command.env_remove("OMPI_MCA_odls_base_sigkill_timeout");
    command.args(["--allow-run-as-root", "--oversubscribe", "-n", &ranks(scenario).to_string()]);
    command.arg(env!("CARGO_BIN_EXE_mpi_worker")).arg(scenario).arg(log_dir).arg(out);
    if resume {
        command.arg("--resume");
    }
    command.stdin(Stdio::null());
    // mpirun forwards the SIGINT a test sends it to the ranks.
    stoker_tests::sigint_default(&mut command);
    command
}

/// Starts the `long` scenario and returns once the ranks have trained 20 steps.
fn start_long(dir: &Path, out: &Path) -> std::process::Child {
    start(mpirun("long", dir, out, false), out)
}

/// Starts `command` and returns once the ranks have trained 20 steps.
fn start(mut command: Command, out: &Path) -> std::process::Child {
    let child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let start = Instant::now();
    while !out.join("started").exists() {
        assert!(start.elapsed() < Duration::from_secs(60), "the ranks never started training");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// Runs a scenario to its end; returns the output and each rank's record.
fn run(scenario: &str, log_dir: &Path, resume: bool) -> (Output, Vec<Json>, PathBuf) {
    let out = scratch_dir(&format!("mpi-out-{scenario}"));
    let output =
        mpirun(scenario, log_dir, &out, resume).output().expect("mpirun runs (apt-get install openmpi-bin)");
    let records = (0..ranks(scenario))
        .filter_map(|r| std::fs::read_to_string(out.join(format!("rank-{r}.json"))).ok())
        .map(|text| serde_json::from_str(&text).expect("a rank's record"))
        .collect();
    (output, records, out)
}

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

fn record_weights(record: &Json) -> Vec<Vec<f32>> {
    from_bits(&serde_json::from_value::<Vec<Vec<u32>>>(record["weights"].clone()).unwrap())
}

fn single(optimizer: ModuleOptimizer) -> Vec<Vec<f32>> {
    let device = burn_stoker::device::cpu();
    let report = Trainer::new(stoker_tests::world::fixed_model(&device), optimizer, joined(50, &device))
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .learning_rate(0.05)
        .log_dir(scratch_dir("mpi-single"))
        .train(mse)
        .expect("one rank");
    weights(&report.model)
}

fn equivalent(scenario: &str, optimizer: ModuleOptimizer) {
    let (output, records, _) = run(scenario, &scratch_dir("mpi-equiv"), false);
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(records.len(), 2, "{}", text(&output));
    assert_eq!(records[0]["size"], 2);
    assert_eq!(records[0]["global_step"], 50);
    assert_eq!(records[0]["weights"], records[1]["weights"], "the replicas must be bit-identical");
    let diff = max_diff(&single(optimizer), &record_weights(&records[0]));
    assert!(diff < 1e-5, "2 ranks x batch 4 vs 1 rank x batch 8: max difference {diff}");
}

#[test]
fn two_mpi_ranks_with_sgd_train_what_one_rank_with_twice_the_batch_trains() {
    equivalent("sgd", SgdConfig::new().init());
}

#[test]
fn two_mpi_ranks_with_adam_train_what_one_rank_with_twice_the_batch_trains() {
    equivalent("adam", AdamConfig::new().init());
}

/// What a rank's exchanges give MPI to sum: the weights once at the start (the fixtures' 6 -> 3
/// `Linear`: 21 values) and the gradients at each step (21, and a flag per parameter: 23), and
/// nothing more: an exchange of the words alone (a callback's sum over ranks, an epoch's end, the
/// final one) sends the words only. Each once sent zeros the size of the gradients beside them.
#[test]
fn over_mpi_an_exchange_of_words_alone_sends_no_gradient_sized_buffer() {
    let (output, records, _) = run("sums", &scratch_dir("mpi-sums"), false);
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(records.len(), 2, "{}", text(&output));
    for record in &records {
        assert_eq!(record["global_step"], 10, "{record}");
        assert_eq!(record["floats_reduced"], 21 + 10 * 23, "{record}");
    }
    assert_eq!(records[0]["weights"], records[1]["weights"], "the replicas must be bit-identical");
}

#[test]
fn over_mpi_chief_only_callbacks_run_once_and_one_rank_writes() {
    let dir = scratch_dir("mpi-callbacks");
    let (output, records, _) = run("callbacks", &dir, false);
    assert!(output.status.success(), "{}", text(&output));
    let (chief, other) = (&records[0], &records[1]);
    assert_eq!((chief["chief_setups"].as_u64(), chief["chief_steps"].as_u64()), (Some(1), Some(8)));
    assert_eq!((other["chief_setups"].as_u64(), other["chief_steps"].as_u64()), (Some(0), Some(0)));
    for record in &records {
        assert_eq!((record["every_setups"].as_u64(), record["every_steps"].as_u64()), (Some(1), Some(8)));
    }
    // One writer of each file: one event file, one stats.json with one entry per epoch, one
    // checkpoint series.
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let events = names.iter().filter(|n| n.starts_with("events.out.tfevents.")).count();
    assert_eq!(events, 1, "{names:?}");
    let stats: Vec<Json> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("stats.json")).unwrap()).unwrap();
    assert!(stats.is_empty(), "no callback here puts scalars: {stats:?}");
    let index: Json =
        serde_json::from_str(&std::fs::read_to_string(dir.join("checkpoints/index.json")).unwrap()).unwrap();
    assert_eq!(index["latest"], "step-8");
}

#[test]
fn over_mpi_a_stop_asked_on_rank_1_stops_both_at_the_same_step() {
    let (output, records, _) = run("stop", &scratch_dir("mpi-stop"), false);
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(records[0]["global_step"], 6, "{}", records[0]);
    assert_eq!(records[1]["global_step"], 6);
    assert_eq!(records[0]["weights"], records[1]["weights"]);
    assert!(records[0]["outcome"].as_str().unwrap().starts_with("stopped"));
}

#[test]
fn over_mpi_a_panic_on_rank_1_ends_the_run_with_an_error_naming_rank_1() {
    let start = Instant::now();
    let (output, records, out) = run("panic", &scratch_dir("mpi-panic"), false);
    assert!(start.elapsed() < Duration::from_secs(30), "took {:?}", start.elapsed());
    assert!(!output.status.success());
    assert!(records.is_empty(), "no rank finished");
    let error =
        |rank: usize| std::fs::read_to_string(out.join(format!("error-{rank}.txt"))).unwrap_or_default();
    assert_eq!(error(1), "panic in the training step: rank 1 broke on purpose", "{}", text(&output));
    assert_eq!(
        error(0),
        "rank 1 of the data-parallel world failed, so every rank stopped",
        "{}",
        text(&output)
    );
    // What a program matches on: rank 0's is a `WorldError`, naming rank 1; rank 1's its panic.
    let variant =
        |rank: usize| std::fs::read_to_string(out.join(format!("error-{rank}.variant"))).unwrap_or_default();
    assert_eq!(variant(0), "World(RankFailed { rank: 1 })");
    assert!(variant(1).starts_with("Panic { location: \"the training step\""), "{}", variant(1));
}

#[test]
fn sigint_to_mpirun_then_a_resume_ends_where_an_uninterrupted_run_does() {
    let (output, whole, _) = run("long", &scratch_dir("mpi-whole"), false);
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(whole[0]["global_step"], 1200);

    let dir = scratch_dir("mpi-interrupted");
    let out = scratch_dir("mpi-out-interrupted");
    let child = start_long(&dir, &out);
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let output = child.wait_with_output().unwrap();
    let text1 = text(&output);
    let records: Vec<Json> = (0..2)
        .map(|r| {
            serde_json::from_str(&std::fs::read_to_string(out.join(format!("rank-{r}.json"))).expect(&text1))
                .unwrap()
        })
        .collect();
    assert_eq!(records[0]["global_step"], records[1]["global_step"], "both stop at the same step");
    assert!(records[0]["outcome"].as_str().unwrap().starts_with("interrupted"), "{}", records[0]);
    let stopped_at = records[0]["global_step"].as_u64().unwrap();
    assert!(stopped_at < 1200, "{stopped_at}");

    let (output, resumed, _) = run("long", &dir, true);
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(resumed[0]["global_step"], 1200);
    assert_eq!(resumed[0]["weights"], resumed[1]["weights"]);
    assert_eq!(
        resumed[0]["weights"], whole[0]["weights"],
        "resumed and uninterrupted runs end bit-identical"
    );
}

/// Ctrl-C on mpirun's terminal reaches mpirun alone (the ranks have process groups of their
/// own): mpirun sends SIGCONT, SIGTERM `odls_base_sigkill_timeout` seconds later, SIGKILL as long
/// after that. With a checkpoint that takes 5 s and the timeout set to 10 (what the guide
/// says to configure), the ranks stop at one step and its checkpoint is complete.
#[test]
fn ctrl_c_on_mpirun_with_a_5_s_checkpoint_and_a_10_s_kill_timeout_keeps_the_checkpoint() {
    let dir = scratch_dir("mpi-slow-save");
    let out = scratch_dir("mpi-out-slow-save");
    let mut command = mpirun("slow-save", &dir, &out, false);
    command.env("OMPI_MCA_odls_base_sigkill_timeout", "10");
    let child = start(command, &out);
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let output = child.wait_with_output().unwrap();
    let text = text(&output);
    let records: Vec<Json> = (0..2)
        .map(|r| {
            let record = std::fs::read_to_string(out.join(format!("rank-{r}.json")));
            serde_json::from_str(
                &record.unwrap_or_else(|_| panic!("rank {r} ended without its record: {text}")),
            )
            .unwrap()
        })
        .collect();
    assert_eq!(records[0]["global_step"], records[1]["global_step"], "both stop at the same step");
    assert!(records[0]["outcome"].as_str().unwrap().starts_with("interrupted: SIGTERM"), "{}", records[0]);
    let stopped_at = records[0]["global_step"].as_u64().unwrap();
    let latest = burn_stoker::saver::Checkpoint::latest(&dir).unwrap().expect(&text);
    assert_eq!(
        latest.global_step(),
        stopped_at,
        "the interrupt's checkpoint is the latest complete one: {text}"
    );
    assert!(!text.contains("writing a checkpoint took"), "10 s is enough for a 5 s checkpoint: {text}");
}

/// A chief whose checkpoint takes longer than mpirun's kill timeout allows says so once, naming
/// the setting (here a timeout of 0 s, so that any checkpoint is too slow).
#[test]
fn over_mpi_a_checkpoint_slower_than_mpiruns_kill_timeout_is_named_once() {
    let out = scratch_dir("mpi-out-grace");
    let mut command = mpirun("callbacks", &scratch_dir("mpi-grace"), &out, false);
    command.env("OMPI_MCA_odls_base_sigkill_timeout", "0");
    let output = command.output().unwrap();
    let text = text(&output);
    assert!(output.status.success(), "{text}");
    assert_eq!(text.matches("writing a checkpoint took").count(), 1, "{text}");
    assert!(
        text.contains("mpirun kills the ranks 0 s after")
            && text.contains("--mca odls_base_sigkill_timeout "),
        "{text}"
    );
}

/// A parameter with a gradient on the chief only (rank 1's step leaves the bias out) gets the
/// same update on both ranks, as with threads: the replicas stay identical (the check at the
/// epoch's end passes) instead of the chief's bias drifting from rank 1's.
#[test]
fn over_mpi_a_parameter_with_a_gradient_on_one_rank_gets_the_same_update_on_both() {
    let (output, records, _) = run("partial-grad", &scratch_dir("mpi-partial"), false);
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(records.len(), 2);
    assert_eq!(records[0]["weights"], records[1]["weights"], "the replicas must be bit-identical");
    assert_eq!(records[0]["global_step"], 50);
}

#[test]
fn over_mpi_a_rank_that_never_trains_ends_the_job_within_seconds() {
    let start = Instant::now();
    let (output, records, _) = run("absent", &scratch_dir("mpi-absent"), false);
    assert!(start.elapsed() < Duration::from_secs(30), "took {:?}", start.elapsed());
    assert!(!output.status.success());
    assert!(records.is_empty(), "no rank finished");
    let text = text(&output);
    assert!(text.contains("stoker: rank 1 left the data-parallel world before its training ended"), "{text}");
}

#[test]
fn over_mpi_a_rank_killed_ends_the_job_and_mpirun_names_it() {
    let dir = scratch_dir("mpi-killed");
    let out = scratch_dir("mpi-out-killed");
    let child = start_long(&dir, &out);
    let pid: i32 = std::fs::read_to_string(out.join("pid-1")).unwrap().trim().parse().unwrap();
    let killed = Instant::now();
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let output = child.wait_with_output().unwrap();
    assert!(killed.elapsed() < Duration::from_secs(30), "took {:?}", killed.elapsed());
    assert!(!output.status.success());
    let text = text(&output);
    assert!(text.contains("rank 1") && text.contains("signal 9"), "{text}");
}

#[test]
fn three_mpi_ranks_resumed_past_global_step_2_pow_24_agree_on_their_counters() {
    let dir = scratch_dir("mpi-far");
    let (output, records, _) = run("far", &dir, false);
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(records.len(), 3, "{}", text(&output));
    // The checkpoint moved past 2^24, where summing three ranks' steps in f32 once rounded.
    let far = (1u64 << 24) + 7;
    let step = stoker_tests::latest_checkpoint(&dir);
    stoker_tests::rewrite_checkpoint_json(&step, "trainer.json", |trainer| {
        trainer["counters"]["global_step"] = far.into();
    });
    let (output, records, out) = run("far", &dir, true);
    let errors: Vec<String> =
        (0..3).filter_map(|r| std::fs::read_to_string(out.join(format!("error-{r}.txt"))).ok()).collect();
    assert!(output.status.success(), "{errors:?}\n{}", text(&output));
    assert_eq!(records.len(), 3);
    for record in &records {
        assert_eq!(record["global_step"], far + 33, "{record}");
        assert_eq!(record["outcome"], "finished");
    }
}

/// Runs `scenario` (rank 1 differs from the chief) and returns each rank's error.
fn layout_errors(scenario: &str) -> Vec<String> {
    let (output, records, out) = run(scenario, &scratch_dir(&format!("mpi-{scenario}")), false);
    assert!(!output.status.success(), "{}", text(&output));
    assert!(records.is_empty(), "no rank trains: {records:?}");
    (0..2).map(|r| std::fs::read_to_string(out.join(format!("error-{r}.txt"))).unwrap_or_default()).collect()
}

#[test]
fn over_mpi_a_rank_with_one_more_hyper_parameter_fails_every_rank_naming_it() {
    let errors = layout_errors("extra-hyper");
    for error in &errors {
        assert!(error.contains("the hyper-parameters differ on rank 1 (rank 0: 1 registered"), "{errors:?}");
    }
    assert!(errors[1].contains("here, rank 1: 2 registered"), "{errors:?}");
}

#[test]
fn over_mpi_a_rank_whose_model_lacks_a_layer_fails_every_rank_naming_it() {
    let errors = layout_errors("extra-layer");
    for error in &errors {
        assert!(
            error.contains(
                "the model's float parameters differ on rank 1 (rank 0: 21 parameters in 2 tensors"
            ),
            "{errors:?}"
        );
    }
    assert!(errors[1].contains("here, rank 1: 18 parameters in 1 tensors"), "{errors:?}");
}

#[test]
fn over_mpi_batchnorm_and_dropout_under_new_version_folders_resume_bit_for_bit() {
    // Before: rank 1 looked for the checkpoint in the base folder (only the chief mapped it to
    // `version_0`) and the resume failed at its first step; the resumed ranks' dropout drew what
    // the first steps had drawn; BatchNorm's checkpoint lacked its last update.
    let (output, straight, _) = run("bn", &scratch_dir("mpi-bn-straight"), false);
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(straight.len(), 2, "{}", text(&output));
    assert_eq!(straight[0]["global_step"], 12);
    assert_eq!(straight[0]["weights"], straight[1]["weights"], "the chief's statistics on every rank");
    let dir = scratch_dir("mpi-bn");
    let (output, stopped, _) = run("bn-stop", &dir, false);
    assert!(output.status.success(), "{}", text(&output));
    // The chief's stop is agreed at the next step's exchange; its checkpoint is step 6's.
    assert_eq!(stopped[0]["global_step"], 7);
    let (output, resumed, _) = run("bn", &dir, true);
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(resumed.len(), 2, "{}", text(&output));
    for rank in 0..2 {
        assert_eq!(resumed[rank]["weights"], straight[rank]["weights"], "rank {rank}, bit for bit");
    }
    assert!(!dir.join("version_1").exists(), "the resume trained in version_0");
}
