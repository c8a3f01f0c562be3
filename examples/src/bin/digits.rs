//! Train an MLP on the 8x8 handwritten digits with stoker's default callbacks, validation every
//! epoch, a learning-rate schedule and checkpoints.
//!
//! `cargo run --release` (from the workspace root), or with options:
//! `cargo run --release -p stoker-examples --bin digits -- --log-dir DIR --epochs N --device cpu|wgpu
//! [--resume] [--log-dir-policy version|refuse|backup|delete|keep] [--threads N] [--mlflow http://HOST:PORT] [--dashboard]`.
//! Each run trains in a new folder `DIR/version_N` (the default policy, `version`), and
//! `--resume` continues the newest one from its latest complete checkpoint. The other policies
//! train in `DIR` itself: a run into one that holds an earlier run is refused (`refuse`), or
//! moves that run aside to `DIR.backup-YYYYMMDD-HHMMSS` (`backup`), deletes it (`delete`) or
//! writes beside it (`keep`). Ctrl-C stops at the next step boundary after writing a checkpoint
//! (exit status 130); a second Ctrl-C exits at once. `--device wgpu` (and the other GPU devices)
//! need the example built with that feature: `cargo run --release --features stoker-examples/wgpu
//! -- --device wgpu`.
//!
//! Data-parallel: `--threads N` trains N ranks in this process, one thread each, on the device
//! given N times; built with the `mpi` feature, `mpirun -n N digits --mpi` trains one rank per
//! process (`cargo build --release -p stoker-examples --features mpi` first).

use std::process::ExitCode;
use std::time::Instant;

use burn_stoker::callback::Outcome;
use burn_stoker::monitor::{MLFLOW_SINK_NAME, MlflowLogger};
use burn_stoker::trainer::LogDirPolicy;
use burn_stoker::world::Threads;
use clap::{CommandFactory, Parser};
use stoker_examples::{DigitsRun, train_digits, train_digits_in};

/// Train an MLP on the 8x8 handwritten digits with stoker's default callbacks, validation every
/// epoch, a learning-rate schedule and checkpoints.
/// The most ranks `--threads` starts: one thread and one replica each, in one process.
const MAX_THREADS: u64 = 256;

#[derive(Debug, Parser)]
#[command(name = "digits")]
struct Cli {
    /// Where the logs and checkpoints go.
    #[arg(long, value_name = "DIR", default_value = "train_log/digits")]
    log_dir: String,
    /// Epochs to train (default: the README's 30).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    epochs: Option<u64>,
    /// The device: cpu, or wgpu, vulkan, metal, cuda[:N], rocm[:N] (each built with the feature of
    /// that name: `--features stoker-examples/wgpu`).
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Continue the latest run (the newest DIR/version_N with the default policy) from its latest
    /// complete checkpoint.
    #[arg(long)]
    resume: bool,
    /// Where a fresh run goes: version (a new DIR/version_N each run, the default); or DIR itself,
    /// and when it holds an earlier run: refuse, backup (move it aside to
    /// DIR.backup-YYYYMMDD-HHMMSS), delete, or keep (write beside it).
    #[arg(long, value_name = "version|refuse|backup|delete|keep", default_value = "version")]
    log_dir_policy: LogDirPolicy,
    /// Train N data-parallel ranks in this process, one thread each, on the device given N times
    /// (at most 256: each rank is a thread with its own replica; a wider world is `--mpi`'s).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=MAX_THREADS), conflicts_with = "mpi")]
    threads: Option<u64>,
    /// One rank per process, started by `mpirun -n N digits --mpi` (built with `--features mpi`).
    #[arg(long)]
    mpi: bool,
    /// Also send the scalars, with the configuration as params, to the MLflow tracking server at
    /// this URI (`mlflow server` prints it), as a run named "digits" in the default experiment.
    #[arg(long, value_name = "http://HOST:PORT", value_parser = mlflow_uri)]
    mlflow: Option<String>,
    /// Show the terminal dashboard (curves, progress, time left, learning rate, status) instead
    /// of the progress bar and the printed scalars; `q` stops at the next step boundary with a
    /// checkpoint, as Ctrl-C does.
    #[arg(long)]
    dashboard: bool,
}

/// `--mlflow`'s check, before anything is trained: a URI burn-stoker's MLflow writer can use.
fn mlflow_uri(uri: &str) -> Result<String, String> {
    MlflowLogger::new(uri).map(|_| uri.to_string()).map_err(|e| e.to_string())
}

/// burn's name (`BURN_DEVICE`) for the backend of the device named `name` (`--device`).
fn burn_device_name(name: &str) -> Option<&'static str> {
    match name.split(':').next()? {
        "cpu" => Some("flex"),
        "wgpu" => Some("wgpu"),
        "vulkan" => Some("vulkan"),
        "metal" => Some("metal"),
        "cuda" => Some("cuda"),
        "rocm" => Some("rocm"),
        _ => None,
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // burn loads an optimizer's state (a resume) on its default device, `BURN_DEVICE` or else the
    // first GPU backend this build has: a resumed `--device cpu` run of a wgpu build would start
    // wgpu (and the Vulkan driver) for nothing. The run's backend is the default from here on.
    if std::env::var_os("BURN_DEVICE").is_none()
        && let Some(backend) = burn_device_name(&cli.device)
    {
        // SAFETY: no other thread exists yet (nothing was started before the arguments were
        // parsed), so nothing reads the environment meanwhile.
        unsafe { std::env::set_var("BURN_DEVICE", backend) };
    }
    let device = match burn_stoker::device::by_name(&cli.device) {
        Ok(device) => device,
        Err(error) => usage(
            clap::error::ErrorKind::InvalidValue,
            &format!(
                "{error} (for this example: `cargo run --release --features stoker-examples/{} -- --device {}`)",
                cli.device.split(':').next().unwrap_or_default(),
                cli.device
            ),
        ),
    };
    let log_dir = cli.log_dir;
    let mut config = DigitsRun::new(&log_dir, device);
    config.resume = cli.resume;
    config.log_dir_policy = cli.log_dir_policy;
    config.mlflow = cli.mlflow;
    config.dashboard = cli.dashboard;
    if let Some(epochs) = cli.epochs {
        config.config.epochs = epochs;
    }
    let threads = cli.threads.unwrap_or(0) as usize;
    let mpi = cli.mpi;
    let start = Instant::now();
    let result = if threads > 0 {
        let devices = vec![config.device.clone(); threads];
        Threads::new(devices)
            .run(|world| {
                let config = DigitsRun { device: world.device().clone(), ..config.clone() };
                train_digits_in(&config, Some(world))
            })
            .map(|mut reports| reports.swap_remove(0))
    } else if mpi {
        match mpi_world(&config) {
            Ok(world) => {
                let (chief, rank) = (world.is_chief(), world.rank());
                let result = train_digits_in(&config, Some(world));
                if !chief {
                    // Only the chief reports; another rank's error is its own line, named, so that
                    // mpirun's interleaved output never reads as one message.
                    return match result {
                        Ok(_) => ExitCode::SUCCESS,
                        Err(error) => {
                            eprintln!("digits: rank {rank}: {error}");
                            ExitCode::FAILURE
                        }
                    };
                }
                result
            }
            Err(error) => Err(error),
        }
    } else {
        train_digits(&config)
    };
    match result {
        Ok((report, _)) if matches!(report.outcome, Outcome::Interrupted { .. }) => {
            let Outcome::Interrupted { signal, checkpoint } = &report.outcome else { unreachable!() };
            let at = checkpoint.as_ref().map_or("nowhere".into(), |c| c.display().to_string());
            println!(
                "interrupted by {signal} at epoch {} (global step {}); checkpoint in {at}; continue with --resume",
                report.counters.epoch_num(),
                report.counters.global_step()
            );
            ExitCode::from(130)
        }
        Ok((report, _)) if matches!(report.outcome, Outcome::NonFinite { .. }) => {
            let Outcome::NonFinite { reason, checkpoint, .. } = &report.outcome else { unreachable!() };
            let at = checkpoint.as_ref().map_or("none".into(), |c| c.display().to_string());
            println!("stopped: {reason}; no checkpoint of it was written; the latest checkpoint is {at}");
            ExitCode::FAILURE
        }
        Ok((report, error)) => {
            println!(
                "trained {} epochs ({} steps) in {:.1} s; validation accuracy {:.2}%",
                report.counters.epoch_num(),
                report.counters.global_step(),
                start.elapsed().as_secs_f64(),
                100.0 * (1.0 - error)
            );
            let logs = report.summary.log_dir.display();
            println!(
                "logs in {logs}: config.json, stats.json, TensorBoard events (tensorboard --logdir {log_dir}), checkpoints/"
            );
            let mlflow_failed = report.writer_failures.iter().any(|f| f.writer == MLFLOW_SINK_NAME);
            if let Some(uri) = &config.mlflow
                && !mlflow_failed
            {
                println!(
                    "scalars sent to the MLflow tracking server at {uri} (run \"digits\" in experiment 0)"
                );
            }
            for failure in &report.writer_failures {
                println!("warning: its logs are incomplete: {failure}");
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("training failed: {error}");
            if let burn_stoker::Error::LogDir(burn_stoker::LogDirError::EarlierRun { .. }) = error.root() {
                eprintln!(
                    "digits: continue that run with --resume, or start afresh with --log-dir-policy version (a new folder inside it), backup (move it aside), delete or keep, or another --log-dir"
                );
            }
            if error.downcast_ref::<stoker_examples::ConfigMismatch>().is_some() {
                eprintln!(
                    "digits: resume with the saved configuration, or start afresh without --resume (a new version folder)"
                );
            }
            ExitCode::FAILURE
        }
    }
}

#[cfg(feature = "mpi")]
fn mpi_world(config: &DigitsRun) -> burn_stoker::Result<burn_stoker::world::World> {
    burn_stoker::world::World::mpi(config.device.clone())
}

#[cfg(not(feature = "mpi"))]
fn mpi_world(_config: &DigitsRun) -> burn_stoker::Result<burn_stoker::world::World> {
    usage(clap::error::ErrorKind::ArgumentConflict, "--mpi needs the example built with `--features mpi`")
}

/// Exit as clap does on a bad argument (status 2), saying what is wrong and the usage line.
fn usage(kind: clap::error::ErrorKind, problem: &str) -> ! {
    Cli::command().error(kind, problem).exit()
}
