//! The dashboard's ways out, for its tests in a real terminal (`examples/tests/it/dashboard.rs`):
//! the digits MLP trained with `monitor::Dashboard`, and a callback that ends the run as asked.
//!
//! `dashboard_faults --log-dir DIR --epochs N [--error-at E] [--panic-at E] [--linger SECONDS]
//! [--final-scalar] [--shell FILE]`
//!
//! - `--error-at E`: the callback returns an error at the end of epoch E (the run fails; the
//!   program prints `training failed: ...` and exits with status 1);
//! - `--panic-at E`: it panics there instead;
//! - `--linger SECONDS`: its `after_train` sleeps that long (the trainer, and the dashboard, are
//!   still there: a second SIGINT meanwhile exits at once);
//! - `--final-scalar`: its `after_train` puts the scalar `final_score` (0.75), the run's last
//!   value, which the dashboard's last frame must show;
//! - `--shell FILE`: an `InjectShell` too, whose prompt opens at an epoch's end once `FILE`
//!   exists (the dashboard steps aside while it is open).
//!
//! The exit status is digits': 0 finished, 130 interrupted, 1 failed.

use std::process::ExitCode;
use std::time::Duration;

use burn::optim::AdamConfig;
use burn_stoker::callback::Outcome;
use burn_stoker::debug::InjectShell;
use burn_stoker::monitor::Dashboard;
use burn_stoker::prelude::*;
use clap::Parser;
use stoker_examples::{DigitBatch, Mlp, TrainingScalars, digit_outputs, load_digits, loader};

/// The digits MLP with the dashboard, and a callback that ends the run as asked.
#[derive(Debug, Parser)]
#[command(name = "dashboard_faults")]
struct Cli {
    /// Where the logs and checkpoints go (a new `version_N` folder inside it).
    #[arg(long, value_name = "DIR")]
    log_dir: String,
    /// Epochs to train.
    #[arg(long, value_name = "N", default_value_t = 3)]
    epochs: u64,
    /// Return an error at the end of this epoch.
    #[arg(long, value_name = "E")]
    error_at: Option<u64>,
    /// Panic at the end of this epoch.
    #[arg(long, value_name = "E")]
    panic_at: Option<u64>,
    /// Sleep this long in `after_train`.
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    linger: u64,
    /// Put the scalar `final_score` in `after_train`.
    #[arg(long)]
    final_scalar: bool,
    /// Add an `InjectShell` that opens its prompt when this file exists.
    #[arg(long, value_name = "FILE")]
    shell: Option<String>,
}

/// Ends the run as the command line asks.
#[derive(Debug)]
struct Fault {
    error_at: Option<u64>,
    panic_at: Option<u64>,
    linger: Duration,
    final_scalar: bool,
}

#[callback]
impl Fault {
    #[on(trigger_epoch)]
    fn fail(&mut self, ctx: &mut Context<'_, Mlp>) -> burn_stoker::Result<()> {
        let epoch = ctx.epoch_num();
        if self.panic_at == Some(epoch) {
            panic!("Fault: the panic asked for at epoch {epoch}");
        }
        if self.error_at == Some(epoch) {
            return Err(burn_stoker::Error::msg(format!("Fault: the error asked for at epoch {epoch}")));
        }
        Ok(())
    }

    #[on(after_train)]
    fn end(&mut self, ctx: &mut Context<'_, Mlp>) {
        if self.final_scalar {
            ctx.monitors().put_scalar("final_score", 0.75);
        }
        std::thread::sleep(self.linger);
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let device = burn_stoker::device::cpu();
    let split = load_digits(42, 0.2);
    let train = loader(split.train, 32, Some(42), &device);
    device.seed(42);
    let model = Mlp::new(256, &device);
    let fault = Fault {
        error_at: cli.error_at,
        panic_at: cli.panic_at,
        linger: Duration::from_secs(cli.linger),
        final_scalar: cli.final_scalar,
    };
    let shell = cli.shell.map(|file| InjectShell::new().file(file));
    let result = Trainer::new(model, AdamConfig::new().init(), train)
        .max_epoch(cli.epochs)
        .log_dir(&cli.log_dir)
        .default_callbacks(DefaultCallbacks { progress: None, printer: None, ..DefaultCallbacks::default() })
        // The fault before the dashboard: its `after_train` runs first, the dashboard still shown.
        .callbacks((TrainingScalars::default(), fault, Dashboard::new().fetch(["cost"]), shell))
        .train(|model: &Mlp, batch: DigitBatch, step: &mut Step<'_>| {
            digit_outputs(model, batch, step.outputs())
        });
    match result {
        Ok(report) if matches!(report.outcome, Outcome::Interrupted { .. }) => {
            println!("interrupted at global step {}", report.counters.global_step());
            ExitCode::from(130)
        }
        Ok(report) => {
            println!("trained {} epochs", report.counters.epoch_num());
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("training failed: {error}");
            ExitCode::FAILURE
        }
    }
}
