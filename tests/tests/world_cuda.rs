//! The CUDA path of the threads transport (feature `cuda`): with two CUDA devices, burn averages
//! the gradients inside `backward()` (NCCL, its `DistributedContext`) and the exchanges carry the
//! words only. Two ranks with batch b train the same weights as one rank with batch 2b on the
//! same samples (SGD and Adam, within 1e-5 after 50 steps), and the replicas are bit-identical.
//!
//! Runs with 2 or more CUDA devices (`cargo test -p stoker-tests --features cuda --release --test
//! world_cuda -- --nocapture`); with fewer, each test fails saying why, unless `STOKER_SKIP_CUDA=1`
//! is set (then it prints why it skipped and passes): enabling the `cuda` feature asks for these
//! tests to run.

#![cfg(feature = "cuda")]

use std::sync::Mutex;

use burn::nn::LinearConfig;
use burn::optim::{AdamConfig, SgdConfig};
use burn::tensor::{Device, DeviceType};
use stoker_tests::weights;
use stoker_tests::world::{B, max_diff, single_and_pair};

const STEPS: usize = 50;
/// One test at a time: burn keeps one gradient sync server per backend for the whole process,
/// and every CUDA backward in the process (the single-device run's too) reports to it.
static SERIAL: Mutex<()> = Mutex::new(());

/// The first two CUDA devices, with autodiff. With fewer than two: a failure naming the
/// opt-out, or `None` (after saying why) when `STOKER_SKIP_CUDA=1` is set.
fn two_cuda_devices() -> Option<[Device; 2]> {
    let devices = Device::enumerate(DeviceType::Cuda).autodiff().into_vec();
    if devices.len() < 2 {
        let reason = format!("{} CUDA device(s), 2 needed", devices.len());
        if std::env::var_os("STOKER_SKIP_CUDA").is_some_and(|v| v == "1") {
            println!("skipped (STOKER_SKIP_CUDA=1): {reason}");
            return None;
        }
        panic!(
            "{reason}: the `cuda` feature's tests need two CUDA devices; set STOKER_SKIP_CUDA=1 to skip them knowingly"
        );
    }
    Some([devices[0].clone(), devices[1].clone()])
}

/// Rank by rank: the NCCL transport, not the reduction through the chief.
fn on_the_cuda_path(world: &burn_stoker::world::World) {
    let shown = format!("{world:?}");
    assert!(shown.contains(r#"transport: "nccl""#), "{shown}");
}

#[test]
fn two_cuda_ranks_with_sgd_train_what_one_rank_with_twice_the_batch_trains() {
    let Some(devices) = two_cuda_devices() else { return };
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let initial = weights(&LinearConfig::new(6, 3).init(&devices[0]));
    let (single, chief, other) =
        single_and_pair(devices, STEPS, || SgdConfig::new().init(), on_the_cuda_path);
    assert_eq!(chief, other, "the replicas must be bit-identical");
    let diff = max_diff(&single, &chief);
    assert!(diff < 1e-5, "2 ranks x batch {B} vs 1 rank x batch {}: max difference {diff}", 2 * B);
    assert!(max_diff(&single, &initial) > 1e-3, "training moved the weights");
}

#[test]
fn two_cuda_ranks_with_adam_train_what_one_rank_with_twice_the_batch_trains() {
    let Some(devices) = two_cuda_devices() else { return };
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (single, chief, other) =
        single_and_pair(devices, STEPS, || AdamConfig::new().init(), on_the_cuda_path);
    assert_eq!(chief, other, "the replicas must be bit-identical");
    let diff = max_diff(&single, &chief);
    assert!(diff < 1e-5, "2 ranks x batch {B} vs 1 rank x batch {}: max difference {diff}", 2 * B);
}
