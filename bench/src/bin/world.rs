//! Data-parallel training's costs: the per-step exchange against the gradients' size (threads
//! and MPI), and the ConvNet's throughput with 2 ranks against 1 rank, each rank single-threaded
//! (burn-flex without rayon), the global batch 64 either way.
//!
//! ```text
//! cargo build --release -p stoker-bench --bin world [--features mpi]
//! target/release/world exchange threads [rounds]       # 2 ranks in one process
//! mpirun -n 2 target/release/world exchange mpi [rounds]
//! target/release/world checksum [rounds]               # the replica check, per epoch
//! target/release/world convnet single [steps]          # 1 rank, batch 64
//! target/release/world convnet threads [steps]         # 2 ranks, batch 32 each
//! mpirun -n 2 target/release/world convnet mpi [steps]
//! ```
//!
//! The exchange is timed as the trainer runs it (`bench_support::time_exchanges`: the gradients
//! sent, summed, averaged and back, with the step's control words), each timed exchange right
//! after an untimed one so that the ranks enter it together; each size is a `Linear` model of
//! about that many bytes of parameters. The chief's time is reported.
//! Throughput is timed on the chief from the end of step 20 to the end of training.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use burn::nn::{Linear, LinearConfig};
use burn::optim::AdamConfig;
use burn::tensor::Device;
use burn_stoker::prelude::*;
use burn_stoker::world::{Threads, World};
use stoker_bench::{Classifier, ConvNet, batches_of, flush_denormals, fresh, step};
use stoker_examples::DigitBatch;

const WARM: u64 = 20;

fn main() {
    flush_denormals();
    let args: Vec<String> = std::env::args().collect();
    let what = args.get(1).map(String::as_str).unwrap_or("");
    let how = args.get(2).map(String::as_str).unwrap_or("");
    let count: Option<usize> = args.get(3).map(|a| a.parse().expect("a count"));
    let result = match (what, how) {
        ("exchange", "threads") => exchange_threads(count.unwrap_or(20)),
        ("exchange", "mpi") => exchange_mpi(count.unwrap_or(20)),
        ("checksum", _) => {
            replica_checksum(how.parse().unwrap_or(20));
            Ok(())
        }
        ("convnet", "single") => {
            convnet(None, count.unwrap_or(400)).map(|r| print_throughput("1 rank, batch 64", r))
        }
        ("convnet", "threads") => convnet_threads(count.unwrap_or(400)),
        ("convnet", "mpi") => convnet_mpi(count.unwrap_or(400)),
        _ => {
            eprintln!(
                "usage: world exchange threads|mpi [rounds] | world convnet single|threads|mpi [steps]"
            );
            std::process::exit(2);
        }
    };
    if let Err(error) = result {
        eprintln!("world: {error}");
        std::process::exit(1);
    }
}

fn cpu() -> Device {
    burn_stoker::device::cpu()
}

/// `Linear(d, d)` sizes: about 0.25, 1, 4 and 16 MB of f32 parameters.
const DIMS: [usize; 4] = [256, 512, 1024, 2048];

fn megabytes(d: usize) -> f64 {
    ((d * d + d) * 4) as f64 / 1e6
}

fn print_exchange(transport: &str, rows: &[(usize, f64)]) {
    for &(d, seconds) in rows {
        let mb = megabytes(d);
        println!("| {transport} | {mb:.2} MB | {:.0} µs | {:.0} µs/MB |", seconds * 1e6, seconds * 1e6 / mb);
    }
}

fn exchange_threads(rounds: usize) -> burn_stoker::Result<()> {
    println!("| transport | gradients | per exchange | per MB |\n|---|---|---|---|");
    for d in DIMS {
        let times = Threads::new([cpu(), cpu()]).run(|world| {
            let model: Linear = LinearConfig::new(d, d).init(world.device());
            burn_stoker::bench_support::time_exchanges(world, model, rounds)
        })?;
        let per = times[0].as_secs_f64() / rounds as f64;
        print_exchange("threads, 2 ranks", &[(d, per)]);
    }
    Ok(())
}

/// The replica check's cost, once per epoch on every rank: each `Linear` size's parameters read
/// to the host and hashed.
fn replica_checksum(rounds: usize) {
    println!("| parameters | per epoch |\n|---|---|");
    for d in DIMS {
        let model: Linear = LinearConfig::new(d, d).init(&cpu());
        let (time, _) = burn_stoker::bench_support::time_replica_checksum(&model, rounds);
        println!("| {:.2} MB | {:.2} ms |", megabytes(d), time.as_secs_f64() * 1e3 / rounds as f64);
    }
}

#[cfg(feature = "mpi")]
fn exchange_mpi(rounds: usize) -> burn_stoker::Result<()> {
    // MPI starts once per process: one world, one size per run (`... exchange mpi ROUNDS D`).
    let d: usize = std::env::args().nth(4).map_or(Ok(1024), |a| a.parse()).expect("a dimension");
    let world = World::mpi(cpu())?;
    let chief = world.is_chief();
    let model: Linear = LinearConfig::new(d, d).init(&cpu());
    let per = burn_stoker::bench_support::time_exchanges(world, model, rounds)?.as_secs_f64() / rounds as f64;
    if chief {
        print_exchange("MPI, 2 processes", &[(d, per)]);
    }
    Ok(())
}

#[cfg(not(feature = "mpi"))]
fn exchange_mpi(_rounds: usize) -> burn_stoker::Result<()> {
    Err(burn_stoker::Error::msg("build with --features mpi"))
}

/// Records the time at the end of step `WARM` and at the end of training, on the chief.
#[derive(Clone, Default)]
struct Clock(Arc<Mutex<Times>>);

/// The end of the warm-up, the end of training, the steps between.
type Times = (Option<Instant>, Option<Instant>, u64);

impl<M> Callback<M> for Clock {
    fn chief_only(&self) -> bool {
        true
    }
    fn trigger_step(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        if ctx.global_step() == WARM {
            self.0.lock().unwrap().0 = Some(Instant::now());
        }
        Ok(())
    }
    fn after_train(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        let mut clock = self.0.lock().unwrap();
        clock.1 = Some(Instant::now());
        clock.2 = ctx.global_step() - WARM;
        Ok(())
    }
}

/// Samples per second over the timed steps (global batch 64).
fn convnet(world: Option<World>, steps: usize) -> burn_stoker::Result<Option<f64>> {
    let ranks = world.as_ref().map_or(1, World::size);
    let device = world.as_ref().map_or_else(cpu, |w| w.device().clone());
    let batch = 64 / ranks;
    let data: Vec<DigitBatch> = batches_of(batch, &device);
    let data = match &world {
        Some(w) => w.shard(data),
        None => data,
    };
    let per_epoch = data.len();
    let clock = Clock::default();
    let model: ConvNet = fresh(&device);
    let trainer = Trainer::new(model, AdamConfig::new().init(), data)
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .max_epoch(steps.div_ceil(per_epoch) as u64)
        .log_dir(std::env::temp_dir().join(format!("stoker-bench-world-{}", std::process::id())))
        .callbacks(clock.clone());
    let trainer = match world {
        Some(world) => trainer.world(world),
        None => trainer,
    };
    trainer.train(|model: &ConvNet, batch: DigitBatch, s: &mut Step<'_>| step(model, batch, s.outputs()))?;
    let (start, end, steps) = *clock.0.lock().unwrap();
    Ok(match (start, end) {
        (Some(start), Some(end)) => Some((steps * 64) as f64 / (end - start).as_secs_f64()),
        _ => None,
    })
}

fn print_throughput(label: &str, samples: Option<f64>) {
    if let Some(samples) = samples {
        println!("| {} | {label} | {samples:.0} samples/s |", ConvNet::NAME);
    }
}

fn convnet_threads(steps: usize) -> burn_stoker::Result<()> {
    let rates = Threads::new([cpu(), cpu()]).run(|world| convnet(Some(world), steps))?;
    print_throughput("2 ranks (threads), batch 32 each", rates[0]);
    Ok(())
}

#[cfg(feature = "mpi")]
fn convnet_mpi(steps: usize) -> burn_stoker::Result<()> {
    let world = World::mpi(cpu())?;
    let rate = convnet(Some(world), steps)?;
    print_throughput("2 ranks (MPI), batch 32 each", rate);
    Ok(())
}

#[cfg(not(feature = "mpi"))]
fn convnet_mpi(_steps: usize) -> burn_stoker::Result<()> {
    Err(burn_stoker::Error::msg("build with --features mpi"))
}
