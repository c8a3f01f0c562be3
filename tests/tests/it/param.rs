//! Hyper-parameters and their setters: every setter against hand-computed learning rates — the
//! values the training step actually read at each step — including resumed runs, which must use
//! the same values as uninterrupted ones.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use burn::lr_scheduler::cosine::CosineAnnealingLrSchedulerConfig;
use burn::lr_scheduler::exponential::ExponentialLrSchedulerConfig;
use burn::lr_scheduler::linear::LinearLrSchedulerConfig;
use burn::lr_scheduler::noam::NoamLrSchedulerConfig;
use burn::lr_scheduler::step::StepLrSchedulerConfig;
use burn::lr_scheduler::{LrScheduler, LrSchedulerRecord};
use burn::nn::Linear;
use burn::optim::SgdConfig;
use burn::tensor::Tensor;
use burn_stoker::param::{HyperParamSetter, SetterCallback};
use burn_stoker::prelude::*;
use burn_stoker::state::{Direction, HyperParams};
use burn_stoker::{ConfigError, Error, saver::Checkpoint};
use stoker_tests::{StopAt, mse, scratch_dir, tiny_data, tiny_model};

type Batch = (Tensor<2>, Tensor<2>);

/// A trainer of the tiny model with plain SGD, `batches` steps per epoch, no default callbacks.
fn trainer(dir: &Path, epochs: u64, batches: usize) -> Trainer<Linear, Vec<Batch>> {
    let device = burn_stoker::device::cpu();
    Trainer::new(tiny_model(&device), SgdConfig::new().init(), tiny_data(batches, &device))
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .max_epoch(epochs)
        .log_dir(dir)
}

/// `(global step, value)` pairs.
type Used = Vec<(u64, f64)>;

/// Train with `callbacks`; return the report and, for each step, `(step number, value of
/// `param` the step read)`.
fn try_record<K, C: Callbacks<Linear, K>>(
    trainer: Trainer<Linear, Vec<Batch>>,
    callbacks: C,
    param: &'static str,
) -> burn_stoker::Result<(TrainReport<Linear>, Used)> {
    let used = Arc::new(Mutex::new(Vec::new()));
    let seen = used.clone();
    let report =
        trainer.callbacks(callbacks).train(move |model: &Linear, batch: Batch, step: &mut Step<'_>| {
            let value = step.hyper(param).expect("the parameter is registered");
            seen.lock().unwrap().push((step.counters().global_step() + 1, value));
            mse(model, batch)
        })?;
    let used = used.lock().unwrap().clone();
    Ok((report, used))
}

fn record<K, C: Callbacks<Linear, K>>(
    trainer: Trainer<Linear, Vec<Batch>>,
    callbacks: C,
    param: &'static str,
) -> Vec<(u64, f64)> {
    try_record(trainer, callbacks, param).unwrap().1
}

/// `used` holds steps `first, first + 1, ...` with `expected` values (within 1e-12).
#[track_caller]
fn assert_used_from(used: &[(u64, f64)], first: u64, expected: &[f64]) {
    let steps: Vec<u64> = used.iter().map(|&(s, _)| s).collect();
    let expected_steps: Vec<u64> = (first..first + expected.len() as u64).collect();
    assert_eq!(steps, expected_steps, "steps; values: {used:?}");
    let close = used.iter().zip(expected).all(|(&(_, u), &e)| (u - e).abs() <= 1e-12);
    assert!(close, "used {:?}\nexpected {expected:?}", used.iter().map(|&(_, v)| v).collect::<Vec<_>>());
}

#[track_caller]
fn assert_used(used: &[(u64, f64)], expected: &[f64]) {
    assert_used_from(used, 1, expected);
}

/// Puts `values[epoch - 1]` as scalar `name` at the end of each epoch (`None`: nothing).
struct PutStat {
    name: &'static str,
    values: Vec<Option<f64>>,
}

impl PutStat {
    fn every_epoch(name: &'static str, values: &[f64]) -> Self {
        PutStat { name, values: values.iter().map(|&v| Some(v)).collect() }
    }
}

impl Callback<Linear> for PutStat {
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        if let Some(Some(v)) = self.values.get(ctx.epoch_num() as usize - 1) {
            ctx.monitors().put_scalar(self.name, *v);
        }
        Ok(())
    }
}

/// A checkpoint after every step.
fn saver() -> PeriodicTrigger<ModelSaver> {
    PeriodicTrigger::new(ModelSaver::new(1000)).every_k_steps(1)
}

/// Run `make()`'s callbacks straight, then stopped after step `stop` and resumed from the
/// directory with fresh callbacks; return both runs' `(step, value)`s: the resumed run's
/// start at step `stop + 1`.
fn straight_and_resumed<K, C: Callbacks<Linear, K>>(
    epochs: u64,
    batches: usize,
    stop: u64,
    param: &'static str,
    configure: impl Fn(Trainer<Linear, Vec<Batch>>) -> Trainer<Linear, Vec<Batch>>,
    make: impl Fn() -> C,
) -> (Used, Used) {
    let straight_dir = scratch_dir("param-straight");
    let straight = record(configure(trainer(&straight_dir, epochs, batches)), (make(), saver()), param);
    let dir = scratch_dir("param-split");
    let (report, first) =
        try_record(configure(trainer(&dir, epochs, batches)), (make(), saver(), StopAt(stop)), param)
            .unwrap();
    assert!(matches!(report.outcome, Outcome::Stopped(_)), "{:?}", report.outcome);
    assert_eq!(first, straight[..stop as usize], "the first part is the straight run");
    let resumed =
        record(configure(trainer(&dir, epochs, batches)).auto_resume(true), (make(), saver()), param);
    (straight, resumed)
}

#[track_caller]
fn assert_resumed_equal(straight: &[(u64, f64)], resumed: &[(u64, f64)], stop: u64) {
    assert_eq!(resumed.first().map(|&(s, _)| s), Some(stop + 1), "{resumed:?}");
    // Bit for bit: the same computation.
    assert_eq!(resumed, &straight[stop as usize..], "a resumed run uses the straight run's values");
}

// ---------------------------------------------------------------------------------------------
// Hyper-parameters held elsewhere (tensorpack's ObjAttrParam)

fn atomic_f64(value: f64) -> Arc<AtomicU64> {
    Arc::new(AtomicU64::new(value.to_bits()))
}

fn load(a: &AtomicU64) -> f64 {
    f64::from_bits(a.load(Ordering::Relaxed))
}

#[test]
fn a_getter_and_setter_parameter_is_read_set_listed_and_compared() {
    let dropout = atomic_f64(0.5);
    let mut hyper = HyperParams::new(1e-3);
    hyper.register("weight_decay", 1e-4);
    let (g, s) = (dropout.clone(), dropout.clone());
    hyper.register_fn("dropout", move || load(&g), move |v| s.store(v.to_bits(), Ordering::Relaxed));
    assert_eq!(hyper.names().collect::<Vec<_>>(), ["learning_rate", "weight_decay", "dropout"]);
    assert_eq!(hyper.get("dropout"), Some(0.5));
    assert!(hyper.is_external("dropout") && !hyper.is_external("weight_decay"));

    // Reads go to the object: a change made elsewhere is seen.
    dropout.store(0.3f64.to_bits(), Ordering::Relaxed);
    assert_eq!(hyper.get("dropout"), Some(0.3));
    // Writes go to the object.
    hyper.set("dropout", 0.125).unwrap();
    assert_eq!(load(&dropout), 0.125);
    // 0.0 is a value; infinity is not.
    hyper.set("dropout", 0.0).unwrap();
    assert_eq!(load(&dropout), 0.0);
    let error = hyper.set("dropout", f64::INFINITY).unwrap_err();
    assert!(matches!(error, Error::Config(ConfigError::HyperParam(_))), "{error:?}");
    assert_eq!(load(&dropout), 0.0, "a refused value does not reach the object");
    let error = hyper.set("dropuot", 0.1).unwrap_err();
    assert_eq!(
        error.to_string(),
        "unknown hyper-parameter `dropuot`; known: `learning_rate`, `weight_decay`, `dropout`"
    );

    // A clone shares the accessor and compares equal; a plain value of the same name does not.
    let copy = hyper.clone();
    assert_eq!(copy, hyper);
    let mut plain = hyper.clone();
    plain.register("dropout", 0.0);
    assert_ne!(plain, hyper);
    assert!(!plain.is_external("dropout"));
    assert_eq!(
        format!("{hyper:?}"),
        "HyperParams { learning_rate: 0.001, weight_decay: 0.0001, dropout: 0.0 (getter and setter) }"
    );
    // "learning_rate" registered as a plain value sets the built-in rate, listed once.
    hyper.register("learning_rate", 0.5);
    assert_eq!(hyper.learning_rate(), 0.5);
    assert_eq!(hyper.names().filter(|&n| n == "learning_rate").count(), 1);

    // A SharedParam.
    let shared = SharedParam::new(2.0);
    hyper.register_shared("strength", &shared);
    hyper.set("strength", 3.0).unwrap();
    assert_eq!(shared.get(), 3.0);
    shared.clone().set(4.0);
    assert_eq!(hyper.get("strength"), Some(4.0));
}

#[test]
#[should_panic(expected = "`learning_rate` is built in")]
fn the_learning_rate_cannot_be_a_getter_and_setter() {
    HyperParams::new(1e-3).register_fn("learning_rate", || 0.1, |_| {});
}

/// When, the value of `dropout`, and the names of every hyper-parameter.
type DropoutSeen = (&'static str, Option<f64>, Vec<String>);

/// Records, at setup and after every epoch, what the context says of `dropout`.
#[derive(Clone, Default)]
struct WatchDropout(Arc<Mutex<Vec<DropoutSeen>>>);

impl Callback<Linear> for WatchDropout {
    fn setup(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let names = ctx.hyper().names().map(String::from).collect();
        self.0.lock().unwrap().push(("setup", ctx.hyper().get("dropout"), names));
        Ok(())
    }
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.0.lock().unwrap().push(("epoch", ctx.hyper().get("dropout"), Vec::new()));
        Ok(())
    }
}

#[test]
fn a_getter_and_setter_parameter_is_driven_by_setters_read_by_the_step_saved_and_restored() {
    let dir = scratch_dir("param-external");
    let dropout = atomic_f64(0.5);
    let external = |trainer: Trainer<Linear, Vec<Batch>>, cell: &Arc<AtomicU64>| {
        let (g, s) = (cell.clone(), cell.clone());
        trainer.hyper_param_fn("dropout", move || load(&g), move |v| s.store(v.to_bits(), Ordering::Relaxed))
    };
    let watch = WatchDropout::default();
    let used = record(
        external(trainer(&dir, 3, 2), &dropout),
        (
            ScheduledHyperParamSetter::new("dropout", [(1, 0.25), (2, 0.125)]),
            watch.clone(),
            PeriodicTrigger::new(ModelSaver::new(10)).every_k_epochs(1),
        ),
        "dropout",
    );
    assert_used(&used, &[0.5, 0.5, 0.25, 0.25, 0.125, 0.125]);
    assert_eq!(load(&dropout), 0.125, "the setter wrote to the object");
    {
        let seen = watch.0.lock().unwrap();
        assert_eq!(seen[0].0, "setup");
        assert_eq!(seen[0].2, ["learning_rate", "dropout"]);
        let after_epochs: Vec<Option<f64>> = seen[1..].iter().map(|e| e.1).collect();
        assert_eq!(after_epochs, [Some(0.25), Some(0.125), Some(0.125)]);
    }
    let checkpoint = Checkpoint::latest(&dir).unwrap().unwrap();
    assert_eq!(checkpoint.hyper_param("dropout"), Some(0.125), "the checkpoint holds the object's value");
    let first = Checkpoint::read(dir.join("checkpoints/step-2")).unwrap();
    assert_eq!(first.hyper_param("dropout"), Some(0.25));

    // Resume (one more epoch) with a new object holding another value: the checkpoint's value
    // reaches the object before setup.
    let fresh = atomic_f64(0.9);
    let watch = WatchDropout::default();
    let used = record(
        external(trainer(&dir, 4, 2), &fresh).auto_resume(true),
        (watch.clone(), PeriodicTrigger::new(ModelSaver::new(10)).every_k_epochs(1)),
        "dropout",
    );
    assert_used_from(&used, 7, &[0.125, 0.125]);
    assert_eq!(watch.0.lock().unwrap()[0].1, Some(0.125), "restored before setup");
    assert_eq!(load(&fresh), 0.125);
}

#[test]
fn a_shared_parameter_is_what_the_step_sees() {
    let dir = scratch_dir("param-shared");
    let noise = SharedParam::new(1.0);
    let in_step = noise.clone();
    let used = Arc::new(Mutex::new(Vec::new()));
    let seen = used.clone();
    trainer(&dir, 4, 1)
        .hyper_param_shared("noise", &noise)
        .callbacks(ScheduledHyperParamSetter::new("noise", [(0, 0.75), (3, 0.0)]).linear())
        .train(move |model: &Linear, batch: Batch, _step: &mut Step<'_>| {
            seen.lock().unwrap().push(in_step.get());
            mse(model, batch)
        })
        .unwrap();
    assert_eq!(*used.lock().unwrap(), [0.75, 0.5, 0.25, 0.0]);
    assert_eq!(noise.get(), 0.0);
}

// ---------------------------------------------------------------------------------------------
// ScheduledHyperParamSetter

#[test]
fn a_schedule_sets_each_value_after_its_epoch_and_zero_is_a_value() {
    let dir = scratch_dir("param-scheduled");
    let schedule = ScheduledHyperParamSetter::new("learning_rate", [(0, 0.1), (2, 0.0), (3, 0.05)]);
    let used = record(trainer(&dir, 4, 2).learning_rate(0.9), schedule, "learning_rate");
    assert_used(&used, &[0.1, 0.1, 0.1, 0.1, 0.0, 0.0, 0.05, 0.05]);
}

#[test]
fn a_linear_schedule_interpolates_between_points_without_extrapolating() {
    let dir = scratch_dir("param-linear");
    // Before epoch 1 nothing is set (no point yet): the initial 0.9. After the last point the
    // last value stays.
    let schedule = ScheduledHyperParamSetter::new("learning_rate", [(1, 0.4), (5, 0.0)]).linear();
    let used = record(trainer(&dir, 7, 1).learning_rate(0.9), schedule, "learning_rate");
    assert_used(&used, &[0.9, 0.4, 0.3, 0.2, 0.1, 0.0, 0.0]);
}

#[test]
fn a_step_based_schedule_applies_after_its_steps() {
    let dir = scratch_dir("param-step-based");
    let exact =
        ScheduledHyperParamSetter::new("learning_rate", [(0, 0.5), (2, 0.25), (5, 0.125)]).step_based();
    let used = record(trainer(&dir, 2, 3), exact, "learning_rate");
    assert_used(&used, &[0.5, 0.5, 0.25, 0.25, 0.25, 0.125]);

    let dir = scratch_dir("param-step-linear");
    let linear = ScheduledHyperParamSetter::new("learning_rate", [(0, 0.0), (4, 0.4)]).step_based().linear();
    let used = record(trainer(&dir, 2, 3), linear, "learning_rate");
    assert_used(&used, &[0.0, 0.1, 0.2, 0.3, 0.4, 0.4]);
}

#[test]
fn set_at_beginning_sets_the_value_in_force_or_only_an_exact_point() {
    let schedule = || ScheduledHyperParamSetter::new("learning_rate", [(0, 0.1), (2, 0.01), (4, 0.001)]);
    // Starting at epoch 4 (epoch 3 is done): the value in force is 0.01 ...
    let dir = scratch_dir("param-beginning");
    let used = record(trainer(&dir, 5, 1).starting_epoch(4).learning_rate(0.5), schedule(), "learning_rate");
    assert_used(&used, &[0.01, 0.001]);
    // ... which is not set without set_at_beginning: 3 is not a point.
    let dir = scratch_dir("param-not-at-beginning");
    let used = record(
        trainer(&dir, 5, 1).starting_epoch(4).learning_rate(0.5),
        schedule().set_at_beginning(false),
        "learning_rate",
    );
    assert_used(&used, &[0.5, 0.001]);
    // A point at the current epoch is set anyway (tensorpack: `(0, v)` is set before epoch 1).
    let dir = scratch_dir("param-not-at-beginning-0");
    let used =
        record(trainer(&dir, 3, 1).learning_rate(0.5), schedule().set_at_beginning(false), "learning_rate");
    assert_used(&used, &[0.1, 0.1, 0.01]);
}

#[test]
fn a_resumed_run_follows_the_schedule_as_an_uninterrupted_one() {
    // Epoch-based linear learning rate and a step-based schedule of another parameter; stopped
    // at step 7, the second step of epoch 3 (3 steps per epoch).
    let make = || {
        (
            ScheduledHyperParamSetter::new("learning_rate", [(0, 0.4), (4, 0.0)]).linear(),
            ScheduledHyperParamSetter::new("momentum_like", [(0, 1.0), (5, 0.5), (8, 0.0)]).step_based(),
        )
    };
    let with_param = |t: Trainer<Linear, Vec<Batch>>| t.hyper_param("momentum_like", 3.0);
    let (straight, resumed) = straight_and_resumed(5, 3, 7, "learning_rate", with_param, make);
    assert_used(&straight, &[0.4, 0.4, 0.4, 0.3, 0.3, 0.3, 0.2, 0.2, 0.2, 0.1, 0.1, 0.1, 0.0, 0.0, 0.0]);
    assert_resumed_equal(&straight, &resumed, 7);

    let (straight, resumed) = straight_and_resumed(5, 3, 7, "momentum_like", with_param, make);
    let mut expected = vec![1.0; 5];
    expected.extend([0.5; 3]);
    expected.extend([0.0; 7]);
    assert_used(&straight, &expected);
    assert_resumed_equal(&straight, &resumed, 7);

    // At an epoch's end too (step 6 ends epoch 2).
    let (straight, resumed) = straight_and_resumed(5, 3, 6, "learning_rate", with_param, make);
    assert_resumed_equal(&straight, &resumed, 6);
}

#[test]
fn a_schedule_of_an_unknown_parameter_or_with_unordered_points_is_an_error() {
    let dir = scratch_dir("param-unknown");
    let error = try_record(
        trainer(&dir, 1, 1),
        ScheduledHyperParamSetter::new("lerning_rate", [(0, 0.1)]),
        "learning_rate",
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "callback `ScheduledHyperParamSetter(lerning_rate)` failed in setup: ScheduledHyperParamSetter sets `lerning_rate`, which is not a hyper-parameter of this trainer (known: `learning_rate`); register it with `Trainer::hyper_param`, `hyper_param_fn` or `hyper_param_shared`"
    );
    let error = try_record(
        trainer(&dir, 1, 1),
        ScheduledHyperParamSetter::new("learning_rate", [(3, 0.1), (1, 0.2)]),
        "learning_rate",
    )
    .unwrap_err();
    assert!(error.to_string().contains("the schedule's points must increase"), "{error}");
}

// ---------------------------------------------------------------------------------------------
// HyperParamSetterWithFunc

#[test]
fn a_function_of_the_epoch_sets_the_value_at_the_beginning_and_after_every_epoch() {
    let dir = scratch_dir("param-func");
    let calls = Arc::new(Mutex::new(Vec::new()));
    let log = calls.clone();
    // tensorpack's example: halve every two epochs (also at epoch 0, the beginning).
    let setter = HyperParamSetterWithFunc::new("learning_rate", move |e, lr| {
        log.lock().unwrap().push((e, lr));
        if e % 2 == 0 { lr * 0.5 } else { lr }
    });
    let used = record(trainer(&dir, 5, 2).learning_rate(0.8), setter, "learning_rate");
    assert_used(&used, &[0.4, 0.4, 0.4, 0.4, 0.2, 0.2, 0.2, 0.2, 0.1, 0.1]);
    assert_eq!(*calls.lock().unwrap(), [(0, 0.8), (1, 0.4), (2, 0.4), (3, 0.2), (4, 0.2), (5, 0.1)]);
}

#[test]
fn a_step_based_function_runs_after_every_step_with_the_global_step() {
    let dir = scratch_dir("param-func-steps");
    // new = old + global step: 0, 0 + 1, 1 + 2, 3 + 3, ...
    let setter = HyperParamSetterWithFunc::new("warmup", |s, old| old + s as f64).step_based();
    let used = record(trainer(&dir, 2, 3).hyper_param("warmup", 0.0), setter, "warmup");
    assert_used(&used, &[0.0, 1.0, 3.0, 6.0, 10.0, 15.0]);
}

#[test]
fn a_function_is_not_applied_twice_when_a_run_resumes() {
    let halve = || HyperParamSetterWithFunc::new("learning_rate", |_, lr| lr * 0.5);
    let lr = |t: Trainer<Linear, Vec<Batch>>| t.learning_rate(0.8);
    // At an epoch's end (step 4 ends epoch 2) ...
    let (straight, resumed) = straight_and_resumed(4, 2, 4, "learning_rate", lr, halve);
    assert_used(&straight, &[0.4, 0.4, 0.2, 0.2, 0.1, 0.1, 0.05, 0.05]);
    assert_resumed_equal(&straight, &resumed, 4);
    // ... and in the middle of one, step-based.
    let halve_steps = || HyperParamSetterWithFunc::new("learning_rate", |_, lr| lr * 0.5).step_based();
    let (straight, resumed) = straight_and_resumed(3, 2, 3, "learning_rate", lr, halve_steps);
    assert_used(&straight, &[0.4, 0.2, 0.1, 0.05, 0.025, 0.0125]);
    assert_resumed_equal(&straight, &resumed, 3);
}

#[test]
fn a_function_giving_a_value_that_is_not_finite_is_an_error() {
    let dir = scratch_dir("param-func-nan");
    let setter = HyperParamSetterWithFunc::new("learning_rate", |e, lr| if e == 1 { f64::NAN } else { lr });
    let error = try_record(trainer(&dir, 3, 1), setter, "learning_rate").unwrap_err();
    assert_eq!(
        error.to_string(),
        "callback `HyperParamSetterWithFunc(learning_rate)` failed in trigger_epoch: HyperParamSetterWithFunc(learning_rate): hyper-parameter `learning_rate` cannot be set to NaN"
    );
}

// ---------------------------------------------------------------------------------------------
// StatMonitorParamSetter

fn halve_when_flat(last_k: usize, threshold: f64) -> StatMonitorParamSetter<impl FnMut(f64) -> f64> {
    StatMonitorParamSetter::new("learning_rate", "val-error", |lr| lr * 0.5, threshold, last_k)
}

#[test]
fn a_statistic_that_stops_decreasing_changes_the_parameter() {
    let dir = scratch_dir("param-stat");
    // last_k = 3: windows [5,4,4] (fell), [4,4,4] (flat: halve, forget), [4], [4,4], [4,4,4]
    // (flat: halve), [3].
    let stat = PutStat::every_epoch("val-error", &[5.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 3.0]);
    let used =
        record(trainer(&dir, 8, 1).learning_rate(1.0), (stat, halve_when_flat(3, 0.0)), "learning_rate");
    assert_used(&used, &[1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.25]);
}

#[test]
fn a_statistic_must_fall_by_more_than_the_threshold() {
    let dir = scratch_dir("param-stat-threshold");
    // last_k = 2, threshold 0.5: [5, 4.6] fell by 0.4 only: halve; [4.0, 3.9]: halve; [3.8].
    let stat = PutStat::every_epoch("val-error", &[5.0, 4.6, 4.0, 3.9, 3.8]);
    let used =
        record(trainer(&dir, 5, 1).learning_rate(1.0), (stat, halve_when_flat(2, 0.5)), "learning_rate");
    assert_used(&used, &[1.0, 1.0, 0.5, 0.5, 0.25]);
}

#[test]
fn reversed_a_statistic_that_stops_increasing_changes_the_parameter() {
    let dir = scratch_dir("param-stat-reverse");
    // [0.5, 0.6] rose; [0.6, 0.6] did not: halve; [0.6].
    let stat = PutStat::every_epoch("accuracy", &[0.5, 0.6, 0.6, 0.6]);
    let setter =
        StatMonitorParamSetter::new("learning_rate", "accuracy", |lr| lr * 0.5, 0.0, 2).reverse(true);
    let used = record(trainer(&dir, 4, 1).learning_rate(1.0), (stat, setter), "learning_rate");
    assert_used(&used, &[1.0, 1.0, 1.0, 0.5]);
}

#[test]
fn a_statistic_put_less_often_is_observed_once_per_value() {
    let dir = scratch_dir("param-stat-stale");
    // Put after even epochs only. Epoch 1: nothing yet; 2: [5]; 3: no new value; 4: [5, 5]:
    // halve and forget; 5: the value of step 4 is observed again (as in tensorpack): [5]; 6:
    // [5, 5]: halve.
    let stat =
        PutStat { name: "val-error", values: vec![None, Some(5.0), None, Some(5.0), None, Some(5.0), None] };
    let used =
        record(trainer(&dir, 7, 1).learning_rate(1.0), (stat, halve_when_flat(2, 0.0)), "learning_rate");
    assert_used(&used, &[1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.25]);
}

#[test]
fn a_stat_monitor_setter_keeps_its_observations_across_a_resume() {
    // last_k = 3 over [5, 5, 4, 4, 4, 3]: flat only at [4, 4, 4] after epoch 5 — which needs
    // the observations of epochs 3 and 4, made before the stop after epoch 4 (step 8).
    let make =
        || (PutStat::every_epoch("val-error", &[5.0, 5.0, 4.0, 4.0, 4.0, 3.0]), halve_when_flat(3, 0.0));
    let lr = |t: Trainer<Linear, Vec<Batch>>| t.learning_rate(1.0);
    let (straight, resumed) = straight_and_resumed(6, 2, 8, "learning_rate", lr, make);
    assert_used(&straight, &[1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.5, 0.5]);
    assert_resumed_equal(&straight, &resumed, 8);
}

#[test]
fn a_stat_monitor_setter_saves_its_observations() {
    let dir = scratch_dir("param-stat-state");
    let stat = PutStat::every_epoch("val-error", &[5.0, 4.5]);
    let saver = PeriodicTrigger::new(ModelSaver::new(10)).every_k_epochs(1);
    record(trainer(&dir, 2, 1), (stat, halve_when_flat(3, 0.0), saver), "learning_rate");
    let checkpoint = Checkpoint::latest(&dir).unwrap().unwrap();
    let state = checkpoint.callback_state("StatMonitorParamSetter(learning_rate)").expect("a state");
    assert_eq!(*state, serde_json::json!({ "observed": [[1, 5.0], [2, 4.5]] }));
}

#[test]
fn a_stat_monitor_setter_needs_last_k() {
    let dir = scratch_dir("param-stat-k0");
    let error = try_record(trainer(&dir, 1, 1), halve_when_flat(0, 0.0), "learning_rate").unwrap_err();
    assert!(error.to_string().contains("last_k must be at least 1"), "{error}");
}

// ---------------------------------------------------------------------------------------------
// HumanHyperParamSetter

/// Writes `contents[epoch - 1]` to the log directory's `hyper.txt` at the end of each epoch,
/// before the setter reads it (`Some("")` after `None`... `None` deletes the file).
struct Person(Vec<Option<&'static str>>);

impl Callback<Linear> for Person {
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let path = ctx.log_dir().join("hyper.txt");
        match self.0.get(ctx.epoch_num() as usize - 1) {
            Some(Some(text)) => std::fs::write(&path, text).map_err(|e| Error::io(&path, e))?,
            Some(None) => std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))?,
            None => {}
        }
        Ok(())
    }
}

#[test]
fn a_person_sets_the_learning_rate_through_a_file_and_mistakes_leave_it_as_it_is() {
    let dir = scratch_dir("param-human");
    let person = Person(vec![
        // Comments, blank lines, spaces, another parameter's line.
        Some("# tuned by hand\n\n  learning_rate : 0.05\nmomentum:0.9\n"),
        // Not `name:value`.
        Some("learning_rate 0.01\n"),
        // Not a number.
        Some("learning_rate:fast\n"),
        // No file.
        None,
        // The last line decides.
        Some("learning_rate:0.2\nlearning_rate:0.02"),
        // Not finite.
        Some("learning_rate:inf\n"),
    ]);
    let used = record(
        trainer(&dir, 7, 1).learning_rate(0.1),
        (person, HumanHyperParamSetter::new("learning_rate")),
        "learning_rate",
    );
    assert_used(&used, &[0.1, 0.05, 0.05, 0.05, 0.05, 0.02, 0.02]);
}

#[test]
fn a_schedule_and_a_person_compose_an_edit_wins_until_the_next_point() {
    // tensorpack's ResNet list: a schedule and a human setter on the learning rate. The file
    // holds 0.1 (written at setup, written again unchanged after epochs 1 and 2) until the person
    // edits it after epoch 3; the schedule's points after epochs 2 and 4 apply all the same.
    let dir = scratch_dir("param-human-schedule");
    let unchanged = Some("learning_rate:0.1\n");
    let person = Person(vec![unchanged, unchanged, Some("learning_rate:0.03\n")]);
    let used = record(
        trainer(&dir, 6, 1).learning_rate(0.1),
        (
            ScheduledHyperParamSetter::new("learning_rate", [(0, 0.1), (2, 0.01), (4, 0.001)]),
            person,
            HumanHyperParamSetter::new("learning_rate"),
        ),
        "learning_rate",
    );
    assert_used(&used, &[0.1, 0.1, 0.01, 0.03, 0.001, 0.001]);
}

#[test]
fn the_file_is_created_with_the_current_value_and_missing_lines_are_added() {
    // Created when missing.
    let dir = scratch_dir("param-human-create");
    let used = record(
        trainer(&dir, 1, 1).learning_rate(0.1),
        HumanHyperParamSetter::new("learning_rate"),
        "learning_rate",
    );
    assert_used(&used, &[0.1]);
    assert_eq!(std::fs::read_to_string(dir.join("hyper.txt")).unwrap(), "learning_rate:0.1\n");

    // An existing file is read at the beginning; a second setter adds its line; a shared
    // parameter follows the file.
    let dir = scratch_dir("param-human-existing");
    std::fs::write(dir.join("hyper.txt"), "learning_rate:0.3").unwrap();
    let dropout = SharedParam::new(0.5);
    let person = Person(vec![Some("learning_rate:0.3\ndropout:0.25\n")]);
    let used = record(
        trainer(&dir, 2, 1).learning_rate(0.1).hyper_param_shared("dropout", &dropout),
        (person, HumanHyperParamSetter::new("learning_rate"), HumanHyperParamSetter::new("dropout")),
        "dropout",
    );
    assert_used(&used, &[0.5, 0.25]);
    assert_eq!(dropout.get(), 0.25);

    let dir = scratch_dir("param-human-existing-lr");
    std::fs::write(dir.join("hyper.txt"), "learning_rate:0.3").unwrap();
    let dropout = SharedParam::new(0.5);
    let used = record(
        trainer(&dir, 1, 1).learning_rate(0.1).hyper_param_shared("dropout", &dropout),
        (HumanHyperParamSetter::new("learning_rate"), HumanHyperParamSetter::new("dropout")),
        "learning_rate",
    );
    assert_used(&used, &[0.3]);
    assert_eq!(std::fs::read_to_string(dir.join("hyper.txt")).unwrap(), "learning_rate:0.3\ndropout:0.5\n");
}

#[test]
fn the_file_name_is_relative_to_the_log_directory() {
    let dir = scratch_dir("param-human-name");
    let used = record(
        trainer(&dir, 1, 1).learning_rate(0.25),
        HumanHyperParamSetter::new("learning_rate").file_name("tuning/lr.txt"),
        "learning_rate",
    );
    assert_used(&used, &[0.25]);
    assert_eq!(std::fs::read_to_string(dir.join("tuning/lr.txt")).unwrap(), "learning_rate:0.25\n");
}

// ---------------------------------------------------------------------------------------------
// ReduceLrOnPlateau

#[test]
fn reduce_lr_on_plateau_follows_keras_counters_patience_cooldown_and_min_lr() {
    let dir = scratch_dir("param-plateau");
    // factor 0.5, patience 2, cooldown 1, min_lr 0.2, min mode ("val_loss"):
    // e1 best 10; e2 wait 1; e3 wait 2: 1.0 -> 0.5, cooldown 1; e4 cooldown ends (0), wait 1;
    // e5 wait 2: 0.5 -> 0.25, cooldown 1; e6 cooldown ends, 9 improves: best 9; e7 wait 1;
    // e8 wait 2: 0.25 -> max(0.125, 0.2) = 0.2; e9 wait 1; e10 wait 2 but 0.2 is not above
    // min_lr: nothing, wait stays; e11 wait 3.
    let stat =
        PutStat::every_epoch("val_loss", &[10.0, 10.0, 10.0, 10.0, 10.0, 9.0, 9.0, 9.0, 9.0, 9.0, 9.0]);
    let plateau = ReduceLrOnPlateau::new("val_loss").factor(0.5).patience(2).cooldown(1).min_lr(0.2);
    let used = record(
        trainer(&dir, 11, 1).learning_rate(1.0),
        (stat, plateau, PeriodicTrigger::new(ModelSaver::new(1)).every_k_epochs(1)),
        "learning_rate",
    );
    assert_used(&used, &[1.0, 1.0, 1.0, 0.5, 0.5, 0.25, 0.25, 0.25, 0.2, 0.2, 0.2]);
    let checkpoint = Checkpoint::latest(&dir).unwrap().unwrap();
    assert_eq!(
        *checkpoint.callback_state("ReduceLROnPlateau(val_loss)").unwrap(),
        serde_json::json!({ "wait": 3, "cooldown_counter": 0, "best": 9.0, "last_seen": 11 })
    );
}

#[test]
fn reduce_lr_on_plateau_maximizes_an_accuracy_and_counts_min_delta() {
    let dir = scratch_dir("param-plateau-max");
    // Auto mode on `val_accuracy`: max. factor 0.1, patience 1, cooldown 2, min_delta 0.01:
    // e1 best 0.5; e2 0.505 is not 0.01 better: 1 -> 0.1, cooldown 2; e3 cooldown 1; e4 cooldown
    // 0 then wait 1: 0.1 -> 0.01, cooldown 2; e5 cooldown 1, 0.6 improves; e6 cooldown 0, wait 1:
    // 0.01 -> 0.001.
    let stat = PutStat::every_epoch("val_accuracy", &[0.5, 0.505, 0.4, 0.4, 0.6, 0.6, 0.6]);
    let plateau = ReduceLrOnPlateau::new("val_accuracy").factor(0.1).patience(1).cooldown(2).min_delta(0.01);
    let used = record(trainer(&dir, 7, 1).learning_rate(1.0), (stat, plateau), "learning_rate");
    assert_used(&used, &[1.0, 1.0, 0.1, 0.1, 0.01, 0.01, 0.001]);
}

#[test]
fn reduce_lr_on_plateau_auto_mode_reads_the_name_as_every_watcher_does() {
    // A rising statistic, factor 0.1, patience 1: maximized (auto or max), it improves until
    // epoch 3, then epochs 4 and 5 reduce; minimized, every epoch from the second reduces. Auto
    // reads the words of the name as `EarlyStopping` and the savers do (`Direction::resolve`):
    // an accuracy and an F1 score rise, a name it cannot read is refused at setup.
    let run = |name: &'static str, mode: Option<Direction>| {
        let dir = scratch_dir("param-plateau-mode");
        let stat = PutStat::every_epoch(name, &[0.5, 0.6, 0.7, 0.7, 0.7, 0.7]);
        let mut plateau = ReduceLrOnPlateau::new(name).factor(0.1).patience(1);
        if let Some(mode) = mode {
            plateau = plateau.mode(mode);
        }
        record(trainer(&dir, 6, 1).learning_rate(1.0), (stat, plateau), "learning_rate")
    };
    let rising = [1.0, 1.0, 1.0, 1.0, 0.1, 0.01];
    assert_used(&run("val_accuracy", None), &rising);
    assert_used(&run("val_f1", None), &rising);
    assert_used(&run("Val_Accuracy", None), &rising);
    assert_used(&run("val_accuracy", Some(Direction::Max)), &rising);
    assert_used(&run("val_accuracy", Some(Direction::Min)), &[1.0, 1.0, 0.1, 0.01, 0.001, 0.0001]);
    assert_used(&run("throughput", Some(Direction::Max)), &rising);

    let dir = scratch_dir("param-plateau-unreadable");
    let stat = PutStat::every_epoch("throughput", &[0.5, 0.6]);
    let error =
        try_record(trainer(&dir, 2, 1), (stat, ReduceLrOnPlateau::new("throughput")), "learning_rate")
            .expect_err("a name Auto cannot read");
    assert!(matches!(error.root(), Error::Config(ConfigError::Invalid(_))), "{error:?}");
    assert!(
        error.to_string().contains("ReduceLROnPlateau(throughput): cannot tell from its name"),
        "{error}"
    );
}

#[test]
fn reduce_lr_on_plateau_defaults_are_keras_defaults() {
    let dir = scratch_dir("param-plateau-defaults");
    // factor 0.1, patience 10, min_delta 1e-4: 1.0, then 0.99995 (not 1e-4 better) ten times:
    // reduced after epoch 11.
    let mut values = vec![1.0];
    values.extend([0.99995; 11]);
    let stat = PutStat::every_epoch("val_loss", &values);
    let used = record(
        trainer(&dir, 12, 1).learning_rate(1.0),
        (stat, ReduceLrOnPlateau::new("val_loss")),
        "learning_rate",
    );
    let mut expected = vec![1.0; 11];
    expected.push(0.1);
    assert_used(&used, &expected);
}

#[test]
fn reduce_lr_on_plateau_skips_epochs_without_a_new_value() {
    let dir = scratch_dir("param-plateau-stale");
    // Validation after odd epochs only: e1 best 1; e2 skipped; e3 wait 1: halve; e4 skipped; e5 halve.
    let stat = PutStat { name: "val_loss", values: vec![Some(1.0), None, Some(1.0), None, Some(1.0)] };
    let plateau = ReduceLrOnPlateau::new("val_loss").factor(0.5).patience(1);
    let used = record(trainer(&dir, 6, 1).learning_rate(1.0), (stat, plateau), "learning_rate");
    assert_used(&used, &[1.0, 1.0, 1.0, 0.5, 0.5, 0.25]);
}

#[test]
fn reduce_lr_on_plateau_keeps_its_counters_across_a_resume() {
    // The scenario of the first plateau test, stopped after epoch 4 (wait 1, best 10).
    let make = || {
        (
            PutStat::every_epoch("val_loss", &[10.0, 10.0, 10.0, 10.0, 10.0, 9.0, 9.0, 9.0, 9.0, 9.0, 9.0]),
            ReduceLrOnPlateau::new("val_loss").factor(0.5).patience(2).cooldown(1).min_lr(0.2),
        )
    };
    let lr = |t: Trainer<Linear, Vec<Batch>>| t.learning_rate(1.0);
    let (straight, resumed) = straight_and_resumed(11, 1, 4, "learning_rate", lr, make);
    assert_used(&straight, &[1.0, 1.0, 1.0, 0.5, 0.5, 0.25, 0.25, 0.25, 0.2, 0.2, 0.2]);
    assert_resumed_equal(&straight, &resumed, 4);
}

#[test]
fn reduce_lr_on_plateau_refuses_a_factor_of_one_or_more() {
    let dir = scratch_dir("param-plateau-factor");
    let error =
        try_record(trainer(&dir, 1, 1), ReduceLrOnPlateau::new("val_loss").factor(1.0), "learning_rate")
            .unwrap_err();
    assert!(error.to_string().contains("the factor must be below 1.0"), "{error}");
}

/// Set in the child process of the verbose test below.
const PLATEAU_CHILD: &str = "STOKER_PLATEAU_VERBOSE_CHILD";

/// Keras's `test_verbose_logging` (reduce_lr_on_plateau_test.py): patience 1, factor 0.1,
/// min_delta 100, two epochs, the rate 0.1: reduced after the second. Runs only as the child of
/// `reduce_lr_on_plateau_verbose_words_its_message_as_keras`, whose stderr it writes to.
#[test]
fn reduce_lr_on_plateau_verbose_child() {
    if std::env::var_os(PLATEAU_CHILD).is_none() {
        return;
    }
    let dir = scratch_dir("param-plateau-verbose");
    let plateau = ReduceLrOnPlateau::new("val_loss").factor(0.1).patience(1).min_delta(100.0).verbose(true);
    let stat = PutStat::every_epoch("val_loss", &[1.0, 1.0]);
    let used = record(trainer(&dir, 2, 1).learning_rate(0.1), (stat, plateau), "learning_rate");
    assert_used(&used, &[0.1, 0.1]);
}

#[test]
fn reduce_lr_on_plateau_verbose_words_its_message_as_keras() {
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &stoker_tests::test_path(module_path!(), "reduce_lr_on_plateau_verbose_child"),
            "--nocapture",
            "--test-threads=1",
        ])
        .env(PLATEAU_CHILD, "1")
        .env("STOKER_LOG", "info")
        .output()
        .expect("running the test binary");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    // Keras's f"Epoch {epoch + 1}: ReduceLROnPlateau reducing learning rate to {new_lr}.", the
    // rate as Python's str() writes 0.1 * 0.1; Keras's test looks for the words up to "0.01".
    let line = "stoker: Epoch 2: ReduceLROnPlateau reducing learning rate to 0.010000000000000002.";
    assert!(stderr.lines().any(|l| l == line), "no line {line:?} in:\n{stderr}");
    assert!(stderr.contains("ReduceLROnPlateau reducing learning rate to 0.01"));
}

// ---------------------------------------------------------------------------------------------
// burn's learning-rate schedulers

#[test]
fn burn_schedulers_give_step_n_their_nth_value() {
    // Cosine annealing 0.4 -> 0 over 4 iterations: 0.2 (1 + cos(i pi / 4)) for i = 0, 1, ...
    let dir = scratch_dir("param-cosine");
    let cosine = LrSchedulerSetter::new(CosineAnnealingLrSchedulerConfig::new(0.4, 4).init().unwrap());
    let used = record(trainer(&dir, 2, 3), cosine, "learning_rate");
    let expected: Vec<f64> =
        (0..6).map(|i| 0.2 * (1.0 + (i as f64 * std::f64::consts::PI / 4.0).cos())).collect();
    assert_used(&used, &expected);
    assert!((expected[1] - 0.341_421_356_237_309_5).abs() < 1e-12 && expected[4].abs() < 1e-12);

    // Noam, factor 1, 4 warm-up steps, model size 16: 0.25 min(n^-1/2, n / 8).
    let dir = scratch_dir("param-noam");
    let noam = NoamLrSchedulerConfig::new(1.0).with_warmup_steps(4).with_model_size(16);
    let used = record(trainer(&dir, 2, 3), LrSchedulerSetter::new(noam.init().unwrap()), "learning_rate");
    assert_used(&used, &[0.03125, 0.0625, 0.09375, 0.125, 0.25 / 5f64.sqrt(), 0.25 / 6f64.sqrt()]);

    // Step: 0.8, halved every 2 steps.
    let dir = scratch_dir("param-step");
    let step = StepLrSchedulerConfig::new(0.8, 2).with_gamma(0.5);
    let used = record(trainer(&dir, 2, 3), LrSchedulerSetter::new(step.init().unwrap()), "learning_rate");
    assert_used(&used, &[0.8, 0.8, 0.4, 0.4, 0.2, 0.2]);

    // Linear 0.5 -> 0.1 over 4 steps, then 0.1.
    let dir = scratch_dir("param-linear-burn");
    let linear = LinearLrSchedulerConfig::new(0.5, 0.1, 4);
    let used = record(trainer(&dir, 2, 3), LrSchedulerSetter::new(linear.init().unwrap()), "learning_rate");
    assert_used(&used, &[0.5, 0.4, 0.3, 0.2, 0.1, 0.1]);
}

#[test]
fn a_burn_scheduler_can_drive_another_parameter() {
    let dir = scratch_dir("param-burn-other");
    let setter = LrSchedulerSetter::new(StepLrSchedulerConfig::new(1.0, 1).with_gamma(0.5).init().unwrap())
        .param("temperature");
    let used = record(trainer(&dir, 1, 4).hyper_param("temperature", 9.0), setter, "temperature");
    assert_used(&used, &[1.0, 0.5, 0.25, 0.125]);
}

/// A scheduler whose record saves nothing: only catching up by steps resumes it.
#[derive(Clone)]
struct Countdown(f64);

impl LrScheduler for Countdown {
    fn step(&mut self) -> f64 {
        self.0 -= 0.0625;
        self.0
    }
    fn to_record(&self) -> LrSchedulerRecord {
        LrSchedulerRecord::new()
    }
    fn load_record(&mut self, _record: LrSchedulerRecord) {}
}

#[test]
fn a_resumed_run_gets_the_same_scheduler_values_as_an_uninterrupted_one() {
    let plain = |t: Trainer<Linear, Vec<Batch>>| t;
    // Exponential (each value computed from the last): 0.9 * 0.5^(n - 1). Stopped at step 4,
    // the first step of epoch 2.
    let exponential = || LrSchedulerSetter::new(ExponentialLrSchedulerConfig::new(0.9, 0.5).init().unwrap());
    let (straight, resumed) = straight_and_resumed(3, 3, 4, "learning_rate", plain, exponential);
    let expected: Vec<f64> = (0..9).map(|i| 0.9 * 0.5f64.powi(i)).collect();
    assert_used(&straight, &expected);
    assert_resumed_equal(&straight, &resumed, 4);

    // At an epoch's end, and a scheduler that saves nothing.
    let countdown = || LrSchedulerSetter::new(Countdown(1.0));
    let (straight, resumed) = straight_and_resumed(3, 3, 6, "learning_rate", plain, countdown);
    let expected: Vec<f64> = (1..=9).map(|n| 1.0 - 0.0625 * n as f64).collect();
    assert_used(&straight, &expected);
    assert_resumed_equal(&straight, &resumed, 6);
}

// ---------------------------------------------------------------------------------------------
// HumanHyperParamSetter: what is put in the file's place

/// Train in a thread; wait for it at most `limit` (a test that hangs fails instead).
fn train_within<T: Send + 'static>(
    limit: std::time::Duration,
    train: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(train());
    });
    receiver.recv_timeout(limit).expect("training ended (a blocked read of hyper.txt holds it)")
}

/// Replaces `hyper.txt` with what `make` puts there at the end of epoch 1.
struct Swap(fn(&Path));

impl Callback<Linear> for Swap {
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        if ctx.epoch_num() == 1 {
            let path = ctx.log_dir().join("hyper.txt");
            std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
            (self.0)(&path);
        }
        Ok(())
    }
}

#[cfg(unix)]
fn mkfifo(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a NUL-terminated path and a mode.
    let made = unsafe { libc::mkfifo(name.as_ptr(), 0o600) };
    assert_eq!(made, 0, "mkfifo {}: {}", path.display(), std::io::Error::last_os_error());
}

#[cfg(unix)]
#[test]
fn hyper_file_fifo_neither_blocks_nor_sets_anything() {
    // A FIFO (no writer ever opens it) in place of the file from the start, then after epoch 1.
    let dir = scratch_dir("hyper-file-fifo");
    mkfifo(&dir.join("hyper.txt"));
    let used = train_within(std::time::Duration::from_secs(120), move || {
        record(
            trainer(&dir, 3, 1).learning_rate(0.1),
            HumanHyperParamSetter::new("learning_rate"),
            "learning_rate",
        )
    });
    assert_used(&used, &[0.1, 0.1, 0.1]);

    let dir = scratch_dir("hyper-file-fifo-later");
    let used = train_within(std::time::Duration::from_secs(120), move || {
        record(
            trainer(&dir, 3, 1).learning_rate(0.1),
            (Swap(mkfifo), HumanHyperParamSetter::new("learning_rate")),
            "learning_rate",
        )
    });
    assert_used(&used, &[0.1, 0.1, 0.1]);
}

#[cfg(unix)]
#[test]
fn hyper_file_link_to_dev_zero_is_not_read() {
    // A link to an endless device: read whole, it would take every byte of memory.
    let peak_before = peak_memory();
    let dir = scratch_dir("hyper-file-dev-zero");
    std::os::unix::fs::symlink("/dev/zero", dir.join("hyper.txt")).unwrap();
    let used = train_within(std::time::Duration::from_secs(120), move || {
        record(
            trainer(&dir, 2, 1).learning_rate(0.1),
            HumanHyperParamSetter::new("learning_rate"),
            "learning_rate",
        )
    });
    assert_used(&used, &[0.1, 0.1]);

    let dir = scratch_dir("hyper-file-dev-zero-later");
    let used = train_within(std::time::Duration::from_secs(120), move || {
        record(
            trainer(&dir, 3, 1).learning_rate(0.1),
            (
                Swap(|path| std::os::unix::fs::symlink("/dev/zero", path).unwrap()),
                HumanHyperParamSetter::new("learning_rate"),
            ),
            "learning_rate",
        )
    });
    assert_used(&used, &[0.1, 0.1, 0.1]);
    // Nothing was read into memory (reading the device until memory ran out would show here).
    if let (Some(before), Some(after)) = (peak_before, peak_memory()) {
        assert!(
            after.saturating_sub(before) < 256 << 20,
            "the peak memory grew from {before} to {after} bytes"
        );
    }
}

/// The process's peak resident memory in bytes (Linux's `VmHWM`), where known.
fn peak_memory() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.trim_start_matches("VmHWM:").trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

#[test]
fn hyper_file_over_the_bound_is_not_read_and_one_at_it_is() {
    let oversize = |path: &Path| {
        // A valid line, then comments up to one byte past the bound.
        let mut text = String::from("learning_rate:0.05\n");
        let limit = HumanHyperParamSetter::MAX_FILE_BYTES as usize;
        while text.len() < limit + 1 {
            text.push_str("# padding\n");
        }
        text.truncate(limit);
        text.push('\n');
        assert_eq!(text.len(), limit + 1);
        std::fs::write(path, text).unwrap();
    };
    let dir = scratch_dir("hyper-file-oversize");
    let used = record(
        trainer(&dir, 3, 1).learning_rate(0.1),
        (Swap(oversize), HumanHyperParamSetter::new("learning_rate")),
        "learning_rate",
    );
    assert_used(&used, &[0.1, 0.1, 0.1]);

    // At the bound exactly, it is read.
    let at_bound = |path: &Path| {
        let mut text = String::from("learning_rate:0.05\n");
        let limit = HumanHyperParamSetter::MAX_FILE_BYTES as usize;
        while text.len() < limit {
            text.push('\n');
        }
        std::fs::write(path, text).unwrap();
    };
    let dir = scratch_dir("hyper-file-at-bound");
    let used = record(
        trainer(&dir, 3, 1).learning_rate(0.1),
        (Swap(at_bound), HumanHyperParamSetter::new("learning_rate")),
        "learning_rate",
    );
    assert_used(&used, &[0.1, 0.05, 0.05]);
}

/// A setter written by a user, as a tensorpack user subclasses `HyperParamSetter`: a linear
/// warm-up of `param` to `target` over the first `epochs` epochs, then nothing (its current
/// value stays); it reads the value it is asked to change from the context.
struct WarmUp {
    param: &'static str,
    target: f64,
    epochs: u64,
    seen_before: Vec<f64>,
}

impl HyperParamSetter for WarmUp {
    const NAME: &'static str = "WarmUp";
    fn param(&self) -> &str {
        self.param
    }
    fn value_to_set<M>(&mut self, ctx: &Context<'_, M>) -> burn_stoker::Result<Option<f64>> {
        self.seen_before.push(ctx.hyper().get(self.param).unwrap());
        let e = ctx.epoch_num();
        Ok((e < self.epochs).then(|| self.target * (e + 1) as f64 / self.epochs as f64))
    }
}

#[test]
fn hyper_param_setter_written_by_a_user_sets_at_the_beginning_and_each_trigger() {
    let dir = scratch_dir("user-setter");
    let setter = WarmUp { param: "learning_rate", target: 0.1, epochs: 4, seen_before: Vec::new() };
    let callback: SetterCallback<WarmUp> = setter.into_callback();
    assert_eq!(Callback::<Linear>::name(&callback), "WarmUp(learning_rate)");
    assert!(!Callback::<Linear>::chief_only(&callback), "every rank, as tensorpack's setters");
    let mut callback = callback;
    let (_, used) =
        try_record(trainer(&dir, 5, 1).learning_rate(0.5), &mut callback, "learning_rate").unwrap();
    // before_train (epoch 0): 0.025; after epochs 1, 2, 3: 0.05, 0.075, 0.1; then left alone.
    assert_used(&used, &[0.025, 0.05, 0.075, 0.1, 0.1]);
    let seen = &callback.setter().seen_before;
    let expected = [0.5, 0.025, 0.05, 0.075, 0.1, 0.1];
    assert!(
        seen.len() == expected.len() && seen.iter().zip(expected).all(|(s, e)| (s - e).abs() < 1e-12),
        "the value before each call: {seen:?}"
    );

    // Under a PeriodicTrigger it sets at the trigger's period: every step here.
    let every_step = PeriodicTrigger::new(
        WarmUp { param: "learning_rate", target: 0.1, epochs: 4, seen_before: Vec::new() }.into_callback(),
    )
    .every_k_steps(1);
    let used = record(trainer(&scratch_dir("user-setter-steps"), 2, 2), every_step, "learning_rate");
    assert_used(&used, &[0.025, 0.05, 0.05, 0.075]);

    // An unknown parameter is refused at setup, named with the setter.
    let bad = WarmUp { param: "momentum", target: 0.1, epochs: 4, seen_before: Vec::new() }.into_callback();
    let error = try_record(trainer(&scratch_dir("user-setter-bad"), 1, 1), bad, "learning_rate").unwrap_err();
    assert!(error.to_string().contains("WarmUp sets `momentum`, which is not a hyper-parameter"), "{error}");
}

/// The built-in setters are `HyperParamSetter`s: what they would set, asked directly.
#[test]
fn hyper_param_setter_is_implemented_by_the_built_in_setters() {
    fn name<S: HyperParamSetter>(setter: &S) -> (&'static str, String) {
        (S::NAME, setter.param().to_string())
    }
    let scheduled = ScheduledHyperParamSetter::new("learning_rate", [(0, 0.1), (2, 0.01)]);
    assert_eq!(name(&scheduled), ("ScheduledHyperParamSetter", "learning_rate".to_string()));
    let with_func = HyperParamSetterWithFunc::new("learning_rate", |_, v| v * 0.5);
    assert_eq!(name(&with_func), ("HyperParamSetterWithFunc", "learning_rate".to_string()));
}
