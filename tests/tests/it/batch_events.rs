//! fastai's batch and prediction events (seed 003): `before_batch` reads and replaces the batch,
//! `after_pred` the model's output (delivered by `Step::pred`), `after_loss` is `before_backward`;
//! the batch events during validation, with `Context::training` false; fastai's `MixUp` ported
//! from its source and checked against a hand computation.

use std::sync::{Arc, Mutex};

use burn::nn::{Linear, LinearConfig};
use burn::tensor::activation::log_softmax;
use burn::tensor::{Device, Int, Tensor, TensorData};
use burn_stoker::callback::{StepBatch, StepEvents, StepLoss, StepPred};
use burn_stoker::fetch::{Fetch, Fetched};
use burn_stoker::prelude::*;
use stoker_tests::{mse, scratch_dir, tiny_data, tiny_model, weights};

type Log = Arc<Mutex<Vec<String>>>;
type Batch = (Tensor<2>, Tensor<2>);

fn take(log: &Log) -> Vec<String> {
    std::mem::take(&mut *log.lock().unwrap())
}

fn trainer<C, K>(
    model: Linear,
    data: Vec<Batch>,
    name: &str,
    callbacks: C,
) -> Trainer<Linear, Vec<Batch>, C, K>
where
    C: Callbacks<Linear, K>,
{
    Trainer::new(model, burn::optim::SgdConfig::new().init(), data)
        .max_epoch(1)
        .log_dir(scratch_dir(name))
        .default_callbacks(DefaultCallbacks::none())
        .callbacks(callbacks)
}

fn host(tensor: Tensor<2>) -> Vec<f32> {
    tensor.into_data().iter::<f32>().collect()
}

// ---------------------------------------------------------------------------------------------
// before_batch

/// Replaces every training batch's inputs by zeros, and logs what it saw.
struct ZeroInputs(Log);

impl<M> Callback<M> for ZeroInputs {
    fn step_events(&self) -> StepEvents {
        StepEvents::BATCH
    }
    fn before_batch(&mut self, ctx: &mut Context<'_, M>, batch: &StepBatch<'_>) -> burn_stoker::Result<()> {
        let first = batch.with(|(x, _): &Batch| host(x.clone())[0])?;
        self.0.lock().unwrap().push(format!(
            "before_batch g{} training={} x[0]={first:.3}",
            ctx.global_step(),
            ctx.training()
        ));
        if ctx.training() {
            batch.update(|(x, y): Batch| (x.zeros_like(), y))?;
        }
        Ok(())
    }
}

#[test]
fn before_batch_reads_and_replaces_the_batch_the_step_runs_on() {
    let device = burn_stoker::device::cpu();
    let log: Log = Arc::default();
    let seen: Log = Arc::default();
    let data = tiny_data(2, &device);
    let firsts: Vec<f32> = data.iter().map(|(x, _)| host(x.clone())[0]).collect();
    let step_log = seen.clone();
    trainer(tiny_model(&device), data, "before-batch", ZeroInputs(log.clone()))
        .train(move |model: &Linear, (x, y): Batch, _step: &mut Step<'_>| {
            step_log.lock().unwrap().push(format!("step x={:?}", host(x.clone())));
            mse(model, (x, y))
        })
        .unwrap();
    assert_eq!(
        take(&log),
        vec![
            format!("before_batch g0 training=true x[0]={:.3}", firsts[0]),
            format!("before_batch g1 training=true x[0]={:.3}", firsts[1]),
        ]
    );
    assert_eq!(
        take(&seen),
        vec![format!("step x={:?}", vec![0.0f32; 8]); 2],
        "the step ran on the replaced batches"
    );
}

/// Asks for the batch as a type it is not.
struct WrongType;

impl<M> Callback<M> for WrongType {
    fn step_events(&self) -> StepEvents {
        StepEvents::BATCH
    }
    fn before_batch(&mut self, _ctx: &mut Context<'_, M>, batch: &StepBatch<'_>) -> burn_stoker::Result<()> {
        batch.update(|x: Tensor<2>| x * 2.0)
    }
}

#[test]
fn a_batch_asked_for_as_another_type_is_an_error_naming_both_types() {
    let device = burn_stoker::device::cpu();
    let error = trainer(tiny_model(&device), tiny_data(1, &device), "wrong-batch", WrongType)
        .train(|model: &Linear, batch: Batch, _step: &mut Step<'_>| mse(model, batch))
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("callback `WrongType` failed in before_batch: the batch is a `(burn_tensor::tensor::api::base::Tensor<2>, burn_tensor::tensor::api::base::Tensor<2>)`, not a `burn_tensor::tensor::api::base::Tensor<2>`"),
        "{error}"
    );
}

/// Cancels the first batch from `before_batch`, and logs `after_cancel_batch`.
struct CancelFirst(Log);

impl<M> Callback<M> for CancelFirst {
    fn step_events(&self) -> StepEvents {
        StepEvents::BATCH
    }
    fn before_batch(&mut self, ctx: &mut Context<'_, M>, _batch: &StepBatch<'_>) -> burn_stoker::Result<()> {
        self.0.lock().unwrap().push(format!("before_batch g{}", ctx.global_step()));
        if ctx.global_step() == 0 { ctx.cancel(burn_stoker::callback::Cancel::Batch) } else { Ok(()) }
    }
    fn after_cancel_batch(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        self.0.lock().unwrap().push(format!("after_cancel_batch g{}", ctx.global_step()));
        Ok(())
    }
}

#[test]
fn cancel_batch_from_before_batch_skips_the_step_function_and_the_optimizer() {
    let device = burn_stoker::device::cpu();
    let (log, steps): (Log, Log) = (Arc::default(), Arc::default());
    let model = tiny_model(&device);
    let before = weights(&model);
    let step_log = steps.clone();
    let report = trainer(model, tiny_data(1, &device), "cancel-batch", CancelFirst(log.clone()))
        .train(move |model: &Linear, batch: Batch, _step: &mut Step<'_>| {
            step_log.lock().unwrap().push("step".to_string());
            mse(model, batch)
        })
        .unwrap();
    // The cancelled step counts (as fastai's `after_batch` counts it) before `after_cancel_batch`.
    assert_eq!(take(&log), vec!["before_batch g0", "after_cancel_batch g1"]);
    assert!(take(&steps).is_empty(), "the step function did not run");
    assert_eq!(weights(&report.model), before, "no optimizer step");
    assert_eq!(report.counters.global_step(), 1, "the cancelled step counts, as fastai's");
}

// ---------------------------------------------------------------------------------------------
// after_pred

/// Replaces the model's output by zeros (times zero: still on the autodiff graph, for backward).
struct ZeroPred(Log);

impl<M> Callback<M> for ZeroPred {
    fn step_events(&self) -> StepEvents {
        StepEvents::PRED
    }
    fn after_pred(&mut self, ctx: &mut Context<'_, M>, pred: &StepPred<'_>) -> burn_stoker::Result<()> {
        let dims = pred.with(|pred: &Tensor<2>| pred.dims())?;
        let (step, training) = (ctx.global_step(), ctx.training());
        self.0.lock().unwrap().push(format!("after_pred g{step} training={training} {dims:?}"));
        pred.update(|pred: Tensor<2>| pred * 0.0)
    }
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

#[test]
fn after_pred_replaces_the_output_the_loss_is_computed_from() {
    let device = burn_stoker::device::cpu();
    let log: Log = Arc::default();
    let losses = Arc::default();
    let data = tiny_data(2, &device);
    // With the output replaced by zeros, the loss is the mean of y².
    let expected: Vec<f32> =
        data.iter().map(|(_, y)| y.clone().powi_scalar(2).mean().into_scalar::<f32>()).collect();
    trainer(tiny_model(&device), data, "after-pred", (ZeroPred(log.clone()), Losses(Arc::clone(&losses))))
        .train(|model: &Linear, (x, y): Batch, step: &mut Step<'_>| {
            let pred = step.pred(model.forward(x));
            (pred - y).powi_scalar(2).mean()
        })
        .unwrap();
    assert_eq!(take(&log), vec!["after_pred g0 training=true [4, 1]", "after_pred g1 training=true [4, 1]"]);
    assert_eq!(*losses.lock().unwrap(), expected);
}

#[test]
fn an_after_pred_callback_under_a_step_that_never_calls_pred_is_an_error() {
    let device = burn_stoker::device::cpu();
    let log: Log = Arc::default();
    let error = trainer(tiny_model(&device), tiny_data(1, &device), "no-pred", ZeroPred(log.clone()))
        .train(|model: &Linear, batch: Batch, _step: &mut Step<'_>| mse(model, batch))
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert_eq!(
        error,
        "callbacks `ZeroPred` take the model's output in after_pred, but the training step did not hand it over: call `step.pred(output)` on the model's output in the step function, before the loss"
    );
    assert!(take(&log).is_empty());
}

#[test]
fn step_pred_without_after_pred_callbacks_returns_its_argument() {
    let device = burn_stoker::device::cpu();
    let losses = Arc::default();
    let data = tiny_data(1, &device);
    let model = tiny_model(&device);
    let expected = mse(&model, data[0].clone()).into_scalar::<f32>();
    trainer(model, data, "pred-alone", Losses(Arc::clone(&losses)))
        .train(|model: &Linear, (x, y): Batch, step: &mut Step<'_>| {
            let pred = step.pred(model.forward(x));
            (pred - y).powi_scalar(2).mean()
        })
        .unwrap();
    assert_eq!(*losses.lock().unwrap(), vec![expected]);
}

// ---------------------------------------------------------------------------------------------
// The DSL: before_batch, after_pred, after_loss.

#[callback(on = before_batch)]
fn halve_inputs(batch: &StepBatch<'_>) -> burn_stoker::Result<()> {
    batch.update(|(x, y): Batch| (x * 0.5, y))
}

#[callback(on = after_pred)]
fn negate_pred<M>(pred: &StepPred<'_>, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
    let _ = ctx.global_step();
    pred.update(|pred: Tensor<2>| -pred)
}

#[callback(on = after_loss)]
fn triple_loss(loss: &StepLoss<'_>) {
    loss.update(|loss| loss * 3.0);
}

#[test]
fn the_dsl_binds_before_batch_after_pred_and_after_loss() {
    let device = burn_stoker::device::cpu();
    let losses = Arc::default();
    let data = tiny_data(1, &device);
    let model = tiny_model(&device);
    let (x, y) = data[0].clone();
    let expected = ((-model.forward(x * 0.5) - y).powi_scalar(2).mean() * 3.0).into_scalar::<f32>();
    trainer(model, data, "dsl-batch", (HalveInputs, NegatePred, TripleLoss, Losses(Arc::clone(&losses))))
        .train(|model: &Linear, (x, y): Batch, step: &mut Step<'_>| {
            let pred = step.pred(model.forward(x));
            (pred - y).powi_scalar(2).mean()
        })
        .unwrap();
    let got = losses.lock().unwrap()[0];
    assert!((got - expected).abs() <= 1e-6 * expected.abs(), "{got} != {expected}");
}

// ---------------------------------------------------------------------------------------------
// Validation batches

#[test]
fn batch_events_reach_the_callbacks_during_validation_with_training_false() {
    let device = burn_stoker::device::cpu();
    let log: Log = Arc::default();
    let validation = tiny_data(3, &device);
    let firsts: Vec<f32> = validation.iter().map(|(x, _)| host(x.clone())[0]).collect();
    let runner = InferenceRunner::new(validation, |model: &Linear, batch: Batch, out: &mut Outputs| {
        out.put("cost", mse(model, batch));
        4usize
    })
    .with(ScalarStats::new(["cost"]));
    let training = tiny_data(1, &device);
    let first = host(training[0].0.clone())[0];
    trainer(tiny_model(&device), training, "valid-batches", (runner, ZeroInputs(log.clone())))
        .train(|model: &Linear, batch: Batch, _step: &mut Step<'_>| mse(model, batch))
        .unwrap();
    let mut expected = vec![format!("before_batch g0 training=true x[0]={first:.3}")];
    // The validation pass's batches, unchanged: ZeroInputs replaces training batches only.
    expected.extend(firsts.iter().map(|x| format!("before_batch g1 training=false x[0]={x:.3}")));
    assert_eq!(take(&log), expected);
}

/// `InferenceRunner::pred_then_score` delivers `after_pred` between its two functions, with
/// `Context::training` false: the validation cost is computed from the output the callback left
/// (zeros here: the mean of y² over the samples, by hand).
#[test]
fn after_pred_reaches_the_callbacks_during_validation_between_predict_and_score() {
    let device = burn_stoker::device::cpu();
    let log: Log = Arc::default();
    let validation = tiny_data(3, &device);
    let (mut sum, mut samples) = (0.0f64, 0usize);
    for (x, y) in &validation {
        let n = x.dims()[0];
        sum += n as f64 * y.clone().powi_scalar(2).mean().into_scalar::<f32>() as f64;
        samples += n;
    }
    let runner = InferenceRunner::pred_then_score(
        validation,
        |model: &Linear, (x, _): &Batch| model.forward(x.clone()),
        |pred: Tensor<2>, (x, y): Batch, out: &mut Outputs| {
            out.put("cost", (pred - y).powi_scalar(2).mean());
            x.dims()[0]
        },
    )
    .with(ScalarStats::new(["cost"]));
    let cost = Arc::default();
    let callbacks = (runner, ZeroPred(log.clone()), ValidationCost(Arc::clone(&cost)));
    trainer(tiny_model(&device), tiny_data(1, &device), "valid-pred", callbacks)
        .train(|model: &Linear, (x, y): Batch, step: &mut Step<'_>| {
            (step.pred(model.forward(x)) - y).powi_scalar(2).mean()
        })
        .unwrap();
    let validated = cost.lock().unwrap().expect("the validation cost");
    assert!((validated - sum / samples as f64).abs() < 1e-6, "{validated} vs {}", sum / samples as f64);
    // One after_pred in the training step, one per validation batch (at global step 1).
    let seen = take(&log);
    assert_eq!(seen.len(), 4, "{seen:?}");
    assert!(seen[1..].iter().all(|line| line.starts_with("after_pred g1 training=false")), "{seen:?}");
}

// ---------------------------------------------------------------------------------------------
// fastai's MixUp (fastai/callback/mixup.py), ported.

/// A classification batch: inputs and class indices.
type Labelled = (Tensor<2>, Tensor<1, Int>);

/// The cross-entropy of each sample (fastai's loss function under `NoneReduce`).
fn cross_entropy(pred: Tensor<2>, y: Tensor<1, Int>) -> Tensor<1> {
    let n = y.dims()[0];
    -log_softmax(pred, 1).gather(1, y.reshape([n, 1])).reshape([n])
}

/// What MixUp keeps from `before_batch` to the loss: each sample's λ, the targets and the
/// shuffled partner's targets, and the prediction.
struct Mixed {
    lam: Tensor<1>,
    y: Tensor<1, Int>,
    y_partner: Tensor<1, Int>,
    pred: Option<Tensor<2>>,
}

/// One batch's draws: each sample's λ (before the max), and the shuffle.
type Draw = (Vec<f32>, Vec<i64>);

/// fastai's `MixUp`: each training batch is mixed with a shuffled copy of itself, sample by
/// sample, with λ drawn from Beta(α, α) and kept at `max(λ, 1 - λ)`; the loss is the same mix of
/// the losses against both targets. No mixing at validation (`run_valid = False`). `draws` gives
/// the batch's λs (before the max) and its shuffle: drawn from Beta and a permutation in a
/// program, given by hand in the test.
struct MixUp {
    draws: Box<dyn FnMut(usize) -> Draw>,
    mixed: Option<Mixed>,
}

impl<M> Callback<M> for MixUp {
    fn chief_only(&self) -> bool {
        false
    }
    fn step_events(&self) -> StepEvents {
        StepEvents::BATCH.and(StepEvents::PRED).and(StepEvents::LOSS)
    }
    fn before_batch(&mut self, ctx: &mut Context<'_, M>, batch: &StepBatch<'_>) -> burn_stoker::Result<()> {
        if !ctx.training() {
            return Ok(());
        }
        batch.update(|(x, y): Labelled| {
            let (n, device) = (y.dims()[0], x.device());
            let (draws, shuffle) = (self.draws)(n);
            let lam: Vec<f32> = draws.iter().map(|&l| l.max(1.0 - l)).collect();
            let lam = Tensor::<1>::from_data(TensorData::new(lam, [n]), &device);
            let shuffle = Tensor::<1, Int>::from_data(TensorData::new(shuffle, [n]), &device);
            let (x_partner, y_partner) = (x.clone().select(0, shuffle.clone()), y.clone().select(0, shuffle));
            // torch.lerp(xb1, xb, lam): xb1 + lam * (xb - xb1).
            let mixed = x_partner.clone() + (x - x_partner) * lam.clone().unsqueeze_dim(1);
            self.mixed = Some(Mixed { lam, y: y.clone(), y_partner, pred: None });
            (mixed, y)
        })
    }
    fn after_pred(&mut self, _ctx: &mut Context<'_, M>, pred: &StepPred<'_>) -> burn_stoker::Result<()> {
        if let Some(mixed) = &mut self.mixed {
            mixed.pred = Some(pred.get::<Tensor<2>>()?);
        }
        Ok(())
    }
    /// fastai's `after_loss`: the loss is replaced by the mix of the losses against both targets.
    fn before_backward(&mut self, _ctx: &mut Context<'_, M>, loss: &StepLoss<'_>) -> burn_stoker::Result<()> {
        let Some(Mixed { lam, y, y_partner, pred: Some(pred) }) = self.mixed.take() else {
            return Ok(());
        };
        let partner = cross_entropy(pred.clone(), y_partner);
        // torch.lerp(lf(pred, yb1), lf(pred, yb), lam), reduced by the mean.
        let mixed = partner.clone() + (cross_entropy(pred, y) - partner) * lam;
        loss.set(mixed.mean().reshape([1]));
        Ok(())
    }
}

/// Two batches of 4 samples of 3 features, 3 classes.
fn labelled(device: &Device) -> Vec<Labelled> {
    (0..2)
        .map(|b| {
            let xs: Vec<f32> = (0..12).map(|i| ((b * 12 + i) as f32 * 0.61).cos()).collect();
            let ys: Vec<i64> = (0..4).map(|i| ((b * 4 + i) * 7 % 3) as i64).collect();
            (
                Tensor::from_data(TensorData::new(xs, [4, 3]), device),
                Tensor::from_data(TensorData::new(ys, [4]), device),
            )
        })
        .collect()
}

/// Records the weights each training step starts from (in `before_batch`, where the model is
/// readable).
struct StepWeights(Arc<Mutex<Vec<Vec<Vec<f32>>>>>);

impl Callback<Linear> for StepWeights {
    fn step_events(&self) -> StepEvents {
        StepEvents::BATCH
    }
    fn before_batch(
        &mut self,
        ctx: &mut Context<'_, Linear>,
        _batch: &StepBatch<'_>,
    ) -> burn_stoker::Result<()> {
        if ctx.training() {
            self.0.lock().unwrap().push(weights(ctx.model()));
        }
        Ok(())
    }
}

/// The validation cost at the end of training.
struct ValidationCost(Arc<Mutex<Option<f64>>>);

impl<M> Callback<M> for ValidationCost {
    fn after_train(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        *self.0.lock().unwrap() = ctx.monitors_ref().latest("validation_cost");
        Ok(())
    }
}

/// A sample's cross-entropy for class `class`, by hand: `w` is `[weight (3x3, in x out), bias]`.
fn hand_cross_entropy(w: &[Vec<f32>], x: &[f64], class: usize) -> f64 {
    let logits: Vec<f64> =
        (0..3).map(|o| w[1][o] as f64 + (0..3).map(|i| x[i] * w[0][i * 3 + o] as f64).sum::<f64>()).collect();
    let max = logits.iter().cloned().fold(f64::MIN, f64::max);
    let log_sum = max + logits.iter().map(|l| (l - max).exp()).sum::<f64>().ln();
    log_sum - logits[class]
}

#[test]
fn mixup_loss_on_mixed_batches_equals_a_hand_computation() {
    let device = burn_stoker::device::cpu();
    let model: Linear = LinearConfig::new(3, 3).init(&device);
    let data = labelled(&device);
    // Per step: each sample's λ before the max, and the shuffle.
    let draws =
        [(vec![0.2f32, 0.7, 0.5, 0.95], vec![2i64, 0, 3, 1]), (vec![0.6, 0.1, 0.3, 0.8], vec![1, 3, 0, 2])];
    let mut given = draws.clone().into_iter();
    let mixup =
        MixUp { draws: Box::new(move |n| given.next().filter(|d| d.0.len() == n).unwrap()), mixed: None };
    let (losses, starts, cost) = (Arc::default(), Arc::default(), Arc::default());
    let runner = InferenceRunner::new(data.clone(), |model: &Linear, (x, y): Labelled, out: &mut Outputs| {
        out.put("cost", cross_entropy(model.forward(x), y).mean());
        4usize
    })
    .with(ScalarStats::new(["cost"]));
    let report = Trainer::new(model, burn::optim::SgdConfig::new().init(), data.clone())
        .max_epoch(1)
        .learning_rate(0.5)
        .log_dir(scratch_dir("mixup"))
        .default_callbacks(DefaultCallbacks::none())
        .callbacks((
            StepWeights(Arc::clone(&starts)),
            mixup,
            Losses(Arc::clone(&losses)),
            runner,
            ValidationCost(Arc::clone(&cost)),
        ))
        .train(|model: &Linear, (x, y): Labelled, step: &mut Step<'_>| {
            let pred = step.pred(model.forward(x));
            cross_entropy(pred, y).mean().reshape([1])
        })
        .unwrap();
    let starts = starts.lock().unwrap().clone();
    let losses = losses.lock().unwrap().clone();
    assert_eq!((starts.len(), losses.len()), (2, 2));
    for (step, ((draws, shuffle), (x, y))) in draws.iter().zip(&data).enumerate() {
        let xs: Vec<f64> = x.clone().into_data().iter::<f32>().map(f64::from).collect();
        let ys: Vec<usize> = y.clone().into_data().iter::<i64>().map(|c| c as usize).collect();
        let mut total = 0.0;
        for i in 0..4 {
            let lam = f64::from(draws[i].max(1.0 - draws[i]));
            let j = shuffle[i] as usize;
            let mixed: Vec<f64> = (0..3).map(|f| lam * xs[i * 3 + f] + (1.0 - lam) * xs[j * 3 + f]).collect();
            let w = &starts[step];
            total += lam * hand_cross_entropy(w, &mixed, ys[i])
                + (1.0 - lam) * hand_cross_entropy(w, &mixed, ys[j]);
        }
        let expected = total / 4.0;
        let got = f64::from(losses[step]);
        assert!((got - expected).abs() < 1e-5, "step {}: the mixed loss {got}, by hand {expected}", step + 1);
    }
    // Validation is not mixed: the validation cost is the plain cross-entropy of the trained
    // model over both batches.
    let w = weights(&report.model);
    let mut plain = 0.0;
    for (x, y) in &data {
        let xs: Vec<f64> = x.clone().into_data().iter::<f32>().map(f64::from).collect();
        let ys: Vec<i64> = y.clone().into_data().iter::<i64>().collect();
        plain += (0..4).map(|i| hand_cross_entropy(&w, &xs[i * 3..i * 3 + 3], ys[i] as usize)).sum::<f64>();
    }
    let cost = cost.lock().unwrap().expect("a validation pass ran");
    assert!((cost - plain / 8.0).abs() < 1e-5, "validation cost {cost}, unmixed by hand {}", plain / 8.0);
}
