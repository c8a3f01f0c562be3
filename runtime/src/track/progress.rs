//! The progress bar.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::io::Write;
use std::sync::{Arc, Mutex};

use crate::callback::{Callback, Context, Counters};
use crate::error::Result;
use crate::fetch::{Fetch, Fetched};
use crate::monitor::printer::format_scalar;

/// The output whose smoothed value the bar shows as `cost`, by default.
const COST_OUTPUT: &str = "loss";
/// The scalar shown as the last validation loss, by default (`inference::ScalarStats`'s).
const VALIDATION_LOSS: &str = "validation_cost";

/// A progress bar per epoch on stderr (indicatif), with steps/s and the time left in the epoch,
/// the smoothed training cost and the last validation loss, as neon's `ProgressBarCallback`
/// shows them; quiet when stderr is not a terminal. On by default.
///
/// - **`cost`**: the mean of the step's `"loss"` over the last [`window`](Self::window) (10)
///   steps, neon's `TrainCostCallback` (`cost/train`, which neon's bar shows), at every
///   `refresh_every` steps (20 by default). The costs of the `window` steps before each refresh
///   are read as **deferred** fetches ([`Fetch::deferred`]): the read never makes the step wait
///   for the device, and the value shows one step later. With a window and a refresh of 1,
///   every step shows neon's value of that step. [`no_cost`](Self::no_cost) turns it off,
///   [`cost_output`](Self::cost_output) averages another output.
/// - **The last validation loss**: the latest value of the scalar `validation_cost`
///   ([`validation`](Self::validation) names another), read after each validation pass that
///   put it, shown from then on (neon writes it after the bar at the epoch's end).
/// - [`show`](Self::show) adds the latest values of more outputs, fetched the same way.
/// - **Nothing is read when nothing is drawn**: when stderr is not a terminal (a log, a CI
///   console), the bar fetches nothing, so a run without a terminal pays nothing for it.
///   [`draw_to`](Self::draw_to) draws to a writer instead (a frame per line), where the values
///   are read.
///
/// Differs from neon: the epoch is stoker's (from 1); the bar is indicatif's, with the steps
/// per second and the time left; the smoothed cost is refreshed every `refresh_every` steps,
/// not at each minibatch (at most every 0.1 s in neon).
///
/// ```
/// use burn_stoker::track::ProgressBar;
/// // neon's bar: the cost smoothed over 10 steps, the last `validation_cost`.
/// let bar = ProgressBar::new();
/// // The accuracy too, every 50 steps; the validation loss put as `val_loss`.
/// let bar = ProgressBar::new().show(["accuracy"]).refresh_every(50).validation("val_loss");
/// # let _ = bar;
/// ```
#[derive(Debug)]
#[doc(alias = "ProgbarLogger")]
#[doc(alias = "TQDMProgressBar")]
#[doc(alias = "RichProgressBar")]
pub struct ProgressBar {
    /// The cost's fetch first (when on), then the shown outputs.
    fetches: Vec<Fetch>,
    cost: bool,
    window: u64,
    refresh_every: u64,
    validation: Option<Cow<'static, str>>,
    target: Option<Lines>,
    /// Whether the bar draws anywhere (checked at `before_train`).
    drawn: bool,
    /// Whether another callback holds the terminal (checked at `before_train`): no bar at all.
    stepped_aside: bool,
    bar: Option<indicatif::ProgressBar>,
    /// The last `window` costs, of consecutive steps, and the step of the last one.
    recent: VecDeque<f32>,
    last_step: u64,
    /// The parts of the message: the cost, the shown values, the validation loss.
    cost_text: String,
    shown_text: String,
    validation_text: String,
}
crate::kind::kind!(ProgressBar);

impl Default for ProgressBar {
    fn default() -> Self {
        ProgressBar::new()
    }
}

impl ProgressBar {
    /// neon's bar: the cost smoothed over 10 steps, refreshed every 20 steps, and the last
    /// `validation_cost`.
    pub fn new() -> Self {
        ProgressBar {
            fetches: vec![Fetch::deferred(COST_OUTPUT)],
            cost: true,
            window: 10,
            refresh_every: 20,
            validation: Some(Cow::Borrowed(VALIDATION_LOSS)),
            target: None,
            drawn: false,
            stepped_aside: false,
            bar: None,
            recent: VecDeque::new(),
            last_step: 0,
            cost_text: String::new(),
            shown_text: String::new(),
            validation_text: String::new(),
        }
    }
    /// Show these scalar outputs of the step too.
    pub fn show(mut self, names: impl IntoIterator<Item = &'static str>) -> Self {
        self.fetches.truncate(usize::from(self.cost));
        let cost = self.fetches.first().map(|f| f.name.clone());
        self.fetches
            .extend(names.into_iter().filter(|name| cost.as_deref() != Some(*name)).map(Fetch::deferred));
        self
    }
    /// Fetch the shown values every `k` steps (at least 1).
    pub fn refresh_every(mut self, k: u64) -> Self {
        self.refresh_every = k.max(1);
        self
    }
    /// Smooth the cost over the last `steps` steps (10 by default, neon's `wsz`; at least 1).
    pub fn window(mut self, steps: u64) -> Self {
        self.window = steps.max(1);
        self
    }
    /// Average this output of the step instead of `"loss"`.
    pub fn cost_output(mut self, name: &'static str) -> Self {
        if self.cost {
            self.fetches[0] = Fetch::deferred(name);
        } else {
            self.fetches.insert(0, Fetch::deferred(name));
            self.cost = true;
        }
        self
    }
    /// Show no training cost (and read none).
    pub fn no_cost(mut self) -> Self {
        if self.cost {
            self.fetches.remove(0);
            self.cost = false;
        }
        self
    }
    /// Show the latest value of the scalar `name` after each validation that puts it
    /// (`validation_cost` by default).
    pub fn validation(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.validation = Some(name.into());
        self
    }
    /// Show no validation loss.
    pub fn no_validation(mut self) -> Self {
        self.validation = None;
        self
    }
    /// Draw to `writer`, a frame per line, instead of stderr: the bar then draws (and reads its
    /// values) whether or not stderr is a terminal.
    pub fn draw_to(mut self, writer: impl Write + Send + 'static) -> Self {
        self.target = Some(Lines(Arc::new(Mutex::new(Box::new(writer)))));
        self
    }

    /// Whether the step about to run is one whose values the bar reads.
    fn reads(&self, step: u64) -> bool {
        let (refresh, within) = (self.refresh_every, step % self.refresh_every);
        within == 0 || (self.cost && within > refresh.saturating_sub(self.window))
    }

    /// The costs' window after the cost of `step`, and the text of its mean at a refresh.
    fn add_cost(&mut self, step: u64, cost: f32) {
        if step != self.last_step + 1 {
            self.recent.clear();
        }
        self.last_step = step;
        if self.recent.len() as u64 >= self.window {
            self.recent.pop_front();
        }
        self.recent.push_back(cost);
        if step.is_multiple_of(self.refresh_every) {
            let mean = self.recent.iter().map(|&c| f64::from(c)).sum::<f64>() / self.recent.len() as f64;
            self.cost_text = format!("cost={}", format_scalar(mean));
        }
    }

    /// Put the message together and hand it to the bar.
    fn update(&self) {
        let Some(bar) = &self.bar else { return };
        let parts = [&self.cost_text, &self.shown_text, &self.validation_text];
        let message: Vec<&str> = parts.iter().map(|s| s.trim_end()).filter(|s| !s.is_empty()).collect();
        bar.set_message(message.join(" "));
    }
}

/// A writer the bar draws to, a frame per line.
#[derive(Clone)]
struct Lines(Arc<Mutex<Box<dyn Write + Send>>>);

impl std::fmt::Debug for Lines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Lines")
    }
}

impl Lines {
    fn write(&self, text: &str) -> std::io::Result<()> {
        let mut writer = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        writer.write_all(text.as_bytes())
    }
}

impl indicatif::TermLike for Lines {
    fn width(&self) -> u16 {
        200
    }
    fn move_cursor_up(&self, _n: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_down(&self, _n: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_right(&self, _n: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_left(&self, _n: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn write_line(&self, s: &str) -> std::io::Result<()> {
        self.write(s)?;
        self.write("\n")
    }
    fn write_str(&self, s: &str) -> std::io::Result<()> {
        if s.is_empty() { Ok(()) } else { self.write_line(s) }
    }
    fn clear_line(&self) -> std::io::Result<()> {
        Ok(())
    }
    fn flush(&self) -> std::io::Result<()> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).flush()
    }
}

impl ProgressBar {
    fn draw_target(&self) -> indicatif::ProgressDrawTarget {
        match &self.target {
            Some(lines) => indicatif::ProgressDrawTarget::term_like(Box::new(lines.clone())),
            None => indicatif::ProgressDrawTarget::stderr(),
        }
    }
}

impl<M> Callback<M> for ProgressBar {
    fn takes_after_batch(&self) -> bool {
        false
    }
    fn fetches(&self) -> &[Fetch] {
        &self.fetches
    }
    fn wants_fetch(&self, counters: &Counters) -> bool {
        self.drawn && self.reads(counters.next_step())
    }
    /// Nothing is drawn beside a callback that holds the terminal (the dashboard).
    fn before_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.stepped_aside = ctx.terminal_held();
        self.drawn = !self.stepped_aside && !self.draw_target().is_hidden();
        Ok(())
    }
    fn before_epoch(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if self.stepped_aside {
            return Ok(());
        }
        let counters = ctx.counters();
        let bar =
            indicatif::ProgressBar::with_draw_target(Some(counters.steps_per_epoch()), self.draw_target());
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{prefix} [{bar:30}] {pos}/{len} [{elapsed_precise}<{eta_precise}, {per_sec}] {msg}",
            )
            .expect("a valid template")
            .progress_chars("=> "),
        );
        bar.set_prefix(format!("epoch {}/{}", counters.epoch_num(), counters.max_epoch()));
        self.bar = Some(bar);
        self.update();
        Ok(())
    }
    fn fetched(&mut self, _ctx: &mut Context<'_, M>, values: &Fetched<'_>) -> Result<()> {
        let step = values.step();
        let shown = if self.cost {
            let cost = values.nth(0, &self.fetches[0].name).get::<f32>(&self.fetches[0].name)?;
            self.add_cost(step, cost);
            &self.fetches[1..]
        } else {
            &self.fetches[..]
        };
        if step.is_multiple_of(self.refresh_every) {
            self.shown_text.clear();
            for fetch in shown {
                let value = values.get::<f32>(&fetch.name)?;
                let _ = write!(self.shown_text, "{}={} ", fetch.name, format_scalar(f64::from(value)));
            }
            self.update();
        }
        Ok(())
    }
    fn after_validate(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if let Some(name) = &self.validation
            && let Some(loss) = ctx.monitors_ref().latest(name)
        {
            self.validation_text = format!("{name}={}", format_scalar(loss));
            self.update();
        }
        Ok(())
    }
    fn trigger_step(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
        Ok(())
    }
    fn after_epoch(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        // Kept: the epoch's validation loss is added to its finished bar, as neon does.
        if let Some(bar) = &self.bar {
            bar.finish();
        }
        Ok(())
    }
    fn after_train(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        if let Some(bar) = self.bar.take()
            && !bar.is_finished()
        {
            bar.abandon();
        }
        Ok(())
    }
}
