//! A short run through the trainer: which steps `PeriodicCallback` lets through (tensorpack's
//! rule, tensorpack/callbacks/trigger.py), and who receives `after_batch` after a training step.

use std::sync::{Arc, Mutex};

use burn::nn::{Linear, LinearConfig};
use burn::optim::SgdConfig;
use burn::tensor::Tensor;

use super::PeriodicCallback;
use crate::callback::{Callback, Context};
use crate::fetch::Fetched;
use crate::trainer::{DefaultCallbacks, Step, Trainer};

type Log = Arc<Mutex<Vec<String>>>;

/// Logs `<event> g<global_step>` of the step events and of `after_batch`; says whether it takes
/// `after_batch`.
struct Steps {
    log: Log,
    name: &'static str,
    takes_after_batch: bool,
}

impl Steps {
    fn push(&self, event: &str, ctx: &Context<'_, Linear>) -> crate::Result<()> {
        self.log.lock().unwrap().push(format!("{event} g{}", ctx.global_step()));
        Ok(())
    }
}

impl Callback<Linear> for Steps {
    fn name(&self) -> std::borrow::Cow<'static, str> {
        self.name.into()
    }
    fn takes_after_batch(&self) -> bool {
        self.takes_after_batch
    }
    fn before_step(&mut self, ctx: &mut Context<'_, Linear>) -> crate::Result<()> {
        self.push("before_step", ctx)
    }
    fn after_step(&mut self, ctx: &mut Context<'_, Linear>, _values: &Fetched<'_>) -> crate::Result<()> {
        self.push("after_step", ctx)
    }
    fn after_batch(&mut self, ctx: &mut Context<'_, Linear>) -> crate::Result<()> {
        self.push("after_batch", ctx)
    }
    fn trigger_step(&mut self, ctx: &mut Context<'_, Linear>) -> crate::Result<()> {
        self.push("trigger_step", ctx)
    }
}

/// One epoch of `steps` steps with `callbacks`.
fn run<C: crate::callback::Callbacks<Linear, K>, K>(name: &str, steps: usize, callbacks: C) {
    let device = crate::device::cpu();
    let model: Linear = LinearConfig::new(2, 1).init(&device);
    let data: Vec<(Tensor<2>, Tensor<2>)> =
        (0..steps).map(|_| (Tensor::ones([2, 2], &device), Tensor::zeros([2, 1], &device))).collect();
    let dir = std::env::temp_dir().join(format!("stoker-lib-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    Trainer::new(model, SgdConfig::new().init(), data)
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .log_dir(&dir)
        .callbacks(callbacks)
        .train(|model: &Linear, (x, y): (Tensor<2>, Tensor<2>), _step: &mut Step<'_>| {
            (model.forward(x) - y).powi_scalar(2).mean()
        })
        .map_err(|e| e.error.to_string())
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// tensorpack's `PeriodicCallback(every_k_steps=3)`: its predicate `global_step % 3 == 0` is read
/// in `before_run`, with `global_step` not yet counting the step (and `after_run` keeps that
/// answer), and again in `trigger_step`, counting it: `before_step` and `after_step` of steps 1,
/// 4, 7 (0, 3, 6 steps before them), `trigger_step` of steps 3 and 6. Before the fix,
/// `before_step` and `after_step` came with steps 3 and 6.
#[test]
fn periodic_callback_reads_tensorpacks_predicate_before_the_step_and_after_it() {
    let log = Log::default();
    let steps = Steps { log: log.clone(), name: "Steps", takes_after_batch: false };
    run("periodic", 7, PeriodicCallback::new(steps).every_k_steps(3));
    let log = log.lock().unwrap().clone();
    let expected = [
        "before_step g0",
        "after_step g1",
        "trigger_step g3",
        "before_step g3",
        "after_step g4",
        "trigger_step g6",
        "before_step g6",
        "after_step g7",
    ];
    assert_eq!(log, expected);
}

/// After a training step `after_batch` reaches the callbacks that take it, not one that says it
/// does not (`Callback::takes_after_batch`).
#[test]
fn after_batch_after_a_training_step_reaches_only_the_callbacks_that_take_it() {
    let (taker, decliner) = (Log::default(), Log::default());
    let takes = Steps { log: taker.clone(), name: "Takes", takes_after_batch: true };
    let declines = Steps { log: decliner.clone(), name: "Declines", takes_after_batch: false };
    run("after-batch", 2, (declines, takes));
    let ends = |log: &Log| log.lock().unwrap().iter().filter(|l| l.starts_with("after_batch")).count();
    assert_eq!((ends(&taker), ends(&decliner)), (2, 0));
    let order: Vec<String> = taker.lock().unwrap().clone();
    assert_eq!(&order[..4], ["before_step g0", "after_step g1", "after_batch g1", "trigger_step g1"]);
}
