//! What rows of the guide's catalogue ("Coming from tensorpack, neon, fastai, Lightning or
//! Keras") call the same as the seed, where no other module's test shows it: a default, a rule
//! of the loop, an error at setup.

use std::io::Write;
use std::sync::{Arc, Mutex};

use burn::nn::Linear;
use burn::tensor::Tensor;
use burn_stoker::debug::CallbackFactory;
use burn_stoker::monitor::{ScalarPrinter, TrainCost};
use burn_stoker::prelude::*;
use burn_stoker::track::ModelSummary;
use stoker_tests::{mse, scratch_dir, tiny_data, tiny_model};

type Batch = (Tensor<2>, Tensor<2>);

fn trainer(name: &str, epochs: u64, batches: usize) -> Trainer<Linear, Vec<Batch>> {
    let device = burn_stoker::device::cpu();
    Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(batches, &device))
        .max_epoch(epochs)
        .log_dir(scratch_dir(name))
        .handle_signals(false)
        .default_callbacks(DefaultCallbacks::none())
}

fn step(model: &Linear, batch: Batch, _step: &mut Step<'_>) -> Tensor<1> {
    mse(model, batch)
}

/// tensorpack's `ModelSaver()`: the 10 most recent checkpoints, and one per half hour forever.
#[test]
fn model_saver_keeps_ten_checkpoints_and_one_per_half_hour_by_default() {
    let policy = ModelSaver::default().policy();
    assert_eq!((policy.max_to_keep, policy.keep_every_n_hours), (10, Some(0.5)));
    let dir = scratch_dir("catalogue-saver-default");
    let device = burn_stoker::device::cpu();
    Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(1, &device))
        .max_epoch(12)
        .log_dir(&dir)
        .handle_signals(false)
        .default_callbacks(DefaultCallbacks::none())
        .callbacks(ModelSaver::default())
        .train(step)
        .unwrap();
    let mut kept: Vec<u64> = std::fs::read_dir(dir.join("checkpoints"))
        .unwrap()
        .filter_map(|entry| entry.unwrap().file_name().to_str()?.strip_prefix("step-")?.parse().ok())
        .collect();
    kept.sort_unstable();
    assert_eq!(kept, (3..=12).collect::<Vec<_>>(), "a checkpoint per epoch, the last 10 kept");
}

/// tensorpack's loop runs `steps_per_epoch` steps an epoch, whatever the data's length: one pass
/// over the data by default, and a new pass when the data runs out within an epoch.
#[test]
fn steps_per_epoch_sets_an_epochs_length_and_a_new_pass_starts_when_the_data_runs_out() {
    let seen: Arc<Mutex<Vec<(u64, u64)>>> = Arc::default();
    let log = seen.clone();
    let record = CallbackFactory::<Linear>::new().after_epoch(move |ctx| {
        log.lock().unwrap().push((ctx.epoch_num(), ctx.global_step()));
    });
    let report = trainer("catalogue-steps-default", 2, 3).callbacks(record).train(step).unwrap();
    assert_eq!(report.counters.global_step(), 6, "one pass over 3 batches per epoch");
    assert_eq!(std::mem::take(&mut *seen.lock().unwrap()), [(1, 3), (2, 6)]);

    let log = seen.clone();
    let record = CallbackFactory::<Linear>::new().after_epoch(move |ctx| {
        log.lock().unwrap().push((ctx.epoch_num(), ctx.global_step()));
    });
    let mut batches = 0;
    let report = trainer("catalogue-steps-set", 2, 3)
        .steps_per_epoch(5)
        .callbacks(record)
        .train(|model: &Linear, batch, step: &mut Step<'_>| {
            batches += 1;
            self::step(model, batch, step)
        })
        .unwrap();
    assert_eq!((report.counters.global_step(), batches), (10, 10));
    assert_eq!(*seen.lock().unwrap(), [(1, 5), (2, 10)], "5 steps an epoch over 3 batches");
}

/// tensorpack's `PeriodicTrigger` asserts a period or `before_train`; here, an error at setup.
#[test]
fn periodic_trigger_without_a_period_nor_before_train_is_refused_at_setup() {
    let trigger = PeriodicTrigger::new(CallbackFactory::<Linear>::new().named("Watched"));
    let error = trainer("catalogue-trigger-none", 1, 2).callbacks(trigger).train(step).unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("PeriodicTrigger around `CallbackFactory(Watched)` never triggers"),
        "{message}"
    );
    assert!(message.contains("every_k_steps, every_k_epochs or before_train"), "{message}");
}

/// tensorpack's `Monitors.put_scalar`, `get_latest` and `get_history`: the history is the
/// `(global_step, value)` pairs put, oldest first, and what one callback puts another reads.
#[test]
fn monitors_latest_and_history_are_the_global_step_and_value_pairs_put() {
    // What `Reader` saw at the end: the latest `quarter`, its history, the latest of a name never put.
    type Seen = (Option<f64>, Vec<(u64, f64)>, Option<f64>);
    let seen: Arc<Mutex<Option<Seen>>> = Arc::default();
    let log = seen.clone();
    let putter = CallbackFactory::<Linear>::new()
        .trigger_step(|ctx| {
            let value = ctx.global_step() as f64 / 4.0;
            ctx.monitors().put_scalar("quarter", value);
        })
        .named("Putter");
    let reader = CallbackFactory::<Linear>::new()
        .after_train(move |ctx| {
            let monitors = ctx.monitors_ref();
            *log.lock().unwrap() = Some((
                monitors.latest("quarter"),
                monitors.history("quarter").to_vec(),
                monitors.latest("other"),
            ));
        })
        .named("Reader");
    trainer("catalogue-monitors", 2, 2).callbacks((putter, reader)).train(step).unwrap();
    let (latest, history, other) = seen.lock().unwrap().clone().expect("after_train ran");
    assert_eq!(latest, Some(1.0));
    assert_eq!(history, [(1, 0.25), (2, 0.5), (3, 0.75), (4, 1.0)]);
    assert_eq!(other, None, "a name never put has no value");
}

#[derive(Clone, Default)]
struct SharedBuffer(Arc<Mutex<Vec<u8>>>);

impl Write for SharedBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The lines a `ScalarPrinter` prints over a run of 2 epochs of 2 steps, where `x` (the global
/// step) is put at every step and `y` (10 times the epoch) at each epoch's trigger.
fn printed(printer: ScalarPrinter, name: &str) -> String {
    let out = SharedBuffer::default();
    let sink = printer.sink(Box::new(out.clone())).unwrap();
    let mut sink = Some(sink);
    let opener = CallbackFactory::<Linear>::new()
        .setup(move |ctx| {
            ctx.monitors().add_sink(sink.take().expect("one setup"));
        })
        .named("Opener");
    let putter = CallbackFactory::<Linear>::new()
        .trigger_step(|ctx| {
            let step = ctx.global_step() as f64;
            ctx.monitors().put_scalar("x", step);
        })
        .trigger_epoch(|ctx| {
            let epoch = ctx.epoch_num() as f64;
            ctx.monitors().put_scalar("y", 10.0 * epoch);
        })
        .named("Putter");
    trainer(name, 2, 2).callbacks((opener, putter)).train(step).unwrap();
    String::from_utf8(out.0.lock().unwrap().clone()).unwrap()
}

/// tensorpack's defaults (`enable_step` off, `enable_epoch` on) print each epoch's scalars once
/// at its end; with `enable_step`, every scalar is printed as it is put, at every step, the
/// epoch's last and its end included, then the epoch's lines repeat every scalar of the epoch.
#[test]
fn scalar_printer_prints_at_epoch_ends_by_default_and_each_scalar_as_put_with_enable_step() {
    let epochs = "epoch 1 (global step 2):\n  x: 2\n  y: 10\nepoch 2 (global step 4):\n  x: 4\n  y: 20\n";
    assert_eq!(printed(ScalarPrinter::new(), "catalogue-printer-default"), epochs);
    let steps = printed(ScalarPrinter::new().enable_step(true), "catalogue-printer-step");
    assert_eq!(
        steps,
        "[step 1] x: 1\n[step 2] x: 2\n[step 2] y: 10\nepoch 1 (global step 2):\n  x: 2\n  y: 10\n\
         [step 3] x: 3\n[step 4] x: 4\n[step 4] y: 20\nepoch 2 (global step 4):\n  x: 4\n  y: 20\n"
    );
    let only_steps =
        printed(ScalarPrinter::new().enable_step(true).enable_epoch(false), "catalogue-printer-off");
    assert_eq!(
        only_steps,
        "[step 1] x: 1\n[step 2] x: 2\n[step 2] y: 10\n[step 3] x: 3\n[step 4] x: 4\n[step 4] y: 20\n"
    );
}

/// The defaults are registered before the trainer's callbacks, so within an event they run
/// first: a user's `before_train` finds the model summary written, and its `after_epoch` reads
/// the `train_cost` of the epoch that just ended.
#[test]
fn the_defaults_run_before_the_users_callbacks_within_an_event() {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let (at_start, at_epoch) = (seen.clone(), seen.clone());
    let user = CallbackFactory::<Linear>::new()
        .before_train(move |ctx| {
            let written = ctx.log_dir().join("model_summary.txt").is_file();
            at_start.lock().unwrap().push(format!("before_train summary written: {written}"));
        })
        .after_epoch(move |ctx| {
            let costs = ctx.monitors_ref().history("train_cost").len();
            at_epoch.lock().unwrap().push(format!("after_epoch {} costs: {costs}", ctx.epoch_num()));
        });
    let defaults = DefaultCallbacks {
        model_summary: Some(ModelSummary::new()),
        train_cost: Some(TrainCost::new()),
        ..DefaultCallbacks::none()
    };
    trainer("catalogue-defaults-first", 2, 2)
        .default_callbacks(defaults)
        .callbacks(user)
        .train(step)
        .unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        ["before_train summary written: true", "after_epoch 1 costs: 1", "after_epoch 2 costs: 2"]
    );
}

/// Lightning's `enable_progress_bar` and `enable_model_summary` are on by default: so are the
/// progress bar and the model summary, each turned off with `None`.
#[test]
fn progress_bar_and_model_summary_are_defaults_each_turned_off_with_none() {
    let defaults = DefaultCallbacks::default();
    assert!(defaults.progress.is_some() && defaults.model_summary.is_some());
    let dir = scratch_dir("catalogue-summary-off");
    let device = burn_stoker::device::cpu();
    let off = DefaultCallbacks { progress: None, model_summary: None, ..DefaultCallbacks::none() };
    Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(1, &device))
        .log_dir(&dir)
        .handle_signals(false)
        .default_callbacks(off)
        .train(step)
        .unwrap();
    assert!(!dir.join("model_summary.txt").exists(), "no summary written");
}
