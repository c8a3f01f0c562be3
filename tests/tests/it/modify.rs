//! Callbacks that change the step: the loss before backward (RnnRegularizer), the gradients before
//! the optimizer (GradientClip, GradientAccumulation). Losses linear in the weights give constant,
//! hand-computable gradients; SGD with learning rate 1 makes the update equal to minus the gradient.

use std::sync::{Arc, Mutex};

use burn::nn::Linear;
use burn::optim::SgdConfig;
use burn::tensor::{Tensor, TensorData};
use burn_stoker::modify::{BatchNormTune, GradientAccumulation, GradientClip, RnnRegularizer, RunOp};
use burn_stoker::prelude::*;
use stoker_tests::{scratch_dir, tiny_model, weights};

type Log = Arc<Mutex<Vec<Vec<f32>>>>;

/// Records the flattened weights (w0, w1, b) after every step.
struct WeightsAfterStep(Log);

impl Callback<Linear> for WeightsAfterStep {
    fn trigger_step(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.0.lock().unwrap().push(weights(ctx.model()).concat());
        Ok(())
    }
}

fn rows(rows: &[[f32; 2]]) -> Tensor<2> {
    let flat: Vec<f32> = rows.iter().flatten().copied().collect();
    Tensor::from_data(TensorData::new(flat, [rows.len(), 2]), &burn_stoker::device::cpu())
}

/// Trains `batches` (one epoch each time over all of them) with loss = sum(model(x)), whose gradient
/// is (sum of rows of x, number of rows) whatever the weights. Returns the initial weights and the
/// weights after each step.
fn train_linear<C, K>(batches: Vec<Tensor<2>>, epochs: u64, callbacks: C) -> (Vec<f32>, Vec<Vec<f32>>)
where
    C: Callbacks<Linear, K>,
    (C, WeightsAfterStep): Callbacks<Linear, (K, burn_stoker::callback::OneCallback)>,
{
    let device = burn_stoker::device::cpu();
    let model = tiny_model(&device);
    let initial = weights(&model).concat();
    let log = Log::default();
    Trainer::new(model, SgdConfig::new().init(), batches)
        .max_epoch(epochs)
        .learning_rate(1.0)
        .log_dir(scratch_dir("modify"))
        .default_callbacks(DefaultCallbacks::none())
        .callbacks((callbacks, WeightsAfterStep(log.clone())))
        .train(|model: &Linear, x: Tensor<2>, _step: &mut Step<'_>| model.forward(x).sum())
        .unwrap();
    let log = log.lock().unwrap().clone();
    (initial, log)
}

fn assert_close(actual: &[f32], expected: &[f32], what: &str) {
    assert_eq!(actual.len(), expected.len(), "{what}");
    for (a, e) in actual.iter().zip(expected) {
        assert!((a - e).abs() < 1e-5, "{what}: {actual:?} != {expected:?}");
    }
}

fn minus(w: &[f32], g: [f32; 3]) -> Vec<f32> {
    w.iter().zip(g).map(|(w, g)| w - g).collect()
}

#[test]
fn gradient_clip_scales_the_global_norm_and_clamps_values() {
    // Gradient (3, 4, 1): global norm sqrt(26).
    let (w0, log) = train_linear(vec![rows(&[[3.0, 4.0]])], 1, GradientClip::new(1.0));
    let n = 26f32.sqrt() + 1e-6;
    assert_close(&log[0], &minus(&w0, [3.0 / n, 4.0 / n, 1.0 / n]), "clipped by norm");

    // A norm already under the limit is left alone.
    let (w0, log) = train_linear(vec![rows(&[[0.3, 0.4]])], 1, GradientClip::new(10.0));
    assert_close(&log[0], &minus(&w0, [0.3, 0.4, 1.0]), "under the limit");

    // By value: each component to [-2, 2].
    let (w0, log) = train_linear(vec![rows(&[[3.0, -4.0]])], 1, GradientClip::by_value(2.0));
    assert_close(&log[0], &minus(&w0, [2.0, -2.0, 1.0]), "clipped by value");
}

#[test]
fn gradient_accumulation_steps_every_k_and_at_the_end_of_each_epoch() {
    // Three batches per epoch, k = 2: the optimizer runs after steps 2 (mean of g1, g2) and 3
    // (g3 alone: the epoch's last step flushes), then again after steps 5 and 6 in epoch 2.
    let batches = vec![rows(&[[1.0, 0.0]]), rows(&[[0.0, 1.0]]), rows(&[[2.0, 2.0]])];
    let (w0, log) = train_linear(batches.clone(), 2, GradientAccumulation::new(2));
    assert_eq!(log.len(), 6);
    let w2 = minus(&w0, [0.5, 0.5, 1.0]);
    let w3 = minus(&w2, [2.0, 2.0, 1.0]);
    let w5 = minus(&w3, [0.5, 0.5, 1.0]);
    let w6 = minus(&w5, [2.0, 2.0, 1.0]);
    assert_close(&log[0], &w0, "no optimizer step after step 1");
    assert_close(&log[1], &w2, "after step 2");
    assert_close(&log[2], &w3, "after step 3 (epoch end)");
    assert_close(&log[3], &w3, "no optimizer step after step 4");
    assert_close(&log[4], &w5, "after step 5");
    assert_close(&log[5], &w6, "after step 6");

    // The sum instead of the mean.
    let (w0, log) = train_linear(batches, 1, GradientAccumulation::new(2).sum());
    assert_close(&log[1], &minus(&w0, [1.0, 1.0, 2.0]), "summed");
}

#[test]
fn accumulation_then_clipping_clips_the_accumulated_gradient() {
    // Registration order: accumulate, then clip the mean (0.5, 0.5, 1) to norm 1.
    let batches = vec![rows(&[[1.0, 0.0]]), rows(&[[0.0, 1.0]])];
    let (w0, log) = train_linear(batches, 1, (GradientAccumulation::new(2), GradientClip::new(1.0)));
    let n = 1.5f32.sqrt() + 1e-6;
    assert_close(&log[0], &w0, "accumulating");
    assert_close(&log[1], &minus(&w0, [0.5 / n, 0.5 / n, 1.0 / n]), "clipped mean");
}

/// Records the `"loss"` output of every step.
struct Losses(Arc<Mutex<Vec<f32>>>);

static LOSS: [Fetch; 1] = [Fetch::host("loss")];

impl<M> Callback<M> for Losses {
    fn fetches(&self) -> &[Fetch] {
        &LOSS
    }
    fn after_step(&mut self, _ctx: &mut Context<'_, M>, values: &Fetched<'_>) -> burn_stoker::Result<()> {
        self.0.lock().unwrap().push(values.get::<f32>("loss")?);
        Ok(())
    }
}

/// A "sequence" of 3 time steps of one unit: raw[t] = w . x[t] + b, as [1, 3, 1].
fn sequence(model: &Linear) -> Tensor<3> {
    model.forward(rows(&[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])).reshape([1, 3, 1])
}

#[test]
fn rnn_regularizer_adds_ar_and_tar_to_the_loss_before_backward() {
    let device = burn_stoker::device::cpu();
    let model = tiny_model(&device);
    let w = weights(&model).concat();
    let raw = [w[0] + w[2], w[1] + w[2], w[0] + w[1] + w[2]];
    let base = raw.iter().sum::<f32>() / 3.0;
    let ar = 2.0 * raw.iter().map(|r| r * r).sum::<f32>() / 3.0;
    let tar = 0.5 * ((raw[1] - raw[0]).powi(2) + (raw[2] - raw[1]).powi(2)) / 2.0;

    let losses = Arc::new(Mutex::new(Vec::new()));
    let dir = scratch_dir("rnn-regularizer");
    let regularized = Trainer::new(model.clone(), SgdConfig::new().init(), vec![(); 3])
        .max_epoch(1)
        .learning_rate(0.1)
        .log_dir(&dir)
        .default_callbacks(DefaultCallbacks::none())
        .callbacks((RnnRegularizer::new(2.0, 0.5).outputs("dropped", "raw"), Losses(losses.clone())))
        .train(|model: &Linear, (): (), step: &mut Step<'_>| {
            let raw = sequence(model);
            step.output("dropped", raw.clone());
            step.output("raw", raw.clone());
            raw.mean()
        })
        .unwrap();
    let first = losses.lock().unwrap()[0];
    let expected = base + ar + tar;
    assert!((first - expected).abs() < 1e-5 * expected.abs().max(1.0), "loss {first} != {expected}");

    // Training with the penalty written into the step by hand gives the same weights.
    let by_hand = Trainer::new(model, SgdConfig::new().init(), vec![(); 3])
        .max_epoch(1)
        .learning_rate(0.1)
        .log_dir(scratch_dir("rnn-regularizer-by-hand"))
        .default_callbacks(DefaultCallbacks::none())
        .train(|model: &Linear, (): (), _step: &mut Step<'_>| {
            let raw = sequence(model);
            let ar = raw.clone().powi_scalar(2).mean().mul_scalar(2.0);
            let diff = raw.clone().slice([0..1, 1..3, 0..1]) - raw.clone().slice([0..1, 0..2, 0..1]);
            let tar = diff.powi_scalar(2).mean().mul_scalar(0.5);
            raw.mean() + ar + tar
        })
        .unwrap();
    assert_close(&weights(&regularized.model).concat(), &weights(&by_hand.model).concat(), "same training");
}

#[test]
fn rnn_regularizer_names_a_missing_output() {
    let device = burn_stoker::device::cpu();
    let error = Trainer::new(tiny_model(&device), SgdConfig::new().init(), vec![(); 1])
        .max_epoch(1)
        .log_dir(scratch_dir("rnn-regularizer-missing"))
        .default_callbacks(DefaultCallbacks::none())
        .callbacks(RnnRegularizer::new(2.0, 1.0))
        .train(|model: &Linear, (): (), _step: &mut Step<'_>| sequence(model).mean())
        .unwrap_err()
        .to_string();
    assert!(error.contains("RnnRegularizer") && error.contains("before_backward"), "{error}");
    assert!(error.contains("`dropped_out`"), "{error}");
}

// ---------------------------------------------------------------- neon's BatchNormTune

/// Two batches of 4 rows, 2 channels: channel 0 holds 1..8, channel 1 holds 10, 20, ..., 80
/// shuffled across the batches.
fn tune_batches() -> Vec<Tensor<2>> {
    vec![
        rows(&[[1.0, 30.0], [2.0, 10.0], [3.0, 80.0], [4.0, 20.0]]),
        rows(&[[5.0, 50.0], [6.0, 70.0], [7.0, 40.0], [8.0, 60.0]]),
    ]
}

fn bn_values(tensor: Tensor<1>) -> Vec<f32> {
    tensor.into_data().iter::<f32>().collect()
}

#[test]
fn batch_norm_tune_sets_the_running_stats_to_the_mean_and_variance_of_the_tuning_set() {
    use burn::nn::{BatchNorm, BatchNormConfig};
    let device = burn_stoker::device::cpu();
    // Channel 0: mean 4.5, population variance (1² + ... + 8²)/8 - 4.5² = 25.5 - 20.25 = 5.25.
    // Channel 1: mean 45, variance 100 x 5.25 = 525.
    let want_mean = [4.5f32, 45.0];
    let want_var = [5.25f32, 525.0];
    for momentum in [0.1, 0.3] {
        let model = BatchNormConfig::new(2).with_momentum(momentum).init(&device);
        // Train on other data (all 100s), so that the running stats are far from the answer.
        let train = vec![rows(&[[100.0, 100.0], [101.0, 99.0]]); 3];
        let tune = BatchNormTune::new(tune_batches(), |bn: &BatchNorm, x: Tensor<2>| {
            bn.forward(x);
        });
        let report = Trainer::new(model, SgdConfig::new().init(), train)
            .max_epoch(2)
            .log_dir(scratch_dir("bn-tune"))
            .handle_signals(false)
            .default_callbacks(DefaultCallbacks::none())
            .callbacks(tune)
            .train(|bn: &BatchNorm, x: Tensor<2>, _step: &mut Step<'_>| bn.forward(x).powi_scalar(2).mean())
            .unwrap();
        let mean = bn_values(report.model.running_mean.value());
        let var = bn_values(report.model.running_var.value());
        for c in 0..2 {
            assert!(
                (mean[c] - want_mean[c]).abs() <= 1e-4 * want_mean[c],
                "momentum {momentum}: mean {mean:?}"
            );
            assert!((var[c] - want_var[c]).abs() <= 1e-4 * want_var[c], "momentum {momentum}: var {var:?}");
        }
    }
}

#[test]
fn batch_norm_tune_refuses_a_model_without_batch_norm_and_an_empty_tuning_set() {
    let device = burn_stoker::device::cpu();
    let mut tune = BatchNormTune::new(tune_batches(), |model: &Linear, x: Tensor<2>| {
        model.forward(x);
    });
    let err = tune.tune(tiny_model(&device)).unwrap_err().to_string();
    assert!(err.contains("BatchNormTune: the model has no burn::nn::BatchNorm"), "{err}");
    let mut empty = BatchNormTune::new(Vec::<Tensor<2>>::new(), |model: &Linear, x: Tensor<2>| {
        model.forward(x);
    });
    let err = empty.tune(tiny_model(&device)).unwrap_err().to_string();
    assert_eq!(err, "BatchNormTune: no tuning batch; give it at least one");
}

#[test]
fn batch_norm_tune_refuses_a_layer_out_of_training_mode() {
    use burn::nn::{BatchNorm, BatchNormConfig};
    let device = burn_stoker::device::cpu();
    // On a device without autodiff, burn's BatchNorm runs in inference mode: its stats never move.
    let model: BatchNorm = burn::module::Module::valid(&BatchNormConfig::new(2).init(&device));
    let mut tune =
        BatchNormTune::new(vec![rows(&[[1.0, 2.0], [3.0, 4.0]]).inner()], |bn: &BatchNorm, x: Tensor<2>| {
            bn.forward(x);
        });
    let err = tune.tune(model).unwrap_err().to_string();
    assert!(err.contains("did not move in `forward`"), "{err}");
}

/// How often a `RunOp` ran, and the model's weights at each run.
fn run_op_runs(
    make: impl FnOnce(Box<dyn FnMut(&mut Linear) + Send>) -> RunOp<Box<dyn FnMut(&mut Linear) + Send>>,
) -> (usize, TrainReport<Linear>) {
    let runs = Arc::new(Mutex::new(0usize));
    let counted = runs.clone();
    let op = make(Box::new(move |_model: &mut Linear| *counted.lock().unwrap() += 1));
    let device = burn_stoker::device::cpu();
    let report =
        Trainer::new(tiny_model(&device), SgdConfig::new().init(), stoker_tests::tiny_data(3, &device))
            .max_epoch(2)
            .log_dir(scratch_dir("run-op"))
            .default_callbacks(DefaultCallbacks::none())
            .callbacks(op)
            .train(|model: &Linear, batch, _step: &mut Step<'_>| stoker_tests::mse(model, batch))
            .unwrap();
    let runs = *runs.lock().unwrap();
    (runs, report)
}

/// tensorpack's flags, on 2 epochs of 3 steps: `run_before` (once), `run_as_trigger` (each
/// epoch), `run_step` (before every step), and `run_after_step` (after every step).
#[test]
fn run_op_runs_before_training_as_a_trigger_and_with_the_steps_as_asked() {
    assert_eq!(run_op_runs(RunOp::new).0, 1 + 2, "before training and each epoch");
    assert_eq!(run_op_runs(|op| RunOp::new(op).run_as_trigger(false)).0, 1);
    assert_eq!(run_op_runs(RunOp::update_ops).0, 6, "RunUpdateOps: every step only");
    assert_eq!(
        run_op_runs(|op| RunOp::new(op).run_before(false).run_as_trigger(false).run_after_step(true)).0,
        6
    );
    assert_eq!(run_op_runs(|op| RunOp::new(op).run_step(true).run_after_step(true)).0, 1 + 2 + 6 + 6);
}

/// Sets every weight to `value`.
struct Fill(f32);

impl burn::module::ModuleMapper for Fill {
    fn map_float<const D: usize>(
        &mut self,
        param: burn::module::Param<Tensor<D>>,
    ) -> burn::module::Param<Tensor<D>> {
        let value = self.0;
        param.map(|t| {
            let filled = t.zeros_like().add_scalar(value).detach();
            if t.is_require_grad() { filled.require_grad() } else { filled }
        })
    }
}

/// `run_step` changes the model the step trains (before it); `run_after_step` the model the
/// step produced, which training returns.
#[test]
fn run_op_changes_the_model_before_or_after_the_step() {
    use burn::module::Module;
    let device = burn_stoker::device::cpu();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let report =
        Trainer::new(tiny_model(&device), SgdConfig::new().init(), stoker_tests::tiny_data(2, &device))
            .max_epoch(2)
            .log_dir(scratch_dir("run-op-model"))
            .default_callbacks(DefaultCallbacks::none())
            .callbacks(RunOp::update_ops(|model: &mut Linear| *model = model.clone().map(&mut Fill(0.25))))
            .train(move |model: &Linear, batch, _step: &mut Step<'_>| {
                log.lock().unwrap().push(weights(model).concat());
                stoker_tests::mse(model, batch)
            })
            .unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 4);
    assert!(
        seen.iter().all(|w| w == &[0.25, 0.25, 0.25]),
        "every step trains on the filled weights: {seen:?}"
    );
    assert_ne!(weights(&report.model).concat(), vec![0.25, 0.25, 0.25], "the last step trained them");

    let after = RunOp::new(|model: &mut Linear| *model = model.clone().map(&mut Fill(-1.0)))
        .run_before(false)
        .run_as_trigger(false)
        .run_after_step(true);
    let report =
        Trainer::new(tiny_model(&device), SgdConfig::new().init(), stoker_tests::tiny_data(2, &device))
            .max_epoch(1)
            .log_dir(scratch_dir("run-op-after"))
            .default_callbacks(DefaultCallbacks::none())
            .callbacks(after)
            .train(|model: &Linear, batch, _step: &mut Step<'_>| stoker_tests::mse(model, batch))
            .unwrap();
    assert_eq!(weights(&report.model).concat(), vec![-1.0, -1.0, -1.0], "filled after the last step");
}
