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

/// What blocks on wgpu, measured where burn blocks (cubecl's `block_on`, counted by
/// `stoker_tests::reads`): a deferred fetch at every step makes no blocking read at all (the
/// trainer polls a transaction's asynchronous execution itself, one read in flight at a time,
/// the steps asking meanwhile gathered into the next read), every step's values arrive with
/// their step, also when one read carries several steps, and a validation pass whose
/// inferencers add their sums on the device reads once.
#[test]
fn on_wgpu_a_deferred_fetch_blocks_no_step_and_a_validation_pass_reads_once() {
    use std::sync::{Arc, Mutex};

    use burn::nn::Linear;
    use burn::tensor::Tensor;
    use burn_stoker::inference::{ClassificationError, InferenceRunner, ScalarStats};
    use burn_stoker::prelude::*;
    use stoker_tests::{mse, tiny_data, tiny_model};

    static DEFERRED: [Fetch; 1] = [Fetch::deferred("loss")];
    static SYNC: [Fetch; 1] = [Fetch::host("loss")];
    #[derive(Clone, Default)]
    struct Losses(Arc<Mutex<Vec<(u64, u32)>>>, bool);
    impl Callback<Linear> for Losses {
        fn fetches(&self) -> &[Fetch] {
            if self.1 { &DEFERRED } else { &SYNC }
        }
        fn after_step(
            &mut self,
            ctx: &mut Context<'_, Linear>,
            values: &Fetched<'_>,
        ) -> burn_stoker::Result<()> {
            if !self.1 {
                self.0.lock().unwrap().push((ctx.global_step(), values.get::<f32>("loss")?.to_bits()));
            }
            Ok(())
        }
        fn fetched(
            &mut self,
            _ctx: &mut Context<'_, Linear>,
            values: &Fetched<'_>,
        ) -> burn_stoker::Result<()> {
            self.0.lock().unwrap().push((values.step(), values.get::<f32>("loss")?.to_bits()));
            Ok(())
        }
    }
    let device = burn_stoker::device::wgpu();
    // `with` fetches synchronously beside `losses` (to compare the values in one run).
    let train = |deferred: bool, with: Option<Losses>, name: &str, interval: std::time::Duration| {
        let losses = Losses(Arc::default(), deferred);
        let seen = losses.0.clone();
        let (report, reads) = stoker_tests::reads::count_reads(|| {
            Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(5, &device))
                .max_epoch(2)
                .log_dir(scratch_dir(name))
                .handle_signals(false)
                .default_callbacks(DefaultCallbacks::none())
                .deferred_read_interval(interval)
                .callbacks((losses, with.map(|w| w.named("sync"))))
                .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
                .unwrap()
        });
        let seen = seen.lock().unwrap().clone();
        (report, reads, seen)
    };
    let (none, none_reads, _) = {
        let (report, reads) = stoker_tests::reads::count_reads(|| {
            Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(5, &device))
                .max_epoch(2)
                .log_dir(scratch_dir("wgpu-none"))
                .handle_signals(false)
                .default_callbacks(DefaultCallbacks::none())
                .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
                .unwrap()
        });
        (report, reads, ())
    };
    eprintln!("wgpu: {none_reads} blocking calls without any fetch ({} transfers)", none.fetch_transfers);
    let default_interval = burn_stoker::trainer::DEFERRED_READ_INTERVAL;
    let (sync, sync_reads, _) = train(false, None, "wgpu-sync", default_interval);
    let (deferred, deferred_reads, _) = train(true, None, "wgpu-deferred", default_interval);
    // An hour between reads: after each epoch's first read, the steps' values wait on the
    // device and one read at the epoch's end brings them all.
    let beside = Losses(Arc::default(), false);
    let (spaced, _, deferred_seen) =
        train(true, Some(beside.clone()), "wgpu-both", std::time::Duration::from_secs(3600));
    let sync_seen = beside.0.lock().unwrap().clone();
    assert_eq!((sync.fetch_transfers, sync_reads), (10, 10), "a synchronous fetch blocks once at every step");
    eprintln!("wgpu: {sync_reads} blocking reads for 10 synchronous fetches");
    eprintln!("wgpu: {deferred_reads} blocking calls with a deferred fetch at every step");
    assert_eq!(deferred_reads, 0, "a deferred fetch at every step makes no blocking read on wgpu");
    assert_eq!(deferred.fetch_transfers, 0);
    // At least one read per epoch (each epoch's values are delivered before it ends), at most
    // one per step.
    assert!((2..=10).contains(&deferred.deferred_reads), "{} deferred reads", deferred.deferred_reads);
    assert!(spaced.deferred_reads < 10, "reads an hour apart gather steps: {} reads", spaced.deferred_reads);
    assert_eq!(deferred_seen, sync_seen, "the same losses, each with its step, in order");
    eprintln!(
        "wgpu: {} deferred reads for 10 steps, {} of them waited for; an hour apart: {} reads",
        deferred.deferred_reads, deferred.deferred_waits, spaced.deferred_reads
    );

    // A validation pass over two batches: one read.
    let valid: Vec<(Tensor<1>, Tensor<1>)> = (0..2)
        .map(|i| {
            let wrong =
                Tensor::from_data(burn::tensor::TensorData::new(vec![i as f32, 1.0, 0.0], [3]), &device);
            let cost = Tensor::from_data(burn::tensor::TensorData::new(vec![0.5 + i as f32], [1]), &device);
            (wrong, cost)
        })
        .collect();
    let runner = InferenceRunner::new(
        valid,
        |_model: &Linear, (wrong, cost): (Tensor<1>, Tensor<1>), out: &mut Outputs| {
            out.put("wrong", wrong);
            out.put("cost", cost);
            3usize
        },
    )
    .with(ClassificationError::new("wrong", "validation_error"))
    .with(ScalarStats::new(["cost"]));
    let counts = runner.counts();
    let (_, reads) = stoker_tests::reads::count_reads(|| {
        Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(1, &device))
            .max_epoch(1)
            .log_dir(scratch_dir("wgpu-validation"))
            .handle_signals(false)
            .default_callbacks(DefaultCallbacks::none())
            .callbacks(runner)
            .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
            .unwrap()
    });
    eprintln!("wgpu: {reads} blocking calls in a run with one validation pass");
    assert_eq!(
        (counts.passes(), counts.transfers(), reads),
        (1, 1, 1),
        "one read per validation pass on wgpu"
    );
}
