//! DSL-declared callbacks run in the real trainer: the recorded events and fetched values match
//! what the attributes say.

use std::cell::RefCell;

use burn::module::Module;
use burn::nn::Linear;
use stoker::prelude::*;
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
fn every_three_steps<M>(ctx: &mut Context<'_, M>) -> stoker::Result<()> {
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
    let device = stoker::device::cpu();
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
        Outer { inner: Inner { counter: Counter::default(), watch: Watch }, every: EveryTwoEpochs, three: EveryThreeSteps },
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
    assert_eq!(report.stop_reason.as_deref(), Some("five"));
}
