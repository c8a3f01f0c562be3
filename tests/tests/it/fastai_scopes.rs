//! The scopes of fastai's cancels as fastai's own control-flow tests show them (fastai
//! nbs/13_learner.ipynb, "Control flow testing": `TestCancelCallback`, and `TestSkipToEpoch`
//! for `SkipToEpoch`), and `Context::training` as fastai's `TrainEvalCallback` sets it. fastai's
//! `_with_events` delivers `before_X` inside the level that catches `X`'s cancel and `after_X`
//! outside it: `after_step` is inside the batch, `before_validate` inside the epoch.

use std::sync::{Arc, Mutex};

use burn::nn::Linear;
use burn::tensor::Tensor;
use burn_stoker::Error;
use burn_stoker::callback::{Cancel, StepBatch, StepEvents, StepGradients, StepLoss};
use burn_stoker::inference::{InferenceRunner, ScalarStats};
use burn_stoker::prelude::*;
use stoker_tests::{mse, scratch_dir, tiny_data, tiny_model, weights};

type Log = Arc<Mutex<Vec<String>>>;

fn take(log: &Log) -> Vec<String> {
    std::mem::take(&mut *log.lock().unwrap())
}

/// Records the events around batches, epochs and validation as
/// `"name:event e<epoch> g<global> t<training>"`, and the weights at each `after_batch`.
struct Recorder {
    name: &'static str,
    log: Log,
    weights: Arc<Mutex<Vec<Vec<Vec<f32>>>>>,
}

impl Recorder {
    fn new(name: &'static str, log: &Log) -> Self {
        Recorder { name, log: log.clone(), weights: Arc::default() }
    }
    fn record<M>(&self, event: &str, ctx: &Context<'_, M>) -> burn_stoker::Result<()> {
        let line = format!(
            "{}:{event} e{} g{} t{}",
            self.name,
            ctx.epoch_num(),
            ctx.global_step(),
            u8::from(ctx.training())
        );
        self.log.lock().unwrap().push(line);
        Ok(())
    }
}

macro_rules! record_events {
    ($($event:ident),*) => {
        $(fn $event(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
            self.record(stringify!($event), ctx)
        })*
    };
}

impl Callback<Linear> for Recorder {
    fn name(&self) -> std::borrow::Cow<'static, str> {
        self.name.into()
    }
    record_events!(
        before_train,
        before_epoch,
        before_step,
        trigger_step,
        after_epoch,
        trigger_epoch,
        before_validate,
        after_validate,
        after_cancel_batch,
        after_cancel_epoch,
        after_train
    );
    fn after_step(
        &mut self,
        ctx: &mut Context<'_, Linear>,
        _values: &Fetched<'_>,
    ) -> burn_stoker::Result<()> {
        self.record("after_step", ctx)
    }
    fn after_batch(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        if ctx.training() {
            self.weights.lock().unwrap().push(weights(ctx.model()));
            self.record("after_batch", ctx)
        } else {
            // A validation batch: one line, without the counters' noise.
            self.log.lock().unwrap().push(format!("{}:valid_batch", self.name));
            Ok(())
        }
    }
}

/// An `InferenceRunner` over 2 validation batches: it asks for a pass from every `trigger_epoch`.
fn runner(device: &burn::tensor::Device) -> impl Callback<Linear> {
    InferenceRunner::new(
        tiny_data(2, device),
        |model: &Linear, batch: (Tensor<2>, Tensor<2>), out: &mut Outputs| {
            out.put("cost", mse(model, batch));
            8usize
        },
    )
    .with(ScalarStats::new(["cost"]))
}

fn run_linear<K, C: Callbacks<Linear, K>>(
    callbacks: C,
    epochs: u64,
    steps: usize,
) -> burn_stoker::Result<TrainReport<Linear>> {
    let device = burn_stoker::device::cpu();
    Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(steps, &device))
        .max_epoch(epochs)
        .log_dir(scratch_dir("fastai-scopes"))
        .default_callbacks(DefaultCallbacks::none())
        .callbacks(callbacks)
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .map_err(Error::from)
}

/// One line of `name`'s.
fn r(name: &str, event: &str, e: u64, g: u64, t: bool) -> String {
    format!("{name}:{event} e{e} g{g} t{}", u8::from(t))
}

/// A plain training batch `g -> g + 1` of epoch `e`, for `name`.
fn batch(name: &str, e: u64, g: u64) -> Vec<String> {
    vec![
        r(name, "before_step", e, g, true),
        r(name, "after_step", e, g + 1, true),
        r(name, "after_batch", e, g + 1, true),
        r(name, "trigger_step", e, g + 1, true),
    ]
}

/// An epoch's end with its validation (2 batches), `name` registered before the runner.
fn validated_end(name: &str, e: u64, g: u64) -> Vec<String> {
    vec![
        r(name, "after_epoch", e, g, true),
        r(name, "trigger_epoch", e, g, true),
        r(name, "before_validate", e, g, false),
        format!("{name}:valid_batch"),
        format!("{name}:valid_batch"),
        r(name, "after_validate", e, g, false),
    ]
}

// ---------------------------------------------------------------------------------------------
// CancelBatch from after_step.

/// fastai's `after_step` runs inside the batch's `_with_events`: cancels the batch of global
/// step 1 from there, after its optimizer step.
#[callback(on = after_step)]
fn cancel_batch_after_step(ctx: &mut Context<'_, Linear>) -> Flow {
    if ctx.global_step() == 2 { Flow::CancelBatch } else { Flow::Continue }
}

/// fastai nbs/13_learner.ipynb, TestCancelCallback ("test cancel batch": a `CancelBatchException`
/// from every batch event but `after_batch`, `after_step` included, is caught by the batch:
/// `after_cancel_batch`, then `after_batch`).
#[test]
fn fastai_cancel_batch_from_after_step_is_caught_by_its_batch() {
    let log: Log = Arc::default();
    let (a, b) = (Recorder::new("A", &log), Recorder::new("B", &log));
    let w = a.weights.clone();
    let report = run_linear((a, CancelBatchAfterStep, b), 1, 3).unwrap();
    let mut expected = vec![r("A", "before_train", 0, 0, false), r("B", "before_train", 0, 0, false)];
    expected.extend([r("A", "before_epoch", 1, 0, false), r("B", "before_epoch", 1, 0, false)]);
    for (x, y) in batch("A", 1, 0).into_iter().zip(batch("B", 1, 0)) {
        expected.extend([x, y]);
    }
    // Step 1: both saw before_step; A saw after_step, then the canceller: B did not. The batch
    // level catches it: after_cancel_batch, after_batch, and the loop goes on.
    expected.extend([r("A", "before_step", 1, 1, true), r("B", "before_step", 1, 1, true)]);
    expected.push(r("A", "after_step", 1, 2, true));
    expected.extend([r("A", "after_cancel_batch", 1, 2, true), r("B", "after_cancel_batch", 1, 2, true)]);
    expected.extend([r("A", "after_batch", 1, 2, true), r("B", "after_batch", 1, 2, true)]);
    expected.extend([r("A", "trigger_step", 1, 2, true), r("B", "trigger_step", 1, 2, true)]);
    for (x, y) in batch("A", 1, 2).into_iter().zip(batch("B", 1, 2)) {
        expected.extend([x, y]);
    }
    expected.extend([r("A", "after_epoch", 1, 3, true), r("B", "after_epoch", 1, 3, true)]);
    expected.extend([r("A", "trigger_epoch", 1, 3, true), r("B", "trigger_epoch", 1, 3, true)]);
    expected.extend([r("A", "after_train", 1, 3, true), r("B", "after_train", 1, 3, true)]);
    assert_eq!(take(&log), expected);
    assert!(matches!(report.outcome, Outcome::Finished), "{:?}", report.outcome);
    assert_eq!(report.counters.global_step(), 3);
    // The optimizer step had run: the cancelled batch trained.
    let w = w.lock().unwrap().clone();
    assert_ne!(w[1], w[0], "the batch cancelled in after_step had its optimizer step");
}

// ---------------------------------------------------------------------------------------------
// CancelEpoch: during training it skips the epoch's validation; from the validation it is the
// epoch's.

/// Cancels epoch 1 at its second step, from `before_step`.
#[callback(on = before_step)]
fn cancel_epoch_one_in_training(ctx: &mut Context<'_, Linear>) -> Flow {
    if ctx.epoch_num() == 1 && ctx.local_step() == 1 { Flow::CancelEpoch } else { Flow::Continue }
}

/// fastai nbs/13_learner.ipynb, TestCancelCallback ("test cancel epoch", in train: a
/// `CancelEpochException` from training ends the epoch before its validation: no
/// `before_validate`, then `after_cancel_epoch`, `after_epoch`).
#[test]
fn fastai_cancel_epoch_in_training_skips_the_epochs_validation() {
    let device = burn_stoker::device::cpu();
    let log: Log = Arc::default();
    let a = Recorder::new("A", &log);
    run_linear((CancelEpochOneInTraining, a, runner(&device)), 2, 2).unwrap();
    let mut expected = vec![r("A", "before_train", 0, 0, false), r("A", "before_epoch", 1, 0, false)];
    expected.extend(batch("A", 1, 0));
    // Epoch 1's validation, asked for by the runner's trigger, does not run.
    expected.extend([
        r("A", "after_cancel_epoch", 1, 1, true),
        r("A", "after_epoch", 1, 1, true),
        r("A", "trigger_epoch", 1, 1, true),
    ]);
    // Epoch 2 validates; the runner kept its data through the skipped pass.
    expected.push(r("A", "before_epoch", 2, 1, true));
    expected.extend(batch("A", 2, 1));
    expected.extend(batch("A", 2, 2));
    expected.extend(validated_end("A", 2, 3));
    expected.push(r("A", "after_train", 2, 3, false));
    assert_eq!(take(&log), expected);
}

/// Cancels epoch 1 from `before_validate`.
#[callback(on = before_validate)]
fn cancel_epoch_one_before_validate(ctx: &mut Context<'_, Linear>) -> Flow {
    if ctx.epoch_num() == 1 { Flow::CancelEpoch } else { Flow::Continue }
}

/// fastai nbs/13_learner.ipynb, TestCancelCallback ("test cancel epoch", in valid: a
/// `CancelEpochException` from `before_validate` is caught by the epoch: no pass, no
/// `after_validate`, then `after_cancel_epoch`).
#[test]
fn fastai_cancel_epoch_from_before_validate_is_caught_by_the_epoch() {
    let device = burn_stoker::device::cpu();
    let log: Log = Arc::default();
    let a = Recorder::new("A", &log);
    let report = run_linear((a, CancelEpochOneBeforeValidate, runner(&device)), 2, 1).unwrap();
    let mut expected = vec![r("A", "before_train", 0, 0, false), r("A", "before_epoch", 1, 0, false)];
    expected.extend(batch("A", 1, 0));
    expected.extend([
        r("A", "after_epoch", 1, 1, true),
        r("A", "trigger_epoch", 1, 1, true),
        r("A", "before_validate", 1, 1, false),
        // No batch, no after_validate: the epoch catches the cancel.
        r("A", "after_cancel_epoch", 1, 1, false),
        r("A", "before_epoch", 2, 1, false),
    ]);
    expected.extend(batch("A", 2, 1));
    expected.extend(validated_end("A", 2, 2));
    expected.push(r("A", "after_train", 2, 2, false));
    assert_eq!(take(&log), expected);
    assert!(matches!(report.outcome, Outcome::Finished), "{:?}", report.outcome);
}

// ---------------------------------------------------------------------------------------------
// SkipToEpoch.

/// fastai's `SkipToEpoch(epoch)` (learner.py, what `fit(start_epoch=...)` adds): a
/// `CancelEpochException` from `before_epoch` for every epoch before `epoch` (0-based there, the
/// epoch number here).
#[callback(on = before_epoch)]
fn skip_to_epoch_three(ctx: &mut Context<'_, Linear>) -> Flow {
    if ctx.epoch_num() < 3 { Flow::CancelEpoch } else { Flow::Continue }
}

/// fastai nbs/13_learner.ipynb, TestSkipToEpoch: the epochs skipped from `before_epoch` run
/// nothing of their training phase (no batch, `training` never set) nor their validation; they
/// receive `after_cancel_epoch` and `after_epoch`.
#[test]
fn fastai_skip_to_epoch_runs_nothing_of_the_skipped_epochs() {
    let device = burn_stoker::device::cpu();
    let log: Log = Arc::default();
    let a = Recorder::new("A", &log);
    let report = run_linear((SkipToEpochThree, a, runner(&device)), 3, 2).unwrap();
    let mut expected = vec![r("A", "before_train", 0, 0, false)];
    for e in [1, 2] {
        // A comes after the canceller: it misses before_epoch.
        expected.extend([
            r("A", "after_cancel_epoch", e, 0, false),
            r("A", "after_epoch", e, 0, false),
            r("A", "trigger_epoch", e, 0, false),
        ]);
    }
    expected.push(r("A", "before_epoch", 3, 0, false));
    expected.extend(batch("A", 3, 0));
    expected.extend(batch("A", 3, 1));
    expected.extend(validated_end("A", 3, 2));
    expected.push(r("A", "after_train", 3, 2, false));
    assert_eq!(take(&log), expected);
    assert_eq!(report.counters.global_step(), 2);
}

// ---------------------------------------------------------------------------------------------
// training, as TrainEvalCallback sets it, with a pass between steps.

/// Asks for a validation pass at global step 1's `trigger_step`, in the middle of the epoch.
struct ValidateMidEpoch;

impl Callback<Linear> for ValidateMidEpoch {
    fn trigger_step(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        match ctx.global_step() {
            1 => ctx.request_validation(),
            _ => Ok(()),
        }
    }
    fn validate(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        assert!(!ctx.training());
        Ok(())
    }
}

/// fastai nbs/13_learner.ipynb, TrainEvalCallback (`before_train` sets `training`,
/// `before_validate` clears it): a pass asked for between two steps of an epoch gives training
/// back to the steps after it.
#[test]
fn fastai_training_comes_back_after_a_pass_between_two_steps() {
    let log: Log = Arc::default();
    let a = Recorder::new("A", &log);
    run_linear((ValidateMidEpoch, a), 1, 2).unwrap();
    let mut expected = vec![r("A", "before_train", 0, 0, false), r("A", "before_epoch", 1, 0, false)];
    expected.extend(batch("A", 1, 0)[..3].iter().cloned());
    // The validator is first in trigger_step: the pass runs before A's trigger_step.
    expected.extend([r("A", "before_validate", 1, 1, false), r("A", "after_validate", 1, 1, false)]);
    expected.push(r("A", "trigger_step", 1, 1, true));
    expected.extend(batch("A", 1, 1));
    expected.extend([r("A", "after_epoch", 1, 2, true), r("A", "trigger_epoch", 1, 2, true)]);
    expected.push(r("A", "after_train", 1, 2, true));
    assert_eq!(take(&log), expected);
}

// ---------------------------------------------------------------------------------------------
// CancelBatch after backward keeps the gradients: fastai's GradientAccumulation.

/// fastai's `GradientAccumulation(n_acc)` (callback/training.py) as its source writes it: the
/// loss scaled by `bs / n_acc` in `after_loss` (here `before_backward`), and in `before_step`
/// (here `after_backward`) a `CancelBatchException` until `n_acc` items were seen, which skips
/// fastai's `step` and `zero_grad`: the gradients add into the next batch's.
struct FastaiGradientAccumulation {
    n_acc: usize,
    count: usize,
    /// fastai's `find_bs(self.learn.yb)`: the rows of the batch.
    bs: usize,
}

impl Callback<Linear> for FastaiGradientAccumulation {
    fn chief_only(&self) -> bool {
        false
    }
    fn step_events(&self) -> StepEvents {
        StepEvents::BATCH.and(StepEvents::LOSS).and(StepEvents::GRADIENTS)
    }
    fn before_train(&mut self, _ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.count = 0;
        Ok(())
    }
    fn before_batch(
        &mut self,
        _ctx: &mut Context<'_, Linear>,
        batch: &StepBatch<'_>,
    ) -> burn_stoker::Result<()> {
        self.bs = batch.with(|(_, y): &(Tensor<2>, Tensor<2>)| y.dims()[0])?;
        Ok(())
    }
    fn before_backward(
        &mut self,
        _ctx: &mut Context<'_, Linear>,
        loss: &StepLoss<'_>,
    ) -> burn_stoker::Result<()> {
        let scale = self.bs as f32 / self.n_acc as f32;
        loss.update(|loss| loss.mul_scalar(scale));
        Ok(())
    }
    fn after_backward(
        &mut self,
        ctx: &mut Context<'_, Linear>,
        _grads: &StepGradients,
    ) -> burn_stoker::Result<()> {
        self.count += self.bs;
        if self.count < self.n_acc {
            return ctx.cancel(Cancel::Batch);
        }
        self.count = 0;
        Ok(())
    }
}

/// Two epochs on `data` under fastai's `GradientAccumulation(n_acc)`; with `n_acc` the batch
/// size, a step per batch as without it (the loss scaled by 1, no cancel).
fn train_on(start: Linear, data: Vec<(Tensor<2>, Tensor<2>)>, n_acc: usize) -> TrainReport<Linear> {
    Trainer::new(start, burn::optim::SgdConfig::new().init(), data)
        .max_epoch(2)
        .log_dir(scratch_dir("fastai-grad-acc"))
        .default_callbacks(DefaultCallbacks::none())
        .callbacks(FastaiGradientAccumulation { n_acc, count: 0, bs: 0 })
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .unwrap()
}

/// fastai callback/training.py, GradientAccumulation (nbs/18a_callback.training.ipynb trains
/// with `n_acc` twice the batch size): batches of 4 accumulated to 8 items give the weights of
/// one step on each pair of batches joined, over two epochs.
#[test]
fn fastai_gradient_accumulation_equals_one_step_on_the_joined_batches() {
    let device = burn_stoker::device::cpu();
    let start = tiny_model(&device);
    let batches = tiny_data(4, &device);
    let joined: Vec<(Tensor<2>, Tensor<2>)> = batches
        .chunks(2)
        .map(|pair| {
            let x = Tensor::cat(vec![pair[0].0.clone(), pair[1].0.clone()], 0);
            (x, Tensor::cat(vec![pair[0].1.clone(), pair[1].1.clone()], 0))
        })
        .collect();
    let accumulated = train_on(start.clone(), batches.clone(), 8);
    let one_step = train_on(start.clone(), joined, 8);
    let plain = train_on(start, batches, 4);
    assert_eq!(accumulated.counters.global_step(), 8, "every batch is a step");
    let (a, b) = (weights(&accumulated.model), weights(&one_step.model));
    for (x, y) in a.iter().flatten().zip(b.iter().flatten()) {
        assert!((x - y).abs() < 1e-5, "accumulated {a:?} != one step on the joined batches {b:?}");
    }
    let c = weights(&plain.model);
    let apart = a.iter().flatten().zip(c.iter().flatten()).any(|(x, y)| (x - y).abs() > 1e-4);
    assert!(apart, "a step per batch trains otherwise: {a:?} vs {c:?}");
}
