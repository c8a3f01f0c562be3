//! fastai's other cancels (seed 003; fastai's `learner.py`, `_with_events`): `CancelStep` /
//! `after_cancel_step`, `CancelTrain` / `after_cancel_train`, `CancelValid` /
//! `after_cancel_validate`, each checked against the events fastai's loop delivers around it;
//! and `ShortEpochCallback` (fastai's `callback/training.py`) against its rule.

use std::sync::{Arc, Mutex};

use burn::nn::Linear;
use burn::tensor::Tensor;
use burn_stoker::Error;
use burn_stoker::callback::{Cancel, StepEvents, StepGradients};
use burn_stoker::prelude::*;
use burn_stoker::stop::ShortEpochCallback;
use stoker_tests::{mse, scratch_dir, tiny_data, tiny_model, weights};

type Log = Arc<Mutex<Vec<String>>>;

fn take(log: &Log) -> Vec<String> {
    std::mem::take(&mut *log.lock().unwrap())
}

/// Records the events it receives as `"name:event e<epoch> g<global> l<local>"` (with the loss
/// at `after_step`, fetched), and the weights after each step.
struct Recorder {
    name: &'static str,
    log: Log,
    weights: Arc<Mutex<Vec<Vec<Vec<f32>>>>>,
}

impl Recorder {
    fn new(name: &'static str, log: &Log) -> Self {
        Recorder { name, log: log.clone(), weights: Arc::default() }
    }
    fn record(&self, event: &str, ctx: &Context<'_, Linear>) -> burn_stoker::Result<()> {
        let c = ctx.counters();
        let line =
            format!("{}:{event} e{} g{} l{}", self.name, c.epoch_num(), c.global_step(), c.local_step());
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
    fn fetches(&self) -> &[Fetch] {
        const LOSS: &[Fetch] = &[Fetch::host("loss")];
        LOSS
    }
    fn step_events(&self) -> StepEvents {
        StepEvents::GRADIENTS
    }
    record_events!(
        before_epoch,
        before_step,
        after_epoch,
        trigger_epoch,
        before_validate,
        after_validate,
        after_cancel_step,
        after_cancel_train,
        after_cancel_validate
    );
    fn after_backward(
        &mut self,
        ctx: &mut Context<'_, Linear>,
        _grads: &StepGradients,
    ) -> burn_stoker::Result<()> {
        self.record("after_backward", ctx)
    }
    fn after_step(&mut self, ctx: &mut Context<'_, Linear>, values: &Fetched<'_>) -> burn_stoker::Result<()> {
        let loss: f32 = values.get("loss")?;
        assert!(loss.is_finite());
        self.record("after_step(loss)", ctx)
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
        .log_dir(scratch_dir("fastai-cancels"))
        .default_callbacks(DefaultCallbacks::none())
        .callbacks(callbacks)
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .map_err(Error::from)
}

/// The events of a plain step `g -> g + 1`, the `l`-th of epoch `e`, for `name`.
fn step(name: &str, e: u64, g: u64, l: u64) -> Vec<String> {
    vec![
        format!("{name}:before_step e{e} g{g} l{l}"),
        format!("{name}:after_backward e{e} g{g} l{l}"),
        format!("{name}:after_step(loss) e{e} g{} l{}", g + 1, l + 1),
        format!("{name}:trigger_step e{e} g{} l{}", g + 1, l + 1),
    ]
}

/// Two recorders' events, interleaved as one event reaches A then B.
fn both(a: Vec<String>, b: Vec<String>) -> Vec<String> {
    a.into_iter().zip(b).flat_map(|(x, y)| [x, y]).collect()
}

// ---------------------------------------------------------------------------------------------
// CancelStep.

/// fastai's `before_step` (between backward and the optimizer) is stoker's `after_backward`:
/// cancels the optimizer step of global step 1.
#[callback(on = after_backward)]
fn cancel_second_step(ctx: &mut Context<'_, Linear>, grads: &StepGradients) -> Flow {
    assert!(grads.is_present());
    if ctx.global_step() == 1 { Flow::CancelStep } else { Flow::Continue }
}

#[test]
fn fastai_cancel_step_skips_the_optimizer_then_after_cancel_step_then_the_rest_of_the_batch() {
    let log: Log = Arc::default();
    let (a, b) = (Recorder::new("A", &log), Recorder::new("B", &log));
    let w = b.weights.clone();
    let report = run_linear((a, CancelSecondStep, b), 1, 3).unwrap();
    let mut expected = both(vec!["A:before_epoch e1 g0 l0".into()], vec!["B:before_epoch e1 g0 l0".into()]);
    expected.extend(both(step("A", 1, 0, 0), step("B", 1, 0, 0)));
    // Step 1: B, after the canceller, misses after_backward; every callback then receives
    // after_cancel_step (inside the step: it does not count yet), and the batch goes on as
    // fastai's does: its after_step with the step's values, trigger_step; the step counts.
    expected.extend(
        ["A:before_step e1 g1 l1", "B:before_step e1 g1 l1", "A:after_backward e1 g1 l1"].map(String::from),
    );
    expected.extend(both(
        vec![
            "A:after_cancel_step e1 g1 l1".into(),
            "A:after_step(loss) e1 g2 l2".into(),
            "A:trigger_step e1 g2 l2".into(),
        ],
        vec![
            "B:after_cancel_step e1 g1 l1".into(),
            "B:after_step(loss) e1 g2 l2".into(),
            "B:trigger_step e1 g2 l2".into(),
        ],
    ));
    expected.extend(both(step("A", 1, 2, 2), step("B", 1, 2, 2)));
    expected.extend(both(
        vec!["A:after_epoch e1 g3 l3".into(), "A:trigger_epoch e1 g3 l3".into()],
        vec!["B:after_epoch e1 g3 l3".into(), "B:trigger_epoch e1 g3 l3".into()],
    ));
    assert_eq!(take(&log), expected);
    assert_eq!(report.counters.global_step(), 3);
    assert!(matches!(report.outcome, Outcome::Finished), "{:?}", report.outcome);
    let w = w.lock().unwrap().clone();
    assert_eq!(w[1], w[0], "the cancelled step changed no weight");
    assert_ne!(w[2], w[1], "the next step trained");
}

/// `Cancel::Step` by hand, from `after_backward`, at every step: no weight ever changes.
struct CancelEveryStep;

impl<M> Callback<M> for CancelEveryStep {
    fn step_events(&self) -> StepEvents {
        StepEvents::GRADIENTS
    }
    fn after_backward(
        &mut self,
        ctx: &mut Context<'_, M>,
        _grads: &StepGradients,
    ) -> burn_stoker::Result<()> {
        ctx.cancel(Cancel::Step)
    }
}

#[test]
fn fastai_cancel_step_at_every_step_trains_nothing_and_counts_every_step() {
    let device = burn_stoker::device::cpu();
    let start = tiny_model(&device);
    let before = weights(&start);
    let report = Trainer::new(start, burn::optim::SgdConfig::new().init(), tiny_data(3, &device))
        .max_epoch(2)
        .log_dir(scratch_dir("fastai-cancel-every-step"))
        .default_callbacks(DefaultCallbacks::none())
        .callbacks(CancelEveryStep)
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .unwrap();
    assert_eq!(weights(&report.model), before, "no optimizer step ran");
    assert_eq!(report.counters.global_step(), 6);
}

// ---------------------------------------------------------------------------------------------
// CancelTrain.

/// A validating callback: its trigger asks for a pass, the pass is logged.
struct Validator(Log);

impl<M> Callback<M> for Validator {
    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        ctx.request_validation()
    }
    fn validate(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        self.0.lock().unwrap().push(format!("validate e{}", ctx.epoch_num()));
        Ok(())
    }
}

/// Cancels the training part of epoch 1 at its second step, from `before_step`.
#[callback(on = before_step)]
fn cancel_train_of_epoch_one(ctx: &mut Context<'_, Linear>) -> Flow {
    if ctx.epoch_num() == 1 && ctx.local_step() == 1 { Flow::CancelTrain } else { Flow::Continue }
}

#[test]
fn fastai_cancel_train_skips_the_rest_of_the_epochs_training_and_still_validates() {
    let log: Log = Arc::default();
    let r = Recorder::new("R", &log);
    let report = run_linear((CancelTrainOfEpochOne, r, Validator(log.clone())), 2, 3).unwrap();
    let r = |e: &str, ep: u64, g: u64, l: u64| format!("R:{e} e{ep} g{g} l{l}");
    let mut expected = vec![r("before_epoch", 1, 0, 0)];
    expected.extend(step("R", 1, 0, 0));
    // Step 1 never ran (the canceller is first) nor counted; then fastai's `after_cancel_train`,
    // the epoch's end, and its validation.
    // R, registered before the validator, receives trigger_epoch before the pass it asks for.
    expected.extend([
        r("after_cancel_train", 1, 1, 1),
        r("after_epoch", 1, 1, 1),
        r("trigger_epoch", 1, 1, 1),
    ]);
    expected.extend([r("before_validate", 1, 1, 1), "validate e1".into(), r("after_validate", 1, 1, 1)]);
    expected.push(r("before_epoch", 2, 1, 0));
    for (g, l) in [(1, 0), (2, 1), (3, 2)] {
        expected.extend(step("R", 2, g, l));
    }
    expected.extend([r("after_epoch", 2, 4, 3), r("trigger_epoch", 2, 4, 3)]);
    expected.extend([r("before_validate", 2, 4, 3), "validate e2".into(), r("after_validate", 2, 4, 3)]);
    assert_eq!(take(&log), expected);
    assert_eq!(report.counters.global_step(), 4);
    assert!(matches!(report.outcome, Outcome::Finished), "{:?}", report.outcome);
}

// ---------------------------------------------------------------------------------------------
// CancelValid.

/// Cancels the validation pass of epoch 1 from `before_validate` (as fastai's `LRFinder` does).
#[callback(on = before_validate)]
fn skip_validation_of_epoch_one(ctx: &mut Context<'_, Linear>) -> Flow {
    if ctx.epoch_num() == 1 { Flow::CancelValid } else { Flow::Continue }
}

#[test]
fn fastai_cancel_valid_in_before_validate_skips_the_pass_then_after_cancel_validate_then_after_validate() {
    let log: Log = Arc::default();
    let (a, b) = (Recorder::new("A", &log), Recorder::new("B", &log));
    let callbacks = (a, SkipValidationOfEpochOne, b, Validator(log.clone()));
    let report = run_linear(callbacks, 2, 1).unwrap();
    let events: Vec<String> = take(&log)
        .into_iter()
        .filter(|line| line.contains("valid") || line.contains("trigger_epoch"))
        .collect();
    let x = |who: &str, e: &str, ep: u64| format!("{who}:{e} e{ep} g{ep} l1");
    // A and B, registered before the validator, receive trigger_epoch before the pass it asks for.
    let expected = vec![
        // Epoch 1: B, after the canceller, misses before_validate; nobody sees the pass.
        x("A", "trigger_epoch", 1),
        x("B", "trigger_epoch", 1),
        x("A", "before_validate", 1),
        x("A", "after_cancel_validate", 1),
        x("B", "after_cancel_validate", 1),
        x("A", "after_validate", 1),
        x("B", "after_validate", 1),
        // Epoch 2: the whole pass.
        x("A", "trigger_epoch", 2),
        x("B", "trigger_epoch", 2),
        x("A", "before_validate", 2),
        x("B", "before_validate", 2),
        "validate e2".into(),
        x("A", "after_validate", 2),
        x("B", "after_validate", 2),
    ];
    assert_eq!(events, expected);
    assert!(matches!(report.outcome, Outcome::Finished), "{:?}", report.outcome);
}

/// A validator that cancels its own pass halfway (after 2 of its 4 batches), by hand.
struct HalfPass(Log);

impl<M> Callback<M> for HalfPass {
    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        ctx.request_validation()
    }
    fn validate(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        for batch in 0..4 {
            self.0.lock().unwrap().push(format!("batch {batch}"));
            if batch == 1 {
                return ctx.cancel(Cancel::Valid);
            }
        }
        Ok(())
    }
}

#[test]
fn fastai_cancel_valid_during_the_pass_ends_it_then_after_cancel_validate_then_after_validate() {
    let log: Log = Arc::default();
    let callbacks = (Recorder::new("A", &log), HalfPass(log.clone()), Recorder::new("B", &log));
    run_linear(callbacks, 1, 1).unwrap();
    let events: Vec<String> = take(&log)
        .into_iter()
        .filter(|l| l.contains("valid") || l.contains("batch") || l.contains("trigger_epoch"))
        .collect();
    let x = |who: &str, e: &str| format!("{who}:{e} e1 g1 l1");
    let expected = vec![
        x("A", "trigger_epoch"),
        x("A", "before_validate"),
        x("B", "before_validate"),
        "batch 0".into(),
        "batch 1".into(),
        x("A", "after_cancel_validate"),
        x("B", "after_cancel_validate"),
        x("A", "after_validate"),
        x("B", "after_validate"),
        // The event that asked for the pass goes on with the callbacks after the validator.
        x("B", "trigger_epoch"),
    ];
    assert_eq!(events, expected);
}

// ---------------------------------------------------------------------------------------------
// Where they do not apply.

#[callback(on = before_step)]
fn cancel_step_before_the_step() -> Flow {
    Flow::CancelStep
}

#[callback(on = after_epoch)]
fn cancel_train_after_the_epoch() -> Flow {
    Flow::CancelTrain
}

#[callback(on = after_step)]
fn cancel_valid_while_training() -> Flow {
    Flow::CancelValid
}

#[callback(on = after_validate)]
fn cancel_valid_after_the_pass() -> Flow {
    Flow::CancelValid
}

#[test]
fn fastai_cancels_where_they_cannot_apply_are_errors_naming_the_callback_the_event_and_where_they_apply() {
    let error = run_linear(CancelStepBeforeTheStep, 1, 2).map(|_| ()).unwrap_err().to_string();
    assert_eq!(
        error,
        "callback `CancelStepBeforeTheStep` failed in before_step: Flow::CancelStep was returned where the training loop cannot act on it (CancelStep applies in after_backward, between backward and the optimizer (fastai's before_step); to skip the whole batch use CancelBatch)"
    );
    let error = run_linear(CancelTrainAfterTheEpoch, 1, 2).map(|_| ()).unwrap_err().to_string();
    assert_eq!(
        error,
        "callback `CancelTrainAfterTheEpoch` failed in after_epoch: Flow::CancelTrain was returned where the training loop cannot act on it (CancelTrain applies from before_epoch to the last trigger_step of the epoch, while it trains; after_epoch and later, its training is over)"
    );
    let error = run_linear(CancelValidWhileTraining, 1, 2).map(|_| ()).unwrap_err().to_string();
    assert_eq!(
        error,
        "callback `CancelValidWhileTraining` failed in after_step: Flow::CancelValid was returned where the training loop cannot act on it (CancelValid applies in before_validate and during the validation pass (its batch events, or validate), not in after_validate nor outside a pass)"
    );
    let log: Log = Arc::default();
    let error =
        run_linear((Validator(log), CancelValidAfterThePass), 1, 2).map(|_| ()).unwrap_err().to_string();
    assert!(
        error.starts_with("callback `CancelValidAfterThePass` failed in after_validate: Flow::CancelValid was returned where the training loop cannot act on it"),
        "{error}"
    );
}

// ---------------------------------------------------------------------------------------------
// ShortEpochCallback.

/// Counts the training steps of each epoch.
#[derive(Default)]
struct StepsPerEpoch(Arc<Mutex<Vec<u64>>>);

impl<M> Callback<M> for StepsPerEpoch {
    fn after_epoch(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        self.0.lock().unwrap().push(ctx.local_step());
        Ok(())
    }
}

/// fastai's rule: after the batch of 0-based index `iter` of an epoch of `n_iter` batches,
/// training goes on while `iter / n_iter < pct`: the batches run are those up to the first index
/// that reaches `pct`, included.
fn fastai_short_epoch_batches(pct: f64, n_iter: u64) -> u64 {
    (0..n_iter).find(|&iter| iter as f64 / n_iter as f64 >= pct).map_or(n_iter, |iter| iter + 1)
}

#[test]
fn fastai_short_epoch_trains_until_the_iteration_reaches_pct_of_the_epoch() {
    // By hand: 10 batches; 0.25 stops after index 3 (0.3), 0.2 after index 2 (0.2 reaches it),
    // the default 0.01 after index 1, 0 after index 0, 1 never (every batch).
    for (pct, by_hand) in [(0.25, 4), (0.2, 3), (0.01, 2), (0.0, 1), (1.0, 10)] {
        assert_eq!(fastai_short_epoch_batches(pct, 10), by_hand, "pct {pct}");
        let counts = StepsPerEpoch::default();
        let seen = counts.0.clone();
        let short = if pct == 0.01 { ShortEpochCallback::new() } else { ShortEpochCallback::new().pct(pct) };
        let report = run_linear((short, counts), 2, 10).unwrap();
        assert_eq!(*seen.lock().unwrap(), [by_hand, by_hand], "pct {pct}");
        assert_eq!(report.counters.global_step(), 2 * by_hand);
    }
}

/// A validation set of `batches` batches whose cost, put as `validation_cost`, is the batch's
/// index: its mean says how many batches the pass ran.
fn indexed_validation(
    batches: usize,
) -> InferenceRunner<Vec<Tensor<1>>, impl Fn(&Linear, Tensor<1>, &mut Outputs) -> usize> {
    let device = burn_stoker::device::cpu();
    let data: Vec<Tensor<1>> = (0..batches).map(|i| Tensor::<1>::from_floats([i as f32], &device)).collect();
    InferenceRunner::new(data, |_model: &Linear, index: Tensor<1>, out: &mut Outputs| {
        out.put("cost", index);
        1usize
    })
    .with(ScalarStats::new(["cost"]))
}

/// The validation cost put by the pass, read in `after_validate`.
#[derive(Default)]
struct ValidationCost(Arc<Mutex<Option<f64>>>);

impl<M> Callback<M> for ValidationCost {
    fn after_validate(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        *self.0.lock().unwrap() = ctx.monitors_ref().latest("validation_cost");
        Ok(())
    }
}

#[test]
fn fastai_short_epoch_with_short_valid_cuts_the_validation_pass_by_the_same_rule() {
    for (short_valid, by_hand) in [(true, fastai_short_epoch_batches(0.25, 8)), (false, 8)] {
        let runner = indexed_validation(8);
        let counts = runner.counts();
        let log: Log = Arc::default();
        let short = ShortEpochCallback::new().pct(0.25).short_valid(short_valid);
        let cost = ValidationCost::default();
        let mean = cost.0.clone();
        run_linear((short, runner, Recorder::new("R", &log), cost), 1, 4).unwrap();
        assert_eq!(counts.batches(), by_hand, "short_valid {short_valid}");
        // The mean of the indices 0..by_hand, over the batches the pass ran.
        let mean = mean.lock().unwrap().expect("validation_cost put");
        assert_eq!(mean, (by_hand - 1) as f64 / 2.0, "short_valid {short_valid}");
        let cancelled = take(&log).iter().any(|l| l.starts_with("R:after_cancel_validate"));
        assert_eq!(cancelled, short_valid, "fastai's CancelValidException, after_cancel_validate");
    }
    assert_eq!(fastai_short_epoch_batches(0.25, 8), 3);
}

#[test]
fn fastai_short_epoch_pct_outside_zero_to_one_is_an_error_at_setup() {
    let error = run_linear(ShortEpochCallback::new().pct(1.5), 1, 2).map(|_| ()).unwrap_err().to_string();
    assert_eq!(
        error,
        "callback `ShortEpochCallback` failed in setup: ShortEpochCallback: pct must be between 0 and 1, got 1.5"
    );
}

/// fastai learner.py, Recorder (`after_cancel_validate` sets `cancel_valid`, and `_valid_mets`
/// is then empty): a pass `ShortEpochCallback(short_valid=True)` cut records no validation loss
/// for its epoch; a whole pass does.
#[test]
fn fastai_recorder_records_no_validation_loss_for_a_pass_short_epoch_cut() {
    for short_valid in [true, false] {
        let mut recorder = burn_stoker::track::Recorder::new().valid_loss("validation_cost").plots(false);
        let short = ShortEpochCallback::new().pct(0.25).short_valid(short_valid);
        run_linear((short, indexed_validation(8), &mut recorder), 2, 4).unwrap();
        let valid: Vec<Option<f64>> = recorder.values().iter().map(|v| v.valid_loss).collect();
        let whole = Some(3.5); // the mean of the indices 0..8
        let expected = if short_valid { vec![None, None] } else { vec![whole, whole] };
        assert_eq!(valid, expected, "short_valid {short_valid}");
    }
}
