//! `Trainer::seed`: the device generator seeded when training starts, so that the random
//! operations inside the step (dropout here) repeat, whatever was drawn between building the
//! model and training; another seed draws otherwise.

use burn::module::{Module, ModuleVisitor, Param};
use burn::nn::{Dropout, DropoutConfig, Linear, LinearConfig};
use burn::optim::SgdConfig;
use burn::tensor::{Distribution, Tensor};
use burn_stoker::prelude::*;
use stoker_tests::scratch_dir;

#[derive(Module, Debug)]
struct Net {
    linear: Linear,
    dropout: Dropout,
}

/// The weights' bits after 3 epochs of 4 steps with dropout 0.5 in the step: the model is built
/// after seeding the device with 1 (burn's `Device::seed`), then `draws` random tensors are drawn
/// (code between building the model and training), then the trainer is seeded with `seed`.
fn weights_after_training(seed: Option<u64>, draws: usize) -> Vec<u32> {
    let device = burn_stoker::device::cpu();
    device.seed(1);
    let model =
        Net { linear: LinearConfig::new(8, 4).init(&device), dropout: DropoutConfig::new(0.5).init() };
    for _ in 0..draws {
        let _ = Tensor::<2>::random([8, 8], Distribution::Default, &device);
    }
    let batches: Vec<Tensor<2>> =
        (0..4).map(|i| Tensor::<2>::ones([16, 8], &device) * (i as f32 + 1.0)).collect();
    let trainer = Trainer::new(model, SgdConfig::new().init(), batches)
        .max_epoch(3)
        .learning_rate(0.1)
        .log_dir(scratch_dir("seed"))
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false);
    let trainer = match seed {
        Some(seed) => trainer.seed(seed),
        None => trainer,
    };
    let report = trainer
        .train(|model: &Net, x: Tensor<2>, _step: &mut Step<'_>| {
            model.linear.forward(model.dropout.forward(x)).powi_scalar(2).mean()
        })
        .expect("training succeeds");
    struct Bits(Vec<u32>);
    impl ModuleVisitor for Bits {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            self.0.extend(param.val().into_data().iter::<f32>().map(f32::to_bits));
        }
    }
    let mut bits = Bits(Vec::new());
    report.model.visit(&mut bits);
    bits.0
}

#[test]
fn seed_same_seed_same_weights_after_n_steps_different_seeds_differ() {
    // Without a seed the step's dropout continues the generator wherever the code before
    // training left it: the test can tell.
    assert_ne!(
        weights_after_training(None, 0),
        weights_after_training(None, 3),
        "dropout draws from the device"
    );
    let seeded = weights_after_training(Some(7), 0);
    assert_eq!(seeded, weights_after_training(Some(7), 3), "same seed, same weights");
    assert_eq!(seeded, weights_after_training(Some(7), 0), "same seed, same weights, run again");
    assert_ne!(seeded, weights_after_training(Some(8), 0), "another seed, other weights");
}
