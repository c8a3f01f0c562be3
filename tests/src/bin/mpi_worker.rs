//! One rank of the MPI tests (`tests/tests/it/world_mpi.rs` starts it with `mpirun -n 2`): trains
//! the fixtures' model on its shard and writes what the test checks into `OUT/rank-R.json`.
//!
//! `mpi_worker SCENARIO LOG_DIR OUT [--resume]`, scenarios:
//! - `sgd`, `adam`: 50 steps of batch 4 per rank, learning rate 0.05;
//! - `callbacks`: two epochs with a chief-only and an every-rank counter, a ModelSaver and the
//!   default callbacks;
//! - `stop`: rank 1 asks to stop after global step 5;
//! - `panic`: rank 1 panics in its step at global step 3;
//! - `long`: 3 epochs of 400 steps with Adam, 2 ms of sleep per step (for SIGINT), a marker file
//!   `OUT/started` after step 20, `--resume` to continue from the log directory;
//! - `absent`: rank 1 gives up before training (its world dropped unused), rank 0 trains;
//! - `far` (under `mpirun -n 3`): 33 steps per rank and epoch, one epoch, two with `--resume`
//!   (the test moves the checkpoint's global step past 2^24 in between);
//! - `extra-hyper`: rank 1 registers one more hyper-parameter than the chief;
//! - `extra-layer`: rank 1's model lacks the chief's bias.
//! - `partial-grad`: rank 1's step leaves the bias out (only the chief has its gradient);
//! - `slow-save`: 2 epochs of 1000 steps per rank, 20 ms of sleep per step, a checkpoint that
//!   takes 5 s to write (a large model's), `OUT/started` after step 20.
//! - `sums`: two epochs of 5 steps per rank with SGD, a sum over ranks at every step (each
//!   rank's record holds `floats_reduced`, the `f32`s its exchanges gave MPI);
//! - `bn`: the ConvNet with BatchNorm and dropout 0.3 (`stoker_tests::families`), seeded, 3
//!   epochs of 4 steps per rank, under `LogDirPolicy::NewVersion`; `bn-stop`: the same, with a
//!   checkpoint and a stop at global step 6. Its record's `weights` are every float tensor's
//!   bits, BatchNorm's statistics included.
//!
//! Every rank writes its process id into `OUT/pid-R` first.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use burn::nn::Linear;
use burn::optim::{AdamConfig, ModuleOptimizer, SgdConfig};
use burn::tensor::Device;
use burn_stoker::prelude::*;
use burn_stoker::world::World;
use serde_json::json;
use stoker_tests::weights;
use stoker_tests::world::{B, batches, bits, fixed_model, mse, without_bias};

/// Counts its setups and steps on this rank.
struct Count {
    chief_only: bool,
    setups: Arc<AtomicU64>,
    steps: Arc<AtomicU64>,
}

impl Callback<Linear> for Count {
    fn name(&self) -> std::borrow::Cow<'static, str> {
        if self.chief_only { "ChiefCount".into() } else { "EveryCount".into() }
    }
    fn chief_only(&self) -> bool {
        self.chief_only
    }
    fn setup(&mut self, _ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.setups.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn trigger_step(&mut self, _ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.steps.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// A callback whose state takes 5 s to save: a checkpoint as slow as a large model's.
struct SlowSave;

impl Callback<Linear> for SlowSave {
    fn name(&self) -> std::borrow::Cow<'static, str> {
        "SlowSave".into()
    }
    fn save_state(&self) -> burn_stoker::Result<Option<serde_json::Value>> {
        std::thread::sleep(std::time::Duration::from_secs(5));
        Ok(Some(json!("slow")))
    }
}

/// On every rank: rank 1 asks to stop after global step 5; the chief marks `started` after
/// step 20 (for the SIGINT test).
struct Script {
    started: PathBuf,
    /// Sum a value over the ranks at every step (`sums`).
    sums: bool,
}

impl Callback<Linear> for Script {
    fn chief_only(&self) -> bool {
        false
    }
    fn trigger_step(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        if ctx.rank() == 1 && ctx.global_step() == 5 && ctx.counters().max_epoch() == 9 {
            ctx.request_stop("rank 1 had enough");
        }
        if self.sums {
            let mut one = [1.0];
            ctx.sum_over_ranks(&mut one)?;
            assert_eq!(one[0], ctx.world_size() as f64, "the sum over ranks of a 1 from each");
        }
        if ctx.rank() == 0 && ctx.global_step() == 20 {
            std::fs::write(&self.started, b"").map_err(|e| burn_stoker::Error::io(&self.started, e))?;
        }
        Ok(())
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!("usage: mpi_worker SCENARIO LOG_DIR OUT [--resume]");
        return ExitCode::from(2);
    }
    let (scenario, log_dir, out) = (args[1].as_str(), PathBuf::from(&args[2]), PathBuf::from(&args[3]));
    let resume = args.get(4).is_some_and(|a| a == "--resume");
    let device = burn_stoker::device::cpu();
    let world = match World::mpi(device.clone()) {
        Ok(world) => world,
        Err(error) => {
            eprintln!("mpi_worker: {error}");
            return ExitCode::FAILURE;
        }
    };
    let rank = world.rank();
    let _ = std::fs::write(out.join(format!("pid-{rank}")), std::process::id().to_string());
    if scenario == "absent" && rank == 1 {
        eprintln!("mpi_worker rank 1: gives up before training");
        drop(world);
        return ExitCode::FAILURE;
    }
    let result = match scenario {
        "bn" | "bn-stop" => run_bn(scenario == "bn-stop", &log_dir, &out, resume, world, &device),
        _ => run(scenario, &log_dir, &out, resume, world, &device),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // Also in a file: mpirun interleaves the ranks' stderr.
            let _ = std::fs::write(out.join(format!("error-{rank}.txt")), error.to_string());
            // Which variant it is, for the tests that branch on it as a program would.
            let _ = std::fs::write(out.join(format!("error-{rank}.variant")), format!("{:?}", error.root()));
            eprintln!("mpi_worker rank {rank}: training failed: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run(
    scenario: &str,
    log_dir: &Path,
    out: &Path,
    resume: bool,
    world: World,
    device: &Device,
) -> burn_stoker::Result<()> {
    let rank = world.rank();
    let size = world.size();
    let optimizer: ModuleOptimizer =
        if matches!(scenario, "sgd" | "sums") { SgdConfig::new().init() } else { AdamConfig::new().init() };
    let (steps, epochs) = match scenario {
        "callbacks" => (8, 2),
        "sums" => (10, 2),
        "stop" => (20, 9),
        "long" => (800, 3),
        "far" => (99, 1 + u64::from(resume)),
        "slow-save" => (2000, 2),
        _ => (100, 1),
    };
    let data = world.shard(batches(steps, B, device));
    let chief = Count { chief_only: true, setups: Default::default(), steps: Default::default() };
    let every = Count { chief_only: false, setups: Default::default(), steps: Default::default() };
    let (chief_setups, chief_steps, every_setups, every_steps) =
        (chief.setups.clone(), chief.steps.clone(), every.setups.clone(), every.steps.clone());
    let script = Script { started: out.join("started"), sums: scenario == "sums" };
    let defaults =
        if scenario == "callbacks" { DefaultCallbacks::default() } else { DefaultCallbacks::none() };
    let mut model = fixed_model(device);
    if scenario == "extra-layer" && rank == 1 {
        model.bias = None;
    }
    let trainer = Trainer::new(model, optimizer, data)
        .default_callbacks(defaults)
        .learning_rate(0.05)
        .max_epoch(epochs)
        .log_dir(log_dir)
        .auto_resume(resume)
        .world(world)
        .callbacks((chief, every, ModelSaver::new(2), script, (scenario == "slow-save").then_some(SlowSave)));
    let trainer =
        if scenario == "extra-hyper" && rank == 1 { trainer.hyper_param("momentum", 0.9) } else { trainer };
    let pause = match scenario {
        "long" => 2,
        "slow-save" => 20,
        _ => 0,
    };
    let report = trainer.train(move |model: &Linear, batch, step: &mut Step<'_>| {
        if scenario == "panic" && rank == 1 && step.counters().global_step() == 3 {
            panic!("rank 1 broke on purpose");
        }
        if pause > 0 {
            std::thread::sleep(std::time::Duration::from_millis(pause));
        }
        if scenario == "partial-grad" && rank == 1 {
            return without_bias(model, batch, step);
        }
        mse(model, batch, step)
    })?;
    let outcome = match &report.outcome {
        Outcome::Finished => "finished".to_string(),
        Outcome::Stopped(reason) => format!("stopped: {reason}"),
        Outcome::Interrupted { signal, .. } => format!("interrupted: {signal}"),
        Outcome::NonFinite { reason, .. } => format!("non-finite: {reason}"),
        Outcome::Failed => "failed".to_string(),
    };
    let record = json!({
        "rank": rank,
        "size": size,
        "global_step": report.counters.global_step(),
        "outcome": outcome,
        "weights": bits(&weights(&report.model)),
        "chief_setups": chief_setups.load(Ordering::SeqCst),
        "chief_steps": chief_steps.load(Ordering::SeqCst),
        "every_setups": every_setups.load(Ordering::SeqCst),
        "every_steps": every_steps.load(Ordering::SeqCst),
        "floats_reduced": burn_stoker::bench_support::mpi_floats_reduced(),
    });
    write_record(out, rank, &record)
}

/// The `bn` and `bn-stop` scenarios.
fn run_bn(
    stop: bool,
    log_dir: &Path,
    out: &Path,
    resume: bool,
    world: World,
    device: &Device,
) -> burn_stoker::Result<()> {
    use stoker_tests::families::{ConvBn, all_bits, image_batches};
    let rank = world.rank();
    let data = world.shard(image_batches(8, 4, device));
    let report = Trainer::new(ConvBn::new(0.3, device), AdamConfig::new().init(), data)
        .default_callbacks(DefaultCallbacks::none())
        .learning_rate(0.01)
        .max_epoch(3)
        .seed(7)
        .log_dir(log_dir)
        .log_dir_policy(burn_stoker::trainer::LogDirPolicy::NewVersion)
        .auto_resume(resume)
        .world(world)
        .callbacks(stop.then_some(stoker_tests::CheckpointAndStop(6)))
        .train(ConvBn::step)?;
    let record = json!({
        "rank": rank,
        "global_step": report.counters.global_step(),
        "weights": all_bits(&report.model),
    });
    write_record(out, rank, &record)
}

/// `record` into `OUT/rank-R.json`.
fn write_record(out: &Path, rank: usize, record: &serde_json::Value) -> burn_stoker::Result<()> {
    let path = out.join(format!("rank-{rank}.json"));
    std::fs::write(&path, record.to_string()).map_err(|e| burn_stoker::Error::io(&path, e))
}
