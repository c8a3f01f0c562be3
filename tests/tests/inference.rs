//! InferenceRunner and its inferencers: the true error over a whole set with batches of any size,
//! scalar means, one transfer per batch, results in the monitors; and the learning-rate schedule.

use std::sync::{Arc, Mutex};

use burn::nn::Linear;
use burn::tensor::{Tensor, TensorData};
use stoker::prelude::*;
use stoker_tests::{mse, scratch_dir, tiny_data, tiny_model};

type Seen = Arc<Mutex<Vec<(u64, Option<f64>, Option<f64>, f64)>>>;

/// Records, at each trigger, the validation results and the learning rate.
struct Observer(Seen, Order);

impl Callback<Linear> for Observer {
    fn order(&self) -> Order {
        self.1.clone()
    }
    fn trigger(&mut self, ctx: &mut Context<'_, Linear>) -> stoker::Result<()> {
        let monitors = ctx.monitors_ref();
        let entry = (
            ctx.epoch_num(),
            monitors.latest("validation_error"),
            monitors.latest("validation_cost"),
            ctx.learning_rate(),
        );
        self.0.lock().unwrap().push(entry);
        Ok(())
    }
}

/// Two validation batches of different sizes: 3 samples (1 wrong, cost 0.5) and 1 sample (1
/// wrong, cost 2.0). True error 2/4 = 0.5 (the mean of per-batch errors would be 2/3).
fn validation_batches() -> Vec<(Tensor<1>, Tensor<1>)> {
    let device = stoker::device::cpu();
    let batch = |wrong: Vec<f32>, cost: f32| {
        let n = wrong.len();
        (
            Tensor::from_data(TensorData::new(wrong, [n]), &device),
            Tensor::from_data(TensorData::new(vec![cost], [1]), &device),
        )
    };
    vec![batch(vec![0.0, 1.0, 0.0], 0.5), batch(vec![1.0], 2.0)]
}

#[test]
fn classification_error_weighs_batches_by_size_and_scalar_stats_average_batches() {
    let device = stoker::device::cpu();
    let seen = Seen::default();
    let runner = InferenceRunner::new(
        validation_batches(),
        |_model: &Linear, (wrong, cost): (Tensor<1>, Tensor<1>), out: &mut Outputs| {
            out.put("wrong", wrong);
            out.put("cost", cost);
        },
    )
    .with(ClassificationError::new("wrong", "validation_error"))
    .with(ScalarStats::new(["cost"]));
    let report =
        Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(2, &device))
            .max_epoch(2)
            .log_dir(scratch_dir("inference"))
            .default_callbacks(DefaultCallbacks::none())
            .callbacks((Observer(seen.clone(), Order::none().after("InferenceRunner")), runner))
            .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
            .unwrap();
    assert_eq!(report.fetch_transfers, 0, "inference transfers are not training fetches");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen, vec![(1, Some(0.5), Some(1.25), 1e-3), (2, Some(0.5), Some(1.25), 1e-3)]);
}

#[test]
fn an_inference_output_that_is_not_produced_is_a_named_error() {
    let device = stoker::device::cpu();
    let runner = InferenceRunner::new(
        validation_batches(),
        |_model: &Linear, (wrong, _cost): (Tensor<1>, Tensor<1>), out: &mut Outputs| {
            out.put("wrong", wrong);
        },
    )
    .with(ScalarStats::new(["cost"]));
    let error =
        Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(2, &device))
            .log_dir(scratch_dir("inference-missing"))
            .default_callbacks(DefaultCallbacks::none())
            .callbacks(runner)
            .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
            .unwrap_err();
    assert_eq!(
        error.to_string(),
        "callback `InferenceRunner` failed in trigger_epoch: callback `InferenceRunner` asks for `cost`, which its forward function does not produce; it produces `wrong`"
    );
}

#[test]
fn the_schedule_sets_values_after_their_epochs_and_interpolates_without_extrapolating() {
    let schedule = ScheduledHyperParamSetter::new("learning_rate", [(2, 1.0), (6, 0.0)]).linear();
    let values: Vec<Option<f64>> = (0..9).map(|e| schedule.value_at(e, true)).collect();
    assert_eq!(values, vec![None, None, Some(1.0), Some(0.75), Some(0.5), Some(0.25), Some(0.0), None, None]);
    let steps = ScheduledHyperParamSetter::new("learning_rate", [(2, 1.0), (6, 0.0)]);
    let exact: Vec<Option<f64>> = (0..9).map(|e| steps.value_at(e, true)).collect();
    assert_eq!(exact, vec![None, None, Some(1.0), None, None, None, Some(0.0), None, None]);
    // At the beginning of a resumed run, the value in force is set even between points.
    let resumed: Vec<Option<f64>> = (0..9).map(|e| steps.value_at(e, false)).collect();
    assert_eq!(
        resumed,
        vec![None, None, Some(1.0), Some(1.0), Some(1.0), Some(1.0), Some(0.0), Some(0.0), Some(0.0)]
    );
}

#[test]
fn the_schedule_drives_the_learning_rate_of_a_run_including_a_resumed_one() {
    let run = |starting_epoch: u64| {
        let device = stoker::device::cpu();
        let seen = Seen::default();
        Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(1, &device))
            .max_epoch(5)
            .starting_epoch(starting_epoch)
            .log_dir(scratch_dir("schedule"))
            .default_callbacks(DefaultCallbacks::none())
            .callbacks((
                Observer(seen.clone(), Order::none().after("ScheduledHyperParamSetter")),
                ScheduledHyperParamSetter::new("learning_rate", [(0, 0.5), (2, 0.1), (4, 0.0)]),
            ))
            .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
            .unwrap();
        let lrs: Vec<(u64, f64)> = seen.lock().unwrap().iter().map(|e| (e.0, e.3)).collect();
        lrs
    };
    // Observed at the end of each epoch, after the setter: the value for the next epoch.
    assert_eq!(run(1), vec![(1, 0.5), (2, 0.1), (3, 0.1), (4, 0.0), (5, 0.0)]);
    assert_eq!(run(4), vec![(4, 0.0), (5, 0.0)]);
}
