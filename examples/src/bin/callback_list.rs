//! tensorpack's ResNet callback list, written with stoker, training the digits MLP (see
//! `stoker_examples::callback_list` for the list side by side with tensorpack's).
//!
//! `cargo run --release -p stoker-examples --bin callback_list -- --help` for the options; neon's
//! switches (`--eval_freq`, `--serialize`, `--history`, `--save_path`, `--no_progress_bar`) come
//! from `burn_stoker::cli::CallbackArgs`. While it runs: edit `<save_path>/hyper.txt` to change the
//! learning rate, `touch INJECT_SHELL.tmp` (in the working directory) to pause at the end of the epoch and get
//! a prompt.

use std::process::ExitCode;

use burn_stoker::cli::CallbackArgs;
use clap::Parser;
use stoker_examples::callback_list::{ListConfig, train_with_list};

/// Train the digits MLP with tensorpack's ResNet callback list.
#[derive(Debug, Parser)]
#[command(name = "callback_list")]
struct Cli {
    /// Epochs to train.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    epochs: u64,
    /// The device: cpu, or wgpu (built with the `wgpu` feature).
    #[arg(long, default_value = "cpu")]
    device: String,
    /// The command SendStat runs after each validation, with `{val-error-top1}` and
    /// `{epoch_num}` replaced (default: append a line to <save_path>/val-error.txt).
    #[arg(long = "send-command", value_name = "COMMAND")]
    send_command: Option<String>,
    #[command(flatten)]
    callbacks: CallbackArgs,
}

fn main() -> ExitCode {
    // neon's single-dash `-eval N` too.
    let cli = Cli::parse_from(burn_stoker::cli::normalize_args(std::env::args_os()));
    let device = match burn_stoker::device::by_name(&cli.device) {
        Ok(device) => device,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    let mut config = ListConfig::new(cli.callbacks.log_dir("train_log/callback_list"), device);
    config.epochs = cli.epochs;
    // Every epoch with `--serialize 0` too (this list always checkpoints); `-H K` keeps what
    // neon keeps.
    config.serialize = cli.callbacks.serialize.filter(|&n| n > 0).unwrap_or(1);
    config.history = cli.callbacks.kept_checkpoints();
    config.eval_freq = cli.callbacks.eval_freq.unwrap_or(1);
    config.progress_bar = !cli.callbacks.no_progress_bar;
    config.send_command = cli.send_command;
    match train_with_list(&config) {
        Ok(report) => {
            println!(
                "trained {} epochs ({} steps): {:?}; logs in {}",
                report.counters.epoch_num(),
                report.counters.global_step(),
                report.outcome,
                config.log_dir.display()
            );
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("training failed: {error}");
            ExitCode::FAILURE
        }
    }
}
