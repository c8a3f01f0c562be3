//! Train an MLP on the 8x8 handwritten digits with stoker's default callbacks, validation every
//! epoch, a learning-rate schedule and checkpoints.
//!
//! `cargo run --release` (from the workspace root), or with options:
//! `cargo run --release -p stoker-examples --bin digits -- --log-dir DIR --epochs N --device cpu|wgpu
//! [--resume] [--log-dir-policy refuse|backup|delete|keep] [--threads N]`. With `--resume`, a run
//! continues from the log directory's latest complete checkpoint. Without it, a run into a log
//! directory that holds an earlier run is refused (the default), or moves that run aside to
//! `DIR.backup-YYYYMMDD-HHMMSS` (`--log-dir-policy backup`), deletes it (`delete`) or writes beside
//! it (`keep`). Ctrl-C stops at the next step boundary after writing a checkpoint (exit status
//! 130); a second Ctrl-C exits at once.
//!
//! Data-parallel: `--threads N` trains N ranks in this process, one thread each, on the device
//! given N times; built with the `mpi` feature, `mpirun -n N digits --mpi` trains one rank per
//! process (`cargo build --release -p stoker-examples --features mpi` first).

use std::process::ExitCode;
use std::time::Instant;

use burn_stoker::trainer::{LogDirPolicy, Outcome};
use burn_stoker::world::Threads;
use stoker_examples::{DigitsConfig, train_digits, train_digits_in};

fn main() -> ExitCode {
    let mut log_dir = String::from("train_log/digits");
    let mut epochs = None;
    let mut device = String::from("cpu");
    let mut resume = false;
    let mut log_dir_policy = LogDirPolicy::default();
    let mut threads = 0usize;
    let mut mpi = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().unwrap_or_else(|| usage(&format!("{name} needs a value")));
        match arg.as_str() {
            "--log-dir" => log_dir = value("--log-dir"),
            "--epochs" => {
                epochs = Some(
                    value("--epochs").parse().unwrap_or_else(|_| usage("--epochs takes a positive integer")),
                )
            }
            "--device" => device = value("--device"),
            "--resume" => resume = true,
            "--log-dir-policy" => {
                log_dir_policy = value("--log-dir-policy")
                    .parse()
                    .unwrap_or_else(|e: burn_stoker::Error| usage(&e.to_string()))
            }
            "--threads" => {
                threads = value("--threads")
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .unwrap_or_else(|| usage("--threads takes a positive integer"))
            }
            "--mpi" => mpi = true,
            "-h" | "--help" => usage(""),
            other => usage(&format!("unknown argument `{other}`")),
        }
    }
    let device = match burn_stoker::device::by_name(&device) {
        Ok(device) => device,
        Err(error) => usage(&error.to_string()),
    };
    let mut config = DigitsConfig::new(&log_dir, device);
    config.resume = resume;
    config.log_dir_policy = log_dir_policy;
    if let Some(epochs) = epochs {
        config.epochs = epochs;
    }
    let start = Instant::now();
    let result = if threads > 0 {
        let devices = vec![config.device.clone(); threads];
        Threads::new(devices)
            .run(|world| {
                let config = DigitsConfig { device: world.device().clone(), ..config.clone() };
                train_digits_in(&config, Some(world))
            })
            .map(|mut reports| reports.swap_remove(0))
    } else if mpi {
        match mpi_world(&config) {
            Ok(world) => {
                let chief = world.is_chief();
                let result = train_digits_in(&config, Some(world));
                if !chief && result.is_ok() {
                    // Only the chief reports.
                    return ExitCode::SUCCESS;
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
            println!(
                "logs in {log_dir}: stats.json, TensorBoard events (tensorboard --logdir {log_dir}), checkpoints/"
            );
            for failure in &report.writer_failures {
                println!("warning: its logs are incomplete: {failure}");
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("training failed: {error}");
            if error.to_string().contains("holds an earlier run") {
                eprintln!(
                    "digits: continue that run with --resume, or start afresh with --log-dir-policy backup (move it aside), delete or keep, or another --log-dir"
                );
            }
            ExitCode::FAILURE
        }
    }
}

#[cfg(feature = "mpi")]
fn mpi_world(config: &DigitsConfig) -> burn_stoker::Result<burn_stoker::world::World> {
    burn_stoker::world::World::mpi(config.device.clone())
}

#[cfg(not(feature = "mpi"))]
fn mpi_world(_config: &DigitsConfig) -> burn_stoker::Result<burn_stoker::world::World> {
    usage("--mpi needs the example built with `--features mpi`")
}

fn usage(problem: &str) -> ! {
    if !problem.is_empty() {
        eprintln!("error: {problem}");
    }
    eprintln!(
        "usage: digits [--log-dir DIR] [--epochs N] [--device cpu|wgpu] [--resume] [--log-dir-policy refuse|backup|delete|keep] [--threads N | --mpi]"
    );
    std::process::exit(if problem.is_empty() { 0 } else { 2 })
}
