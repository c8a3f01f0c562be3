//! One run of the feature matrices (`tests/tests/it/matrix.rs` starts it, under `mpirun -n 2`
//! for the MPI world): a model family trained on its synthetic data with a set of features on,
//! seeded, so that an interrupted run resumed with the same command ends with the uninterrupted
//! run's weights, bit for bit.
//!
//! `matrix_worker MODEL WORLD LOG_DIR OUT [FEATURE...] [--resume]`
//!
//! - MODEL: `mlp`, `convbn` (BatchNorm and dropout), `lstm`, `transformer` (attention, LayerNorm,
//!   dropout, embeddings): `stoker_tests::families`;
//! - WORLD: `one` (one device), `threads` (a 2-rank threads world), `mpi` (this process is one
//!   rank of an MPI world; needs the feature `mpi`);
//! - FEATURE: `versioned` (`LogDirPolicy::NewVersion`, the example's default), `archive` (a second
//!   saver every 3 steps into `OUT/../archive`, the resume reads it), `best` (`SaveBestState`),
//!   `early` (`EarlyStopping` with `restore_best_weights`), `min` (`MinSaver`), `dashboard`,
//!   `shell` (`InjectShell`, its file created before training: the prompt opens at the first
//!   epoch's end and reads stdin), `mlflow` (a local MLflow server in this process, slow: it holds
//!   every batch of metrics, then released after 8 steps), `mlflow-down` (a server that never
//!   answers), `cbdata` (neon's `CallbackDataWriter`, feature `hdf5`), `handle` (a `StopHandle`
//!   stop at global step 9, on the last rank), `slow` (20 ms of sleep per step, so that a signal
//!   lands mid-run).
//!
//! Training: 4 epochs of 6 batches per rank, a checkpoint every 2 steps (`ModelSaver::new(3)`),
//! `val_loss` put at each epoch's end from a fixed script, `Trainer::seed(7)`; a fresh run
//! unless `--resume` (`auto_resume`, or `resume_from` the archive with `archive`). Writes
//! `OUT/pid-R` first, `OUT/started` once the chief has trained 6 steps, and at the end
//! `OUT/rank-R.json`: the outcome, the global step and the bits of every float tensor.

use std::path::PathBuf;
use std::process::ExitCode;

use burn::module::Module;
use burn::optim::AdamConfig;
use burn::tensor::{Device, Tensor, TensorData};
use burn_stoker::callback::Named;
use burn_stoker::debug::InjectShell;
use burn_stoker::monitor::{Dashboard, MlflowLogger};
use burn_stoker::prelude::*;
use burn_stoker::saver::{MinSaver, SaveBestState};
use burn_stoker::stop::EarlyStopping;
use burn_stoker::trainer::{LogDirPolicy, StopHandle, TrainData};
use burn_stoker::world::{Shard, Threads, World};
use serde_json::json;
use stoker_tests::families::{self, ConvBn, LstmNet, TinyTransformer};

/// What one run is asked to do.
#[derive(Clone)]
struct Args {
    model: String,
    world: String,
    log_dir: PathBuf,
    out: PathBuf,
    features: Vec<String>,
    resume: bool,
}

impl Args {
    fn has(&self, feature: &str) -> bool {
        self.features.iter().any(|f| f == feature)
    }
}

/// `val_loss` at each epoch's end: a best at epochs 1, 2 and 4.
const VAL_LOSS: [f64; 4] = [1.0, 0.6, 0.8, 0.5];

/// Puts `val_loss`; marks `OUT/started` once the chief has trained 6 steps; sleeps 20 ms per
/// step when asked; asks its `StopHandle` to stop at global step 9 when given one.
struct Script {
    started: PathBuf,
    slow: bool,
    handle: Option<StopHandle>,
}

impl<M> Callback<M> for Script {
    fn name(&self) -> std::borrow::Cow<'static, str> {
        "Script".into()
    }
    fn trigger_step(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        if self.slow {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        if ctx.rank() == 0 && ctx.global_step() == 6 {
            std::fs::write(&self.started, b"").map_err(|e| burn_stoker::Error::io(&self.started, e))?;
        }
        if ctx.global_step() == 9
            && let Some(handle) = &self.handle
        {
            handle.stop();
        }
        Ok(())
    }
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        let epoch = ctx.epoch_num() as usize;
        ctx.monitors().put_scalar("val_loss", VAL_LOSS[(epoch - 1) % VAL_LOSS.len()]);
        Ok(())
    }
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.len() < 4 {
        eprintln!("usage: matrix_worker MODEL WORLD LOG_DIR OUT [FEATURE...] [--resume]");
        return ExitCode::from(2);
    }
    let args = Args {
        model: argv[0].clone(),
        world: argv[1].clone(),
        log_dir: PathBuf::from(&argv[2]),
        out: PathBuf::from(&argv[3]),
        features: argv[4..].iter().filter(|a| *a != "--resume").cloned().collect(),
        resume: argv.iter().any(|a| a == "--resume"),
    };
    let results: Vec<(usize, burn_stoker::Result<serde_json::Value>)> = match args.world.as_str() {
        "one" => vec![(0, family(&args, None, &burn_stoker::device::cpu()))],
        "threads" => {
            let cpu = burn_stoker::device::cpu;
            match Threads::new([cpu(), cpu()]).run(|world| {
                let device = world.device().clone();
                Ok::<_, burn_stoker::Error>((world.rank(), family(&args, Some(world), &device)))
            }) {
                Ok(results) => results,
                Err(error) => vec![(0, Err(error))],
            }
        }
        "mpi" => mpi_rank(&args),
        other => {
            eprintln!("matrix_worker: unknown world {other}");
            return ExitCode::from(2);
        }
    };
    let mut failed = false;
    for (rank, result) in results {
        let record = result.unwrap_or_else(|error| {
            failed = true;
            eprintln!("matrix_worker rank {rank}: {error}");
            json!({ "error": error.to_string() })
        });
        let path = args.out.join(format!("rank-{rank}.json"));
        std::fs::write(&path, record.to_string()).expect("writing the record");
    }
    if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}

#[cfg(feature = "mpi")]
fn mpi_rank(args: &Args) -> Vec<(usize, burn_stoker::Result<serde_json::Value>)> {
    let device = burn_stoker::device::cpu();
    match World::mpi(device.clone()) {
        Ok(world) => {
            let rank = world.rank();
            vec![(rank, family(args, Some(world), &device))]
        }
        Err(error) => vec![(0, Err(error))],
    }
}

#[cfg(not(feature = "mpi"))]
fn mpi_rank(_args: &Args) -> Vec<(usize, burn_stoker::Result<serde_json::Value>)> {
    vec![(0, Err(burn_stoker::Error::msg("matrix_worker was built without the feature `mpi`")))]
}

/// Train `args.model` on this rank of `world` (or alone): the record of how it ended.
fn family(args: &Args, world: Option<World>, device: &Device) -> burn_stoker::Result<serde_json::Value> {
    let rank = world.as_ref().map_or(0, World::rank);
    let _ = std::fs::write(args.out.join(format!("pid-{rank}")), std::process::id().to_string());
    let (r, size) = world.as_ref().map_or((0, 1), |w| (w.rank(), w.size()));
    match args.model.as_str() {
        "mlp" => {
            let data = mlp_batches(device).shard(r, size);
            run(args, world, families::fixed(Mlp::new(device)), data, Mlp::step)
        }
        "convbn" => {
            let data = families::image_batches(12, 4, device).shard(r, size);
            run(args, world, families::fixed(ConvBn::new(0.3, device)), data, ConvBn::step)
        }
        "lstm" => {
            let data = families::sequence_batches(12, 4, device).shard(r, size);
            run(args, world, families::fixed(LstmNet::new(device)), data, LstmNet::step)
        }
        "transformer" => {
            let data = families::token_batches(12, 4, device).shard(r, size);
            run(args, world, families::fixed(TinyTransformer::new(0.2, device)), data, TinyTransformer::step)
        }
        other => Err(burn_stoker::Error::msg(format!("unknown model {other}"))),
    }
}

/// A small MLP: two linear layers with a ReLU between them.
#[derive(Module, Debug)]
struct Mlp {
    first: burn::nn::Linear,
    second: burn::nn::Linear,
}

impl Mlp {
    fn new(device: &Device) -> Mlp {
        Mlp {
            first: burn::nn::LinearConfig::new(4, 8).init(device),
            second: burn::nn::LinearConfig::new(8, 1).init(device),
        }
    }
    fn step(&self, (x, y): (Tensor<2>, Tensor<2>), _step: &mut Step<'_>) -> Tensor<1> {
        let out = self.second.forward(burn::tensor::activation::relu(self.first.forward(x)));
        (out - y).powi_scalar(2).mean()
    }
}

/// 12 batches of 4 rows of 4 features for the MLP, deterministic.
fn mlp_batches(device: &Device) -> Vec<(Tensor<2>, Tensor<2>)> {
    (0..12)
        .map(|b| {
            let x: Vec<f32> = (0..16).map(|i| ((b * 16 + i) as f32 * 0.37).sin()).collect();
            let y: Vec<f32> = (0..4).map(|i| ((b * 4 + i) as f32 * 0.11).cos()).collect();
            (
                Tensor::from_data(TensorData::new(x, [4, 4]), device),
                Tensor::from_data(TensorData::new(y, [4, 1]), device),
            )
        })
        .collect()
}

/// The features' callbacks, each `None` when off.
type Features = (
    (
        Option<Named<PeriodicTrigger<ModelSaver>>>,
        Option<SaveBestState>,
        Option<EarlyStopping>,
        Option<MinSaver>,
    ),
    (Option<Dashboard>, Option<InjectShell>, Option<MlflowLogger>),
    CallbackData,
);

/// The features' callbacks asked for in `args`.
fn feature_callbacks(args: &Args) -> Features {
    let archive = args.has("archive").then(|| {
        PeriodicTrigger::new(ModelSaver::new(usize::MAX).checkpoint_dir(archive_dir(args)))
            .every_k_steps(3)
            .named("archive")
    });
    let best = args.has("best").then(|| SaveBestState::new("best", "val_loss"));
    let early =
        args.has("early").then(|| EarlyStopping::new("val_loss").patience(100).restore_best_weights(true));
    let min = args.has("min").then(|| MinSaver::new("val_loss"));
    let dashboard = args.has("dashboard").then(Dashboard::new);
    let shell = args.has("shell").then(|| InjectShell::new().file(args.out.join("INJECT")));
    ((archive, best, early, min), (dashboard, shell, mlflow(args)), cbdata(args))
}

/// The MLflow writer, to a local server in this process: slow (holding every batch of metrics
/// until released, from the 8th step on) or down (never answering).
fn mlflow(args: &Args) -> Option<MlflowLogger> {
    use stoker_tests::mlflow::{Fake, Mode};
    let mode = match (args.has("mlflow"), args.has("mlflow-down")) {
        (true, _) => Mode::HoldLogBatch,
        (_, true) => Mode::Silent,
        _ => return None,
    };
    let fake = Fake::start(mode);
    let release = fake.clone();
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(400));
        release.release();
    });
    let logger = MlflowLogger::new(&fake.uri).expect("an http URI");
    Some(logger.timeout(std::time::Duration::from_secs(1)))
}

/// neon's callback_data file, when asked (feature `hdf5`).
#[cfg(feature = "hdf5")]
type CallbackData = Option<burn_stoker::monitor::CallbackDataWriter>;
#[cfg(not(feature = "hdf5"))]
type CallbackData = ();

#[cfg(feature = "hdf5")]
fn cbdata(args: &Args) -> CallbackData {
    args.has("cbdata").then(|| burn_stoker::monitor::CallbackDataWriter::new("data.h5").loss("val_loss"))
}

#[cfg(not(feature = "hdf5"))]
fn cbdata(args: &Args) -> CallbackData {
    assert!(!args.has("cbdata"), "matrix_worker was built without the feature `hdf5`");
}

/// The archive's folder: beside the log directory, shared by the runs of one case.
fn archive_dir(args: &Args) -> PathBuf {
    args.log_dir.with_extension("archive")
}

/// Train `model` on `data` with the features of `args`: the record of how it ended.
fn run<M, D>(
    args: &Args,
    world: Option<World>,
    model: M,
    data: D,
    step: fn(&M, D::Batch, &mut Step<'_>) -> Tensor<1>,
) -> burn_stoker::Result<serde_json::Value>
where
    M: Module + 'static,
    D: TrainData,
{
    let rank = world.as_ref().map_or(0, World::rank);
    let mut trainer = Trainer::new(model, AdamConfig::new().init(), data)
        .default_callbacks(DefaultCallbacks::none())
        .learning_rate(0.01)
        .max_epoch(4)
        .seed(7)
        .log_dir(&args.log_dir);
    if let Some(world) = world {
        trainer = trainer.world(world);
    }
    if args.has("versioned") {
        trainer = trainer.log_dir_policy(LogDirPolicy::NewVersion);
    }
    if args.resume {
        trainer = match args.has("archive") {
            true => trainer.resume_from(archive_dir(args)),
            false => trainer.auto_resume(true),
        };
    }
    if args.has("shell") && !args.resume {
        std::fs::write(args.out.join("INJECT"), b"").map_err(|e| burn_stoker::Error::io(&args.out, e))?;
    }
    let last_rank = rank + 1 == trainer_size(&args.world);
    let handle = (args.has("handle") && last_rank).then(|| trainer.stop_handle());
    let script = Script { started: args.out.join("started"), slow: args.has("slow"), handle };
    let saver = PeriodicTrigger::new(ModelSaver::new(3)).every_k_steps(2);
    let report = trainer.callbacks((script, saver, feature_callbacks(args))).train(step);
    let (report, error) = match report {
        Ok(report) => (report, None),
        Err(failure) => match failure.report {
            Some(report) => (*report, Some(failure.error.to_string())),
            None => return Err(failure.error),
        },
    };
    Ok(json!({
        "rank": rank,
        "outcome": format!("{:?}", report.outcome),
        "error": error,
        "global_step": report.counters.global_step(),
        "weights": families::all_bits(&report.model),
    }))
}

/// The number of ranks of a world of kind `world`.
fn trainer_size(world: &str) -> usize {
    if world == "one" { 1 } else { 2 }
}
