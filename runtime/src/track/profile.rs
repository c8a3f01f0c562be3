//! The time of each phase of a step over a window of steps (tensorpack's `GraphProfiler`), as a
//! Chrome trace and as scalars.

use std::path::PathBuf;
use std::time::Duration;

use burn::module::Module;
use burn::tensor::Device;
use serde_json::{Value as Json, json};

use crate::callback::{Callback, Context, StepEvents, StepGradients, StepLoss};
use crate::error::{Error, Result, check_setting};
use crate::fetch::Fetched;
use crate::state::write_atomic;
use crate::state::{Clock, MonotonicClock};

/// The file [`StepProfiler`] writes in the log directory.
pub const PROFILE_FILE: &str = "step_profile.json";

/// The phases of a step, in the order they run.
const PHASES: [&str; 4] = ["forward", "backward", "optimizer", "callbacks"];

/// tensorpack's `GraphProfiler`, for a burn step: the time of each phase of the steps of a
/// window, written as a Chrome trace (`step_profile.json` in the log directory, which
/// `chrome://tracing` and [Perfetto](https://ui.perfetto.dev) open) and put as scalars
/// `profile/<phase>_ms` (the phase's mean over the window, in milliseconds) when the window ends.
///
/// Each profiled step is one `step` slice holding four, back to back:
///
/// - `forward`: from this callback's `before_step` to `before_backward` (the step function: the
///   forward pass and the loss);
/// - `backward`: to `after_backward` (burn's backward, and the loss hooks of the callbacks after
///   this one);
/// - `optimizer`: to this callback's `after_step` (the optimizer step, the gradient hooks of the
///   callbacks after this one, the step's fetch transfer, the `after_step` of the callbacks
///   before this one);
/// - `callbacks`: to this callback's `trigger_step` (the `after_step` of the callbacks after this
///   one and the `trigger_step` of those before it).
///
/// Register it first (or order the others after it) so that `callbacks` holds the other
/// callbacks' step events; the `before_step` of callbacks after it counts in `forward`, and the
/// `trigger_step` of callbacks after it falls between two profiled steps.
///
/// **It syncs the device** at each phase boundary of a profiled step (burn's `Device::sync` on
/// every device of the model), or an asynchronous device (CUDA, wgpu) would charge a phase with the
/// work queued by the one before; those steps are slower than unprofiled ones. Outside the window
/// it does nothing but receive the loss and gradient events; a run without it pays nothing.
/// It takes the loss and gradient events, so a step that runs backward itself (burn-train's
/// `TrainStep` through `LearnerStep`) refuses it, as it refuses every callback taking the loss.
/// tensorpack's `GraphProfiler` records TensorFlow's per-operation trace instead; burn has no
/// per-kernel tracer to read, so the phases are the finest grain here.
///
/// ```
/// use burn_stoker::track::StepProfiler;
///
/// // Steps 101 to 120, after 100 steps of warm-up.
/// let profiler = StepProfiler::new().skip(100).steps(20);
/// # let _ = profiler;
/// ```
#[doc(alias = "GraphProfiler")]
#[derive(Debug, Clone)]
pub struct StepProfiler<C = MonotonicClock> {
    clock: C,
    skip: u64,
    steps: u64,
    /// The devices to sync, from the model at setup.
    devices: Vec<Device>,
    /// Where the trace goes, set at setup.
    path: Option<PathBuf>,
    /// The boundaries of the step being profiled: before_step, before_backward, after_backward,
    /// after_step, trigger_step (`None` where not reached yet).
    marks: [Option<Duration>; 5],
    /// The profiled steps: their global step (1-based) and marks.
    done: Vec<(u64, [Duration; 5])>,
    /// Whether the window's results were written.
    written: bool,
}
crate::kind::kind!(StepProfiler<C>);

impl StepProfiler<MonotonicClock> {
    /// Profile steps 11 to 20 (10 after 10 of warm-up).
    pub fn new() -> Self {
        StepProfiler::with_clock(MonotonicClock::new())
    }
}

impl Default for StepProfiler<MonotonicClock> {
    fn default() -> Self {
        StepProfiler::new()
    }
}

impl<C: Clock> StepProfiler<C> {
    /// Read the time from `clock` (a [`ManualClock`](crate::state::ManualClock) in a test).
    pub fn with_clock(clock: C) -> Self {
        StepProfiler {
            clock,
            skip: 10,
            steps: 10,
            devices: Vec::new(),
            path: None,
            marks: [None; 5],
            done: Vec::new(),
            written: false,
        }
    }

    /// The steps of warm-up before the window (10 by default).
    pub fn skip(mut self, steps: u64) -> Self {
        self.skip = steps;
        self
    }

    /// The steps profiled (10 by default); at least 1.
    pub fn steps(mut self, steps: u64) -> Self {
        self.steps = steps;
        self
    }

    /// Whether the step numbered `global_step` (1-based) is in the window.
    fn in_window(&self, global_step: u64) -> bool {
        global_step > self.skip && global_step <= self.skip + self.steps
    }

    /// Marks boundary `i` of the step being profiled, after syncing the devices.
    fn mark(&mut self, i: usize) -> Result<()> {
        for device in &self.devices {
            device
                .sync()
                .map_err(|e| Error::msg(format!("StepProfiler: syncing the device failed: {e:?}")))?;
        }
        self.marks[i] = Some(self.clock.now());
        Ok(())
    }

    /// The trace of the profiled steps, in Chrome's trace-event format (times in microseconds).
    pub fn trace(&self) -> Json {
        let micros = |d: Duration| d.as_secs_f64() * 1e6;
        let mut events = Vec::with_capacity(self.done.len() * 5);
        for (global_step, marks) in &self.done {
            let slice = |name: &str, from: Duration, to: Duration| {
                json!({
                    "name": name, "cat": "step", "ph": "X", "pid": 1, "tid": 1,
                    "ts": micros(from), "dur": micros(to.saturating_sub(from)),
                    "args": { "global_step": global_step },
                })
            };
            events.push(slice("step", marks[0], marks[4]));
            for (k, phase) in PHASES.iter().enumerate() {
                events.push(slice(phase, marks[k], marks[k + 1]));
            }
        }
        json!({ "traceEvents": events, "displayTimeUnit": "ms" })
    }

    /// Writes the trace and puts the scalars, once.
    fn finish<M>(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if self.written || self.done.is_empty() {
            return Ok(());
        }
        self.written = true;
        let n = self.done.len() as f64;
        for (k, phase) in PHASES.iter().enumerate() {
            let nanos: u128 = self.done.iter().map(|(_, m)| m[k + 1].saturating_sub(m[k]).as_nanos()).sum();
            ctx.monitors().put_scalar(&format!("profile/{phase}_ms"), nanos as f64 / n / 1e6);
        }
        if let Some(path) = &self.path {
            let text = serde_json::to_vec(&self.trace())
                .map_err(|e| Error::context("StepProfiler: the trace", e))?;
            write_atomic(path, &text).map_err(|e| Error::io(path, e))?;
        }
        Ok(())
    }
}

impl<M: Module, C: Clock> Callback<M> for StepProfiler<C> {
    fn step_events(&self) -> StepEvents {
        StepEvents::LOSS.and(StepEvents::GRADIENTS)
    }

    fn setup(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        check_setting(self.steps >= 1, "StepProfiler", "steps", "at least 1", self.steps)?;
        self.devices = ctx.model().devices();
        self.path = Some(ctx.log_dir().join(PROFILE_FILE));
        Ok(())
    }

    fn before_step(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.marks = [None; 5];
        if self.in_window(ctx.global_step() + 1) {
            self.mark(0)?;
        }
        Ok(())
    }

    fn before_backward(&mut self, _ctx: &mut Context<'_, M>, _loss: &StepLoss<'_>) -> Result<()> {
        if self.marks[0].is_some() {
            self.mark(1)?;
        }
        Ok(())
    }

    fn after_backward(&mut self, _ctx: &mut Context<'_, M>, _grads: &StepGradients) -> Result<()> {
        if self.marks[1].is_some() {
            self.mark(2)?;
        }
        Ok(())
    }

    fn after_step(&mut self, _ctx: &mut Context<'_, M>, _values: &Fetched<'_>) -> Result<()> {
        if self.marks[2].is_some() {
            self.mark(3)?;
        }
        Ok(())
    }

    fn trigger_step(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if self.marks[3].is_none() {
            return Ok(());
        }
        self.mark(4)?;
        let marks = self.marks.map(|m| m.expect("every boundary of a profiled step is marked"));
        self.done.push((ctx.global_step(), marks));
        if ctx.global_step() >= self.skip + self.steps {
            self.finish(ctx)?;
        }
        Ok(())
    }

    fn after_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.finish(ctx)
    }
}
