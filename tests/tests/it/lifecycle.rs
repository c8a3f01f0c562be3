//! The trainer's lifecycle, pinned event by event with a recording callback: a plain run, the
//! trigger wrappers, stops, errors and panics; the order of callbacks; fetches and transfers.

use std::sync::{Arc, Mutex};

use burn::nn::Linear;
use burn::tensor::{Tensor, TensorData};
use burn_stoker::debug::CallbackFactory;
use burn_stoker::prelude::*;
use burn_stoker::trigger::{Proxy, ProxyCallback};
use burn_stoker::{CheckpointError, ConfigError, Error, callback::Event};
use stoker_tests::reads::count_reads;
use stoker_tests::{mse, scratch_dir, tiny_data, tiny_model};

type Log = Arc<Mutex<Vec<String>>>;

/// Records every event it receives as `"name:event e<epoch> g<global> l<local>"`.
struct Recorder {
    name: &'static str,
    log: Log,
    order: Order,
    /// Fail (`Err`) or panic at this event and global step.
    fail: Option<(&'static str, u64, bool)>,
    /// Ask for a stop at this global step, from after_step.
    stop_at: Option<u64>,
    /// Ask for a stop at this event and global step (after recording it).
    stop_in: Option<(&'static str, u64)>,
}

impl Recorder {
    fn new(name: &'static str, log: &Log) -> Self {
        Recorder { name, log: log.clone(), order: Order::none(), fail: None, stop_at: None, stop_in: None }
    }
    fn record(&self, event: &str, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let c = *ctx.counters();
        if self.stop_in == Some((event, c.global_step())) {
            ctx.request_stop(format!("stop in {event}"));
        }
        self.log.lock().unwrap().push(format!(
            "{}:{event} e{} g{} l{}",
            self.name,
            c.epoch_num(),
            c.global_step(),
            c.local_step()
        ));
        match self.fail {
            Some((at, step, panic)) if at == event && step == c.global_step() => {
                if panic {
                    panic!("{} broke", self.name);
                }
                Err(Error::msg(format!("{} failed on purpose", self.name)))
            }
            _ => Ok(()),
        }
    }
}

impl Callback<Linear> for Recorder {
    fn name(&self) -> std::borrow::Cow<'static, str> {
        self.name.into()
    }
    fn order(&self) -> Order {
        self.order.clone()
    }
    fn setup(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.record("setup", ctx)
    }
    fn before_train(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.record("before_train", ctx)
    }
    fn before_epoch(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.record("before_epoch", ctx)
    }
    fn before_step(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.record("before_step", ctx)
    }
    fn after_step(
        &mut self,
        ctx: &mut Context<'_, Linear>,
        _values: &Fetched<'_>,
    ) -> burn_stoker::Result<()> {
        if self.stop_at == Some(ctx.global_step()) {
            ctx.request_stop("enough");
        }
        self.record("after_step", ctx)
    }
    fn trigger_step(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.record("trigger_step", ctx)
    }
    fn after_epoch(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.record("after_epoch", ctx)
    }
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.record("trigger_epoch", ctx)?;
        self.trigger(ctx)
    }
    fn trigger(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.record("trigger", ctx)
    }
    fn after_train(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.record("after_train", ctx)
    }
}

fn run<K, C: Callbacks<Linear, K>>(
    callbacks: C,
    epochs: u64,
    steps: usize,
) -> burn_stoker::Result<TrainReport<Linear>> {
    run_from(callbacks, 1, epochs, steps)
}

/// As [`run`], from epoch `starting_epoch` (a fresh run: `global_step` starts at 0).
fn run_from<K, C: Callbacks<Linear, K>>(
    callbacks: C,
    starting_epoch: u64,
    epochs: u64,
    steps: usize,
) -> burn_stoker::Result<TrainReport<Linear>> {
    let device = burn_stoker::device::cpu();
    Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(steps, &device))
        .max_epoch(epochs)
        .starting_epoch(starting_epoch)
        .log_dir(scratch_dir("lifecycle"))
        .default_callbacks(DefaultCallbacks::none())
        .callbacks(callbacks)
        .train(|model: &Linear, batch, step: &mut Step<'_>| {
            let loss = mse(model, batch);
            step.output("double", loss.clone() * 2.0);
            step.output(
                "pair",
                Tensor::<2>::from_data(TensorData::new(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2]), &loss.device()),
            );
            loss
        })
        .map_err(burn_stoker::Error::from)
}

fn take(log: &Log) -> Vec<String> {
    std::mem::take(&mut *log.lock().unwrap())
}

/// The events of `name` in a plain run of `epochs` x `steps`, up to `after_train`.
fn plain(name: &str, epochs: u64, steps: u64) -> Vec<String> {
    let mut out = vec![format!("{name}:setup e0 g0 l0"), format!("{name}:before_train e0 g0 l0")];
    let mut g = 0;
    for e in 1..=epochs {
        out.push(format!("{name}:before_epoch e{e} g{g} l0"));
        for l in 0..steps {
            out.push(format!("{name}:before_step e{e} g{g} l{l}"));
            g += 1;
            out.push(format!("{name}:after_step e{e} g{g} l{}", l + 1));
            out.push(format!("{name}:trigger_step e{e} g{g} l{}", l + 1));
        }
        for event in ["after_epoch", "trigger_epoch", "trigger"] {
            out.push(format!("{name}:{event} e{e} g{g} l{steps}"));
        }
    }
    out.push(format!("{name}:after_train e{epochs} g{g} l{steps}"));
    out
}

#[test]
fn a_plain_run_delivers_every_event_in_order_with_its_counters() {
    let log = Log::default();
    let report = run(Recorder::new("A", &log), 2, 2).unwrap();
    assert_eq!(take(&log), plain("A", 2, 2));
    assert_eq!(report.counters.global_step(), 4);
    assert_eq!(report.outcome, Outcome::Finished);
}

fn triggers(log: &Log) -> Vec<String> {
    take(log).into_iter().filter(|l| l.contains(":trigger ")).collect()
}

#[test]
fn periodic_trigger_triggers_every_k_steps() {
    let log = Log::default();
    run(PeriodicTrigger::new(Recorder::new("A", &log)).every_k_steps(3), 2, 4).unwrap();
    assert_eq!(triggers(&log), vec!["A:trigger e1 g3 l3", "A:trigger e2 g6 l2"]);
}

#[test]
fn periodic_trigger_triggers_every_k_epochs_and_before_train() {
    let log = Log::default();
    run(PeriodicTrigger::new(Recorder::new("A", &log)).every_k_epochs(2).before_train(true), 5, 1).unwrap();
    assert_eq!(triggers(&log), vec!["A:trigger e0 g0 l0", "A:trigger e2 g2 l1", "A:trigger e4 g4 l1"]);
}

#[test]
fn periodic_trigger_replaces_trigger_epoch_and_keeps_the_other_events() {
    let log = Log::default();
    run(PeriodicTrigger::new(Recorder::new("A", &log)).every_k_epochs(2), 2, 1).unwrap();
    let events = take(&log);
    assert!(!events.iter().any(|l| l.contains("trigger_epoch")), "{events:?}");
    assert_eq!(events.iter().filter(|l| l.contains(":before_step")).count(), 2);
    assert_eq!(events.iter().filter(|l| l.contains(":trigger ")).count(), 1);
}

/// tensorpack's `PeriodicCallback` with only `every_k_steps` (tensorpack/callbacks/trigger.py:
/// `PeriodicCallback.predicate` is `global_step % k == 0`, read by `EnableCallbackIf` in
/// `before_run`, whose answer `after_run` keeps, in `trigger_step` and in each epoch event;
/// tensorpack's `global_step` counts a step from its `after_run` on): `before_step` and
/// `after_step` of the steps after a multiple of k steps (the first step too), `trigger_step` of
/// the steps ending on one, the epoch events when `global_step` is one; neither the last step
/// nor the last epoch is added (that is `every_k_epochs`' rule). Before: `before_step` and
/// `after_step` came a step later (`before_step e1 g2`, `after_step e1 g3`: the steps ending on
/// a multiple of k).
#[test]
fn periodic_callback_every_k_steps_alone_adds_no_last_step_nor_last_epoch() {
    let log = Log::default();
    run(PeriodicCallback::new(Recorder::new("A", &log)).every_k_steps(3), 2, 4).unwrap();
    let gated: Vec<String> = take(&log)
        .into_iter()
        .filter(|l| !l.contains("setup") && !l.contains("before_train") && !l.contains("after_train"))
        .collect();
    assert_eq!(
        gated,
        vec![
            // global_step 0 is a multiple of every k, as in tensorpack.
            "A:before_epoch e1 g0 l0",
            "A:before_step e1 g0 l0",
            "A:after_step e1 g1 l1",
            "A:trigger_step e1 g3 l3",
            "A:before_step e1 g3 l3",
            "A:after_step e1 g4 l4",
            "A:trigger_step e2 g6 l2",
            "A:before_step e2 g6 l2",
            "A:after_step e2 g7 l3",
        ]
    );
    // An epoch that ends on a multiple of k gets its epoch events (4 steps, k = 2: both).
    run(PeriodicCallback::new(Recorder::new("A", &log)).every_k_steps(2), 2, 4).unwrap();
    let ends: Vec<String> = take(&log).into_iter().filter(|l| l.contains(":trigger ")).collect();
    assert_eq!(ends, vec!["A:trigger e1 g4 l4", "A:trigger e2 g8 l4"]);
}

/// With `every_k_epochs`, the last step of training and the last epoch's events are delivered
/// too (tensorpack: `local_step == steps_per_epoch - 1 and epoch_num == max_epoch`).
#[test]
fn periodic_callback_every_k_epochs_adds_the_last_step_and_epoch() {
    let log = Log::default();
    run(PeriodicCallback::new(Recorder::new("A", &log)).every_k_epochs(2), 3, 2).unwrap();
    let steps: Vec<String> = take(&log).into_iter().filter(|l| l.contains("_step")).collect();
    assert_eq!(
        steps,
        vec![
            "A:before_step e2 g2 l0",
            "A:after_step e2 g3 l1",
            "A:trigger_step e2 g3 l1",
            "A:before_step e2 g3 l1",
            "A:after_step e2 g4 l2",
            "A:trigger_step e2 g4 l2",
            "A:before_step e3 g5 l1",
            "A:after_step e3 g6 l2",
            "A:trigger_step e3 g6 l2",
        ]
    );
}

/// The last step is the last epoch's last step, however `global_step` started: a fresh run from
/// `starting_epoch(2)` ends at global step 4, not at `max_epoch * steps_per_epoch` = 6.
#[test]
fn periodic_callback_last_step_fires_from_a_starting_epoch_past_one() {
    let log = Log::default();
    run_from(PeriodicCallback::new(Recorder::new("A", &log)).every_k_epochs(5), 2, 3, 2).unwrap();
    let gated: Vec<String> = take(&log)
        .into_iter()
        .filter(|l| !l.contains("setup") && !l.contains("before_train") && !l.contains("after_train"))
        .collect();
    assert_eq!(
        gated,
        vec![
            "A:before_epoch e3 g2 l0",
            "A:before_step e3 g3 l1",
            "A:after_step e3 g4 l2",
            "A:trigger_step e3 g4 l2",
            "A:after_epoch e3 g4 l2",
            "A:trigger_epoch e3 g4 l2",
            "A:trigger e3 g4 l2",
        ]
    );
}

#[test]
fn periodic_callback_delivers_epoch_events_every_k_epochs_and_the_last() {
    let log = Log::default();
    run(PeriodicCallback::new(Recorder::new("A", &log)).every_k_epochs(2), 5, 1).unwrap();
    let epochs: Vec<String> =
        take(&log).into_iter().filter(|l| l.contains("before_epoch") || l.contains(":trigger ")).collect();
    assert_eq!(
        epochs,
        vec![
            "A:before_epoch e2 g1 l0",
            "A:trigger e2 g2 l1",
            "A:before_epoch e4 g3 l0",
            "A:trigger e4 g4 l1",
            "A:before_epoch e5 g4 l0",
            "A:trigger e5 g5 l1",
        ]
    );
}

#[test]
fn enable_callback_if_gates_everything_but_setup_before_and_after_train() {
    let log = Log::default();
    let only_epoch_two = |c: &Counters| c.epoch_num() == 2;
    run(EnableCallbackIf::new(Recorder::new("A", &log), only_epoch_two), 3, 1).unwrap();
    assert_eq!(
        take(&log),
        vec![
            "A:setup e0 g0 l0",
            "A:before_train e0 g0 l0",
            "A:before_epoch e2 g1 l0",
            "A:before_step e2 g1 l0",
            "A:after_step e2 g2 l1",
            "A:trigger_step e2 g2 l1",
            "A:after_epoch e2 g2 l1",
            "A:trigger_epoch e2 g2 l1",
            "A:trigger e2 g2 l1",
            "A:after_train e3 g3 l1",
        ]
    );
}

#[test]
fn a_stop_mid_epoch_ends_the_epoch_without_its_end_events_and_runs_after_train() {
    let log = Log::default();
    let mut a = Recorder::new("A", &log);
    a.stop_at = Some(3);
    let report = run((a, Recorder::new("B", &log)), 2, 4).unwrap();
    let events = take(&log);
    let tail: Vec<&str> = events.iter().rev().take(6).rev().map(String::as_str).collect();
    assert_eq!(
        tail,
        vec![
            "A:after_step e1 g3 l3",
            "B:after_step e1 g3 l3",
            "A:trigger_step e1 g3 l3",
            "B:trigger_step e1 g3 l3",
            "A:after_train e1 g3 l3",
            "B:after_train e1 g3 l3"
        ]
    );
    assert_eq!(report.outcome, Outcome::Stopped("enough".into()));
    assert_eq!(report.counters.global_step(), 3);
}

#[test]
fn an_error_in_a_callback_is_returned_after_every_after_train() {
    let log = Log::default();
    let mut b = Recorder::new("B", &log);
    b.fail = Some(("trigger_step", 2, false));
    let error = run((Recorder::new("A", &log), b, Recorder::new("C", &log)), 2, 2).unwrap_err();
    assert_eq!(error.to_string(), "callback `B` failed in trigger_step: B failed on purpose");
    assert!(matches!(error, Error::Callback { .. }));
    let events = take(&log);
    let tail: Vec<&str> = events.iter().rev().take(4).rev().map(String::as_str).collect();
    assert_eq!(
        tail,
        vec![
            "B:trigger_step e1 g2 l2",
            "A:after_train e1 g2 l2",
            "B:after_train e1 g2 l2",
            "C:after_train e1 g2 l2"
        ]
    );
}

#[test]
fn a_panic_in_a_callback_is_reported_with_its_name_after_every_after_train() {
    let log = Log::default();
    let mut b = Recorder::new("B", &log);
    b.fail = Some(("after_epoch", 2, true));
    let error = run((Recorder::new("A", &log), b), 2, 2).unwrap_err();
    assert_eq!(error.to_string(), "panic in callback `B` in after_epoch: B broke");
    let events = take(&log);
    assert_eq!(&events[events.len() - 2..], ["A:after_train e1 g2 l2", "B:after_train e1 g2 l2"]);
}

#[test]
fn a_panic_in_the_training_step_is_reported_as_such() {
    let log = Log::default();
    let device = burn_stoker::device::cpu();
    let error =
        Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(2, &device))
            .log_dir(scratch_dir("step-panic"))
            .default_callbacks(DefaultCallbacks::none())
            .callbacks(Recorder::new("A", &log))
            .train(|model: &Linear, batch, step: &mut Step<'_>| {
                if step.counters().global_step() == 1 {
                    panic!("bad batch");
                }
                mse(model, batch)
            })
            .unwrap_err();
    assert_eq!(error.to_string(), "panic in the training step: bad batch");
    assert_eq!(take(&log).last().map(String::as_str), Some("A:after_train e1 g1 l1"));
}

#[test]
fn after_train_reaches_only_callbacks_whose_setup_ran() {
    let log = Log::default();
    let mut b = Recorder::new("B", &log);
    b.fail = Some(("setup", 0, false));
    let error = run((Recorder::new("A", &log), b, Recorder::new("C", &log)), 1, 1).unwrap_err();
    assert_eq!(error.to_string(), "callback `B` failed in setup: B failed on purpose");
    assert_eq!(
        take(&log),
        vec!["A:setup e0 g0 l0", "B:setup e0 g0 l0", "A:after_train e0 g0 l0", "B:after_train e0 g0 l0"]
    );
}

#[test]
fn order_constraints_sort_topologically_and_keep_registration_order_for_ties() {
    let log = Log::default();
    let mut a = Recorder::new("A", &log);
    a.order = Order::none().after("C");
    let b = Recorder::new("B", &log);
    let c = Recorder::new("C", &log);
    let mut d = Recorder::new("D", &log);
    d.order = Order::none().before("B");
    run((a, b, c, d), 1, 1).unwrap();
    let setup: Vec<String> =
        take(&log).into_iter().filter(|l| l.contains(":setup")).map(|l| l[..1].to_string()).collect();
    // At each point, the earliest registered callback whose constraints are met runs next.
    assert_eq!(setup, vec!["C", "A", "D", "B"]);
}

#[test]
fn an_order_cycle_is_an_error_naming_every_callback_in_it() {
    let log = Log::default();
    let mut a = Recorder::new("A", &log);
    a.order = Order::none().after("C");
    let mut b = Recorder::new("B", &log);
    b.order = Order::none().after("A");
    let mut c = Recorder::new("C", &log);
    c.order = Order::none().after("B");
    let error = run((Recorder::new("Free", &log), a, b, c), 1, 1).unwrap_err();
    assert_eq!(error.to_string(), "the callbacks' order constraints form a cycle: `A` -> `B` -> `C` -> `A`");
    assert!(take(&log).is_empty(), "nothing ran");
}

#[test]
fn callback_names_that_repeat_are_refused_before_anything_runs() {
    let log = Log::default();
    let error = run((Recorder::new("A", &log), Recorder::new("B", &log), Recorder::new("A", &log)), 1, 1)
        .unwrap_err();
    assert!(matches!(error, Error::Config(ConfigError::Order(_))), "{error:?}");
    assert_eq!(
        error.to_string(),
        "two callbacks are named `A`; give one another name with `.named(\"...\")` (`A(...)`: burn_stoker::callback::Named) so that checkpointed state, order constraints and errors can tell them apart"
    );
    assert!(take(&log).is_empty(), "nothing ran, not even setup");

    // Two closures' callbacks get the same default name: the second needs one of its own.
    let error = run((CallbackFactory::<Linear>::new(), CallbackFactory::<Linear>::new()), 1, 1).unwrap_err();
    assert!(error.to_string().starts_with("two callbacks are named `CallbackFactory`"), "{error}");
    run((CallbackFactory::<Linear>::new(), CallbackFactory::<Linear>::new().named("second")), 1, 1)
        .expect("distinct names train");
}

#[test]
fn an_order_target_that_is_not_registered_is_an_error() {
    let log = Log::default();
    let mut a = Recorder::new("A", &log);
    a.order = Order::none().after("InferenceRunner");
    let error = run((a, Recorder::new("B", &log)), 1, 1).unwrap_err();
    assert_eq!(
        error.to_string(),
        "callback `A` is ordered after `InferenceRunner`, but no callback named `InferenceRunner` is registered; registered: `A`, `B`"
    );
}

#[test]
fn boxed_lists_options_and_nested_tuples_are_sets() {
    let log = Log::default();
    let boxed: Vec<Box<dyn Callback<Linear>>> =
        vec![Box::new(Recorder::new("A", &log)), Box::new(Recorder::new("B", &log))];
    let none: Option<Recorder> = None;
    run((boxed, (Recorder::new("C", &log), (Some(Recorder::new("D", &log)), none))), 1, 1).unwrap();
    let setup: Vec<String> =
        take(&log).into_iter().filter(|l| l.contains(":setup")).map(|l| l[..1].to_string()).collect();
    assert_eq!(setup, vec!["A", "B", "C", "D"]);
}

/// Fetches what it is told, every `every` steps, and records the values.
struct Fetcher {
    name: &'static str,
    fetches: Vec<Fetch>,
    every: u64,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Callback<Linear> for Fetcher {
    fn name(&self) -> std::borrow::Cow<'static, str> {
        self.name.into()
    }
    fn fetches(&self) -> &[Fetch] {
        &self.fetches
    }
    fn wants_fetch(&self, counters: &Counters) -> bool {
        counters.next_step().is_multiple_of(self.every)
    }
    fn after_step(&mut self, ctx: &mut Context<'_, Linear>, values: &Fetched<'_>) -> burn_stoker::Result<()> {
        if !ctx.global_step().is_multiple_of(self.every) {
            assert!(values.get::<f32>("loss").is_err(), "nothing fetched at an unwanted step");
            return Ok(());
        }
        for fetch in &self.fetches {
            let text = match (fetch.name.as_ref(), fetch.kind) {
                ("pair", burn_stoker::fetch::FetchKind::Host) => {
                    let data: TensorData = values.get(&fetch.name)?;
                    format!("pair {:?} {:?}", data.shape().to_vec(), data.try_to_vec::<f32>().unwrap())
                }
                ("pair", burn_stoker::fetch::FetchKind::Device) => {
                    let tensor: Tensor<2> = values.get(&fetch.name)?;
                    format!("pair on device {:?}", tensor.dims())
                }
                (name, _) => {
                    let loss: f32 = values.get("loss")?;
                    let value: f64 = values.get(name)?;
                    let ratio = if name == "double" { value / f64::from(loss) } else { 1.0 };
                    format!("{name} ratio {ratio:.3}")
                }
            };
            self.seen.lock().unwrap().push(text);
        }
        Ok(())
    }
}

fn fetcher(fetches: Vec<Fetch>, every: u64) -> (Fetcher, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::default();
    (Fetcher { name: "Fetcher", fetches, every, seen: Arc::clone(&seen) }, seen)
}

#[test]
fn fetched_values_are_the_step_outputs() {
    let (f, seen) = fetcher(vec![Fetch::host("loss"), Fetch::host("double"), Fetch::host("pair")], 1);
    run(f, 1, 2).unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 6);
    assert_eq!(seen[1], "double ratio 2.000");
    assert_eq!(seen[2], "pair [2, 2] [1.0, 2.0, 3.0, 4.0]");
}

// Transfers are counted where they happen: `count_reads` counts every device-to-host read burn
// makes on the training thread (stoker_tests::reads), whoever asked for it; the report's own
// `fetch_transfers` must agree with it.

#[test]
fn no_fetch_means_no_transfer() {
    let log = Log::default();
    let (report, reads) = count_reads(|| run(Recorder::new("A", &log), 2, 3).unwrap());
    assert_eq!(reads, 0, "device-to-host reads in a run where nobody fetches");
    assert_eq!(report.fetch_transfers, 0);
}

#[test]
fn host_fetches_of_all_callbacks_share_one_transfer_per_step() {
    let (f1, _) = fetcher(vec![Fetch::host("loss"), Fetch::host("double")], 1);
    let (mut f2, _) = fetcher(vec![Fetch::host("pair"), Fetch::host("loss")], 1);
    f2.name = "Second";
    let (report, reads) = count_reads(|| run((f1, f2), 2, 3).unwrap());
    assert_eq!(reads, 6, "one device-to-host read per step");
    assert_eq!(report.fetch_transfers, 6);
}

#[test]
fn fetches_happen_only_at_the_steps_asked_for() {
    let (f, seen) = fetcher(vec![Fetch::host("loss")], 2);
    let (report, reads) = count_reads(|| run(f, 2, 3).unwrap());
    assert_eq!(reads, 3, "steps 2, 4 and 6");
    assert_eq!(report.fetch_transfers, 3);
    assert_eq!(seen.lock().unwrap().len(), 3);
}

#[test]
fn device_fetches_need_no_transfer() {
    let (f, seen) = fetcher(vec![Fetch::device("pair")], 1);
    let (report, reads) = count_reads(|| run(f, 1, 3).unwrap());
    assert_eq!(reads, 0);
    assert_eq!(report.fetch_transfers, 0);
    assert_eq!(seen.lock().unwrap()[0], "pair on device [2, 2]");
}

#[test]
fn fetching_a_name_the_step_does_not_produce_is_a_named_error() {
    let (f, _) = fetcher(vec![Fetch::host("accuracy")], 1);
    let error = run(f, 1, 1).unwrap_err();
    assert_eq!(
        error.to_string(),
        "callback `Fetcher` asks for `accuracy`, which the training step does not produce; it produces `double`, `pair`, `loss`"
    );
}

#[test]
fn events_have_their_names() {
    assert_eq!(Event::AfterStep(Fetched::none()).name(), "after_step");
    assert_eq!(Event::TriggerEpoch.name(), "trigger_epoch");
}

/// Trains `model` 2 epochs of 2 steps with `callbacks`, keeping the whole result.
fn run_keeping<K, C: Callbacks<Linear, K>>(
    model: Linear,
    callbacks: C,
) -> Result<TrainReport<Linear>, TrainError<Linear>> {
    let device = burn_stoker::device::cpu();
    Trainer::new(model, burn::optim::SgdConfig::new().init(), tiny_data(2, &device))
        .max_epoch(2)
        .log_dir(scratch_dir("keeping"))
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .callbacks(callbacks)
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
}

#[test]
fn error_in_after_train_comes_back_with_the_trained_model_and_the_counters() {
    let log = Log::default();
    let initial = tiny_model(&burn_stoker::device::cpu());
    let clean = run_keeping(initial.clone(), Recorder::new("A", &log)).expect("a clean run");
    let mut b = Recorder::new("B", &log);
    b.fail = Some(("after_train", 4, false));
    let failed = run_keeping(initial, (Recorder::new("A", &log), b)).expect_err("after_train fails");
    assert_eq!(failed.to_string(), "callback `B` failed in after_train: B failed on purpose");
    assert!(
        matches!(&failed.error, Error::Callback { callback, event: "after_train", .. } if callback == "B")
    );
    // The Debug form leaves the model's weights out.
    let debug = format!("{failed:?}");
    assert!(debug.contains("outcome: Finished") && !debug.contains("Linear"), "{debug}");
    let report = failed.into_report().expect("the model came back");
    assert_eq!(report.outcome, Outcome::Finished, "training itself finished");
    assert_eq!(report.counters.global_step(), 4);
    assert_eq!(report.counters.epoch_num(), 2);
    assert_eq!(
        stoker_tests::weights(&report.model),
        stoker_tests::weights(&clean.model),
        "the trained model"
    );
}

#[test]
fn error_in_an_event_comes_back_with_the_model_as_it_was() {
    let log = Log::default();
    let mut b = Recorder::new("B", &log);
    b.fail = Some(("trigger_step", 3, false));
    let failed = run_keeping(tiny_model(&burn_stoker::device::cpu()), (Recorder::new("A", &log), b))
        .expect_err("trigger_step fails");
    assert_eq!(failed.to_string(), "callback `B` failed in trigger_step: B failed on purpose");
    let report = failed.report.expect("the model came back");
    assert_eq!(report.outcome, Outcome::Failed);
    assert_eq!(report.counters.global_step(), 3);
}

#[test]
fn error_before_training_has_no_report_and_converts_into_the_crates_error() {
    let dir = scratch_dir("no-report");
    let device = burn_stoker::device::cpu();
    let train = || -> burn_stoker::Result<TrainReport<Linear>> {
        // `?` turns the TrainError into burn_stoker::Error.
        let report =
            Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(2, &device))
                .log_dir(&dir)
                .resume_from(dir.join("nowhere"))
                .default_callbacks(DefaultCallbacks::none())
                .handle_signals(false)
                .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))?;
        Ok(report)
    };
    let error = train().expect_err("nothing to resume from");
    assert!(matches!(error, Error::Checkpoint(CheckpointError::NotFound { .. })), "{error:?}");
    let failed =
        Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(2, &device))
            .log_dir(&dir)
            .resume_from(dir.join("nowhere"))
            .default_callbacks(DefaultCallbacks::none())
            .handle_signals(false)
            .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
            .expect_err("nothing to resume from");
    assert!(failed.report.is_none(), "no training happened");
    assert!(std::error::Error::source(&failed).is_none(), "transparent: the error's own source");
}

/// `starting_epoch(0)` is refused with an error naming the bounds, in every build: the check
/// comes before any arithmetic on the value (a debug build used to panic on `0 - 1` first).
#[test]
fn starting_epoch_zero_is_an_error_not_an_overflow() {
    let device = burn_stoker::device::cpu();
    for (starting_epoch, max_epoch) in [(0, 3), (4, 3), (u64::MAX, 3)] {
        let result =
            Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(2, &device))
                .max_epoch(max_epoch)
                .starting_epoch(starting_epoch)
                .log_dir(scratch_dir("starting-epoch"))
                .default_callbacks(DefaultCallbacks::none())
                .handle_signals(false)
                .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch));
        let error = result.expect_err("an out-of-range starting epoch is an error").to_string();
        assert!(
            error.contains(&format!(
                "starting_epoch must be between 1 and max_epoch ({max_epoch}), not {starting_epoch}"
            )),
            "{error}"
        );
    }
}

/// What a callback saw of the outcome: while training (before_train, each trigger_epoch) and in
/// after_train.
#[derive(Default, Clone)]
struct SeesOutcome(Arc<Mutex<Seen>>);

/// The outcome at each event while training, and the outcome and failure in after_train.
type Seen = (Vec<Option<Outcome>>, Option<(Option<Outcome>, Option<String>)>);

impl Callback<Linear> for SeesOutcome {
    fn before_train(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.0.lock().unwrap().0.push(ctx.outcome().cloned());
        Ok(())
    }
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.0.lock().unwrap().0.push(ctx.outcome().cloned());
        Ok(())
    }
    fn after_train(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.0.lock().unwrap().1 = Some((ctx.outcome().cloned(), ctx.failure().map(String::from)));
        Ok(())
    }
}

#[test]
fn after_train_knows_how_training_ended_finished_stopped_or_failed() {
    let seen = |probe: &SeesOutcome| probe.0.lock().unwrap().clone();

    let probe = SeesOutcome::default();
    run(probe.clone(), 2, 2).unwrap();
    let (during, after) = seen(&probe);
    assert_eq!(during, vec![None, None, None], "no outcome while training");
    assert_eq!(after, Some((Some(Outcome::Finished), None)));

    let log = Log::default();
    let mut stopper = Recorder::new("A", &log);
    stopper.stop_at = Some(3);
    let probe = SeesOutcome::default();
    run((stopper, probe.clone()), 2, 4).unwrap();
    assert_eq!(seen(&probe).1, Some((Some(Outcome::Stopped("enough".into())), None)));

    let mut failing = Recorder::new("B", &log);
    failing.fail = Some(("trigger_step", 2, false));
    let probe = SeesOutcome::default();
    let error = run((failing, probe.clone()), 2, 2).unwrap_err();
    assert_eq!(
        seen(&probe).1,
        Some((Some(Outcome::Failed), Some(error.to_string()))),
        "after_train sees the failure and its message"
    );
}

#[test]
fn periodic_callback_without_a_period_is_refused_at_setup() {
    let log = Log::default();
    let error = run(PeriodicCallback::new(Recorder::new("A", &log)), 1, 2).unwrap_err().to_string();
    assert!(error.contains("PeriodicCallback around `A` has no period"), "{error}");
    assert!(error.contains("every_k_steps or every_k_epochs"), "{error}");
    assert!(take(&log).iter().all(|event| !event.contains("after_step")), "no step was delivered");
}

/// Puts `val-error` at each `trigger_epoch`: the value of its epoch.
struct PutValError(Vec<f64>);

impl Callback<Linear> for PutValError {
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let error = self.0[ctx.epoch_num() as usize - 1];
        ctx.monitors().put_scalar("val-error", error);
        Ok(())
    }
}

fn val_error_below_0_2(ctx: &Context<'_, Linear>) -> bool {
    ctx.monitors_ref().latest("val-error").is_some_and(|error| error < 0.2)
}

/// A predicate on the monitors: enabled once `val-error` < 0.2, which epoch 3's
/// `trigger_epoch` puts (before the wrapper, registered after the putter, reads it).
#[test]
fn enable_callback_if_with_context_reads_the_monitors() {
    let errors = || PutValError(vec![0.5, 0.3, 0.1, 0.05]);
    let log = Log::default();
    run((errors(), EnableCallbackIf::with_context(Recorder::new("A", &log), val_error_below_0_2)), 4, 2)
        .unwrap();
    let gated: Vec<String> = take(&log)
        .into_iter()
        .filter(|l| !l.contains("setup") && !l.contains("before_train") && !l.contains("after_train"))
        .collect();
    assert_eq!(
        gated,
        vec![
            "A:trigger_epoch e3 g6 l2",
            "A:trigger e3 g6 l2",
            "A:before_epoch e4 g6 l0",
            "A:before_step e4 g6 l0",
            "A:after_step e4 g7 l1",
            "A:trigger_step e4 g7 l1",
            "A:before_step e4 g7 l1",
            "A:after_step e4 g8 l2",
            "A:trigger_step e4 g8 l2",
            "A:after_epoch e4 g8 l2",
            "A:trigger_epoch e4 g8 l2",
            "A:trigger e4 g8 l2",
        ]
    );

    // A wrapped callback that fetches gets its values at the enabled steps; they leave the
    // device at every step it wants them (the fetch is decided before the monitors can be read).
    let (f, seen) = fetcher(vec![Fetch::host("loss")], 1);
    let report = run((errors(), EnableCallbackIf::with_context(f, val_error_below_0_2)), 4, 2).unwrap();
    assert_eq!(seen.lock().unwrap().len(), 2, "steps 7 and 8");
    assert_eq!(report.fetch_transfers, 8);
    // A counters predicate decides the fetches: nothing leaves the device at a disabled step.
    let (f, seen) = fetcher(vec![Fetch::host("loss")], 1);
    let report = run(EnableCallbackIf::new(f, |c: &Counters| c.epoch_num() == 4), 4, 2).unwrap();
    assert_eq!(seen.lock().unwrap().len(), 2, "steps 7 and 8");
    assert_eq!(report.fetch_transfers, 2);
}

/// The events from a stop requested at `(event, global_step)` by `A` (registered before `B`)
/// to the end: the tail of the log from A's event on.
fn after_stop(event: &'static str, step: u64) -> (Vec<String>, TrainReport<Linear>) {
    let log = Log::default();
    let mut a = Recorder::new("A", &log);
    a.stop_in = Some((event, step));
    let report = run((a, Recorder::new("B", &log)), 2, 2).unwrap();
    let events = take(&log);
    let from = events
        .iter()
        .position(|l| l.starts_with(&format!("A:{event} ")) && l.contains(&format!(" g{step} ")));
    (events[from.expect("A's event")..].to_vec(), report)
}

/// tensorpack's `StopTraining` is an exception: the callbacks after the raiser in that event,
/// and every later event but `after_train`, do not run. A stoker stop is a request honoured at
/// the next step boundary: the rest of the event runs for every callback, and so do the rest
/// of the step's events; then the loop ends without the epoch-end events of an unfinished
/// epoch, and `after_train` runs for every callback.
#[test]
fn stop_lets_the_rest_of_the_event_and_the_step_run_then_ends_at_the_boundary() {
    // Before a step: that step still runs, with its after_step and trigger_step.
    let (tail, report) = after_stop("before_step", 1);
    assert_eq!(
        tail,
        vec![
            "A:before_step e1 g1 l1",
            "B:before_step e1 g1 l1",
            "A:after_step e1 g2 l2",
            "B:after_step e1 g2 l2",
            "A:trigger_step e1 g2 l2",
            "B:trigger_step e1 g2 l2",
            "A:after_train e1 g2 l2",
            "B:after_train e1 g2 l2",
        ]
    );
    assert_eq!(report.outcome, Outcome::Stopped("stop in before_step".into()));
    assert_eq!(report.counters.global_step(), 2);

    // In after_epoch: the epoch finishes (trigger_epoch for all); the next one never starts.
    let (tail, report) = after_stop("after_epoch", 2);
    assert_eq!(
        tail,
        vec![
            "A:after_epoch e1 g2 l2",
            "B:after_epoch e1 g2 l2",
            "A:trigger_epoch e1 g2 l2",
            "A:trigger e1 g2 l2",
            "B:trigger_epoch e1 g2 l2",
            "B:trigger e1 g2 l2",
            "A:after_train e1 g2 l2",
            "B:after_train e1 g2 l2",
        ]
    );
    assert_eq!(report.outcome, Outcome::Stopped("stop in after_epoch".into()));

    // In before_epoch: no step of that epoch runs, nor its end events.
    let (tail, report) = after_stop("before_epoch", 2);
    assert_eq!(
        tail,
        vec![
            "A:before_epoch e2 g2 l0",
            "B:before_epoch e2 g2 l0",
            "A:after_train e2 g2 l0",
            "B:after_train e2 g2 l0",
        ]
    );
    assert_eq!(report.counters.global_step(), 2);
}

/// A decorator: renames the callback, counts its epoch triggers, and withholds its `before_step`.
struct Decorator {
    triggers: Arc<Mutex<u64>>,
}

impl<C: Callback<Linear>> Proxy<Linear, C> for Decorator {
    fn name(&self, inner: &C) -> std::borrow::Cow<'static, str> {
        format!("Decorated({})", inner.name()).into()
    }
    fn trigger_epoch(&mut self, inner: &mut C, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        *self.triggers.lock().unwrap() += 1;
        inner.trigger_epoch(ctx)
    }
    fn before_step(&mut self, _inner: &mut C, _ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        Ok(())
    }
}

/// tensorpack's `ProxyCallback`: every event reaches the wrapped callback, as if unwrapped; a
/// decorator overrides what it changes and forwards the rest.
#[test]
fn proxy_callback_forwards_every_event_and_a_decorator_overrides_some() {
    let log = Log::default();
    run(ProxyCallback::new(Recorder::new("A", &log)), 2, 2).unwrap();
    assert_eq!(take(&log), plain("A", 2, 2));

    let triggers = Arc::new(Mutex::new(0));
    let decorated =
        ProxyCallback::decorated(Recorder::new("A", &log), Decorator { triggers: triggers.clone() });
    assert_eq!(Callback::<Linear>::name(&decorated), "Decorated(A)");
    run(decorated, 2, 2).unwrap();
    let expected: Vec<String> = plain("A", 2, 2).into_iter().filter(|l| !l.contains("before_step")).collect();
    assert_eq!(take(&log), expected);
    assert_eq!(*triggers.lock().unwrap(), 2);
}
