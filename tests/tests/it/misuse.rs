//! Foot-guns that surfaced late become errors at setup, with the fix in the message (issue 40,
//! item 2): a model on a device without autodiff, a chief-only callback that takes a value inside
//! the step of a world; `Trainer` stays `Send` with `mpi` on. (A second `.callbacks(...)` does
//! not compile: `tests/ui/fail/callbacks_twice.rs`.)

use burn::nn::Linear;
use burn::optim::SgdConfig;
use burn::tensor::Device;
use burn_stoker::callback::StepLoss;
use burn_stoker::prelude::*;
use burn_stoker::world::Threads;
use stoker_tests::{mse, scratch_dir, tiny_data, tiny_model};

/// A model built on a device without autodiff cannot train: refused before the log directory
/// is touched, naming the parameter and `device.autodiff()`. Before: the first backward failed,
/// after setup.
#[test]
fn misuse_a_model_on_a_device_without_autodiff_is_refused_before_anything_is_written() {
    let dir = scratch_dir("misuse-no-autodiff");
    let plain = Device::default();
    assert!(!plain.is_autodiff());
    let error = Trainer::new(tiny_model(&plain), SgdConfig::new().init(), tiny_data(4, &plain))
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .log_dir(&dir)
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .map_err(burn_stoker::Error::from)
        .expect_err("a model without autodiff cannot train");
    let message = error.to_string();
    assert!(matches!(error, burn_stoker::Error::Config(burn_stoker::ConfigError::Misuse(_))), "{error:?}");
    assert!(message.contains("without autodiff") && message.contains("device.autodiff()"), "{message}");
    let written: Vec<_> =
        std::fs::read_dir(&dir).map(|d| d.flatten().map(|e| e.file_name()).collect()).unwrap_or_default();
    assert!(written.is_empty(), "nothing was written: {written:?}");
}

/// Halves the loss before backward; `chief_only` is the default (true).
#[callback(on = before_backward)]
fn halve_loss_on_the_chief(loss: &StepLoss<'_>) {
    loss.update(|l| l * 0.5);
}

/// Halves the loss before backward on every rank.
#[callback(on = before_backward, chief_only = false)]
fn halve_loss_everywhere(loss: &StepLoss<'_>) {
    loss.update(|l| l * 0.5);
}

/// A 2-rank threads world training with the callbacks `make` gives each rank: each rank's steps.
fn world_of_two<C: burn_stoker::callback::Callbacks<Linear, K>, K>(
    name: &str,
    make: impl Fn() -> C + Sync,
) -> burn_stoker::Result<Vec<u64>> {
    let dir = scratch_dir(name);
    Threads::new([burn_stoker::device::cpu(), burn_stoker::device::cpu()]).run(|world| {
        let data = world.shard(tiny_data(8, world.device()));
        Trainer::new(tiny_model(world.device()), SgdConfig::new().init(), data)
            .default_callbacks(DefaultCallbacks::none())
            .handle_signals(false)
            .log_dir(&dir)
            .callbacks(make())
            .world(world)
            .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
            .map(|report| report.counters.global_step())
    })
}

/// In a world, a callback that changes the loss on the chief only would make the replicas
/// diverge: refused at setup, naming the callback, what it takes and `chief_only = false`; the
/// same callback on every rank trains. Before: it trained, rank 0 alone halving its loss.
#[test]
fn misuse_a_chief_only_callback_that_takes_the_loss_in_a_world_is_refused_naming_the_fix() {
    let error = world_of_two("misuse-chief-only-loss", || HalveLossOnTheChief)
        .expect_err("a chief-only loss hook in a world");
    let message = error.to_string();
    assert!(
        message.contains("HalveLossOnTheChief")
            && message.contains("the loss (before_backward)")
            && message.contains("chief_only = false"),
        "{message}"
    );
    let steps =
        world_of_two("misuse-every-rank-loss", || HalveLossEverywhere).expect("on every rank it trains");
    assert_eq!(steps, vec![4, 4]);
}

/// `.set_chief_only(v)` on a callback that takes the loss: made chief-only, it is refused in a
/// world as one chief-only by its own answer is, the error naming `.set_chief_only(false)`;
/// released onto every rank with `.set_chief_only(false)`, the chief-only one trains.
#[test]
fn misuse_set_chief_only_true_on_a_loss_hook_in_a_world_is_refused() {
    let error = world_of_two("misuse-set-chief-only-loss", || HalveLossEverywhere.set_chief_only(true))
        .expect_err("a loss hook made chief-only in a world");
    let message = error.to_string();
    assert!(
        message.contains("HalveLossEverywhere")
            && message.contains("the loss (before_backward)")
            && message.contains(".set_chief_only(false)"),
        "{message}"
    );
    let steps = world_of_two("misuse-set-chief-only-released", || HalveLossOnTheChief.set_chief_only(false))
        .expect("released onto every rank it trains");
    assert_eq!(steps, vec![4, 4]);
}

/// With the feature `mpi` on, a trainer (and a world) still moves to another thread: enabling
/// `mpi` anywhere in a dependency graph must not break code that trains on a thread. Before:
/// MPI's communicator, a raw pointer, made `World` and so `Trainer` not `Send` (this did not
/// compile).
#[cfg(feature = "mpi")]
#[test]
fn misuse_with_mpi_on_a_trainer_and_a_world_still_move_to_another_thread() {
    fn is_send<T: Send>(_: &T) {}
    fn world_is_send<T: Send>() {}
    world_is_send::<burn_stoker::world::World>();
    let device = burn_stoker::device::cpu();
    let trainer = Trainer::new(tiny_model(&device), SgdConfig::new().init(), tiny_data(4, &device))
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .log_dir(scratch_dir("misuse-send-with-mpi"));
    is_send(&trainer);
    let steps = std::thread::spawn(move || {
        trainer
            .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
            .map(|report| report.counters.global_step())
            .map_err(|e| e.to_string())
    })
    .join()
    .expect("the training thread")
    .expect("trains on its thread");
    assert_eq!(steps, 4);
}
