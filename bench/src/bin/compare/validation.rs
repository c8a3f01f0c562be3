//! `compare --validation <rounds> <passes>`: a validation pass of the digits MLP over the
//! validation split (360 images, batches of 64, the last one short), timed two ways, interleaved
//! round after round in one process:
//!
//! - a hand-written loop that adds the batches' cost sums (cost x batch size), wrong counts and
//!   sizes on the device and reads them back once per pass: the best a user can write by hand;
//! - stoker's `InferenceRunner` with `ScalarStats::new(["cost"])` and
//!   `ClassificationError::new("wrong", ...)`, run by the trainer every step (one step of
//!   training between passes, not timed): each pass is timed from `before_validate` to
//!   `after_validate`, which surround it.
//!
//! Both end with their one read, so the device has finished when the clock stops.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use burn::data::dataloader::batcher::Batcher;
use burn::optim::AdamConfig;
use burn::tensor::{Device, Tensor};
use burn_stoker::inference::{ClassificationError, InferenceRunner, ScalarStats};
use burn_stoker::prelude::*;
use stoker_bench::{batches, fresh, median};
use stoker_examples::{DigitBatch, DigitBatcher, Mlp, digit_outputs, load_digits};

fn validation_batches(device: &Device) -> Vec<DigitBatch> {
    let split = load_digits(1, 0.2);
    split.valid.chunks(64).map(|c| DigitBatcher.batch(c.to_vec(), device)).collect()
}

/// One hand-written pass: the sums on the device, one read; returns (mean cost, error rate).
fn hand_pass(model: &Mlp, data: &[DigitBatch]) -> (f64, f64) {
    let mut outputs = Outputs::new();
    let mut sums: Option<Tensor<1>> = None;
    let mut datapoints = 0usize;
    for batch in data {
        outputs.clear();
        let n = batch.images.dims()[0];
        digit_outputs(model, batch.clone(), &mut outputs);
        let cost = outputs.get("cost").expect("cost").flat() * n as f32;
        let wrong = outputs.get("wrong").expect("wrong").flat().sum();
        let batch_sums = Tensor::cat(vec![cost, wrong], 0);
        sums = Some(match sums {
            Some(total) => total + batch_sums,
            None => batch_sums,
        });
        datapoints += n;
    }
    let sums: Vec<f32> = sums.expect("a batch").into_data().iter::<f32>().collect();
    (f64::from(sums[0]) / datapoints as f64, f64::from(sums[1]) / datapoints as f64)
}

/// Times each pass between `before_validate` and `after_validate`, the device synchronized first
/// (the training step before the pass may still be queued on an asynchronous device).
#[derive(Clone)]
struct PassClock(Arc<Mutex<(Option<Instant>, Vec<Duration>)>>, Device);

impl<M> Callback<M> for PassClock {
    fn before_validate(&mut self, _ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        self.1.sync().map_err(|e| burn_stoker::Error::msg(e.to_string()))?;
        self.0.lock().unwrap().0 = Some(Instant::now());
        Ok(())
    }
    fn after_validate(&mut self, _ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        let mut clock = self.0.lock().unwrap();
        if let Some(start) = clock.0.take() {
            clock.1.push(start.elapsed());
        }
        Ok(())
    }
}

/// `passes` passes of the runner (one training step before each); the median pass, and the
/// transfers the runner counted per pass.
fn runner_passes(
    model: &Mlp,
    valid: &[DigitBatch],
    train: &[DigitBatch],
    passes: u64,
    device: &Device,
) -> (Duration, f64) {
    let dir = std::env::temp_dir().join(format!("stoker-bench-validation-{}", std::process::id()));
    let runner = InferenceRunner::new(valid.to_vec(), |model: &Mlp, batch: DigitBatch, out: &mut Outputs| {
        let n = batch.images.dims()[0];
        digit_outputs(model, batch, out);
        n
    })
    .with(ScalarStats::new(["cost"]))
    .with(ClassificationError::new("wrong", "validation_error"));
    let counts = runner.counts();
    let clock = PassClock(Arc::default(), device.clone());
    Trainer::new(model.clone(), AdamConfig::new().init(), train.to_vec())
        .max_epoch(1)
        .steps_per_epoch(passes)
        .log_dir(&dir)
        .log_dir_policy(burn_stoker::trainer::LogDirPolicy::Delete)
        .default_callbacks(DefaultCallbacks::none())
        .callbacks((PeriodicTrigger::new(runner).every_k_steps(1), clock.clone()))
        .train(|model: &Mlp, batch: DigitBatch, s: &mut Step<'_>| digit_outputs(model, batch, s.outputs()))
        .expect("training succeeds");
    let _ = std::fs::remove_dir_all(&dir);
    let times = clock.0.lock().unwrap().1.clone();
    assert_eq!(times.len() as u64, passes);
    let mut sorted = times;
    sorted.sort();
    (sorted[sorted.len() / 2], counts.transfers() as f64 / counts.passes() as f64)
}

pub fn compare(mut args: impl Iterator<Item = String>, device: &Device, device_name: &str) {
    let usage = "usage: compare --validation <rounds> <passes>";
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).expect(usage);
    let passes: u64 = args.next().and_then(|a| a.parse().ok()).expect(usage);
    let valid = validation_batches(device);
    let train = batches(device);
    let model: Mlp = fresh(device);
    // Warm-up of both (kernels compiled, autotuned, caches filled).
    let _ = hand_pass(&model, &valid);
    let _ = runner_passes(&model, &valid, &train, 3, device);
    let (mut hand, mut runner, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let mut transfers = 0.0;
    for round in 0..rounds {
        let time_hand = || {
            let mut times: Vec<Duration> = (0..passes)
                .map(|_| {
                    let start = Instant::now();
                    let _ = hand_pass(&model, &valid);
                    start.elapsed()
                })
                .collect();
            times.sort();
            times[times.len() / 2]
        };
        let (h, (r, t)) = if round % 2 == 0 {
            let h = time_hand();
            (h, runner_passes(&model, &valid, &train, passes, device))
        } else {
            let r = runner_passes(&model, &valid, &train, passes, device);
            (time_hand(), r)
        };
        transfers = t;
        hand.push(h.as_secs_f64() * 1e3);
        runner.push(r.as_secs_f64() * 1e3);
        ratios.push(h.as_secs_f64() / r.as_secs_f64());
    }
    println!(
        "\nvalidation pass, digits MLP, {} images in {} batches, device {device_name}; {passes} passes x {rounds} rounds (median pass of each round):",
        valid.iter().map(|b| b.images.dims()[0]).sum::<usize>(),
        valid.len()
    );
    println!("  hand-written loop, sums on the device, one read per pass: {:.3} ms", median(hand));
    println!(
        "  InferenceRunner (ScalarStats, ClassificationError), {transfers} transfer(s) per pass: {:.3} ms",
        median(runner)
    );
    println!("  hand / runner (speed ratio), median of the rounds: {:.3}", median(ratios));
}
