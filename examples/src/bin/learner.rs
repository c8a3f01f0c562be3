//! The digits MLP trained from one burn-train `TrainStep` twice: with burn-train's `Learner` and
//! with stoker ([`stoker_examples::learner`]), then compared: the weights, the training loss and
//! the validation accuracy of each epoch. `cargo run --release --features stoker-examples/burn-train
//! --bin learner -- --epochs 3`.

use std::process::ExitCode;

use clap::Parser;
use stoker_examples::learner::{Setup, train_with_learner, train_with_stoker};
use stoker_examples::{Mlp, load_digits, loader};

/// Train the digits MLP with burn-train's Learner and with stoker, and compare.
#[derive(Parser, Debug)]
struct Args {
    /// Epochs for each trainer.
    #[arg(long, default_value_t = 3)]
    epochs: u64,
    /// Where the two runs write their logs (`learner/` and `stoker/` inside).
    #[arg(long, default_value = "train_log/learner")]
    log_dir: std::path::PathBuf,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("learner: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> burn_stoker::Result<()> {
    let device = burn_stoker::device::cpu();
    let split = load_digits(7, 0.2);
    let setup = Setup {
        train: loader(split.train, 32, None, &device),
        valid: loader(split.valid, 64, None, &device),
        epochs: args.epochs,
        learning_rate: 1e-2,
    };
    device.seed(7);
    let model = Mlp::new(64, &device);
    let (by_learner, summary) = train_with_learner(model.clone(), &setup, &args.log_dir.join("learner"))?;
    let report = train_with_stoker(model, &setup, &args.log_dir.join("stoker"))?;
    let largest = by_learner
        .weights()
        .iter()
        .zip(report.model.weights())
        .flat_map(|((_, a), (_, b))| a.iter().zip(b).map(|(x, y)| (x - y).abs()).collect::<Vec<_>>())
        .fold(0.0f32, f32::max);
    println!("largest weight difference after {} epochs: {largest:e}", args.epochs);
    println!("Learner's summary:\n{summary}");
    println!("stoker's log: {}", args.log_dir.join("stoker/stats.json").display());
    Ok(())
}
