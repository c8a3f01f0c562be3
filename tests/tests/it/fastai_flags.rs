//! fastai's last pieces of the loop: `CancelBackwardException` and `after_cancel_backward`
//! (fastai/learner.py, `Learner._do_grad_opt`: `self._with_events(self._backward, 'backward',
//! CancelBackwardException)`, then `_step`, then `opt.zero_grad()`), a callback's `run_train` /
//! `run_valid` (fastai/callback/core.py, `Callback.__call__`: an event of `_inner_loop` is not
//! called while training when `run_train` is false, nor while validating when `run_valid` is
//! false), and `after_create` (fastai/learner.py, `Learner.__init__` ends with
//! `self("after_create")`), stoker's `setup`.

use std::cell::RefCell;
use std::sync::{Arc, Mutex};

use burn::module::{Module, ModuleVisitor, Param};
use burn::nn::Linear;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{GradientsParams, SgdConfig};
use burn::tensor::Tensor;
use burn_stoker::Error;
use burn_stoker::callback::{CallbackExt, Cancel, StepBatch, StepEvents, StepGradients, StepLoss};
use burn_stoker::fetch::Fetch;
use burn_stoker::inference::{InferenceRunner, ScalarStats};
use burn_stoker::prelude::*;
use stoker_tests::{mse, scratch_dir, tiny_data, tiny_model, weights};

type Log = Arc<Mutex<Vec<String>>>;
/// The weights after each batch, as `weights` reads them.
type Weights = Arc<Mutex<Vec<Vec<Vec<f32>>>>>;

fn lines(log: &Log) -> Vec<String> {
    log.lock().unwrap().clone()
}

fn train<K, C: Callbacks<Linear, K>>(
    callbacks: C,
    optimizer: SgdConfig,
    epochs: u64,
    validate: bool,
) -> burn_stoker::Result<TrainReport<Linear>> {
    train_from(tiny_model(&burn_stoker::device::cpu()), callbacks, optimizer, epochs, validate)
}

/// [`train`] from the weights `start`.
fn train_from<K, C: Callbacks<Linear, K>>(
    start: Linear,
    callbacks: C,
    optimizer: SgdConfig,
    epochs: u64,
    validate: bool,
) -> burn_stoker::Result<TrainReport<Linear>> {
    let device = burn_stoker::device::cpu();
    let runner = validate.then(|| {
        InferenceRunner::new(
            tiny_data(2, &device),
            |model: &Linear, batch: (Tensor<2>, Tensor<2>), out: &mut Outputs| {
                out.put("cost", mse(model, batch));
                4usize
            },
        )
        .with(ScalarStats::new(["cost"]))
    });
    Trainer::new(start, optimizer.init(), tiny_data(4, &device))
        .max_epoch(epochs)
        .learning_rate(0.1)
        .log_dir(scratch_dir("fastai-flags"))
        .default_callbacks(DefaultCallbacks::none())
        .callbacks((callbacks, runner))
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .map_err(Error::from)
}

// ---------------------------------------------------------------------------------------------
// CancelBackward.

/// Cancels the backward pass of the step whose `global_step` (before it counts) is `at`.
struct CancelBackwardAt(u64);

impl Callback<Linear> for CancelBackwardAt {
    fn chief_only(&self) -> bool {
        false
    }
    fn step_events(&self) -> StepEvents {
        StepEvents::LOSS
    }
    fn before_backward(
        &mut self,
        ctx: &mut Context<'_, Linear>,
        _loss: &StepLoss<'_>,
    ) -> burn_stoker::Result<()> {
        if ctx.global_step() == self.0 { ctx.cancel(Cancel::Backward) } else { Ok(()) }
    }
}

/// Whether every gradient `grads` holds for `model`'s parameters is zero, and how many there are.
fn zero_gradients(model: &Linear, grads: &GradientsParams) -> (bool, usize) {
    struct Zeros<'a>(&'a GradientsParams, bool, usize);
    impl ModuleVisitor for Zeros<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            if let Some(grad) = self.0.get::<D>(param.id) {
                self.2 += 1;
                self.1 &= grad.into_data().iter::<f32>().all(|v| v == 0.0);
            }
        }
    }
    let mut zeros = Zeros(grads, true, 0);
    model.visit(&mut zeros);
    (zeros.1, zeros.2)
}

/// Records the events of the backward pass and of the batch, and the weights after each batch.
struct Watch {
    log: Log,
    weights: Weights,
}

impl Callback<Linear> for Watch {
    fn chief_only(&self) -> bool {
        false
    }
    fn step_events(&self) -> StepEvents {
        StepEvents::LOSS.and(StepEvents::GRADIENTS)
    }
    fn before_train(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.weights.lock().unwrap().push(weights(ctx.model()));
        Ok(())
    }
    fn before_backward(
        &mut self,
        ctx: &mut Context<'_, Linear>,
        _loss: &StepLoss<'_>,
    ) -> burn_stoker::Result<()> {
        self.log.lock().unwrap().push(format!("before_backward g{}", ctx.global_step()));
        Ok(())
    }
    fn after_cancel_backward(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.log.lock().unwrap().push(format!("after_cancel_backward g{}", ctx.global_step()));
        Ok(())
    }
    fn after_backward(
        &mut self,
        ctx: &mut Context<'_, Linear>,
        grads: &StepGradients,
    ) -> burn_stoker::Result<()> {
        let model = ctx.model().clone();
        let mut seen = (false, 0);
        grads.update(|g| {
            seen = zero_gradients(&model, &g);
            g
        });
        let what = if seen.0 { "zeros" } else { "gradients" };
        self.log.lock().unwrap().push(format!("after_backward g{} {what} of {}", ctx.global_step(), seen.1));
        Ok(())
    }
    fn after_step(
        &mut self,
        ctx: &mut Context<'_, Linear>,
        _values: &Fetched<'_>,
    ) -> burn_stoker::Result<()> {
        self.log.lock().unwrap().push(format!("after_step g{}", ctx.global_step()));
        Ok(())
    }
    fn after_batch(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.weights.lock().unwrap().push(weights(ctx.model()));
        self.log.lock().unwrap().push(format!("after_batch g{}", ctx.global_step()));
        Ok(())
    }
}

fn watch() -> (Watch, Log, Weights) {
    let (log, weights): (Log, _) = (Arc::default(), Arc::default());
    (Watch { log: log.clone(), weights: Arc::clone(&weights) }, log, weights)
}

/// Each parameter's change from weights `a` to weights `b`, flattened.
fn delta(a: &[Vec<f32>], b: &[Vec<f32>]) -> Vec<f32> {
    a.iter().flatten().zip(b.iter().flatten()).map(|(x, y)| y - x).collect()
}

/// fastai/learner.py `_do_grad_opt` and `_with_events`: a `CancelBackwardException` from
/// `before_backward` skips `_backward`, `after_cancel_backward` then `after_backward` follow,
/// and `_step` still runs on what `.grad` holds (zeros after the last `zero_grad`): with plain
/// SGD the weights stay, with momentum they move by the momentum alone (`Δw = μ Δw_prev`).
#[test]
fn fastai_cancel_backward_skips_backward_and_the_optimizer_steps_on_zero_gradients() {
    let (watcher, log, w) = watch();
    let report = train((CancelBackwardAt(2), watcher), SgdConfig::new(), 1, false).unwrap();
    assert_eq!(report.counters.global_step(), 4, "the cancelled step counts");
    let expected: Vec<String> = [
        "before_backward g0",
        "after_backward g0 gradients of 2",
        "after_step g1",
        "after_batch g1",
        "before_backward g1",
        "after_backward g1 gradients of 2",
        "after_step g2",
        "after_batch g2",
        // The canceller comes first: the watcher misses before_backward, then every callback
        // receives after_cancel_backward, and the optimizer's gradients reach after_backward.
        "after_cancel_backward g2",
        "after_backward g2 zeros of 2",
        "after_step g3",
        "after_batch g3",
        "before_backward g3",
        "after_backward g3 gradients of 2",
        "after_step g4",
        "after_batch g4",
    ]
    .map(String::from)
    .to_vec();
    assert_eq!(lines(&log), expected);
    let w = w.lock().unwrap();
    assert_eq!(w[3], w[2], "plain SGD on zero gradients leaves the weights");
    assert_ne!(w[4], w[3], "the next step trains");

    let (watcher, _, w) = watch();
    let momentum = SgdConfig::new().with_momentum(Some(MomentumConfig::new().with_momentum(0.9)));
    train((CancelBackwardAt(2), watcher), momentum, 1, false).unwrap();
    let w = w.lock().unwrap();
    let (before, cancelled) = (delta(&w[1], &w[2]), delta(&w[2], &w[3]));
    assert!(before.iter().any(|d| d.abs() > 1e-3), "the step before moved: {before:?}");
    for (d, prev) in cancelled.iter().zip(&before) {
        assert!((d - 0.9 * prev).abs() < 1e-5, "momentum alone: {cancelled:?} against 0.9 × {before:?}");
    }
}

/// `CancelBackward` after a `CancelBatch` from `after_backward` (fastai's
/// `GradientAccumulation`, which skips `_step` and `zero_grad`): the step after it steps on the
/// kept gradients, as fastai's `.grad` still holds them.
#[test]
fn fastai_cancel_backward_steps_on_the_gradients_a_cancel_batch_kept() {
    /// Cancels the batch of step 1 from `after_backward`, keeping its gradients.
    struct KeepStepOne;
    impl Callback<Linear> for KeepStepOne {
        fn chief_only(&self) -> bool {
            false
        }
        fn step_events(&self) -> StepEvents {
            StepEvents::GRADIENTS
        }
        fn after_backward(
            &mut self,
            ctx: &mut Context<'_, Linear>,
            _grads: &StepGradients,
        ) -> burn_stoker::Result<()> {
            if ctx.global_step() == 1 { ctx.cancel(Cancel::Batch) } else { Ok(()) }
        }
    }
    let start = tiny_model(&burn_stoker::device::cpu());
    let (watcher, log, w) = watch();
    train_from(start.clone(), (CancelBackwardAt(2), KeepStepOne, watcher), SgdConfig::new(), 1, false)
        .unwrap();
    let log = lines(&log);
    assert!(log.contains(&"after_backward g2 gradients of 2".to_string()), "{log:?}");
    let w = w.lock().unwrap();
    assert_eq!(w[2], w[1], "step 1's batch was cancelled before its optimizer step");
    assert_ne!(w[3], w[2], "step 2 steps on the gradients step 1 kept");

    // The same as the plain step 1 the cancel postponed: the weights after it, one step late.
    let (watcher, _, plain) = watch();
    train_from(start, (CancelBackwardAt(u64::MAX), watcher), SgdConfig::new(), 1, false).unwrap();
    let plain = plain.lock().unwrap();
    assert_eq!(w[3], plain[2], "step 1's gradients, applied at step 2");
}

/// A `CancelBackward` from an event outside `before_backward` is an error saying where it
/// applies (fastai's exception would escape its batch).
#[test]
fn fastai_cancel_backward_elsewhere_is_an_error_naming_where_it_applies() {
    #[callback(on = before_step)]
    fn cancel_backward_early(ctx: &mut Context<'_, Linear>) -> Flow {
        if ctx.global_step() == 1 { Flow::CancelBackward } else { Flow::Continue }
    }
    let error = train(CancelBackwardEarly, SgdConfig::new(), 1, false).unwrap_err().to_string();
    assert!(error.contains("cancel_backward_early") || error.contains("CancelBackwardEarly"), "{error}");
    assert!(error.contains("CancelBackward applies in before_backward"), "{error}");
}

// ---------------------------------------------------------------------------------------------
// run_train / run_valid.

/// Records every event's name, with `train` or `valid` for a batch event, and whether it takes
/// training and validation batches.
struct Batches {
    log: Log,
    train: bool,
    valid: bool,
    fetches: Vec<Fetch>,
}

impl Batches {
    fn new(train: bool, valid: bool) -> (Self, Log) {
        let log: Log = Arc::default();
        (Batches { log: log.clone(), train, valid, fetches: Vec::new() }, log)
    }
    fn push(&self, ctx: &Context<'_, Linear>, event: &str) -> burn_stoker::Result<()> {
        let phase = if ctx.training() { "train" } else { "valid" };
        self.log.lock().unwrap().push(format!("{event} {phase}"));
        Ok(())
    }
}

macro_rules! push_events {
    ($($event:ident),*) => {
        $(fn $event(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
            self.push(ctx, stringify!($event))
        })*
    };
}

impl Callback<Linear> for Batches {
    fn step_events(&self) -> StepEvents {
        StepEvents::BATCH
    }
    fn takes_training_batches(&self) -> bool {
        self.train
    }
    fn takes_validation_batches(&self) -> bool {
        self.valid
    }
    fn fetches(&self) -> &[Fetch] {
        &self.fetches
    }
    push_events!(
        before_epoch,
        before_step,
        after_batch,
        trigger_step,
        trigger_epoch,
        before_validate,
        after_validate
    );
    fn before_batch(
        &mut self,
        ctx: &mut Context<'_, Linear>,
        _batch: &StepBatch<'_>,
    ) -> burn_stoker::Result<()> {
        self.push(ctx, "before_batch")
    }
    fn after_step(
        &mut self,
        ctx: &mut Context<'_, Linear>,
        _values: &Fetched<'_>,
    ) -> burn_stoker::Result<()> {
        self.push(ctx, "after_step")
    }
}

fn count(log: &[String], line: &str) -> usize {
    log.iter().filter(|l| *l == line).count()
}

/// fastai/callback/core.py `Callback.__call__`: with `run_train = False` no event of
/// `_inner_loop` reaches the callback while training; the others do, and validation's batches
/// do. Beside it, a callback that takes both sees each training batch's.
#[test]
fn fastai_run_train_false_takes_no_event_of_a_training_batch() {
    let (off, off_log) = Batches::new(false, true);
    let (on, on_log) = Batches::new(true, true);
    train((off.named("off"), on.named("on")), SgdConfig::new(), 2, true).unwrap();
    let (off, on) = (lines(&off_log), lines(&on_log));
    for event in ["before_step", "before_batch", "after_step", "after_batch"] {
        assert_eq!(count(&off, &format!("{event} train")), 0, "{event} in training: {off:?}");
        assert_eq!(count(&on, &format!("{event} train")), 8, "{event} in training: {on:?}");
    }
    // Validation's batches (2 per pass, a pass per epoch), and the events between steps.
    for log in [&off, &on] {
        assert_eq!(count(log, "before_batch valid"), 4, "{log:?}");
        assert_eq!(count(log, "after_batch valid"), 4, "{log:?}");
        assert_eq!(count(log, "trigger_step train"), 8, "{log:?}");
        assert_eq!(log.iter().filter(|l| l.starts_with("before_epoch")).count(), 2, "{log:?}");
        assert_eq!(count(log, "before_validate valid"), 2, "{log:?}");
        assert_eq!(count(log, "after_validate valid"), 2, "{log:?}");
    }
}

/// fastai/callback/core.py `Callback.__call__`: with `run_valid = False` no batch event reaches
/// the callback during validation (fastai's `MixUp`, `RNNRegularizer`), while `before_validate`
/// and `after_validate`, outside `_inner_loop`, still do.
#[test]
fn fastai_run_valid_false_takes_no_batch_event_of_a_validation_pass() {
    let (off, off_log) = Batches::new(true, false);
    let (on, on_log) = Batches::new(true, true);
    train((on.named("on"), off.named("off")), SgdConfig::new(), 2, true).unwrap();
    let (off, on) = (lines(&off_log), lines(&on_log));
    for event in ["before_batch", "after_batch"] {
        assert_eq!(count(&off, &format!("{event} valid")), 0, "{event} in validation: {off:?}");
        assert_eq!(count(&on, &format!("{event} valid")), 4, "{event} in validation: {on:?}");
        assert_eq!(count(&off, &format!("{event} train")), 8, "{event} in training: {off:?}");
    }
    assert_eq!(count(&off, "before_validate valid"), 2, "{off:?}");
    assert_eq!(count(&off, "after_validate valid"), 2, "{off:?}");
}

/// A callback that takes no training batch but declares fetches is refused at setup: its
/// values would never be handed over.
#[test]
fn a_callback_without_training_batches_may_not_fetch() {
    let (mut off, _) = Batches::new(false, true);
    off.fetches = vec![Fetch::host("loss")];
    let error = train(off, SgdConfig::new(), 1, false).unwrap_err().to_string();
    assert!(error.contains("takes no event of a training step"), "{error}");
}

// ---------------------------------------------------------------------------------------------
// after_create.

thread_local! {
    static CREATED: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// fastai's `after_create`, bound by that name: stoker's `setup`.
#[callback(on = after_create)]
fn note_created(ctx: &mut Context<'_, Linear>) {
    let params = ctx.model().num_params();
    CREATED.with(|log| log.borrow_mut().push(format!("after_create params={params} g{}", ctx.global_step())));
}

#[callback(on = before_train)]
fn note_before_train(ctx: &mut Context<'_, Linear>) {
    CREATED.with(|log| log.borrow_mut().push(format!("before_train g{}", ctx.global_step())));
}

/// fastai/learner.py `Learner.__init__`: `after_create` once, with the model there, before any
/// `before_fit` (stoker's `before_train`); a trainer trains once, so it is `setup`.
#[test]
fn fastai_after_create_is_setup_once_before_training() {
    CREATED.with(|log| log.borrow_mut().clear());
    train((NoteBeforeTrain, NoteCreated), SgdConfig::new(), 2, false).unwrap();
    let log = CREATED.with(|log| log.borrow().clone());
    assert_eq!(log, vec!["after_create params=3 g0".to_string(), "before_train g0".to_string()]);
}
