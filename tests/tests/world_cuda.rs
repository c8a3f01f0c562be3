//! The CUDA path of the threads transport (feature `cuda`): with two CUDA devices, burn averages
//! the gradients inside `backward()` (NCCL, its `DistributedContext`) and the exchanges carry the
//! words only. Two ranks with batch b train the same weights as one rank with batch 2b on the
//! same samples (SGD and Adam, within 1e-5 after 50 steps), and the replicas are bit-identical.
//!
//! Runs with 2 or more CUDA devices (`cargo test -p stoker-tests --features cuda --release --test
//! world_cuda -- --nocapture`); with fewer, each test prints why it skipped and passes.

#![cfg(feature = "cuda")]

use std::sync::Mutex;

use burn::nn::{Linear, LinearConfig};
use burn::optim::{AdamConfig, ModuleOptimizer, SgdConfig};
use burn::tensor::{Device, DeviceType, Tensor, TensorData};
use burn_stoker::prelude::*;
use burn_stoker::world::Threads;
use stoker_tests::{scratch_dir, weights};

type Weights = Vec<Vec<f32>>;

const STEPS: usize = 50;
/// One test at a time: burn keeps one gradient sync server per backend for the whole process,
/// and every CUDA backward in the process (the single-device run's too) reports to it.
static SERIAL: Mutex<()> = Mutex::new(());
const B: usize = 4;

/// The first two CUDA devices, with autodiff; `None` (after saying why) with fewer than two.
fn two_cuda_devices() -> Option<[Device; 2]> {
    let devices = Device::enumerate(DeviceType::Cuda).autodiff().into_vec();
    if devices.len() < 2 {
        println!("skipped: {} CUDA device(s), 2 needed", devices.len());
        return None;
    }
    Some([devices[0].clone(), devices[1].clone()])
}

/// `n` batches of `rows` points of a fixed linear map 6 -> 3 plus a bend, deterministic.
fn batches(n: usize, rows: usize, device: &Device) -> Vec<(Tensor<2>, Tensor<2>)> {
    (0..n)
        .map(|b| {
            let xs: Vec<f32> = (0..rows * 6).map(|i| (((b * rows * 6 + i) as f32) * 0.731).sin()).collect();
            let ys: Vec<f32> = xs
                .chunks(6)
                .flat_map(|x| [x[0] - 2.0 * x[1] + x[5] * x[5], 0.5 * x[2] + x[3].abs(), x[4] - x[0] * x[1]])
                .collect();
            (
                Tensor::from_data(TensorData::new(xs, [rows, 6]), device),
                Tensor::from_data(TensorData::new(ys, [rows, 3]), device),
            )
        })
        .collect()
}

/// Batch `k` of the single-device run: batches `2k` and `2k + 1` of the two ranks, stacked.
fn joined(device: &Device) -> Vec<(Tensor<2>, Tensor<2>)> {
    let small = batches(2 * STEPS, B, device);
    small
        .chunks(2)
        .map(|pair| {
            (
                Tensor::cat(vec![pair[0].0.clone(), pair[1].0.clone()], 0),
                Tensor::cat(vec![pair[0].1.clone(), pair[1].1.clone()], 0),
            )
        })
        .collect()
}

fn mse(model: &Linear, (x, y): (Tensor<2>, Tensor<2>), _step: &mut Step<'_>) -> Tensor<1> {
    (model.forward(x) - y).powi_scalar(2).mean()
}

fn max_diff(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    a.iter().flatten().zip(b.iter().flatten()).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

/// Trains 50 steps on the first device with batch 2B, then on two ranks (two CUDA devices) with
/// batch B, from the same initial model; returns (single, rank 0, rank 1) weights.
fn single_and_pair(devices: [Device; 2], optimizer: fn() -> ModuleOptimizer) -> (Weights, Weights, Weights) {
    let device = devices[0].clone();
    let initial: Linear = LinearConfig::new(6, 3).init(&device);
    let single = Trainer::new(initial.clone(), optimizer(), joined(&device))
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .learning_rate(0.05)
        .log_dir(scratch_dir("world-cuda-single"))
        .train(mse)
        .expect("single-device training");
    assert_eq!(single.counters.global_step(), STEPS as u64);

    let initial = Mutex::new(initial);
    let dir = scratch_dir("world-cuda-pair");
    let reports = Threads::new(devices)
        .run(|world| {
            // The CUDA path, not the reduction through the chief.
            let shown = format!("{world:?}");
            assert!(shown.contains("grads_reduced_by_backend: true"), "{shown}");
            // Rank 1 starts from other weights: the chief's must reach it.
            let model = if world.is_chief() {
                initial.lock().unwrap().clone()
            } else {
                LinearConfig::new(6, 3).init(world.device())
            };
            let data = world.shard(batches(2 * STEPS, B, world.device()));
            Trainer::new(model, optimizer(), data)
                .default_callbacks(DefaultCallbacks::none())
                .handle_signals(false)
                .learning_rate(0.05)
                .log_dir(&dir)
                .world(world)
                .train(mse)
        })
        .expect("two ranks");
    assert_eq!(reports.len(), 2);
    for report in &reports {
        assert_eq!(report.counters.global_step(), STEPS as u64);
    }
    (weights(&single.model), weights(&reports[0].model), weights(&reports[1].model))
}

#[test]
fn two_cuda_ranks_with_sgd_train_what_one_rank_with_twice_the_batch_trains() {
    let Some(devices) = two_cuda_devices() else { return };
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let initial = weights(&LinearConfig::new(6, 3).init(&devices[0]));
    let (single, chief, other) = single_and_pair(devices, || SgdConfig::new().init());
    assert_eq!(chief, other, "the replicas must be bit-identical");
    let diff = max_diff(&single, &chief);
    assert!(diff < 1e-5, "2 ranks x batch {B} vs 1 rank x batch {}: max difference {diff}", 2 * B);
    assert!(max_diff(&single, &initial) > 1e-3, "training moved the weights");
}

#[test]
fn two_cuda_ranks_with_adam_train_what_one_rank_with_twice_the_batch_trains() {
    let Some(devices) = two_cuda_devices() else { return };
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (single, chief, other) = single_and_pair(devices, || AdamConfig::new().init());
    assert_eq!(chief, other, "the replicas must be bit-identical");
    let diff = max_diff(&single, &chief);
    assert!(diff < 1e-5, "2 ranks x batch {B} vs 1 rank x batch {}: max difference {diff}", 2 * B);
}
