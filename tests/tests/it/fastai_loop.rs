//! fastai's loop (seed 003): `before_validate` / `after_validate` with `Context::training`, the
//! `CancelBatch` / `CancelEpoch` / `CancelFit` flows and their `after_cancel_*` events, numeric
//! `order`, and the events inside a step from the DSL. `ModelResetter` and
//! `TerminateOnNaNCallback` are written with the DSL as seed 003 writes them in Python.

use std::sync::{Arc, Mutex};

use burn::module::Module;
use burn::nn::Linear;
use burn::tensor::Tensor;
use burn_stoker::Error;
use burn_stoker::callback::{Cancel, StepEvents, StepGradients, StepLoss, resolve_order};
use burn_stoker::prelude::*;
use stoker_tests::{mse, scratch_dir, tiny_data, tiny_model, weights};

type Log = Arc<Mutex<Vec<String>>>;

fn take(log: &Log) -> Vec<String> {
    std::mem::take(&mut *log.lock().unwrap())
}

// ---------------------------------------------------------------------------------------------
// before_validate / after_validate, and ModelResetter as seed 003 writes it.

/// What an RNN carries from batch to batch: here, how many forward passes ran since the last
/// reset; a reset writes that number to the log.
#[derive(Debug)]
struct Hidden {
    passes: u32,
    log: Log,
}

/// A model with a state that a reset clears (an RNN's hidden state).
#[derive(Module, Debug)]
struct Rnn {
    linear: Linear,
    #[module(skip)]
    hidden: Arc<Mutex<Hidden>>,
}

impl Rnn {
    fn forward(&self, batch: (Tensor<2>, Tensor<2>)) -> Tensor<1> {
        self.hidden.lock().unwrap().passes += 1;
        mse(&self.linear, batch)
    }
    fn reset(&mut self) {
        let mut hidden = self.hidden.lock().unwrap();
        let passes = std::mem::take(&mut hidden.passes);
        hidden.log.lock().unwrap().push(format!("reset after {passes} passes"));
    }
}

/// `Callback` that resets the model at each validation/training step
///
/// fastai's `before_train` starts each epoch's training phase: stoker's `before_epoch`; fastai's
/// `after_fit` is stoker's `after_train`.
#[derive(Debug, Default)]
struct ModelResetter;

#[rustfmt::skip]
#[callback]
impl ModelResetter {
    #[on(before_epoch)]    fn before_train(&mut self, ctx: &mut Context<'_, Rnn>)    { ctx.model_mut().reset() }
    #[on(before_validate)] fn before_validate(&mut self, ctx: &mut Context<'_, Rnn>) { ctx.model_mut().reset() }
    #[on(after_train)]     fn after_fit(&mut self, ctx: &mut Context<'_, Rnn>)       { ctx.model_mut().reset() }
}

/// Logs the events around validation with `Context::training`.
struct Watch(Log);

impl<M> Callback<M> for Watch {
    fn before_epoch(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        self.log("before_epoch", ctx)
    }
    fn before_validate(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        self.log("before_validate", ctx)
    }
    fn validate(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        self.log("validate (never: Watch asked for no pass)", ctx)
    }
    fn after_validate(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        self.log("after_validate", ctx)
    }
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        let cost = ctx.monitors_ref().latest("validation_cost").is_some();
        self.log(&format!("trigger_epoch (validation_cost put: {cost})"), ctx)
    }
}

impl Watch {
    fn log<M>(&self, event: &str, ctx: &Context<'_, M>) -> burn_stoker::Result<()> {
        self.0.lock().unwrap().push(format!("{event} e{} training={}", ctx.epoch_num(), ctx.training()));
        Ok(())
    }
}

#[test]
fn fastai_model_resetter_resets_before_training_before_validation_and_after_the_fit() {
    let device = burn_stoker::device::cpu();
    let log: Log = Arc::default();
    let model = Rnn {
        linear: tiny_model(&device),
        hidden: Arc::new(Mutex::new(Hidden { passes: 0, log: log.clone() })),
    };
    // Validation: 3 batches, each one forward pass of the model.
    let runner = InferenceRunner::new(
        tiny_data(3, &device),
        |model: &Rnn, batch: (Tensor<2>, Tensor<2>), out: &mut Outputs| {
            out.put("cost", model.forward(batch));
            4usize
        },
    )
    .with(ScalarStats::new(["cost"]));
    let report = Trainer::new(model, burn::optim::SgdConfig::new().init(), tiny_data(2, &device))
        .max_epoch(2)
        .log_dir(scratch_dir("fastai-resetter"))
        .default_callbacks(DefaultCallbacks::none())
        .callbacks((ModelResetter, runner, Watch(log.clone())))
        .train(|model: &Rnn, batch, _step: &mut Step<'_>| model.forward(batch))
        .unwrap();
    // By hand: 2 epochs of 2 training passes, a validation of 3 passes after each; the
    // resetter runs first in each event, Watch last (after the runner's pass in trigger_epoch).
    // `training` as fastai's TrainEvalCallback sets it: false before the first epoch's training
    // and from a validation on, until the next epoch's training starts.
    let epoch = |e: u32, first_reset: u32| {
        vec![
            format!("reset after {first_reset} passes"), // before_epoch: the previous validation's 3, or 0
            format!("before_epoch e{e} training=false"),
            "reset after 2 passes".to_string(), // before_validate: this epoch's 2 training steps
            format!("before_validate e{e} training=false"),
            format!("after_validate e{e} training=false"), // the runner's 3 passes ran in between
            format!("trigger_epoch (validation_cost put: true) e{e} training=false"),
        ]
    };
    let mut expected = epoch(1, 0);
    expected.extend(epoch(2, 3));
    expected.push("reset after 3 passes".to_string()); // after_train: the last validation's 3
    assert_eq!(take(&log), expected);
    assert_eq!(report.model.hidden.lock().unwrap().passes, 0, "the fit ends with a reset model");
}

/// A callback that asks for a validation pass where none can run is told so.
#[test]
fn fastai_validation_requested_in_setup_is_an_error() {
    struct Early;
    impl<M> Callback<M> for Early {
        fn setup(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
            ctx.request_validation()
        }
    }
    let error = run_linear(Early, 1, 2).map(|_| ()).unwrap_err().to_string();
    assert!(
        error.starts_with("callback `Early` failed in setup: a validation pass was requested (Context::request_validation) where the trainer cannot run one"),
        "{error}"
    );
}

// ---------------------------------------------------------------------------------------------
// CancelBatch, CancelEpoch, CancelFit.

/// Records every event it receives as `"name:event e<epoch> g<global> l<local>"`, and the
/// weights after each step.
struct Recorder {
    name: &'static str,
    log: Log,
    weights: Arc<Mutex<Vec<Vec<Vec<f32>>>>>,
    order: Order,
}

impl Recorder {
    fn new(name: &'static str, log: &Log) -> Self {
        Recorder { name, log: log.clone(), weights: Arc::default(), order: Order::none() }
    }
    fn record<M>(&self, event: &str, ctx: &Context<'_, M>) -> burn_stoker::Result<()> {
        let c = ctx.counters();
        self.log.lock().unwrap().push(format!(
            "{}:{event} e{} g{} l{}",
            self.name,
            c.epoch_num(),
            c.global_step(),
            c.local_step()
        ));
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
    fn order(&self) -> Order {
        self.order.clone()
    }
    record_events!(
        before_train,
        before_epoch,
        before_step,
        after_epoch,
        trigger_epoch,
        after_train,
        after_cancel_batch,
        after_cancel_epoch,
        after_cancel_fit
    );
    fn after_step(
        &mut self,
        ctx: &mut Context<'_, Linear>,
        _values: &Fetched<'_>,
    ) -> burn_stoker::Result<()> {
        self.record("after_step", ctx)
    }
    fn trigger_step(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.weights.lock().unwrap().push(weights(ctx.model()));
        self.record("trigger_step", ctx)
    }
}

fn run_linear<K, C: Callbacks<Linear, K>>(
    callbacks: C,
    epochs: u64,
    steps: usize,
) -> burn_stoker::Result<TrainReport<Linear>> {
    let device = burn_stoker::device::cpu();
    Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(steps, &device))
        .max_epoch(epochs)
        .log_dir(scratch_dir("fastai-loop"))
        .default_callbacks(DefaultCallbacks::none())
        .callbacks(callbacks)
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .map_err(Error::from)
}

/// The events of a plain step `g -> g + 1`, the `l`-th of epoch `e`, for `name`.
fn step(name: &str, e: u64, g: u64, l: u64) -> Vec<String> {
    vec![
        format!("{name}:before_step e{e} g{g} l{l}"),
        format!("{name}:after_step e{e} g{} l{}", g + 1, l + 1),
        format!("{name}:trigger_step e{e} g{} l{}", g + 1, l + 1),
    ]
}

fn lines(parts: &[&[String]]) -> Vec<String> {
    parts.iter().flat_map(|p| p.iter().cloned()).collect()
}

fn one(line: String) -> Vec<String> {
    vec![line]
}

/// Cancels the batch of global step 1 (the second), from `before_step`.
#[callback(on = before_step)]
fn cancel_second_batch(ctx: &mut Context<'_, impl Module>) -> Flow {
    if ctx.global_step() == 1 { Flow::CancelBatch } else { Flow::Continue }
}

#[test]
fn fastai_cancel_batch_skips_the_rest_of_the_batch_then_after_cancel_batch_then_after_step() {
    let log: Log = Arc::default();
    let before = Recorder::new("A", &log);
    let after = Recorder::new("B", &log);
    let (a_weights, b_weights) = (before.weights.clone(), after.weights.clone());
    let report = run_linear((before, CancelSecondBatch, after), 1, 3).unwrap();
    let b = |e: &str, g: u64, l: u64| format!("B:{e} e1 g{g} l{l}");
    let a = |e: &str, g: u64, l: u64| format!("A:{e} e1 g{g} l{l}");
    let mut expected =
        lines(&[&one("A:before_train e0 g0 l0".into()), &one("B:before_train e0 g0 l0".into())]);
    expected.extend([a("before_epoch", 0, 0), b("before_epoch", 0, 0)]);
    // Step 0 as usual, A then B at each event.
    for (x, y) in step("A", 1, 0, 0).into_iter().zip(step("B", 1, 0, 0)) {
        expected.extend([x, y]);
    }
    // Step 1: A (before the canceller) saw before_step, B did not; the step counts.
    expected.push(a("before_step", 1, 1));
    expected.extend([a("after_cancel_batch", 2, 2), b("after_cancel_batch", 2, 2)]);
    expected.extend([a("after_step", 2, 2), b("after_step", 2, 2)]);
    expected.extend([a("trigger_step", 2, 2), b("trigger_step", 2, 2)]);
    for (x, y) in step("A", 1, 2, 2).into_iter().zip(step("B", 1, 2, 2)) {
        expected.extend([x, y]);
    }
    expected.extend([
        a("after_epoch", 3, 3),
        b("after_epoch", 3, 3),
        a("trigger_epoch", 3, 3),
        b("trigger_epoch", 3, 3),
    ]);
    expected.extend([a("after_train", 3, 3), b("after_train", 3, 3)]);
    assert_eq!(take(&log), expected);
    assert_eq!(report.counters.global_step(), 3);
    assert!(matches!(report.outcome, Outcome::Finished), "{:?}", report.outcome);
    // No optimizer step at the cancelled batch: the weights after it are those after step 0;
    // steps 0 and 2 changed them.
    let w = b_weights.lock().unwrap().clone();
    assert_eq!(w.len(), 3);
    assert_eq!(w[1], w[0], "the cancelled batch changed no weight");
    assert_ne!(w[2], w[1], "the next batch trained");
    assert_eq!(*a_weights.lock().unwrap(), w);
}

/// Cancels the batch at global step 1 from inside the step, after backward: the gradients exist,
/// the optimizer does not run.
struct CancelAfterBackward;

impl<M> Callback<M> for CancelAfterBackward {
    fn step_events(&self) -> StepEvents {
        StepEvents::GRADIENTS
    }
    fn after_backward(&mut self, ctx: &mut Context<'_, M>, grads: &StepGradients) -> burn_stoker::Result<()> {
        assert!(grads.is_present());
        if ctx.global_step() == 1 { ctx.cancel(Cancel::Batch) } else { Ok(()) }
    }
}

#[test]
fn fastai_cancel_batch_after_backward_skips_the_optimizer() {
    let log: Log = Arc::default();
    let recorder = Recorder::new("R", &log);
    let w = recorder.weights.clone();
    let report = run_linear((CancelAfterBackward, recorder), 1, 3).unwrap();
    let w = w.lock().unwrap().clone();
    assert_eq!(w[1], w[0], "no optimizer step at the cancelled batch");
    assert_ne!(w[2], w[1]);
    assert_eq!(report.counters.global_step(), 3);
    let events = take(&log);
    assert!(events.contains(&"R:after_cancel_batch e1 g2 l2".to_string()), "{events:?}");
}

/// Cancels epoch 1 at its second step (global step 1), from `before_step`.
#[callback(on = before_step)]
fn cancel_epoch_one(ctx: &mut Context<'_, impl Module>) -> Flow {
    if ctx.epoch_num() == 1 && ctx.local_step() == 1 { Flow::CancelEpoch } else { Flow::Continue }
}

#[test]
fn fastai_cancel_epoch_ends_the_epoch_then_after_cancel_epoch_then_after_epoch() {
    let log: Log = Arc::default();
    let recorder = Recorder::new("R", &log);
    let w = recorder.weights.clone();
    let report = run_linear((CancelEpochOne, recorder), 2, 3).unwrap();
    let r = |e: &str, ep: u64, g: u64, l: u64| format!("R:{e} e{ep} g{g} l{l}");
    let expected = lines(&[
        &[r("before_train", 0, 0, 0), r("before_epoch", 1, 0, 0)],
        &step("R", 1, 0, 0),
        // Step 1 never ran for R (the canceller comes first), nor counted.
        &[r("after_cancel_epoch", 1, 1, 1), r("after_epoch", 1, 1, 1), r("trigger_epoch", 1, 1, 1)],
        &[r("before_epoch", 2, 1, 0)],
        &step("R", 2, 1, 0),
        &step("R", 2, 2, 1),
        &step("R", 2, 3, 2),
        &[r("after_epoch", 2, 4, 3), r("trigger_epoch", 2, 4, 3), r("after_train", 2, 4, 3)],
    ]);
    assert_eq!(take(&log), expected);
    assert_eq!(report.counters.global_step(), 4);
    assert_eq!(w.lock().unwrap().len(), 4, "4 steps ran");
}

/// Cancels the fit at global step 2, from `after_step`.
#[callback(on = after_step)]
fn cancel_fit_at_two(ctx: &mut Context<'_, impl Module>) -> Flow {
    if ctx.global_step() == 2 { Flow::CancelFit } else { Flow::Continue }
}

#[test]
fn fastai_cancel_fit_stops_at_once_then_after_cancel_fit_then_after_train() {
    let log: Log = Arc::default();
    let before = Recorder::new("A", &log);
    let after = Recorder::new("B", &log);
    let report = run_linear((before, CancelFitAtTwo, after), 2, 3).unwrap();
    let a = |e: &str, g: u64, l: u64| format!("A:{e} e1 g{g} l{l}");
    let b = |e: &str, g: u64, l: u64| format!("B:{e} e1 g{g} l{l}");
    let mut expected = vec!["A:before_train e0 g0 l0".to_string(), "B:before_train e0 g0 l0".to_string()];
    expected.extend([a("before_epoch", 0, 0), b("before_epoch", 0, 0)]);
    for (x, y) in step("A", 1, 0, 0).into_iter().zip(step("B", 1, 0, 0)) {
        expected.extend([x, y]);
    }
    // Step 1: A saw after_step, then the canceller stopped the event: B did not, no
    // trigger_step, no after_epoch.
    expected.extend([a("before_step", 1, 1), b("before_step", 1, 1), a("after_step", 2, 2)]);
    expected.extend([a("after_cancel_fit", 2, 2), b("after_cancel_fit", 2, 2)]);
    expected.extend([a("after_train", 2, 2), b("after_train", 2, 2)]);
    assert_eq!(take(&log), expected);
    match &report.outcome {
        Outcome::Stopped(reason) => {
            assert_eq!(reason, "cancelled by `CancelFitAtTwo` in after_step (Flow::CancelFit)")
        }
        other => panic!("expected a stop, got {other:?}"),
    }
}

/// Returns CancelBatch from after_batch, where the batch is over.
#[callback(on = after_batch)]
fn cancel_batch_too_late() -> Flow {
    Flow::CancelBatch
}

/// Returns CancelEpoch from after_epoch, where the epoch is over.
#[callback(on = after_epoch)]
fn cancel_epoch_too_late() -> Flow {
    Flow::CancelEpoch
}

#[test]
fn fastai_cancel_where_it_cannot_apply_is_an_error_naming_the_callback_and_event() {
    let error = run_linear(CancelBatchTooLate, 1, 2).map(|_| ()).unwrap_err().to_string();
    assert_eq!(
        error,
        "callback `CancelBatchTooLate` failed in after_batch: Flow::CancelBatch was returned where the training loop cannot act on it (CancelBatch applies in before_step, before_batch, after_pred, before_backward, after_backward and after_step, while the batch runs (a training batch or a validation batch), not in after_batch, where the batch is over; to end the epoch use CancelEpoch, to stop training CancelFit)"
    );
    let error = run_linear(CancelEpochTooLate, 1, 2).map(|_| ()).unwrap_err().to_string();
    assert!(
        error.starts_with("callback `CancelEpochTooLate` failed in after_epoch: Flow::CancelEpoch was returned where the training loop cannot act on it"),
        "{error}"
    );
}

// ---------------------------------------------------------------------------------------------
// Numeric order, and TerminateOnNaNCallback as seed 003 writes it.

#[test]
fn fastai_order_constraints_first_then_numeric_order_then_registration() {
    let names: Vec<std::borrow::Cow<'static, str>> = vec!["a".into(), "b".into(), "c".into(), "d".into()];
    // Values only: lowest first, registration among equals (a and d at 0).
    let orders = vec![Order::none(), Order::none().value(-9), Order::none().value(5), Order::none()];
    assert_eq!(resolve_order(&names, &orders).unwrap(), vec![1, 0, 3, 2]);
    // A constraint wins over a value: b (-9) runs after d (0); c (5) before a (0).
    let orders = vec![
        Order::none(),
        Order::none().value(-9).after("d"),
        Order::none().value(5).before("a"),
        Order::none(),
    ];
    // Ready at first: c (5), d (0) -> d; then b (-9), c (5) -> b; then c; then a.
    assert_eq!(resolve_order(&names, &orders).unwrap(), vec![3, 1, 2, 0]);
}

/// A `Callback` that terminates training if loss is NaN.
#[derive(Debug, Default)]
struct TerminateOnNaNCallback;

#[callback]
#[order(-9)]
impl TerminateOnNaNCallback {
    /// Test if `last_loss` is NaN and interrupts training.
    #[on(after_step)]
    #[fetch("loss")]
    fn after_batch(&mut self, loss: f32) -> Flow {
        if loss.is_infinite() || loss.is_nan() { Flow::CancelFit } else { Flow::Continue }
    }
}

#[test]
fn fastai_terminate_on_nan_at_order_minus_nine_cancels_the_fit_before_the_others_see_the_step() {
    let log: Log = Arc::default();
    let device = burn_stoker::device::cpu();
    // The recorder is registered first, but at order 0 it runs after the -9 callback.
    let report =
        Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(4, &device))
            .max_epoch(1)
            .log_dir(scratch_dir("fastai-nan"))
            .default_callbacks(DefaultCallbacks::none())
            .callbacks((Recorder::new("R", &log), TerminateOnNaNCallback))
            .train(|model: &Linear, batch, step: &mut Step<'_>| {
                let loss = mse(model, batch);
                // The third step's loss is NaN.
                if step.counters().global_step() == 2 { loss * f32::NAN } else { loss }
            })
            .unwrap();
    let expected = lines(&[
        &["R:before_train e0 g0 l0".to_string(), "R:before_epoch e1 g0 l0".to_string()],
        &step("R", 1, 0, 0),
        &step("R", 1, 1, 1),
        // Step 2: R never sees its after_step (nor trigger_step, after_epoch).
        &["R:before_step e1 g2 l2".to_string(), "R:after_cancel_fit e1 g3 l3".to_string()],
        &["R:after_train e1 g3 l3".to_string()],
    ]);
    assert_eq!(take(&log), expected);
    match &report.outcome {
        Outcome::Stopped(reason) => {
            assert_eq!(reason, "cancelled by `TerminateOnNaNCallback` in after_step (Flow::CancelFit)")
        }
        other => panic!("expected a stop, got {other:?}"),
    }
}

#[test]
fn fastai_order_terminate_on_nan_builtin_is_at_minus_nine() {
    let order = <burn_stoker::debug::TerminateOnNaN as Callback<Linear>>::order(
        &burn_stoker::debug::TerminateOnNaN::new(),
    );
    assert_eq!(order.value, -9);
}

// ---------------------------------------------------------------------------------------------
// The events inside a step, from the DSL.

/// Doubles the loss before backward (fastai's `after_loss`).
#[callback(on = before_backward)]
fn double_the_loss(loss: &StepLoss<'_>) {
    loss.update(|loss| loss * 2.0);
}

/// Withholds the gradients at every step (no optimizer step), reading the model through ctx.
#[callback(on = after_backward)]
fn withhold_gradients(ctx: &mut Context<'_, Linear>, grads: &StepGradients) {
    let _ = ctx.model();
    grads.take();
}

#[test]
fn fastai_dsl_before_backward_changes_the_loss_backward_differentiates() {
    let device = burn_stoker::device::cpu();
    let start = tiny_model(&device);
    let train = |doubled_in_step: bool, callbacks: Option<DoubleTheLoss>| {
        Trainer::new(start.clone(), burn::optim::SgdConfig::new().init(), tiny_data(3, &device))
            .max_epoch(1)
            .log_dir(scratch_dir("fastai-loss"))
            .default_callbacks(DefaultCallbacks::none())
            .callbacks(callbacks)
            .train(move |model: &Linear, batch, _step: &mut Step<'_>| {
                let loss = mse(model, batch);
                if doubled_in_step { loss * 2.0 } else { loss }
            })
            .unwrap()
            .model
    };
    let by_hook = weights(&train(false, Some(DoubleTheLoss)));
    let by_step = weights(&train(true, None));
    let plain = weights(&train(false, None));
    assert_eq!(by_hook, by_step, "the hook's loss is what backward differentiated");
    assert_ne!(by_hook, plain);
}

#[test]
fn fastai_dsl_after_backward_takes_the_gradients() {
    let device = burn_stoker::device::cpu();
    let model = tiny_model(&device);
    let before = weights(&model);
    let report = Trainer::new(model, burn::optim::SgdConfig::new().init(), tiny_data(3, &device))
        .max_epoch(1)
        .log_dir(scratch_dir("fastai-grads"))
        .default_callbacks(DefaultCallbacks::none())
        .callbacks(WithholdGradients)
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .unwrap();
    assert_eq!(weights(&report.model), before, "no step had gradients left for the optimizer");
    assert_eq!(report.counters.global_step(), 3);
}

// ---------------------------------------------------------------------------------------------
// A cancelled epoch and checkpoints.

/// Epochs of 3 steps, epoch 1 cancelled at its second step, a checkpoint at every epoch's end.
fn cancelled_epoch_run(
    model: Linear,
    dir: &std::path::Path,
    epochs: u64,
    resume: bool,
) -> TrainReport<Linear> {
    let device = burn_stoker::device::cpu();
    Trainer::new(model, burn::optim::SgdConfig::new().init(), tiny_data(3, &device))
        .max_epoch(epochs)
        .log_dir(dir)
        .handle_signals(false)
        .auto_resume(resume)
        .default_callbacks(DefaultCallbacks::none())
        .callbacks((CancelEpochOne, burn_stoker::saver::ModelSaver::new(100)))
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .unwrap()
}

#[test]
fn fastai_cancel_epoch_checkpoint_resumes_at_the_next_epoch_as_a_straight_run() {
    let device = burn_stoker::device::cpu();
    let start = tiny_model(&device);
    // Straight: epoch 1 counts 1 step (the second was cancelled before its optimizer), 2 and 3
    // count 3 each.
    let straight = cancelled_epoch_run(start.clone(), &scratch_dir("fastai-cancel-straight"), 3, false);
    assert_eq!(straight.counters.global_step(), 7);
    // Split after the cancelled epoch: its checkpoint resumes at epoch 2, the data after the two
    // batches epoch 1 took (the cancelled one included).
    let dir = scratch_dir("fastai-cancel-split");
    let first = cancelled_epoch_run(start.clone(), &dir, 1, false);
    assert_eq!((first.counters.epoch_num(), first.counters.global_step()), (1, 1));
    let latest = burn_stoker::saver::Checkpoint::latest(&dir).unwrap().expect("the epoch's checkpoint");
    assert_eq!(latest.global_step(), 1);
    let resumed = cancelled_epoch_run(tiny_model(&device), &dir, 3, true);
    assert_eq!(resumed.counters.global_step(), 7);
    assert_eq!(weights(&resumed.model), weights(&straight.model), "bit for bit");
}

/// A validating callback of its own: its trigger asks for a pass, the pass is logged.
struct Validator(&'static str, Log);

impl<M> Callback<M> for Validator {
    fn name(&self) -> std::borrow::Cow<'static, str> {
        self.0.into()
    }
    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        ctx.request_validation()
    }
    fn validate(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        self.1.lock().unwrap().push(format!(
            "{}:validate e{} training={}",
            self.0,
            ctx.epoch_num(),
            ctx.training()
        ));
        Ok(())
    }
}

#[test]
fn fastai_validate_events_surround_each_pass_that_a_trigger_runs() {
    let log: Log = Arc::default();
    // `every_two` validates at epochs 2 and 4 only (its wrapper's period), `every` at every epoch;
    // Watch, last, sees each pass's events and then its own trigger_epoch.
    let every_two =
        burn_stoker::trigger::PeriodicTrigger::new(Validator("EveryTwo", log.clone())).every_k_epochs(2);
    let callbacks = (every_two, Validator("Every", log.clone()), Watch(log.clone()));
    run_linear(callbacks, 3, 1).unwrap();
    let pass = |who: &str, e: u32| {
        vec![
            format!("before_validate e{e} training=false"),
            format!("{who}:validate e{e} training=false"),
            format!("after_validate e{e} training=false"),
        ]
    };
    let mut expected = Vec::new();
    for e in 1..=3 {
        expected.push(format!("before_epoch e{e} training=false"));
        if e == 2 {
            expected.extend(pass("EveryTwo", e));
        }
        expected.extend(pass("Every", e));
        expected.push(format!("trigger_epoch (validation_cost put: false) e{e} training=false"));
    }
    assert_eq!(take(&log), expected);
}

/// Cancels the batch of global step 1 on every rank.
struct CancelOnEveryRank;

impl<M> Callback<M> for CancelOnEveryRank {
    fn chief_only(&self) -> bool {
        false
    }
    fn before_step(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        if ctx.global_step() == 1 { ctx.cancel(Cancel::Batch) } else { Ok(()) }
    }
}

#[test]
fn fastai_cancel_in_data_parallel_training_is_an_error_saying_what_to_return_instead() {
    let dir = scratch_dir("fastai-world-cancel");
    let result = burn_stoker::world::Threads::new([burn_stoker::device::cpu(), burn_stoker::device::cpu()])
        .run(|world: burn_stoker::world::World| {
            let device = world.device().clone();
            let data = world.shard(tiny_data(8, &device));
            Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), data)
                .handle_signals(false)
                .max_epoch(1)
                .log_dir(&dir)
                .world(world)
                .default_callbacks(DefaultCallbacks::none())
                .callbacks(CancelOnEveryRank)
                .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
                .map(|_| ())
                .map_err(Error::from)
        });
    let text = result.expect_err("a cancel in a world fails").to_string();
    assert!(
        text.contains("callback `CancelOnEveryRank` failed in before_step: Flow::CancelBatch is not supported in data-parallel training, where every rank must agree on the steps it runs: return Flow::Stop or Flow::SkipEpoch"),
        "{text}"
    );
}
