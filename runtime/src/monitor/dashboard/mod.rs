//! The terminal dashboard (feature `dashboard`): [`Dashboard`].

mod screen;
mod state;
mod terminal;

use std::sync::Arc;
use std::sync::atomic::Ordering::{Relaxed, Release};
use std::thread::JoinHandle;

use self::state::{DashboardSink, Shared, Split, Status};
use super::ScalarPrinter;
use crate::Result;
use crate::callback::{Callback, Context, Counters};
use crate::fetch::{Fetch, Fetched};

/// A dashboard in the terminal, like burn-train's: the curves of the monitored scalars, training
/// and validation side by side, the progress of the epoch and of the run with the time left, the
/// learning rate, and the run's status (running, validating, stopping at the next boundary,
/// interrupted, stopped, finished, failed). The chief's only; a callback, so it replaces
/// [`ProgressBar`](crate::track::ProgressBar) and [`ScalarPrinter`] among the default
/// callbacks (set those to `None`).
///
/// It holds the terminal (raw mode, the alternate screen, stderr) from `before_train` to the
/// end of training, after every callback's `after_train`, once the values they put have reached
/// it, and puts it back on every way out: the end of training, a stop, an error, a panic (a
/// panic hook restores the terminal, then reports as before), a second SIGINT or SIGTERM from
/// outside (which exits at once; signals are handled on Unix only). Not after a death that runs
/// none of the process's code (SIGKILL, `std::process::exit` or `abort` elsewhere): `reset`
/// puts the terminal back then. The last frame stays on the screen, but after a panic (whose
/// message does). Keys: `q` stops the run at its next step boundary with a checkpoint, as a Ctrl-C
/// does (through the run's [`StopHandle`](crate::trainer::StopHandle), so the run ends
/// [`Interrupted`](crate::callback::Outcome::Interrupted) by `"StopHandle"`); Ctrl-C (the
/// terminal is in raw mode, so it is a key here) does the same, and a second Ctrl-C puts the
/// terminal back and exits at once with status 130. When stderr is not a terminal it falls back
/// to the plain printer ([`ScalarPrinter`]'s table on stdout at each epoch's end).
///
/// Its work is off the step's path: the curves come from the monitors through a writer (on the
/// writers' thread), a thread draws every 250 ms and reads the keys, and at each step the
/// callback stores the global step and the learning rate (two relaxed atomic stores). The step
/// outputs given to [`fetch`](Self::fetch) are read as **deferred** fetches when the screen
/// thread asks, at most every 250 ms (a flag the step reads, never a clock), and drawn as
/// per-step training curves.
///
/// A scalar's chart is its name without a `train`, `validation`, `valid` or `val` prefix (then
/// `_`, `-` or `/`): `train_cost`, `validation_cost` and the fetched `cost` share the chart
/// `cost`.
///
/// ```
/// use burn_stoker::monitor::Dashboard;
///
/// // The dashboard instead of the progress bar and the printer (they step aside by themselves);
/// // the step's `cost` every 250 ms.
/// let dashboard = Dashboard::new().fetch(["cost"]).scalars(["cost", "accuracy", "validation_error"]);
/// # let _ = dashboard;
/// ```
#[derive(Debug, Default)]
#[doc(alias = "TuiMetricsRenderer")]
pub struct Dashboard {
    selection: Option<Vec<String>>,
    fetches: Vec<Fetch>,
    /// Set at setup on the chief when stderr is a terminal.
    shared: Option<Arc<Shared>>,
    screen: Option<JoinHandle<()>>,
}
crate::kind::kind!(Dashboard);

impl Dashboard {
    /// Every monitored scalar, no step output fetched.
    pub fn new() -> Self {
        Dashboard::default()
    }

    /// Show only these scalars: each is a scalar's full name (`validation_error`) or its
    /// chart's name (`cost`: `train_cost` and `validation_cost`).
    pub fn scalars<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.selection = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// Also draw these scalar outputs of the training step, read every 250 ms at most as
    /// deferred fetches (the step never waits for them). Their chart is their name.
    pub fn fetch(mut self, names: impl IntoIterator<Item = &'static str>) -> Self {
        self.fetches = names.into_iter().map(Fetch::deferred).collect();
        self
    }

    /// End the screen thread (it leaves the last frame behind) and put the terminal back, not
    /// waiting for the writer's last values.
    fn close(&mut self) {
        if let Some(shared) = &self.shared {
            shared.closing.store(true, Release);
            shared.written.store(true, Release);
        }
        if let Some(screen) = self.screen.take() {
            let _ = screen.join();
        }
        terminal::restore();
    }

    /// The status the run ended with, and why.
    fn final_status<M>(&self, ctx: &Context<'_, M>, asked: Status) -> (Status, String) {
        if let Some(failure) = ctx.failure() {
            return (Status::Failed, failure.to_string());
        }
        match (asked, ctx.signal_received(), ctx.stop_requested()) {
            (Status::Stopping, _, _) | (_, Some(_), _) => (Status::Interrupted, String::new()),
            (_, None, Some(reason)) => (Status::Stopped, reason.to_string()),
            (_, None, None) => (Status::Finished, String::new()),
        }
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        self.close();
    }
}

impl<M> Callback<M> for Dashboard {
    fn fetches(&self) -> &[Fetch] {
        &self.fetches
    }

    fn wants_fetch(&self, _counters: &Counters) -> bool {
        match &self.shared {
            Some(shared) if shared.want_fetch.load(Relaxed) => {
                shared.want_fetch.store(false, Relaxed);
                true
            }
            _ => false,
        }
    }

    fn setup(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if !ctx.is_chief() {
            return Ok(());
        }
        // It replaces the progress bar and the scalar printer (its own printer below when
        // there is no terminal).
        ctx.hold_terminal();
        if !terminal::available() {
            let printer = ScalarPrinter::new().sink(Box::new(std::io::stdout()))?;
            ctx.monitors().add_sink(printer);
            return Ok(());
        }
        let shared = Arc::new(Shared::new(self.selection.clone()));
        ctx.monitors().add_sink(DashboardSink(shared.clone()));
        self.shared = Some(shared);
        Ok(())
    }

    fn before_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let Some(shared) = &self.shared else { return Ok(()) };
        let counters = ctx.counters();
        shared.max_epoch.store(counters.max_epoch(), Relaxed);
        shared.steps_per_epoch.store(counters.steps_per_epoch(), Relaxed);
        shared.global_step.store(ctx.global_step(), Relaxed);
        shared.run_first_step.store(ctx.global_step(), Relaxed);
        shared.learning_rate.store(ctx.learning_rate().to_bits(), Relaxed);
        if let Err(e) = terminal::enter() {
            crate::logging::warn!("Dashboard: cannot hold the terminal ({e}); training goes on without it");
            return Ok(());
        }
        let stop = ctx.stop_handle();
        match terminal::spawn(shared.clone(), Box::new(move || stop.stop())) {
            Ok(screen) => self.screen = Some(screen),
            Err(e) => {
                terminal::restore();
                crate::logging::warn!(
                    "Dashboard: cannot start its thread ({e}); training goes on without it"
                );
            }
        }
        Ok(())
    }

    fn before_epoch(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if let Some(shared) = &self.shared {
            let counters = ctx.counters();
            shared.epoch.store(counters.epoch_num(), Relaxed);
            shared.steps_per_epoch.store(counters.steps_per_epoch(), Relaxed);
            // The steps of the epoch done before it (a run resumed in its middle) count as done.
            let first = ctx.global_step() - ctx.local_step().min(ctx.global_step());
            shared.epoch_first_step.store(first, Relaxed);
            let ms = shared.started.elapsed().as_millis() as u64;
            shared.epoch_started_ms.store(ms, Relaxed);
        }
        Ok(())
    }

    fn trigger_step(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if let Some(shared) = &self.shared {
            shared.global_step.store(ctx.global_step(), Relaxed);
            shared.learning_rate.store(ctx.learning_rate().to_bits(), Relaxed);
            if ctx.signal_received().is_some() {
                shared.change_status(Status::Running, Status::Stopping);
            }
        }
        Ok(())
    }

    fn fetched(&mut self, _ctx: &mut Context<'_, M>, values: &Fetched<'_>) -> Result<()> {
        let Some(shared) = &self.shared else { return Ok(()) };
        // Every few hundred milliseconds, never per step: the writer holds this lock only
        // while it adds a batch of points.
        let mut curves = shared.curves();
        for fetch in &self.fetches {
            let value = values.get::<f32>(&fetch.name)?;
            curves.push(&fetch.name, Some(Split::Step), values.step(), f64::from(value));
        }
        Ok(())
    }

    fn before_validate(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        if let Some(shared) = &self.shared {
            shared.change_status(Status::Running, Status::Validating);
        }
        Ok(())
    }

    fn after_validate(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        if let Some(shared) = &self.shared {
            shared.change_status(Status::Validating, Status::Running);
        }
        Ok(())
    }

    fn after_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let Some(shared) = &self.shared else { return Ok(()) };
        shared.global_step.store(ctx.global_step(), Relaxed);
        let (status, detail) = self.final_status(ctx, shared.status());
        *shared.detail() = detail;
        shared.set_status(status);
        // The last frame waits for the values put until the monitors close, after every
        // callback's `after_train` (the writer's end, `DashboardSink`'s drop); the dashboard's
        // drop joins the screen thread.
        shared.closing.store(true, Release);
        Ok(())
    }
}
