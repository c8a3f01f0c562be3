//! Regenerate the guide's pictures of `Recorder`'s plots (book/src/images/loss.png and lr.png):
//! train the digits MLP for 8 epochs with validation, a learning rate warmed up over the first
//! epoch then brought down linearly, and a `Recorder`, then copy the `loss.png` and `lr.png` it
//! wrote in the log directory into the output folder.
//!
//! `cargo run --release -p stoker-examples --bin guide_plots -- [OUT_DIR]` (default
//! `book/src/images`, from the workspace root). The run is seeded and on the CPU, so it draws the
//! same pictures each time.

use std::path::PathBuf;
use std::process::ExitCode;

use burn::optim::AdamConfig;
use burn_stoker::prelude::*;
use burn_stoker::track::{LOSS_PLOT, LR_PLOT, Recorder};
use stoker_examples::{DigitBatch, Mlp, digit_outputs, load_digits, loader};

fn main() -> ExitCode {
    let out = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "book/src/images".into()));
    match plots(&out) {
        Ok(()) => {
            println!("wrote {} and {}", out.join(LOSS_PLOT).display(), out.join(LR_PLOT).display());
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("guide_plots: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Train, then copy the two plots into `out`.
fn plots(out: &std::path::Path) -> burn_stoker::Result<()> {
    let device = burn_stoker::device::cpu();
    let split = load_digits(42, 0.2);
    let train = loader(split.train, 32, Some(42), &device);
    let valid = loader(split.valid, 256, None, &device);
    device.seed(42);
    let model = Mlp::new(256, &device);
    let log_dir = std::env::temp_dir().join(format!("stoker-guide-plots-{}", std::process::id()));
    // 45 steps an epoch: from 1e-3 up to 1e-2 over the first epoch, then down to 1e-4 by the end.
    let schedule = ScheduledHyperParamSetter::new("learning_rate", [(0, 1e-3), (45, 1e-2), (360, 1e-4)])
        .linear()
        .step_based();
    let validation = InferenceRunner::new(valid, |model: &Mlp, batch: DigitBatch, out: &mut Outputs| {
        digit_outputs(model, batch, out);
    })
    .with(ScalarStats::new(["cost"]));
    Trainer::new(model, AdamConfig::new().init(), train)
        .max_epoch(8)
        .log_dir(&log_dir)
        .log_dir_policy(LogDirPolicy::Delete)
        .default_callbacks(DefaultCallbacks::none())
        .callbacks((validation, schedule, Recorder::new().valid_loss("validation_cost")))
        .train(|model: &Mlp, batch: DigitBatch, step: &mut Step<'_>| {
            digit_outputs(model, batch, step.outputs())
        })?;
    std::fs::create_dir_all(out).map_err(|e| burn_stoker::Error::io(out, e))?;
    for name in [LOSS_PLOT, LR_PLOT] {
        let (from, to) = (log_dir.join(name), out.join(name));
        std::fs::copy(&from, &to).map_err(|e| burn_stoker::Error::io(&from, e))?;
    }
    std::fs::remove_dir_all(&log_dir).map_err(|e| burn_stoker::Error::io(&log_dir, e))
}
