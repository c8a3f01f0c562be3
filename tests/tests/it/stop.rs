//! Early stopping against hand-computed histories: a scripted callback puts the watched statistic
//! each epoch, and the run must stop at exactly the epoch Keras's `EarlyStopping` would (patience,
//! min_delta, baseline, start_from_epoch, modes, missing values), restore the best epoch's
//! weights, and keep its counters across a resume; neon's `EarlyStop` with a user function; neon's
//! `SaveBestState` writing the best epoch's model, which plain burn loads back.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use burn::module::Module;
use burn::nn::Linear;
use burn::optim::SgdConfig;
use burn_stoker::compat::neon::early_stop;
use burn_stoker::prelude::*;
use burn_stoker::saver::SaveBestState;
use burn_stoker::state::Direction;
use burn_stoker::stop::EarlyStopping;
use serde_json::{Value as Json, json};
use stoker_tests::{mse, scratch_dir, tiny_data, tiny_model, weights};

type Weights = Vec<Vec<f32>>;
type Seen = Arc<Mutex<Vec<(u64, Weights)>>>;

/// Puts `values[epoch - 1]` (when it is `Some`) as `name` at each epoch's trigger, and records the
/// model's weights there.
struct Script {
    name: &'static str,
    values: Vec<Option<f64>>,
    seen: Seen,
}

impl Script {
    fn new(name: &'static str, values: &[f64]) -> Self {
        Script::sparse(name, &values.iter().map(|&v| Some(v)).collect::<Vec<_>>())
    }
    fn sparse(name: &'static str, values: &[Option<f64>]) -> Self {
        Script { name, values: values.to_vec(), seen: Seen::default() }
    }
    /// The weights recorded at the end of `epoch`.
    fn weights_at(seen: &Seen, epoch: u64) -> Weights {
        seen.lock()
            .unwrap()
            .iter()
            .find(|(e, _)| *e == epoch)
            .map(|(_, w)| w.clone())
            .expect("epoch recorded")
    }
}

impl Callback<Linear> for Script {
    fn name(&self) -> std::borrow::Cow<'static, str> {
        format!("Script({})", self.name).into()
    }
    fn trigger(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let epoch = ctx.epoch_num();
        if let Some(&Some(value)) = self.values.get(epoch as usize - 1) {
            ctx.monitors().put_scalar(self.name, value);
        }
        self.seen.lock().unwrap().push((epoch, weights(ctx.model())));
        Ok(())
    }
}

/// Train the tiny model (2 steps per epoch, SGD at 0.1) with `callbacks` up to `max_epoch`.
fn train<K, C: Callbacks<Linear, K>>(
    dir: &Path,
    model: Linear,
    max_epoch: u64,
    resume: bool,
    callbacks: C,
) -> burn_stoker::Result<TrainReport<Linear>> {
    let device = burn_stoker::device::cpu();
    Trainer::new(model, SgdConfig::new().init(), tiny_data(2, &device))
        .learning_rate(0.1)
        .max_epoch(max_epoch)
        .log_dir(dir)
        .auto_resume(resume)
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .callbacks(callbacks)
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .map_err(burn_stoker::Error::from)
}

/// The epoch a run ended at and whether it was stopped (with the reason).
fn ended(report: &TrainReport<Linear>) -> (u64, Option<String>) {
    let reason = match &report.outcome {
        Outcome::Stopped(reason) => Some(reason.clone()),
        Outcome::Finished => None,
        other => panic!("unexpected outcome {other:?}"),
    };
    (report.counters.epoch_num(), reason)
}

/// The epoch at which `stop` ends a run of `max_epoch` epochs in which `val_loss` (or `name`)
/// takes `values`; `None` when the run finishes.
fn stop_epoch_of(name: &'static str, values: &[f64], max_epoch: u64, stop: EarlyStopping) -> Option<u64> {
    let device = burn_stoker::device::cpu();
    let report =
        train(&scratch_dir("stop"), tiny_model(&device), max_epoch, false, (Script::new(name, values), stop))
            .unwrap();
    match ended(&report) {
        (epoch, Some(_)) => Some(epoch),
        (epoch, None) => {
            assert_eq!(epoch, max_epoch);
            None
        }
    }
}

fn stop_epoch(values: &[f64], max_epoch: u64, stop: EarlyStopping) -> Option<u64> {
    stop_epoch_of("val_loss", values, max_epoch, stop)
}

#[test]
fn patience_counts_the_evaluations_without_improvement() {
    let history = [1.0, 0.9, 0.95, 0.92, 0.8];
    // e1 best 1.0; e2 best 0.9; e3 wait 1; e4 wait 2 >= 2: stop.
    assert_eq!(stop_epoch(&history, 5, EarlyStopping::new("val_loss").patience(2)), Some(4));
    // Patience 3: e5 improves, the run finishes.
    assert_eq!(stop_epoch(&history, 5, EarlyStopping::new("val_loss").patience(3)), None);
    // Patience 0 (Keras's default): the first epoch that does not improve; equal is no improvement.
    assert_eq!(stop_epoch(&[1.0, 1.0, 0.5], 3, EarlyStopping::new("val_loss")), Some(2));
    assert_eq!(stop_epoch(&[1.0, 0.5, 0.5], 3, EarlyStopping::new("val_loss")), Some(3));
}

#[test]
fn the_stop_reason_names_the_statistic_and_the_best_epoch() {
    let device = burn_stoker::device::cpu();
    let report = train(
        &scratch_dir("stop-reason"),
        tiny_model(&device),
        9,
        false,
        (Script::new("val_loss", &[1.0, 0.5, 0.75, 0.625]), EarlyStopping::new("val_loss").patience(2)),
    )
    .unwrap();
    assert_eq!(
        ended(&report),
        (
            4,
            Some(
                "EarlyStopping(val_loss): no improvement for 2 evaluations (patience 2); best 0.5 at epoch 2"
                    .into()
            )
        )
    );
}

/// Records what `Context::stop_requested` answers in `after_train`.
struct StopSeenAtTheEnd(Arc<Mutex<Option<Option<String>>>>);

impl Callback<Linear> for StopSeenAtTheEnd {
    fn after_train(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        *self.0.lock().unwrap() = Some(ctx.stop_requested().map(str::to_string));
        Ok(())
    }
}

#[test]
fn the_stop_reason_is_still_requested_in_after_train() {
    // A callback that reports how the run ended (a tracker's run status) tells a stop from an
    // error that ended training early by asking `stop_requested` in `after_train`.
    let device = burn_stoker::device::cpu();
    let seen = Arc::new(Mutex::new(None));
    let report = train(
        &scratch_dir("stop-after-train"),
        tiny_model(&device),
        9,
        false,
        (
            Script::new("val_loss", &[1.0, 1.0]),
            EarlyStopping::new("val_loss"),
            StopSeenAtTheEnd(Arc::clone(&seen)),
        ),
    )
    .unwrap();
    let (epoch, reason) = ended(&report);
    assert_eq!(epoch, 2);
    assert!(reason.is_some());
    assert_eq!(seen.lock().unwrap().clone(), Some(reason), "after_train sees the stop and its reason");

    // A run that finished saw no stop.
    let seen = Arc::new(Mutex::new(None));
    let dir = scratch_dir("stop-after-train-none");
    train(&dir, tiny_model(&device), 2, false, StopSeenAtTheEnd(Arc::clone(&seen))).unwrap();
    assert_eq!(seen.lock().unwrap().clone(), Some(None));
}

#[test]
fn min_delta_is_the_smallest_change_that_counts_and_its_sign_is_ignored() {
    let history = [1.0, 0.875, 0.5, 0.375, 0.25, 0.0];
    // e2: 0.875 + 0.25 < 1.0? no, wait 1; e3: 0.75 < 1.0, best 0.5; e4: 0.625 < 0.5? no, wait 1;
    // e5: 0.5 < 0.5? no, wait 2: stop.
    let stop = || EarlyStopping::new("val_loss").patience(2);
    assert_eq!(stop_epoch(&history, 6, stop().min_delta(0.25)), Some(5));
    assert_eq!(stop_epoch(&history, 6, stop().min_delta(-0.25)), Some(5));
    assert_eq!(stop_epoch(&history, 6, stop()), None);
    // Max: 0.625 - 0.125 > 0.5? no: stop at e2 with patience 1; without min_delta it improves.
    let accuracy = [0.5, 0.625, 0.75, 0.8125];
    let max = || EarlyStopping::new("val_accuracy").mode(Direction::Max).patience(1);
    assert_eq!(stop_epoch_of("val_accuracy", &accuracy, 4, max().min_delta(0.125)), Some(2));
    assert_eq!(stop_epoch_of("val_accuracy", &accuracy, 4, max()), None);
}

#[test]
fn a_baseline_must_be_beaten_for_the_patience_to_start_over() {
    let stop = || EarlyStopping::new("val_loss").patience(2);
    let history = [0.8, 0.7, 0.75, 0.72, 0.6];
    // Baseline 0.5 never beaten: e1 wait 1 (best 0.8), e2 wait 2 (best 0.7, an improvement: no
    // check), e3 wait 3 >= 2: stop. Without it: e3 wait 1, e4 wait 2: stop.
    assert_eq!(stop_epoch(&history, 5, stop().baseline(0.5)), Some(3));
    assert_eq!(stop_epoch(&history, 5, stop()), Some(4));
    // Beaten at e2 (0.4 < 0.5): wait 0; e3 wait 1; e4 wait 2: stop.
    assert_eq!(stop_epoch(&[0.8, 0.4, 0.45, 0.42, 0.41, 0.3], 6, stop().baseline(0.5)), Some(4));
    // Keras stops only on an epoch without improvement: improving every epoch without ever beating
    // the baseline runs to the end.
    assert_eq!(
        stop_epoch(&[0.9, 0.8, 0.7, 0.6], 4, EarlyStopping::new("val_loss").patience(1).baseline(0.5)),
        None
    );
}

#[test]
fn start_from_epoch_skips_the_warm_up_epochs() {
    let history = [1.0, 2.0, 3.0, 3.0, 2.5];
    // Epochs 1 and 2 are not evaluated: e3 is the first best, e4 does not improve: stop.
    assert_eq!(stop_epoch(&history, 5, EarlyStopping::new("val_loss").start_from_epoch(2)), Some(4));
    assert_eq!(stop_epoch(&history, 5, EarlyStopping::new("val_loss")), Some(2));
}

#[test]
fn an_epoch_without_a_new_value_is_not_evaluated() {
    // The value is put every other epoch: e1 best 1.0; e2 nothing new; e3 wait 1: stop (had the
    // stale 1.0 counted at e2, it would have stopped there).
    let values = [Some(1.0), None, Some(1.5), None, Some(2.0)];
    let device = burn_stoker::device::cpu();
    let report = train(
        &scratch_dir("stop-sparse"),
        tiny_model(&device),
        5,
        false,
        (Script::sparse("val_loss", &values), EarlyStopping::new("val_loss").patience(1)),
    )
    .unwrap();
    assert_eq!(ended(&report).0, 3);
}

#[test]
fn auto_mode_reads_the_name_and_fails_when_it_cannot_tell() {
    // `val_accuracy` is maximized: e2 improves, e3 and e4 do not (patience 1: stop at e3).
    let accuracy = [0.5, 0.75, 0.625, 0.6];
    assert_eq!(
        stop_epoch_of("val_accuracy", &accuracy, 4, EarlyStopping::new("val_accuracy").patience(1)),
        Some(3)
    );
    // Minimized, the same history stops at e2.
    assert_eq!(
        stop_epoch_of(
            "val_accuracy",
            &accuracy,
            4,
            EarlyStopping::new("val_accuracy").mode(Direction::Min).patience(1)
        ),
        Some(2)
    );
    let device = burn_stoker::device::cpu();
    let error = train(
        &scratch_dir("stop-auto"),
        tiny_model(&device),
        2,
        false,
        (Script::new("throughput", &[1.0, 2.0]), EarlyStopping::new("throughput")),
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "callback `EarlyStopping(throughput)` failed in setup: EarlyStopping(throughput): cannot tell from its name whether `throughput` should be minimized or maximized; name the direction with `.mode(Direction::Min)` or `.mode(Direction::Max)`"
    );
}

#[test]
fn a_statistic_never_put_is_an_error_naming_what_there_is() {
    let device = burn_stoker::device::cpu();
    let error = train(
        &scratch_dir("stop-missing"),
        tiny_model(&device),
        3,
        false,
        (Script::new("val_loss", &[1.0, 2.0, 3.0]), EarlyStopping::new("validation_loss")),
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "callback `EarlyStopping(validation_loss)` failed in trigger_epoch: EarlyStopping(validation_loss): no scalar named `validation_loss` has been put; the monitors hold `val_loss`. Watch one of those, or order this callback after the one that puts `validation_loss` (`#[order(after = InferenceRunner)]`, or later in the tuple)"
    );
    // Ordered before the callback that puts it: nothing is there yet at the first epoch.
    let error = train(
        &scratch_dir("stop-order"),
        tiny_model(&device),
        3,
        false,
        (EarlyStopping::new("val_loss"), Script::new("val_loss", &[1.0, 2.0, 3.0])),
    )
    .unwrap_err();
    assert!(
        error.to_string().contains("no scalar named `val_loss` has been put; no scalar has been put yet."),
        "{error}"
    );
}

/// Keras's `test_early_stopping_patience` (losses 10, 9, 8, 9, 8.9, ...: stopped at the 0-based
/// epoch `max(patience, 1) + 2`) and Lightning's `test_early_stopping_patience` (the 0-based
/// epochs 4, 3, 4), each epoch 1-based here.
#[test]
fn keras_and_lightning_patience_cases_stop_where_theirs_do() {
    let keras = [10.0, 9.0, 8.0, 9.0, 8.9, 8.8, 8.7, 8.6, 8.5];
    for patience in 0..=3u64 {
        let stop = EarlyStopping::new("loss").patience(patience);
        assert_eq!(
            stop_epoch_of("loss", &keras, 9, stop),
            Some(patience.max(1) + 2 + 1),
            "patience {patience}"
        );
    }
    let lightning: [(&[f64], u64, u64); 3] = [
        (&[6.0, 5.0, 5.0, 5.0, 5.0, 5.0], 3, 4),
        (&[6.0, 5.0, 4.0, 4.0, 3.0, 3.0], 1, 3),
        (&[6.0, 5.0, 6.0, 5.0, 5.0, 5.0], 3, 4),
    ];
    for (losses, patience, stopped) in lightning {
        let stop = EarlyStopping::new("test_val_loss").patience(patience);
        assert_eq!(stop_epoch_of("test_val_loss", losses, 6, stop), Some(stopped + 1), "{losses:?}");
    }
}

/// Puts `values[n]` as `val_loss` at its n-th trigger.
struct InTurn(Vec<f64>, usize);

impl Callback<Linear> for InTurn {
    fn trigger(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        if let Some(&value) = self.0.get(self.1) {
            ctx.monitors().put_scalar("val_loss", value);
        }
        self.1 += 1;
        Ok(())
    }
}

/// The global step at which a run of 10 steps per epoch ends when `val_loss` takes `values`
/// at every third step, watched by `stop` every third step.
fn stop_step_every_3_steps(values: &[f64], stop: EarlyStopping) -> u64 {
    let device = burn_stoker::device::cpu();
    let report = Trainer::new(tiny_model(&device), SgdConfig::new().init(), tiny_data(10, &device))
        .max_epoch(3)
        .log_dir(scratch_dir("stop-steps"))
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .callbacks((
            PeriodicTrigger::new(InTurn(values.to_vec(), 0)).every_k_steps(3),
            PeriodicTrigger::new(stop).every_k_steps(3),
        ))
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .unwrap();
    assert!(matches!(report.outcome, Outcome::Stopped(_)), "{:?}", report.outcome);
    report.counters.global_step()
}

/// Lightning's `test_check_on_train_epoch_end_smart_handling` with `val_check_interval`: checked
/// every 3 of 10 steps, a stop at the second check ends the run at step 6. The guard is "not
/// the first evaluation", not Keras's "not the first epoch" (which held every stop of epoch 1
/// back, to step 12).
#[test]
fn a_check_every_k_steps_stops_at_its_second_evaluation_in_the_first_epoch() {
    assert_eq!(stop_step_every_3_steps(&[1.0; 10], EarlyStopping::new("val_loss")), 6);
    // The first evaluation never stops, even on a NaN, which is no improvement.
    assert_eq!(stop_step_every_3_steps(&[f64::NAN; 10], EarlyStopping::new("val_loss")), 6);
    assert_eq!(stop_step_every_3_steps(&[1.0; 10], EarlyStopping::new("val_loss").patience(2)), 9);
}

/// Runs with restore_best_weights; returns the final model's weights and those of each epoch.
fn restored(values: &[f64], max_epoch: u64, stop: EarlyStopping) -> (u64, Weights, Seen) {
    let device = burn_stoker::device::cpu();
    let script = Script::new("val_loss", values);
    let seen = script.seen.clone();
    let report =
        train(&scratch_dir("stop-restore"), tiny_model(&device), max_epoch, false, (script, stop)).unwrap();
    (report.counters.epoch_num(), weights(&report.model), seen)
}

#[test]
fn restore_best_weights_gives_the_best_epochs_weights_after_a_stop_and_at_the_end() {
    // Stopped at e4 (patience 2), best at e2.
    let (epoch, model, seen) = restored(
        &[1.0, 0.5, 0.75, 0.8],
        9,
        EarlyStopping::new("val_loss").patience(2).restore_best_weights(true),
    );
    assert_eq!(epoch, 4);
    assert_eq!(model, Script::weights_at(&seen, 2));
    assert_ne!(model, Script::weights_at(&seen, 4), "training changed the weights after epoch 2");
    // Keras 3 restores at the end of training even without an early stop.
    let (epoch, model, seen) =
        restored(&[1.0, 0.5, 0.9], 3, EarlyStopping::new("val_loss").patience(5).restore_best_weights(true));
    assert_eq!(epoch, 3);
    assert_eq!(model, Script::weights_at(&seen, 2));
    // Without it, the last weights stay.
    let (_, model, seen) = restored(&[1.0, 0.5, 0.75, 0.8], 9, EarlyStopping::new("val_loss").patience(2));
    assert_eq!(model, Script::weights_at(&seen, 4));
    // After a warm-up, the best is among the evaluated epochs: e2's lower value does not count.
    let (epoch, model, seen) = restored(
        &[3.0, 1.0, 2.0, 2.5],
        4,
        EarlyStopping::new("val_loss").start_from_epoch(2).patience(1).restore_best_weights(true),
    );
    assert_eq!(epoch, 4);
    assert_eq!(model, Script::weights_at(&seen, 3));
}

/// Keras's `test_early_stopping_final_weights_when_restoring_model_weights`
/// (early_stopping_test.py), its 0-based epochs counted from 1 here: patience 2 stops at the fifth
/// epoch with the third's weights; with a baseline of 0.5 that no epoch beats and patience 5, five
/// epochs run and the third's weights come back; and so they do when another callback stops the
/// run after the fourth epoch.
#[test]
fn kerass_restore_best_weights_cases_restore_the_same_epoch() {
    let stop = |patience| EarlyStopping::new("val_loss").patience(patience).restore_best_weights(true);
    let (epoch, model, seen) = restored(&[0.2, 0.15, 0.1, 0.11, 0.12], 9, stop(2));
    assert_eq!(epoch, 5);
    assert_eq!(model, Script::weights_at(&seen, 3));
    let (epoch, model, seen) = restored(&[0.9, 0.8, 0.7, 0.71, 0.72, 0.73], 9, stop(5).baseline(0.5));
    assert_eq!(epoch, 5);
    assert_eq!(model, Script::weights_at(&seen, 3));
    // Another callback stops the run after the fourth epoch: the third's weights come back.
    let device = burn_stoker::device::cpu();
    let script = Script::new("val_loss", &[0.9, 0.8, 0.7, 0.71, 0.72, 0.73]);
    let seen = script.seen.clone();
    let other = burn_stoker::debug::CallbackFactory::new()
        .after_epoch(|ctx| {
            if ctx.epoch_num() == 4 {
                ctx.request_stop("another callback");
            }
        })
        .named("Other");
    let callbacks = (script, stop(5).baseline(0.5), other);
    let report = train(&scratch_dir("stop-restore-other"), tiny_model(&device), 9, false, callbacks).unwrap();
    assert_eq!(report.counters.epoch_num(), 4);
    assert_eq!(weights(&report.model), Script::weights_at(&seen, 3));
}

/// Keras's `test_early_stopping` (early_stopping_test.py): the direction `mode="auto"` gives each
/// of its metrics, which Keras 3 asks the compiled metric for and stoker reads from the name, and
/// no direction for `unknown` (a `ValueError` there, an error at setup here).
#[test]
fn kerass_auto_mode_cases_resolve_to_the_same_direction() {
    let cases = [
        ("val_mse", Direction::Min),
        ("val_loss", Direction::Min),
        ("loss", Direction::Min),
        ("acc", Direction::Max),
        ("val_accuracy", Direction::Max),
        ("hinge", Direction::Min),
        ("f1_score", Direction::Max),
    ];
    for (name, mode) in cases {
        assert_eq!(Direction::Auto.resolve(name), Some(mode), "{name}");
    }
    assert_eq!(Direction::Auto.resolve("unknown"), None);
}

/// The saved state of the callback `name` in the latest checkpoint under `dir`.
fn saved_state(dir: &Path, name: &str) -> Json {
    let checkpoint = burn_stoker::saver::Checkpoint::latest(dir).unwrap().expect("a checkpoint");
    checkpoint.callback_state(name).cloned().unwrap_or(Json::Null)
}

#[test]
fn a_resumed_run_keeps_the_counters_and_the_best_weights() {
    let device = burn_stoker::device::cpu();
    let initial = tiny_model(&device);
    let history = [1.0, 0.5, 0.75, 0.8, 0.9, 1.0];
    let stop = || EarlyStopping::new("val_loss").patience(2).restore_best_weights(true);

    // Straight through: stops at e4 with e2's weights.
    let straight = Script::new("val_loss", &history);
    let straight_seen = straight.seen.clone();
    let report =
        train(&scratch_dir("stop-straight"), initial.clone(), 10, false, (straight, stop())).unwrap();
    assert_eq!(ended(&report).0, 4);
    assert_eq!(weights(&report.model), Script::weights_at(&straight_seen, 2));

    // The same run, interrupted after e3 (2 steps per epoch: e2 ends at step 4).
    let dir = scratch_dir("stop-resume");
    let first = Script::new("val_loss", &history);
    let first_seen = first.seen.clone();
    let report = train(&dir, initial.clone(), 3, false, (first, stop(), ModelSaver::new(3))).unwrap();
    assert_eq!(ended(&report), (3, None));
    assert_eq!(
        saved_state(&dir, "EarlyStopping(val_loss)"),
        json!({ "wait": 1, "best": 0.5, "best_epoch": 2, "stopped_epoch": 0, "seen": 3, "best_weights": "best-step-4.bpk" })
    );
    assert!(dir.join("early-stopping-val_loss/best-step-4.bpk").is_file());
    assert_eq!(Script::weights_at(&first_seen, 2), Script::weights_at(&straight_seen, 2));

    // Resumed into a freshly initialized model: stops at e4 (a fresh count would run to e6), with
    // e2's weights read back from the log directory.
    let report = train(
        &dir,
        tiny_model(&device),
        10,
        true,
        (Script::new("val_loss", &history), stop(), ModelSaver::new(3)),
    )
    .unwrap();
    assert_eq!(
        ended(&report),
        (
            4,
            Some(
                "EarlyStopping(val_loss): no improvement for 2 evaluations (patience 2); best 0.5 at epoch 2"
                    .into()
            )
        )
    );
    assert_eq!(weights(&report.model), Script::weights_at(&straight_seen, 2));
    assert_eq!(saved_state(&dir, "EarlyStopping(val_loss)")["stopped_epoch"], json!(4));
}

/// Issue 39, item 9: the best weights travel with every checkpoint that names them. Bests at
/// epochs 1, 2, 4 and 6 wrote four weights files; the run sent back to epoch 3's end (a
/// checkpoint kept by `ModelSaver::new(10)`, whose best is epoch 2's) restores epoch 2's weights
/// at the end, epoch 4 being worse this time. Before: only the last two files were kept, epoch
/// 2's was gone ("cannot read the best weights"), and epoch 4's weights took its place.
#[test]
fn a_run_sent_back_to_an_older_checkpoint_restores_the_best_weights_it_names() {
    let device = burn_stoker::device::cpu();
    let dir = scratch_dir("stop-older-best");
    let stop = || EarlyStopping::new("val_loss").patience(10).restore_best_weights(true);
    let first = Script::new("val_loss", &[1.0, 0.5, 0.9, 0.4, 0.8, 0.3]);
    let seen = first.seen.clone();
    train(&dir, tiny_model(&device), 6, false, (first, stop(), ModelSaver::new(10))).unwrap();
    let report = Trainer::new(tiny_model(&device), SgdConfig::new().init(), tiny_data(2, &device))
        .learning_rate(0.1)
        .max_epoch(4)
        .log_dir(&dir)
        .resume_from(dir.join("checkpoints/step-6"))
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .callbacks((Script::new("val_loss", &[1.0, 0.5, 0.9, 0.95]), stop(), ModelSaver::new(10)))
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .unwrap();
    assert_eq!(weights(&report.model), Script::weights_at(&seen, 2), "epoch 2's weights, the best");
}

#[test]
fn early_stop_calls_the_users_function_with_its_state() {
    // Stop under a target.
    let device = burn_stoker::device::cpu();
    let report = train(
        &scratch_dir("early-stop"),
        tiny_model(&device),
        9,
        false,
        (Script::new("val_loss", &[1.0, 0.5, 0.25, 0.1]), early_stop("val_loss", |(), v: f64| ((), v < 0.3))),
    )
    .unwrap();
    assert_eq!(
        ended(&report),
        (3, Some("EarlyStopping(val_loss): the stop function triggered at val_loss = 0.25".into()))
    );

    // Two rises in a row, counted in the state; the function sees only new values.
    let calls = Arc::new(AtomicU64::new(0));
    let counted = calls.clone();
    let rises = move |(previous, rises): (Option<f64>, u32), v: f64| {
        counted.fetch_add(1, Ordering::SeqCst);
        let rises = if previous.is_some_and(|p| v > p) { rises + 1 } else { 0 };
        ((Some(v), rises), rises >= 2)
    };
    let values = [Some(1.0), Some(1.1), None, Some(1.0), Some(1.2), Some(1.3), Some(1.4)];
    let report = train(
        &scratch_dir("early-stop-rises"),
        tiny_model(&device),
        9,
        false,
        (Script::sparse("val_loss", &values), early_stop("val_loss", rises)),
    )
    .unwrap();
    assert_eq!(ended(&report).0, 6);
    assert_eq!(calls.load(Ordering::SeqCst), 5);
}

/// neon's rule with Keras's `restore_best_weights`, both configurations of the one
/// `EarlyStopping`: the function stops the run, and the best epoch's weights (lowest, as `mode`
/// reads `val_loss`) come back; the patience rule, left at Keras's 0, plays no part (it would
/// have stopped at e3, the first epoch without improvement).
#[test]
fn a_stop_function_with_restore_best_weights_restores_the_best_epoch() {
    let stop =
        EarlyStopping::new("val_loss").stop_when(|(), v: f64| ((), v > 0.75)).restore_best_weights(true);
    let (epoch, model, seen) = restored(&[0.6, 0.5, 0.7, 0.8, 0.9], 9, stop);
    assert_eq!(epoch, 4, "the function stops at the first value over 0.75");
    assert_eq!(model, Script::weights_at(&seen, 2));
    // Without the best weights, a name `Direction::Auto` cannot read is no error: the function
    // needs no direction (the patience rule refuses `throughput` at setup).
    let device = burn_stoker::device::cpu();
    let callbacks = (
        Script::new("throughput", &[1.0, 2.0, 3.0]),
        EarlyStopping::new("throughput").stop_when(|(), v: f64| ((), v >= 2.0)),
    );
    let report =
        train(&scratch_dir("stop-function-any-name"), tiny_model(&device), 9, false, callbacks).unwrap();
    assert_eq!(report.counters.epoch_num(), 2);
}

#[test]
fn early_stops_state_survives_a_resume() {
    let device = burn_stoker::device::cpu();
    let rises = |(previous, rises): (Option<f64>, u32), v: f64| {
        let rises = if previous.is_some_and(|p| v > p) { rises + 1 } else { 0 };
        ((Some(v), rises), rises >= 2)
    };
    let history = [1.0, 1.1, 1.0, 1.2, 1.3, 1.4, 1.5];
    let dir = scratch_dir("early-stop-resume");
    let report = train(
        &dir,
        tiny_model(&device),
        4,
        false,
        (Script::new("val_loss", &history), early_stop("val_loss", rises), ModelSaver::new(3)),
    )
    .unwrap();
    assert_eq!(ended(&report), (4, None));
    let saved = saved_state(&dir, "EarlyStopping(val_loss)");
    assert_eq!((&saved["rule"], &saved["seen"]), (&json!([1.2, 1]), &json!(4)), "{saved}");
    // e5 is the second rise in a row (a fresh state would see the first at e6 and stop at e7).
    let report = train(
        &dir,
        tiny_model(&device),
        9,
        true,
        (Script::new("val_loss", &history), early_stop("val_loss", rises), ModelSaver::new(3)),
    )
    .unwrap();
    assert_eq!(ended(&report).0, 5);
}

/// The weights in the burnpack file `path`, loaded by plain burn.
fn file_weights(path: &Path) -> Weights {
    let device = burn_stoker::device::cpu();
    weights(&tiny_model(&device).load_file(path))
}

#[test]
fn save_best_state_writes_the_best_epochs_model_atomically() {
    let device = burn_stoker::device::cpu();
    let dir = scratch_dir("save-best");
    // Lowest at e4, highest at e1.
    let history = [1.0, 0.5, 0.75, 0.25, 0.3];
    let script = Script::new("val_loss", &history);
    let seen = script.seen.clone();
    train(
        &dir,
        tiny_model(&device),
        5,
        false,
        (
            script,
            Script::new("val_score", &history),
            SaveBestState::new("best/min.bpk", "val_loss").weights_only(),
            SaveBestState::new(dir.join("max.bpk"), "val_score").mode(Direction::Max).weights_only(),
        ),
    )
    .unwrap();
    assert_eq!(file_weights(&dir.join("best/min.bpk")), Script::weights_at(&seen, 4));
    assert_eq!(file_weights(&dir.join("max.bpk")), Script::weights_at(&seen, 1));
    assert_ne!(Script::weights_at(&seen, 4), Script::weights_at(&seen, 5));
    let left: Vec<_> = std::fs::read_dir(dir.join("best")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, vec!["min.bpk"], "no temporary file is left");
}

#[test]
fn save_best_state_keeps_its_best_across_a_resume() {
    let device = burn_stoker::device::cpu();
    let dir = scratch_dir("save-best-resume");
    let history = [1.0, 0.5, 0.75];
    let script = Script::new("val_loss", &history);
    let seen = script.seen.clone();
    let saver = || SaveBestState::new("best.bpk", "val_loss").weights_only();
    train(&dir, tiny_model(&device), 2, false, (script, saver(), ModelSaver::new(3))).unwrap();
    assert_eq!(
        saved_state(&dir, "SaveBestState(val_loss)"),
        json!({ "best": 0.5, "best_epoch": 2, "seen": 2 })
    );
    // e3 (0.75) is worse than e2's 0.5: the file keeps e2's model (a fresh best would take e3's).
    let report = train(
        &dir,
        tiny_model(&device),
        3,
        true,
        (Script::new("val_loss", &history), saver(), ModelSaver::new(3)),
    )
    .unwrap();
    assert_eq!(file_weights(&dir.join("best.bpk")), Script::weights_at(&seen, 2));
    assert_ne!(weights(&report.model), Script::weights_at(&seen, 2));
}

#[test]
fn save_best_state_refuses_a_directory() {
    let device = burn_stoker::device::cpu();
    let dir = scratch_dir("save-best-dir");
    let error = train(
        &dir,
        tiny_model(&device),
        1,
        false,
        (Script::new("val_loss", &[1.0]), SaveBestState::new(dir.clone(), "val_loss").weights_only()),
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "callback `SaveBestState(val_loss)` failed in setup: SaveBestState(val_loss): {} is a directory; give the path of the file to write",
            dir.display()
        )
    );
    // The whole state is a checkpoint folder: a folder of the user's, or a file, is never
    // replaced by one.
    std::fs::write(dir.join("notes.txt"), b"mine").unwrap();
    for (path, what) in
        [(dir.clone(), "a folder that is not a checkpoint"), (dir.join("notes.txt"), "a file")]
    {
        let error = train(
            &dir,
            tiny_model(&device),
            1,
            false,
            (Script::new("val_loss", &[1.0]), SaveBestState::new(path.clone(), "val_loss")),
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains(&format!("{} is {what}", path.display())), "{error}");
    }
    assert_eq!(std::fs::read(dir.join("notes.txt")).unwrap(), b"mine");
}

/// Sets every weight to NaN in `trigger_epoch` of epoch `at` (before the savers after it).
struct PoisonWeights {
    at: u64,
}

impl Callback<Linear> for PoisonWeights {
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        if ctx.epoch_num() == self.at {
            let model = ctx.model_mut();
            model.weight = model.weight.clone().map(|w| w.mul_scalar(f32::NAN));
        }
        Ok(())
    }
}

/// Records the global step training starts at.
#[derive(Clone, Default)]
struct StartedAt(Arc<AtomicU64>);

impl<M> Callback<M> for StartedAt {
    fn before_train(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        self.0.store(ctx.global_step(), Ordering::SeqCst);
        Ok(())
    }
}

/// The outcome of a run stopped by a non-finite number: (reason, global step, checkpoint).
fn non_finite(report: &TrainReport<Linear>) -> (String, u64, Option<std::path::PathBuf>) {
    match &report.outcome {
        Outcome::NonFinite { reason, global_step, checkpoint } => {
            (reason.clone(), *global_step, checkpoint.clone())
        }
        other => panic!("expected Outcome::NonFinite, got {other:?}"),
    }
}

/// A following run with `auto_resume` starts from the last good checkpoint, at global step
/// `step`, and finishes.
fn assert_resumes_at(dir: &Path, step: u64) {
    let latest = burn_stoker::saver::Checkpoint::latest(dir).unwrap().expect("a checkpoint");
    assert_eq!(latest.global_step(), step);
    let started = StartedAt::default();
    let device = burn_stoker::device::cpu();
    let report = train(dir, tiny_model(&device), 5, true, (ModelSaver::new(10), started.clone()))
        .expect("the resumed run trains");
    assert_eq!(started.0.load(Ordering::SeqCst), step);
    assert_eq!(report.outcome, Outcome::Finished);
    assert_eq!(report.counters.global_step(), 10);
    assert!(weights(&report.model).iter().flatten().all(|w| w.is_finite()));
}

#[test]
fn nan_weights_at_checkpoint_time_stop_cleanly_and_the_last_good_checkpoint_stays_the_latest() {
    let dir = scratch_dir("nan-weights");
    let device = burn_stoker::device::cpu();
    // Epochs of 2 steps, a checkpoint every epoch; the weights turn NaN in epoch 3's trigger.
    let report = train(&dir, tiny_model(&device), 5, false, (PoisonWeights { at: 3 }, ModelSaver::new(10)))
        .expect("NaN weights stop training without an error");
    let last = dir.join("checkpoints/step-4");
    assert_eq!(
        non_finite(&report),
        ("2 weights are not finite at global step 6 (epoch 3)".to_string(), 6, Some(last.clone()))
    );
    assert_eq!(report.counters.global_step(), 6);
    assert_eq!(report.counters.epoch_num(), 3, "no epoch after the NaN");
    // The model comes back as it is, NaN weights included.
    assert!(weights(&report.model).iter().flatten().any(|w| w.is_nan()));
    let mut saved: Vec<String> = std::fs::read_dir(dir.join("checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("step-"))
        .collect();
    saved.sort();
    assert_eq!(saved, ["step-2", "step-4"], "no checkpoint of the NaN weights");
    assert_resumes_at(&dir, 4);
}

#[test]
fn nan_loss_with_terminate_on_nan_stops_cleanly_and_auto_resume_loads_the_last_good_checkpoint() {
    let dir = scratch_dir("nan-loss");
    let device = burn_stoker::device::cpu();
    let report = Trainer::new(tiny_model(&device), SgdConfig::new().init(), tiny_data(2, &device))
        .learning_rate(0.1)
        .max_epoch(5)
        .log_dir(&dir)
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .callbacks((burn_stoker::debug::TerminateOnNaN::new(), ModelSaver::new(10)))
        // The loss of global step 5 (the first of epoch 3) is NaN.
        .train(|model: &Linear, batch, step: &mut Step<'_>| {
            let loss = mse(model, batch);
            if step.counters().global_step() == 4 { loss.mul_scalar(f32::NAN) } else { loss }
        })
        .expect("a NaN loss stops training without an error");
    let last = dir.join("checkpoints/step-4");
    assert_eq!(
        non_finite(&report),
        ("the loss is NaN at global step 5 (epoch 3)".to_string(), 5, Some(last.clone()))
    );
    assert_eq!(report.counters.global_step(), 5, "stopped at the NaN step's boundary");
    assert_resumes_at(&dir, 4);
}
