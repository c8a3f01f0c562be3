//! A quick measurement of what the trainer adds to a step: the same MLP, data and optimizer
//! trained by a hand-written burn loop, by stoker without callbacks, and by stoker with the default
//! callbacks, interleaved in one process; medians of steps per second.
//!
//! `cargo run --release --bin overhead -- [steps] [rounds]`

use std::time::Instant;

use burn::optim::{AdamConfig, GradientsParams};
use burn_stoker::prelude::*;
use stoker_examples::{DigitBatch, DigitBatcher, Mlp, digit_outputs, load_digits};

fn batches(device: &burn::tensor::Device) -> Vec<DigitBatch> {
    use burn::data::dataloader::batcher::Batcher;
    let split = load_digits(1, 0.2);
    split.train.chunks(64).filter(|c| c.len() == 64).map(|c| DigitBatcher.batch(c.to_vec(), device)).collect()
}

fn hand_loop(data: &[DigitBatch], steps: usize, device: &burn::tensor::Device) -> f64 {
    let mut model = Mlp::new(128, device);
    let mut optimizer = AdamConfig::new().init();
    let mut outputs = Outputs::new();
    let start = Instant::now();
    for i in 0..steps {
        outputs.clear();
        let loss = digit_outputs(&model, data[i % data.len()].clone(), &mut outputs);
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optimizer.step(1e-3, model, grads);
    }
    // Wait for the device to finish what was queued.
    let _ = model.forward(data[0].images.clone()).into_data();
    steps as f64 / start.elapsed().as_secs_f64()
}

fn stoker_loop(data: &[DigitBatch], steps: usize, defaults: bool, device: &burn::tensor::Device) -> f64 {
    let model = Mlp::new(128, device);
    let dir = std::env::temp_dir().join(format!("stoker-overhead-{}", std::process::id()));
    let defaults = if defaults {
        DefaultCallbacks { printer: None, ..DefaultCallbacks::default() }
    } else {
        DefaultCallbacks::none()
    };
    let start = Instant::now();
    let report = Trainer::new(model, AdamConfig::new().init(), data.to_vec())
        .max_epoch(1)
        .steps_per_epoch(steps as u64)
        .log_dir(&dir)
        .default_callbacks(defaults)
        .train(|model: &Mlp, batch: DigitBatch, step: &mut Step<'_>| {
            digit_outputs(model, batch, step.outputs())
        })
        .expect("training succeeds");
    let _ = report.model.forward(data[0].images.clone()).into_data();
    let rate = steps as f64 / start.elapsed().as_secs_f64();
    let _ = std::fs::remove_dir_all(&dir);
    rate
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let steps: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2000);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(7);
    let device = burn_stoker::device::cpu();
    let data = batches(&device);
    let (mut hand, mut bare, mut defaults) = (Vec::new(), Vec::new(), Vec::new());
    hand_loop(&data, steps / 4, &device);
    for _ in 0..rounds {
        hand.push(hand_loop(&data, steps, &device));
        bare.push(stoker_loop(&data, steps, false, &device));
        defaults.push(stoker_loop(&data, steps, true, &device));
    }
    let (h, b, d) = (median(hand), median(bare), median(defaults));
    println!("MLP 64-128-10, batch 64, Adam, {steps} steps x {rounds} rounds, medians:");
    println!("  hand-written burn loop     {h:8.0} steps/s");
    println!("  stoker, no callbacks       {b:8.0} steps/s  ({:.3} of the hand loop)", b / h);
    println!("  stoker, default callbacks  {d:8.0} steps/s  ({:.3} of the hand loop)", d / h);
}
