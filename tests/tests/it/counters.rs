//! The counters a porter reads, one test per row of the table in the guide ("Events and the
//! lifecycle", "The counters"): each counter recorded at every event of a small run and compared
//! with its definition, replayed here as the seed's own loop runs it (tensorpack's
//! `TrainLoop.main_loop`, neon's `Model.fit` and `_epoch_fit`).

use std::sync::{Arc, Mutex};

use burn::nn::Linear;
use burn_stoker::callback::{StepEvents, StepGradients, StepLoss};
use burn_stoker::prelude::*;
use stoker_tests::{mse, scratch_dir, tiny_data, tiny_model};

/// What one event saw: its name and every counter.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Seen {
    event: &'static str,
    epoch_num: u64,
    global_step: u64,
    local_step: u64,
    latest_step_index: i64,
    epoch_index: u64,
    step_index: u64,
}

type Log = Arc<Mutex<Vec<Seen>>>;

/// Records the counters at every event of the loop, the events inside the step included.
struct Counting(Log);

impl Counting {
    fn see(&self, event: &'static str, ctx: &Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.0.lock().unwrap().push(Seen {
            event,
            epoch_num: ctx.epoch_num(),
            global_step: ctx.global_step(),
            local_step: ctx.local_step(),
            latest_step_index: ctx.latest_step_index(),
            epoch_index: ctx.epoch_index(),
            step_index: ctx.step_index(),
        });
        Ok(())
    }
}

impl Callback<Linear> for Counting {
    fn step_events(&self) -> StepEvents {
        StepEvents::LOSS.and(StepEvents::GRADIENTS)
    }
    fn setup(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.see("setup", ctx)
    }
    fn before_train(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.see("before_train", ctx)
    }
    fn before_epoch(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.see("before_epoch", ctx)
    }
    fn before_step(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.see("before_step", ctx)
    }
    fn before_backward(
        &mut self,
        ctx: &mut Context<'_, Linear>,
        _: &StepLoss<'_>,
    ) -> burn_stoker::Result<()> {
        self.see("before_backward", ctx)
    }
    fn after_backward(
        &mut self,
        ctx: &mut Context<'_, Linear>,
        _: &StepGradients,
    ) -> burn_stoker::Result<()> {
        self.see("after_backward", ctx)
    }
    fn after_step(&mut self, ctx: &mut Context<'_, Linear>, _: &Fetched<'_>) -> burn_stoker::Result<()> {
        self.see("after_step", ctx)
    }
    fn trigger_step(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.see("trigger_step", ctx)
    }
    fn after_epoch(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.see("after_epoch", ctx)
    }
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.see("trigger_epoch", ctx)
    }
    fn after_train(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.see("after_train", ctx)
    }
}

const EPOCHS: u64 = 3;
const STEPS: u64 = 3;

/// The counters at every event of a run of `EPOCHS` x `STEPS` from epoch 1.
fn seen() -> Vec<Seen> {
    let log = Log::default();
    let device = burn_stoker::device::cpu();
    Trainer::new(
        tiny_model(&device),
        burn::optim::SgdConfig::new().init(),
        tiny_data(STEPS as usize, &device),
    )
    .max_epoch(EPOCHS)
    .log_dir(scratch_dir("counters"))
    .default_callbacks(DefaultCallbacks::none())
    .callbacks(Counting(log.clone()))
    .train(|model: &Linear, batch, _: &mut Step<'_>| mse(model, batch))
    .unwrap();
    let seen = std::mem::take(&mut *log.lock().unwrap());
    assert_eq!(seen.len(), 3 + EPOCHS as usize * (3 + 5 * STEPS as usize), "every event once");
    seen
}

/// The events of the run, in order, as the stoker names them (the step's five per step).
fn events() -> Vec<&'static str> {
    let step = ["before_step", "before_backward", "after_backward", "after_step", "trigger_step"];
    let mut out = vec!["setup", "before_train"];
    for _ in 0..EPOCHS {
        out.push("before_epoch");
        (0..STEPS).for_each(|_| out.extend(step));
        out.extend(["after_epoch", "trigger_epoch"]);
    }
    out.push("after_train");
    out
}

/// tensorpack's `TrainLoop` replayed: `epoch_num` starts at `starting_epoch - 1`, `local_step`
/// at -1; `for epoch_num in range(starting_epoch, max_epoch + 1)`, `before_epoch`, `for
/// local_step in range(steps_per_epoch)`: `before_run`, the step, `global_step += 1`
/// (`MaintainStepCounter._after_run`, before the other callbacks' `_after_run`), `after_run`,
/// `trigger_step`; then `after_epoch`, `trigger_epoch`; `after_train`. The step's inside is
/// between `before_run` and `after_run`, at the values of `before_run`. Each event with
/// (epoch_num, global_step, local_step).
fn tensorpack() -> Vec<(&'static str, u64, u64, i64)> {
    let (mut epoch_num, mut global_step, mut local_step) = (0u64, 0u64, -1i64);
    let mut out = vec![("setup", epoch_num, global_step, local_step)];
    out.push(("before_train", epoch_num, global_step, local_step));
    for epoch in 1..=EPOCHS {
        epoch_num = epoch;
        out.push(("before_epoch", epoch_num, global_step, local_step));
        for step in 0..STEPS as i64 {
            local_step = step;
            for event in ["before_step", "before_backward", "after_backward"] {
                out.push((event, epoch_num, global_step, local_step));
            }
            global_step += 1;
            out.push(("after_step", epoch_num, global_step, local_step));
            out.push(("trigger_step", epoch_num, global_step, local_step));
        }
        out.push(("after_epoch", epoch_num, global_step, local_step));
        out.push(("trigger_epoch", epoch_num, global_step, local_step));
    }
    out.push(("after_train", epoch_num, global_step, local_step));
    out
}

/// neon's `Model.fit` replayed: `while epoch_index < num_epochs`: `on_epoch_begin(epoch)`,
/// `for mb_idx, (x, t) in enumerate(dataset)`: `on_minibatch_begin(epoch, mb_idx)`, the step,
/// `on_minibatch_end(epoch, mb_idx)`; `on_epoch_end(epoch)`, `epoch_index += 1`. Each event
/// that passes them with (epoch, minibatch), `None` for the epoch events, which pass none;
/// neon's begin and end map to stoker's events as the table in "Coming from" says.
fn neon() -> Vec<(&'static str, u64, Option<u64>)> {
    let mut out = Vec::new();
    for epoch in 0..EPOCHS {
        out.push(("before_epoch", epoch, None));
        for minibatch in 0..STEPS {
            out.push(("before_step", epoch, Some(minibatch)));
            out.push(("after_step", epoch, Some(minibatch)));
            out.push(("trigger_step", epoch, Some(minibatch)));
        }
        out.push(("after_epoch", epoch, None));
        out.push(("trigger_epoch", epoch, None));
    }
    out
}

#[test]
fn the_run_delivers_the_events_the_replays_name() {
    let seen = seen();
    assert_eq!(seen.iter().map(|s| s.event).collect::<Vec<_>>(), events());
    let tp: Vec<_> = tensorpack().iter().map(|t| t.0).collect();
    assert_eq!(tp, events(), "the tensorpack replay covers the same events");
}

/// Row `epoch_num` (tensorpack's `epoch_num`, stoker's): 1-based, 0 before the first epoch.
#[test]
fn epoch_num_is_tensorpacks_at_every_event() {
    let seen = seen();
    for (s, (event, epoch_num, _, _)) in seen.iter().zip(tensorpack()) {
        assert_eq!(s.epoch_num, epoch_num, "epoch_num at {event}");
    }
}

/// Row `global_step` (tensorpack's, stoker's): the steps finished, counting the step from
/// `after_step` on.
#[test]
fn global_step_is_tensorpacks_at_every_event() {
    let seen = seen();
    for (s, (event, _, global_step, _)) in seen.iter().zip(tensorpack()) {
        assert_eq!(s.global_step, global_step, "global_step at {event}");
    }
}

/// Row `local_step` (stoker's): the steps of the epoch finished; it differs from tensorpack's
/// from `after_step` on, where it counts the step that just ran.
#[test]
fn local_step_counts_the_finished_steps_of_the_epoch() {
    let seen = seen();
    let (mut finished, mut epoch) = (0, 0);
    for s in &seen {
        if s.epoch_num != epoch {
            (finished, epoch) = (0, s.epoch_num);
        }
        if s.event == "after_step" {
            finished += 1;
        }
        assert_eq!(s.local_step, finished, "local_step at {} of epoch {}", s.event, s.epoch_num);
    }
    let differs = seen.iter().zip(tensorpack()).filter(|(s, t)| s.local_step as i64 != t.3).count();
    assert!(differs > 0, "stoker's local_step is not tensorpack's: the table says so");
}

/// Row `latest_step_index()`: tensorpack's `local_step` at every event, -1 before the
/// first step and the previous epoch's last index in a later `before_epoch` included.
#[test]
fn tensorpack_local_step_is_tensorpacks_at_every_event() {
    let seen = seen();
    for (s, (event, _, _, local_step)) in seen.iter().zip(tensorpack()) {
        assert_eq!(
            s.latest_step_index, local_step,
            "tensorpack's local_step at {event} of epoch {}",
            s.epoch_num
        );
    }
}

/// Rows `epoch_index()` and `step_index()`: the `epoch` and `minibatch` neon passes, at
/// every event that has them.
#[test]
fn neon_epoch_and_minibatch_are_neons_at_every_event_that_passes_them() {
    let seen: Vec<Seen> =
        seen().into_iter().filter(|s| !matches!(s.event, "before_backward" | "after_backward")).collect();
    let in_epochs = &seen[2..seen.len() - 1];
    let neon = neon();
    assert_eq!(in_epochs.len(), neon.len());
    for (s, (event, epoch, minibatch)) in in_epochs.iter().zip(neon) {
        assert_eq!(s.event, event);
        assert_eq!(s.epoch_index, epoch, "neon's epoch at {event}");
        if let Some(minibatch) = minibatch {
            assert_eq!(s.step_index, minibatch, "neon's minibatch at {event}");
        }
    }
    // Between the epochs, where neon passes no minibatch: the last one's index, 0 before any.
    let at = |event: &str| seen.iter().filter(|s| s.event == event).map(|s| s.step_index).collect::<Vec<_>>();
    assert_eq!(at("before_epoch"), [0; EPOCHS as usize]);
    assert_eq!(at("after_epoch"), [STEPS - 1; EPOCHS as usize]);
    assert_eq!(seen[0].epoch_index, 0, "0 before the first epoch");
}
