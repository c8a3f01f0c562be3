//! DSL-declared callbacks run in the real trainer: the recorded events and fetched values match
//! what the attributes say.

use std::cell::RefCell;

use burn::module::Module;
use burn::nn::Linear;
use burn_stoker::prelude::*;
use stoker_tests::{mse, scratch_dir, tiny_data, tiny_model};

thread_local! {
    static LOG: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

fn log(entry: String) {
    LOG.with(|l| l.borrow_mut().push(entry));
}

fn take_log() -> Vec<String> {
    LOG.with(|l| std::mem::take(&mut *l.borrow_mut()))
}

#[callback(on = trigger, every_k_epochs = 2)]
fn every_two_epochs(ctx: &mut Context<'_, impl Module>) {
    log(format!("every_two_epochs e{} g{}", ctx.epoch_num(), ctx.global_step()));
}

#[callback(on = trigger, every_k_steps = 3, before_train = true)]
fn every_three_steps<M>(ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
    log(format!("every_three_steps g{}", ctx.global_step()));
    Ok(())
}

#[callback(on = after_step, every_k_steps = 2)]
#[fetch("loss", "double")]
fn watch(loss: f32, double: f64, ctx: &mut Context<'_, Linear>) {
    assert!((double - 2.0 * f64::from(loss)).abs() < 1e-5);
    log(format!("watch g{} {}", ctx.global_step(), loss > 0.0));
}

#[callback(on = trigger_step)]
fn stop_at_five(ctx: &mut Context<'_, impl Module>) -> Flow {
    if ctx.global_step() == 5 { Flow::Stop("five".into()) } else { Flow::Continue }
}

#[derive(Default, serde::Serialize, serde::Deserialize)]
struct Counter {
    steps: u64,
    triggers: u64,
}

#[callback(state)]
#[order(after = EveryTwoEpochs)]
impl Counter {
    #[on(trigger_step)]
    fn count(&mut self) {
        self.steps += 1;
    }

    #[on(trigger)]
    fn report(&mut self, ctx: &mut Context<'_, impl Module>) {
        self.triggers += 1;
        log(format!("counter e{} steps {}", ctx.epoch_num(), self.steps));
    }
}

#[derive(Callbacks)]
struct Inner {
    counter: Counter,
    #[every_k_steps(2)]
    watch: Watch,
}

#[derive(Callbacks)]
struct Outer {
    inner: Inner,
    every: EveryTwoEpochs,
    three: EveryThreeSteps,
}

fn train<K, C: Callbacks<Linear, K>>(callbacks: C, epochs: u64) -> TrainReport<Linear> {
    let device = burn_stoker::device::cpu();
    Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(2, &device))
        .max_epoch(epochs)
        .log_dir(scratch_dir("dsl"))
        .default_callbacks(DefaultCallbacks::none())
        .callbacks(callbacks)
        .train(|model: &Linear, batch, step: &mut Step<'_>| {
            let loss = mse(model, batch);
            step.output("double", loss.clone() * 2.0);
            loss
        })
        .unwrap()
}

#[test]
fn declared_callbacks_run_when_their_attributes_say() {
    take_log();
    let report = train(
        Outer {
            inner: Inner { counter: Counter::default(), watch: Watch },
            every: EveryTwoEpochs,
            three: EveryThreeSteps,
        },
        4,
    );
    assert_eq!(report.counters.global_step(), 8);
    let log = take_log();
    assert_eq!(
        log,
        vec![
            "every_three_steps g0",
            "watch g2 true",
            "counter e1 steps 2",
            "every_three_steps g3",
            "watch g4 true",
            "every_two_epochs e2 g4",
            "counter e2 steps 4",
            "watch g6 true",
            "every_three_steps g6",
            "counter e3 steps 6",
            "watch g8 true",
            "every_two_epochs e4 g8",
            "counter e4 steps 8",
        ]
    );
}

#[test]
fn a_returned_flow_stops_training() {
    let report = train((StopAtFive, EveryTwoEpochs), 10);
    assert_eq!(report.counters.global_step(), 5);
    assert_eq!(report.outcome, Outcome::Stopped("five".into()));
}

macro_rules! on_event {
    ($($event:ident => $name:ident),* $(,)?) => {
        $(
            #[callback(on = $event)]
            fn $name(ctx: &mut Context<'_, impl Module>) {
                log(format!(
                    "{} e{} g{} l{}",
                    stringify!($event),
                    ctx.epoch_num(),
                    ctx.global_step(),
                    ctx.local_step()
                ));
            }
        )*
    };
}

on_event! {
    setup => on_setup,
    before_train => on_before_train,
    before_epoch => on_before_epoch,
    before_step => on_before_step,
    after_step => on_after_step,
    trigger_step => on_trigger_step,
    after_epoch => on_after_epoch,
    trigger_epoch => on_trigger_epoch,
    trigger => on_trigger,
    after_train => on_after_train,
}

#[test]
fn a_function_on_each_event_runs_in_tensorpack_order() {
    take_log();
    train(
        (
            OnSetup,
            OnBeforeTrain,
            OnBeforeEpoch,
            OnBeforeStep,
            OnAfterStep,
            OnTriggerStep,
            OnAfterEpoch,
            OnTriggerEpoch,
            OnTrigger,
            OnAfterTrain,
        ),
        2,
    );
    let mut expected = vec!["setup e0 g0 l0".to_string(), "before_train e0 g0 l0".to_string()];
    let mut global = 0;
    for epoch in 1..=2 {
        expected.push(format!("before_epoch e{epoch} g{global} l0"));
        for local in 0..2 {
            expected.push(format!("before_step e{epoch} g{global} l{local}"));
            global += 1;
            expected.push(format!("after_step e{epoch} g{global} l{}", local + 1));
            expected.push(format!("trigger_step e{epoch} g{global} l{}", local + 1));
        }
        expected.push(format!("after_epoch e{epoch} g{global} l2"));
        expected.push(format!("trigger_epoch e{epoch} g{global} l2"));
        // A `trigger` callback is triggered by the default `trigger_epoch`.
        expected.push(format!("trigger e{epoch} g{global} l2"));
    }
    expected.push(format!("after_train e2 g{global} l2"));
    assert_eq!(take_log(), expected);
}

fn warm(counters: &Counters) -> bool {
    counters.global_step() >= 4
}

#[callback(on = after_step, enable_if = warm)]
#[fetch("loss")]
fn warm_loss(loss: f32, ctx: &mut Context<'_, impl Module>) {
    log(format!("warm_loss g{} {}", ctx.global_step(), loss.is_finite()));
}

#[test]
fn enable_if_gates_a_declared_callback_and_its_fetches() {
    take_log();
    let (report, reads) = stoker_tests::reads::count_reads(|| train(WarmLoss, 3));
    // The predicate is evaluated before each step: global_step 4 and 5 before steps 5 and 6.
    assert_eq!(take_log(), vec!["warm_loss g5 true", "warm_loss g6 true"]);
    assert_eq!(reads, 2, "device-to-host reads: only at the two enabled steps");
    assert_eq!(report.fetch_transfers, 2);
}

#[callback(on = trigger, chief_only = false)]
fn everywhere<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

#[derive(Callbacks)]
struct Placement {
    default_chief: EveryTwoEpochs,
    declared: Everywhere,
    #[chief_only]
    forced: EveryThreeSteps,
    #[chief_only(false)]
    #[order(before = EveryTwoEpochs)]
    released: StopAtFive,
}

#[test]
fn composition_reports_names_chief_only_and_field_order() {
    let set = Placement {
        default_chief: EveryTwoEpochs,
        declared: Everywhere,
        forced: EveryThreeSteps,
        released: StopAtFive,
    };
    let infos: Vec<(String, bool, Order)> = (0..Callbacks::<Linear, _>::len(&set))
        .map(|i| {
            let info = Callbacks::<Linear, _>::info(&set, i);
            (info.name.into_owned(), info.chief_only, info.order)
        })
        .collect();
    assert_eq!(
        infos,
        vec![
            ("EveryTwoEpochs".to_string(), true, Order::none()),
            ("Everywhere".to_string(), false, Order::none()),
            ("EveryThreeSteps".to_string(), true, Order::none()),
            ("StopAtFive".to_string(), false, Order::none().before("EveryTwoEpochs")),
        ]
    );
}

/// Flips at global step 3: false before the third step, true once it has run.
fn from_three(counters: &Counters) -> bool {
    counters.global_step() >= 3
}

#[callback(on = before_step, enable_if = from_three)]
fn dsl_before_step(ctx: &mut Context<'_, impl Module>) {
    log(format!("dsl before_step g{}", ctx.global_step()));
}

#[callback(on = after_step, enable_if = from_three)]
fn dsl_after_step(ctx: &mut Context<'_, impl Module>) {
    log(format!("dsl after_step g{}", ctx.global_step()));
}

#[callback(on = trigger_step, enable_if = from_three)]
fn dsl_trigger_step(ctx: &mut Context<'_, impl Module>) {
    log(format!("dsl trigger_step g{}", ctx.global_step()));
}

/// Logs its step events as `"<tag> <event> g<global_step>"`, ungated.
struct StepLog(&'static str);

impl<M> Callback<M> for StepLog {
    fn name(&self) -> std::borrow::Cow<'static, str> {
        self.0.into()
    }
    fn before_step(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        log(format!("{} before_step g{}", self.0, ctx.global_step()));
        Ok(())
    }
    fn after_step(&mut self, ctx: &mut Context<'_, M>, _: &Fetched<'_>) -> burn_stoker::Result<()> {
        log(format!("{} after_step g{}", self.0, ctx.global_step()));
        Ok(())
    }
    fn trigger_step(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        log(format!("{} trigger_step g{}", self.0, ctx.global_step()));
        Ok(())
    }
}

impl CallbackKind for StepLog {
    const NAME: &'static str = "StepLog";
}

#[derive(Callbacks)]
struct DeriveGated {
    #[enable_if(from_three)]
    steps: StepLog,
}

/// tensorpack's `EnableCallbackIf` rule, the same for a declared callback, a gated field of a
/// `#[derive(Callbacks)]` struct and the wrapper: `before_step` (and the step's fetches) follow
/// the predicate read before the step, `after_step` that same answer, and `trigger_step` the
/// predicate read after the step (`global_step` counting it). With a predicate that turns true
/// once step 3 has run: `trigger_step` from step 3, `before_step` and `after_step` from step 4.
#[test]
fn enable_if_reads_the_predicate_after_the_step_for_trigger_step_in_dsl_derive_and_wrapper() {
    take_log();
    train(
        (
            (DslBeforeStep, DslAfterStep, DslTriggerStep),
            DeriveGated { steps: StepLog("derive") },
            EnableCallbackIf::new(StepLog("wrapper"), from_three),
        ),
        2,
    );
    let log = take_log();
    for tag in ["dsl", "derive", "wrapper"] {
        let seen: Vec<&str> =
            log.iter().filter_map(|l| l.strip_prefix(tag).and_then(|l| l.strip_prefix(' '))).collect();
        assert_eq!(
            seen,
            vec!["trigger_step g3", "before_step g3", "after_step g4", "trigger_step g4"],
            "{tag}: {log:?}"
        );
    }
}
