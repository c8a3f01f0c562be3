//! The GPU code path: the same trainer on burn-wgpu (Mesa's llvmpipe where there is no GPU).
#![cfg(feature = "wgpu")]

use stoker_examples::{DigitsConfig, train_digits};
use stoker_tests::scratch_dir;

#[test]
fn the_digits_example_trains_on_wgpu() {
    let dir = scratch_dir("wgpu");
    let mut config = DigitsConfig::new(&dir, burn_stoker::device::wgpu());
    config.epochs = 3;
    let (report, error) = train_digits(&config).expect("training on wgpu succeeds");
    assert_eq!(report.counters.global_step(), 3 * 45);
    // One fetch of two scalars per step (the example's training scalars), plus the progress bar's
    // every 20 steps, merged into the same transfer.
    assert_eq!(report.fetch_transfers, 3 * 45);
    assert!(error < 0.2, "validation error after 3 epochs on wgpu: {error}");
}
