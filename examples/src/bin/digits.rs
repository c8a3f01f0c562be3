//! Train an MLP on the 8x8 handwritten digits with stoker's default callbacks, validation every
//! epoch, a learning-rate schedule and checkpoints.
//!
//! `cargo run --release` (from the workspace root), or with options:
//! `cargo run --release -p stoker-examples --bin digits -- --log-dir DIR --epochs N --device cpu|wgpu
//! [--resume]`. With `--resume`, a run continues from the log directory's latest complete
//! checkpoint. Ctrl-C stops at the next step boundary after writing a checkpoint (exit status 130);
//! a second Ctrl-C exits at once.

use std::process::ExitCode;
use std::time::Instant;

use burn_stoker::trainer::Outcome;
use stoker_examples::{DigitsConfig, train_digits};

fn main() -> ExitCode {
    let mut log_dir = String::from("train_log/digits");
    let mut epochs = None;
    let mut device = String::from("cpu");
    let mut resume = false;
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
    if let Some(epochs) = epochs {
        config.epochs = epochs;
    }
    let start = Instant::now();
    match train_digits(&config) {
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
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("training failed: {error}");
            ExitCode::FAILURE
        }
    }
}

fn usage(problem: &str) -> ! {
    if !problem.is_empty() {
        eprintln!("error: {problem}");
    }
    eprintln!("usage: digits [--log-dir DIR] [--epochs N] [--device cpu|wgpu] [--resume]");
    std::process::exit(if problem.is_empty() { 0 } else { 2 })
}
