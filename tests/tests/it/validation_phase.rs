//! Validation as a phase the trainer owns (issue 41): an `InferenceRunner` asks for a pass, and
//! the trainer delivers fastai's batch events of each validation batch (`before_batch`,
//! `after_pred`, `after_loss` to every callback that takes them, `after_batch` to every callback)
//! with fastai's cancels from any of them (`CancelBatch` skips the rest of that batch, `CancelValid` ends the pass), as fastai's
//! `Learner` does (fastai nbs/13_learner.ipynb: `_do_epoch_validate` runs `one_batch` inside
//! `_with_events(..., 'validate', CancelValidException)`, and `TestCancelCallback` checks that a
//! cancel in any batch event skips what follows it). Control is a value, never an error: a
//! callback that wraps every error it sees with context still cancels and validates as before.

use std::sync::{Arc, Mutex};

use burn::nn::Linear;
use burn::tensor::Tensor;
use burn_stoker::callback::{Cancel, StepBatch, StepEvents, StepLoss, StepPred};
use burn_stoker::prelude::*;
use stoker_tests::{scratch_dir, tiny_data, tiny_model};

type Log = Arc<Mutex<Vec<String>>>;
type Batch = (Tensor<2>, Tensor<2>);

fn take(log: &Log) -> Vec<String> {
    std::mem::take(&mut *log.lock().unwrap())
}

/// Logs the validation's events (and the batch events with `training`), and cancels where told:
/// `(event, validation batch index, cancel)`.
struct Watcher {
    log: Log,
    /// The validation batches seen in `before_batch`, in this pass.
    batch: u64,
    cancel: Option<(&'static str, u64, Cancel)>,
    /// Doubles the validation loss in after_loss.
    double_loss: bool,
}

impl Watcher {
    fn new(log: &Log) -> Self {
        Watcher { log: log.clone(), batch: 0, cancel: None, double_loss: false }
    }
    fn event<M>(&mut self, ctx: &mut Context<'_, M>, event: &'static str) -> burn_stoker::Result<()> {
        self.log.lock().unwrap().push(format!("{event} training={}", ctx.training()));
        if let Some((at, batch, cancel)) = self.cancel
            && at == event
            && !ctx.training()
            && batch + 1 == self.batch
        {
            return ctx.cancel(cancel);
        }
        Ok(())
    }
}

impl<M> Callback<M> for Watcher {
    fn step_events(&self) -> StepEvents {
        StepEvents::BATCH.and(StepEvents::PRED).and(StepEvents::LOSS)
    }
    fn before_validate(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        self.batch = 0;
        self.event(ctx, "before_validate")
    }
    fn before_batch(&mut self, ctx: &mut Context<'_, M>, _batch: &StepBatch<'_>) -> burn_stoker::Result<()> {
        if !ctx.training() {
            self.batch += 1;
        }
        self.event(ctx, "before_batch")
    }
    fn after_pred(&mut self, ctx: &mut Context<'_, M>, _pred: &StepPred<'_>) -> burn_stoker::Result<()> {
        self.event(ctx, "after_pred")
    }
    fn before_backward(&mut self, ctx: &mut Context<'_, M>, loss: &StepLoss<'_>) -> burn_stoker::Result<()> {
        if self.double_loss && !ctx.training() {
            loss.update(|loss| loss * 2.0);
        }
        self.event(ctx, "after_loss")
    }
    fn after_cancel_batch(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        self.event(ctx, "after_cancel_batch")
    }
    fn after_batch(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        self.event(ctx, "after_batch")
    }
    fn after_cancel_validate(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        self.event(ctx, "after_cancel_validate")
    }
    fn after_validate(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        self.event(ctx, "after_validate")
    }
}

/// Reads `validation_loss` after each pass.
struct LossReader(Arc<Mutex<Vec<f64>>>);

impl<M> Callback<M> for LossReader {
    fn after_validate(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        if let Some(loss) = ctx.monitors_ref().latest("validation_loss") {
            self.0.lock().unwrap().push(loss);
        }
        Ok(())
    }
}

/// A runner whose forward function is in two parts, putting `loss` (each batch of 8 samples).
#[expect(clippy::type_complexity, reason = "the two closures are named by their signatures")]
fn runner(
    validation: Vec<Batch>,
) -> InferenceRunner<
    Vec<Batch>,
    burn_stoker::inference::PredThenScore<
        impl FnMut(&Linear, &Batch) -> Tensor<2>,
        impl FnMut(Tensor<2>, Batch, &mut Outputs) -> usize,
    >,
> {
    InferenceRunner::pred_then_score(
        validation,
        |model: &Linear, (x, _): &Batch| model.forward(x.clone()),
        |pred: Tensor<2>, (x, y): Batch, out: &mut Outputs| {
            out.put("loss", (pred - y).powi_scalar(2).mean());
            x.dims()[0]
        },
    )
    .with(ScalarStats::new(["loss"]))
}

/// Each validation batch's loss, by hand, with the model training left.
fn hand_losses(model: &Linear, validation: &[Batch]) -> Vec<f64> {
    validation
        .iter()
        .map(|(x, y)| {
            (model.forward(x.clone()) - y.clone()).powi_scalar(2).mean().into_scalar::<f32>() as f64
        })
        .collect()
}

fn train<C: Callbacks<Linear, K>, K>(name: &str, callbacks: C) -> Linear {
    let device = burn_stoker::device::cpu();
    Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(1, &device))
        .max_epoch(1)
        .log_dir(scratch_dir(name))
        .default_callbacks(DefaultCallbacks::none())
        .callbacks(callbacks)
        .train(|model: &Linear, (x, y): Batch, step: &mut Step<'_>| {
            (step.pred(model.forward(x)) - y).powi_scalar(2).mean()
        })
        .unwrap()
        .model
}

fn validation_events(log: &Log) -> Vec<String> {
    take(log).into_iter().filter(|line| line.ends_with("training=false")).collect()
}

fn lines(events: &[&str]) -> Vec<String> {
    events.iter().map(|event| format!("{event} training=false")).collect()
}

/// Every batch event of each validation batch reaches the callbacks that take them, `after_loss`
/// and `after_batch` included (fastai's `one_batch` runs `after_pred`, `after_loss` and
/// `after_batch` in validation too), and what `after_loss` leaves is what the inferencers read.
#[test]
fn every_batch_event_reaches_the_callbacks_during_validation_and_after_loss_changes_the_loss() {
    let device = burn_stoker::device::cpu();
    let validation = tiny_data(3, &device);
    let log: Log = Arc::default();
    let losses = Arc::default();
    let mut watcher = Watcher::new(&log);
    watcher.double_loss = true;
    let model =
        train("valid-phase-events", (runner(validation.clone()), watcher, LossReader(Arc::clone(&losses))));
    let batch = ["before_batch", "after_pred", "after_loss", "after_batch"];
    let mut expected = lines(&["before_validate"]);
    (0..3).for_each(|_| expected.extend(lines(&batch)));
    expected.extend(lines(&["after_validate"]));
    assert_eq!(validation_events(&log), expected);
    let by_hand = hand_losses(&model, &validation);
    let doubled = 2.0 * by_hand.iter().sum::<f64>() / 3.0;
    let got = losses.lock().unwrap()[0];
    assert!(
        (got - doubled).abs() < 1e-5 * doubled.abs().max(1.0),
        "validation_loss {got}, doubled by hand {doubled}"
    );
}

/// `CancelBatch` from another callback's `after_pred` on the second validation batch: the rest
/// of that batch does not run (no `after_loss`, the inferencers do not see it), every callback
/// receives `after_cancel_batch`, then `after_batch`, and the pass goes on (fastai's `TestCancelCallback` with
/// `CancelBatchException` in `after_pred`: `after_cancel_batch`, `after_batch`, next batch).
#[test]
fn cancel_batch_from_any_callback_skips_the_rest_of_that_validation_batch() {
    let device = burn_stoker::device::cpu();
    let validation = tiny_data(3, &device);
    let log: Log = Arc::default();
    let losses = Arc::default();
    let mut watcher = Watcher::new(&log);
    watcher.cancel = Some(("after_pred", 1, Cancel::Batch));
    let runner = runner(validation.clone());
    let counts = runner.counts();
    let model = train("valid-phase-cancel-batch", (runner, watcher, LossReader(Arc::clone(&losses))));
    let mut expected = lines(&["before_validate", "before_batch", "after_pred", "after_loss", "after_batch"]);
    expected.extend(lines(&["before_batch", "after_pred", "after_cancel_batch", "after_batch"]));
    expected.extend(lines(&["before_batch", "after_pred", "after_loss", "after_batch", "after_validate"]));
    assert_eq!(validation_events(&log), expected);
    let by_hand = hand_losses(&model, &validation);
    let without_second = (by_hand[0] + by_hand[2]) / 2.0;
    let got = losses.lock().unwrap()[0];
    assert!(
        (got - without_second).abs() < 1e-5,
        "validation_loss {got}, batches 0 and 2 by hand {without_second}"
    );
    assert_eq!((counts.passes(), counts.batches()), (1, 2));
}

/// `CancelValid` from another callback's `before_batch` on the second validation batch ends the
/// pass: `after_cancel_validate`, then `after_validate` (fastai's `_with_events(..., 'validate',
/// CancelValidException)`); the batches run before it make the results.
#[test]
fn cancel_valid_from_any_callback_ends_the_pass() {
    let device = burn_stoker::device::cpu();
    let validation = tiny_data(3, &device);
    let log: Log = Arc::default();
    let losses = Arc::default();
    let mut watcher = Watcher::new(&log);
    watcher.cancel = Some(("before_batch", 1, Cancel::Valid));
    let runner = runner(validation.clone());
    let counts = runner.counts();
    let model = train("valid-phase-cancel-valid", (runner, watcher, LossReader(Arc::clone(&losses))));
    let mut expected = lines(&["before_validate", "before_batch", "after_pred", "after_loss"]);
    expected.extend(lines(&["after_batch", "before_batch", "after_cancel_validate", "after_validate"]));
    assert_eq!(validation_events(&log), expected);
    let first = hand_losses(&model, &validation)[0];
    let got = losses.lock().unwrap()[0];
    assert!((got - first).abs() < 1e-5, "validation_loss {got}, batch 0 by hand {first}");
    // A cancelled pass is not counted among the passes; its batch is.
    assert_eq!((counts.passes(), counts.batches()), (0, 1));
}

/// Wraps a callback, adding context to every error it returns, as users do with anyhow's
/// `.context` or a `.map_err`.
struct WrapsErrors<C>(C);

fn wrapped(result: burn_stoker::Result<()>) -> burn_stoker::Result<()> {
    result.map_err(|e| burn_stoker::Error::context("in my wrapper", e))
}

impl<M, C: Callback<M>> Callback<M> for WrapsErrors<C> {
    fn name(&self) -> std::borrow::Cow<'static, str> {
        self.0.name()
    }
    fn chief_only(&self) -> bool {
        self.0.chief_only()
    }
    fn step_events(&self) -> StepEvents {
        self.0.step_events()
    }
    fn setup(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        wrapped(self.0.setup(ctx))
    }
    fn before_step(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        wrapped(self.0.before_step(ctx))
    }
    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        wrapped(self.0.trigger(ctx))
    }
    fn before_validate(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        wrapped(self.0.before_validate(ctx))
    }
    fn validate(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        wrapped(self.0.validate(ctx))
    }
    fn before_batch(&mut self, ctx: &mut Context<'_, M>, batch: &StepBatch<'_>) -> burn_stoker::Result<()> {
        wrapped(self.0.before_batch(ctx, batch))
    }
    fn after_pred(&mut self, ctx: &mut Context<'_, M>, pred: &StepPred<'_>) -> burn_stoker::Result<()> {
        wrapped(self.0.after_pred(ctx, pred))
    }
    fn before_backward(&mut self, ctx: &mut Context<'_, M>, loss: &StepLoss<'_>) -> burn_stoker::Result<()> {
        wrapped(self.0.before_backward(ctx, loss))
    }
    fn after_cancel_batch(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        wrapped(self.0.after_cancel_batch(ctx))
    }
    fn after_batch(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        wrapped(self.0.after_batch(ctx))
    }
    fn after_cancel_validate(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        wrapped(self.0.after_cancel_validate(ctx))
    }
    fn after_validate(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        wrapped(self.0.after_validate(ctx))
    }
}

/// Cancels the first training step from `before_step`.
#[callback(on = before_step)]
fn cancel_first_step(ctx: &mut Context<'_, Linear>) -> Flow {
    if ctx.training() && ctx.global_step() == 0 { Flow::CancelBatch } else { Flow::Continue }
}

/// The same run, every callback bare or wrapped: a validation request (the runner's trigger), a
/// `CancelBatch` of a training step and one of a validation batch, all values the context
/// records, pass through a wrapper that adds context to every error as they would without it.
/// (With cancels and requests travelling as an `Err`, the wrapper turned each into a failure.)
#[test]
fn a_callback_wrapping_every_error_with_context_still_cancels_and_validates() {
    let device = burn_stoker::device::cpu();
    let validation = tiny_data(3, &device);
    let run = |name: &str, wrap: bool| {
        let log: Log = Arc::default();
        let losses = Arc::default();
        let mut watcher = Watcher::new(&log);
        watcher.cancel = Some(("before_batch", 0, Cancel::Batch));
        let runner = runner(validation.clone());
        let counts = runner.counts();
        let reader = LossReader(Arc::clone(&losses));
        let model = match wrap {
            false => train(name, (runner, watcher, CancelFirstStep, reader)),
            true => train(
                name,
                (
                    WrapsErrors(runner),
                    WrapsErrors(watcher),
                    WrapsErrors(CancelFirstStep),
                    WrapsErrors(reader),
                ),
            ),
        };
        // The validation loss, against the batches 1 and 2 by hand (the first was cancelled).
        let by_hand = hand_losses(&model, &validation);
        let losses = losses.lock().unwrap().clone();
        assert_eq!(losses.len(), 1, "{name}: one pass put its loss");
        let expected = (by_hand[1] + by_hand[2]) / 2.0;
        assert!(
            (losses[0] - expected).abs() < 1e-5,
            "{name}: validation_loss {}, by hand {expected}",
            losses[0]
        );
        (take(&log), counts.passes(), counts.batches())
    };
    let bare = run("valid-phase-bare", false);
    let wrapped = run("valid-phase-wrapped", true);
    assert_eq!(bare, wrapped);
    let (log, passes, batches) = bare;
    // The training step was cancelled from before_step (after_cancel_batch, training), then the
    // first validation batch from before_batch (after_cancel_batch, not training); the pass ran.
    let cancels: Vec<&String> = log.iter().filter(|line| line.starts_with("after_cancel_batch")).collect();
    assert_eq!(cancels, ["after_cancel_batch training=true", "after_cancel_batch training=false"], "{log:?}");
    assert_eq!((passes, batches), (1, 2));
}

/// Logs the end of every batch (`after_batch`, with `training`) and the training events around
/// it; takes no step hooks (`after_batch` reaches every callback). Cancels in `after_batch` of
/// the first validation batch when told.
struct BatchEnds {
    log: Log,
    cancel: Option<Cancel>,
}

impl<M> Callback<M> for BatchEnds {
    fn after_step(&mut self, ctx: &mut Context<'_, M>, _values: &Fetched<'_>) -> burn_stoker::Result<()> {
        self.log.lock().unwrap().push(format!("after_step training={}", ctx.training()));
        Ok(())
    }
    fn after_cancel_batch(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        self.log.lock().unwrap().push(format!("after_cancel_batch training={}", ctx.training()));
        Ok(())
    }
    fn after_batch(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        self.log.lock().unwrap().push(format!("after_batch training={}", ctx.training()));
        match self.cancel.take() {
            Some(cancel) if !ctx.training() => ctx.cancel(cancel),
            other => {
                self.cancel = other;
                Ok(())
            }
        }
    }
    fn trigger_step(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        self.log.lock().unwrap().push(format!("trigger_step training={}", ctx.training()));
        Ok(())
    }
    fn after_validate(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        self.log.lock().unwrap().push(format!("after_validate training={}", ctx.training()));
        Ok(())
    }
}

/// Two training steps (the first cancelled from `before_step`), then a pass over 3 validation
/// batches.
fn batch_ends_run(name: &str, cancel: Option<Cancel>) -> (Vec<String>, burn_stoker::Result<()>) {
    let device = burn_stoker::device::cpu();
    let log: Log = Arc::default();
    let ends = BatchEnds { log: log.clone(), cancel };
    let result =
        Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(2, &device))
            .max_epoch(1)
            .log_dir(scratch_dir(name))
            .default_callbacks(DefaultCallbacks::none())
            .callbacks((runner(tiny_data(3, &device)), CancelFirstStep, ends))
            .train(|model: &Linear, (x, y): Batch, _step: &mut Step<'_>| {
                (model.forward(x) - y).powi_scalar(2).mean()
            })
            .map(drop)
            .map_err(|e| e.error);
    (take(&log), result)
}

/// fastai's `after_batch` ends every batch of both phases (fastai nbs/13_learner.ipynb:
/// `_do_one_batch` runs inside `_with_events(..., 'batch', CancelBatchException)`, whose
/// `after_batch` follows the batch whether it ran or was cancelled, in `all_batches` of training
/// and of `_do_epoch_validate` alike; `self.training` tells which), reaching every callback, one
/// without step hooks too: in training after `after_step` (a cancelled batch's after
/// `after_cancel_batch`), before `trigger_step`; in validation after each batch, with `training`
/// false. (Before, no `after_batch` existed: fastai's mapped to `after_step` in training only.)
#[test]
fn after_batch_ends_every_batch_of_training_and_validation_with_training_telling_which() {
    let (log, result) = batch_ends_run("valid-phase-after-batch", None);
    result.unwrap();
    let mut expected = vec!["after_cancel_batch training=true", "after_step training=true"];
    expected.extend(["after_batch training=true", "trigger_step training=true"]);
    expected.extend(["after_step training=true", "after_batch training=true", "trigger_step training=true"]);
    expected.extend(["after_batch training=false"; 3]);
    expected.push("after_validate training=false");
    assert_eq!(log, expected);
}

/// `CancelValid` returned from `after_batch` of the first validation batch ends the pass
/// (fastai's `after_batch` runs inside `_with_events(..., 'validate', CancelValidException)`):
/// no other batch runs, `after_validate` follows. `CancelBatch` there is an error naming the
/// callback and `after_batch`: the batch is over (in fastai the exception escapes the batch's
/// `_with_events`, which has already run).
#[test]
fn cancels_from_after_batch_apply_to_what_encloses_the_batch() {
    let (log, result) = batch_ends_run("valid-phase-after-batch-valid", Some(Cancel::Valid));
    result.unwrap();
    let validation: Vec<&str> =
        log.iter().filter(|line| line.ends_with("training=false")).map(String::as_str).collect();
    assert_eq!(validation, ["after_batch training=false", "after_validate training=false"]);
    let (_, result) = batch_ends_run("valid-phase-after-batch-batch", Some(Cancel::Batch));
    let message = result.unwrap_err().to_string();
    assert!(
        message.starts_with("callback `BatchEnds` failed in after_batch: Flow::CancelBatch was returned where the training loop cannot act on it")
            && message.contains("not in after_batch, where the batch is over"),
        "{message}"
    );
}

/// Counts the ends of batches with `#[callback]`, which tells the trainer that it takes
/// `after_batch`.
#[derive(Default)]
struct DslBatchEnds {
    training: u64,
    validation: u64,
}

#[callback]
impl DslBatchEnds {
    #[on(after_batch)]
    fn end(&mut self, ctx: &mut Context<'_, impl burn::module::Module>) {
        if ctx.training() {
            self.training += 1;
        } else {
            self.validation += 1;
        }
    }
}

/// Says it does not take `after_batch` (`Callback::takes_after_batch`) but counts it anyway: it
/// shows where the trainer delivers it regardless.
#[derive(Default)]
struct DeclinesBatchEnds {
    training: u64,
    validation: u64,
}

impl<M> Callback<M> for DeclinesBatchEnds {
    fn takes_after_batch(&self) -> bool {
        false
    }
    fn after_batch(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        if ctx.training() {
            self.training += 1;
        } else {
            self.validation += 1;
        }
        Ok(())
    }
}

/// After a training step `after_batch` reaches the callbacks that take it: a hand-written one
/// (by default), a `#[callback]` binding it, not one that declines it (`takes_after_batch`
/// false, as `#[callback]` answers for the callbacks that do not bind it, so that a run where no
/// callback takes it pays nothing for it); a validation pass delivers it to every callback.
#[test]
fn after_batch_after_a_training_step_reaches_the_callbacks_that_take_it() {
    let device = burn_stoker::device::cpu();
    let log: Log = Arc::default();
    let (mut dsl, mut declines) = (DslBatchEnds::default(), DeclinesBatchEnds::default());
    let ends = BatchEnds { log: log.clone(), cancel: None };
    Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(2, &device))
        .max_epoch(1)
        .log_dir(scratch_dir("valid-phase-after-batch-takers"))
        .callbacks((runner(tiny_data(3, &device)), &mut dsl, &mut declines, ends))
        .train(|model: &Linear, (x, y): Batch, _step: &mut Step<'_>| {
            (model.forward(x) - y).powi_scalar(2).mean()
        })
        .unwrap();
    let hand_written = take(&log).iter().filter(|line| line.starts_with("after_batch training=true")).count();
    assert_eq!((hand_written, dsl.training, dsl.validation), (2, 2, 3));
    assert_eq!((declines.training, declines.validation), (0, 3));
}

/// fastai's `RNNRegularizer` runs in training only (fastai/callback/rnn.py: `run_valid=False`, and
/// `after_loss` returns when not training): the loss a validation pass delivers to it is left as
/// it is, and the pass, which puts no activations, does not fail for it.
#[test]
fn rnn_regularizer_leaves_the_validation_loss_as_it_is() {
    let device = burn_stoker::device::cpu();
    let validation = tiny_data(3, &device);
    let losses = Arc::default();
    let regularizer = burn_stoker::modify::RnnRegularizer::new(2.0, 0.0);
    let model =
        Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(1, &device))
            .max_epoch(1)
            .log_dir(scratch_dir("valid-phase-rnn-regularizer"))
            .default_callbacks(DefaultCallbacks::none())
            .callbacks((runner(validation.clone()), regularizer, LossReader(Arc::clone(&losses))))
            .train(|model: &Linear, (x, y): Batch, step: &mut Step<'_>| {
                let pred = model.forward(x);
                step.output("dropped_out", pred.clone().unsqueeze_dim::<3>(1));
                (pred - y).powi_scalar(2).mean()
            })
            .unwrap()
            .model;
    let by_hand = hand_losses(&model, &validation);
    let plain = by_hand.iter().sum::<f64>() / 3.0;
    let got = losses.lock().unwrap()[0];
    assert!(
        (got - plain).abs() < 1e-5 * plain.abs().max(1.0),
        "validation_loss {got}, without a penalty {plain}"
    );
}
