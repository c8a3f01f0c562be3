//! The GPU code path: the same trainer on burn-wgpu (Mesa's llvmpipe where there is no GPU).
#![cfg(feature = "wgpu")]

use stoker_examples::{DigitsRun, train_digits};
use stoker_tests::scratch_dir;

#[test]
fn the_digits_example_trains_on_wgpu() {
    let dir = scratch_dir("wgpu");
    let mut config = DigitsRun::new(&dir, burn_stoker::device::wgpu());
    config.config.epochs = 3;
    let (report, error) = train_digits(&config).expect("training on wgpu succeeds");
    assert_eq!(report.counters.global_step(), 3 * 45);
    // One fetch of two scalars per step (the example's training scalars), plus the progress bar's
    // every 20 steps, merged into the same transfer.
    assert_eq!(report.fetch_transfers, 3 * 45);
    assert!(error < 0.2, "validation error after 3 epochs on wgpu: {error}");
}

/// Two ranks sharing the wgpu device (the threads transport) train what one rank with twice the
/// batch trains, and their replicas are bit-identical: on an asynchronous device each rank's
/// tensors, the trained models included, are handed over only after its queued work has run.
#[test]
fn two_ranks_on_one_wgpu_device_train_identical_replicas() {
    use stoker_tests::world::{max_diff, single_and_pair};
    let device = burn_stoker::device::wgpu;
    let (single, chief, other) =
        single_and_pair([device(), device()], 20, || burn::optim::SgdConfig::new().init(), |_| {});
    assert_eq!(chief, other, "the replicas must be bit-identical");
    let diff = max_diff(&single, &chief);
    assert!(diff < 1e-5, "2 ranks x batch 4 vs 1 rank x batch 8 on wgpu: max difference {diff}");
}
