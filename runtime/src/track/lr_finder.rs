//! fastai's [`LrFinder`]: training with an exponentially growing learning rate, stopped when the
//! loss diverges, the weights and the optimizer restored at the end; the loss against the
//! learning rate, plotted.

use std::path::Path;

use burn::module::Module;
use burn::optim::ModuleOptimizer;

use super::lr_suggest::{SmoothLoss, SuggestedLr, Suggestion};
use super::plot::Mark;
use super::recorder::{VALID_COLOR, plot_lr_find};
use crate::callback::{Callback, Context};
use crate::error::{Cancel, Result};
use crate::fetch::{Fetch, Fetched};

/// The file [`LrFinder`] writes at the end of its run, in the log directory.
pub const LR_FIND_PLOT: &str = "lr_find.png";

/// The colours of the suggestions' marks, after the loss's blue: matplotlib's next ones.
const MARK_COLORS: [[u8; 3]; 4] = [VALID_COLOR, [44, 160, 44], [214, 39, 40], [148, 103, 189]];

static LOSS: [Fetch; 1] = [Fetch::host("loss")];

/// What the model, the optimizer and the learning rate were before the sweep.
struct Saved<M> {
    model: M,
    optimizer: ModuleOptimizer,
    learning_rate: f64,
}

/// fastai's `LRFinder(start_lr=1e-7, end_lr=10, num_it=100, stop_div=True)` and `lr_find`: trains
/// with a learning rate growing exponentially from `start_lr` to `end_lr` over `num_it` steps,
/// records the smoothed loss against it, stops when the loss diverges, then puts back the
/// weights, the optimizer's state and the learning rate it found.
///
/// fastai's rules, each a test:
/// - the learning rate of the `i`-th step of the sweep (0-based) is fastai's `SchedExp` at
///   `i / num_it`: `start_lr * (end_lr / start_lr)^(i / num_it)`, set in `before_step`;
/// - after each step, the loss (the step's `"loss"` output, fetched) is smoothed as fastai's
///   `Recorder` smooths it (`AvgSmoothLoss(beta=0.98)`: `val = lerp(loss, val, 0.98)`, divided by
///   `1 - 0.98^count`); the sweep stops (`Flow::CancelFit`) at the first step where the smoothed
///   loss exceeds 4 times the best one so far, with `stop_div`, and after `num_it` steps;
///   `num_it` below 6 is 6;
/// - `before_validate` cancels every validation pass (`Flow::CancelValid`);
/// - at `after_train` (whatever ended the run) the model, the optimizer and the learning rate
///   are those of `before_train`.
///
/// A NaN loss stops nothing, as in fastai (its comparisons are false for a NaN): the sweep runs
/// on to `num_it`, and its curve ends at the first NaN, for the suggestions and the plot alike.
///
/// Give the run enough steps: `max_epoch(u64::MAX)` lets the finder end it (fastai's `lr_find`
/// fits `num_it / len(dl) + 1` epochs); a run shorter than `num_it` steps is warned about. Run
/// it with `DefaultCallbacks::none()` and no saver (fastai's `no_logging`): its steps are not
/// training. The results: [`points`](Self::points) (fastai's `recorder.lrs` and
/// `recorder.losses`), [`suggest`](Self::suggest) (fastai's suggestion functions on the points
/// `lr_find` gives them), and `lr_find.png` in the log directory ([`plot`](Self::plot): the
/// loss against the learning rate on a logarithmic scale, without the last 5 points, with the
/// suggestions marked). A `CancelFit` cannot be agreed on by the ranks of a data-parallel world:
/// the finder runs on one device.
///
/// ```no_run
/// use burn::nn::Linear;
/// use burn::optim::AdamConfig;
/// use burn::tensor::Tensor;
/// use burn_stoker::prelude::*;
/// use burn_stoker::track::{LrFinder, Suggestion};
///
/// # fn run(model: Linear, data: Vec<(Tensor<2>, Tensor<2>)>) -> burn_stoker::Result<()> {
/// // fastai: learn.lr_find()
/// let mut finder = LrFinder::new();
/// let report = Trainer::new(model, AdamConfig::new().init(), data)
///     .max_epoch(u64::MAX)
///     .default_callbacks(DefaultCallbacks::none())
///     .log_dir("train_log/lr_find")
///     .callbacks(&mut finder)
///     .train(|model: &Linear, (x, y): (Tensor<2>, Tensor<2>), _step: &mut Step<'_>| {
///         (model.forward(x) - y).powi_scalar(2).mean()
///     })?;
/// let model = report.model; // the weights before the sweep
/// if let Some(valley) = finder.suggest(Suggestion::Valley) {
///     println!("valley: {:.2e}", valley.lr);
/// }
/// # let _ = model; Ok(()) }
/// ```
pub struct LrFinder<M> {
    start_lr: f64,
    end_lr: f64,
    num_it: u64,
    stop_div: bool,
    plots: bool,
    saved: Option<Saved<M>>,
    /// The global step at `before_train`: the sweep's iteration is the steps since.
    first_step: u64,
    smooth: SmoothLoss,
    best: f64,
    points: Vec<(f64, f64)>,
}
crate::kind::kind!(LrFinder<M>);

impl<M> Default for LrFinder<M> {
    fn default() -> Self {
        LrFinder {
            start_lr: 1e-7,
            end_lr: 10.0,
            num_it: 100,
            stop_div: true,
            plots: true,
            saved: None,
            first_step: 0,
            smooth: SmoothLoss::new(),
            best: f64::INFINITY,
            points: Vec::new(),
        }
    }
}

impl<M> LrFinder<M> {
    /// fastai's defaults: from 1e-7 to 10 over 100 steps, stopping on divergence.
    pub fn new() -> Self {
        LrFinder::default()
    }
    /// The first learning rate (1e-7 by default).
    pub fn start_lr(mut self, lr: f64) -> Self {
        self.start_lr = lr;
        self
    }
    /// The learning rate the schedule reaches at `num_it` (10 by default).
    pub fn end_lr(mut self, lr: f64) -> Self {
        self.end_lr = lr;
        self
    }
    /// The number of steps of the sweep (100 by default; at least 6, as fastai's).
    pub fn num_it(mut self, steps: u64) -> Self {
        self.num_it = steps.max(6);
        self
    }
    /// Whether to stop when the smoothed loss exceeds 4 times its best (yes by default).
    pub fn stop_div(mut self, stop: bool) -> Self {
        self.stop_div = stop;
        self
    }
    /// Whether to write `lr_find.png` at the end of the run (yes by default).
    pub fn plots(mut self, write: bool) -> Self {
        self.plots = write;
        self
    }
    /// The learning rate of the sweep's `i`-th step (0-based): fastai's
    /// `SchedExp(start_lr, end_lr)` at `i / num_it`.
    pub fn lr_at(&self, i: u64) -> f64 {
        self.start_lr * (self.end_lr / self.start_lr).powf(i as f64 / self.num_it as f64)
    }
    /// Every step of the sweep: its learning rate and the smoothed loss after it (fastai's
    /// `recorder.lrs` and `recorder.losses`).
    pub fn points(&self) -> &[(f64, f64)] {
        &self.points
    }
    /// The suggestion of `method` over the points fastai's `lr_find` gives its suggestion
    /// functions: without the first `num_it / 10` and the last 5, and cut at the first loss
    /// that is not a number. `None` when too few are left.
    pub fn suggest(&self, method: Suggestion) -> Option<SuggestedLr> {
        let end = self.points.len().saturating_sub(5);
        let start = ((self.num_it / 10) as usize).min(end);
        let kept = &self.points[start..end];
        let kept = &kept[..kept.iter().position(|p| p.1.is_nan()).unwrap_or(kept.len())];
        let (lrs, losses): (Vec<f64>, Vec<f64>) = kept.iter().copied().unzip();
        method.suggest(&lrs, &losses)
    }
    /// Plot the smoothed loss against the learning rate (on a logarithmic scale), without the
    /// last 5 points, with `suggestions` marked, to a PNG file at `path`: fastai's
    /// `plot_lr_find`.
    pub fn plot(&self, path: impl AsRef<Path>, suggestions: &[Suggestion]) -> Result<()> {
        let found: Vec<(Suggestion, SuggestedLr)> =
            suggestions.iter().filter_map(|&m| Some((m, self.suggest(m)?))).collect();
        let marks: Vec<Mark<'_>> = found
            .iter()
            .zip(MARK_COLORS.iter().cycle())
            .map(|((method, s), &color)| Mark { at: s.point, color, label: method.name() })
            .collect();
        plot_lr_find(path.as_ref(), &self.points, &marks)
    }
}

impl<M: Module> Callback<M> for LrFinder<M> {
    fn fetches(&self) -> &[Fetch] {
        &LOSS
    }

    fn before_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let c = ctx.counters();
        let epochs = c.max_epoch().saturating_sub(c.starting_epoch()).saturating_add(1);
        let steps = epochs.saturating_mul(c.steps_per_epoch());
        if steps < self.num_it {
            crate::logging::warn!(
                "LrFinder: the run has {steps} steps, fewer than num_it = {}: the sweep ends at {:.3e}; give the trainer max_epoch(u64::MAX), and the finder ends the run",
                self.num_it,
                self.lr_at(steps)
            );
        }
        let model = ctx.model().clone();
        let optimizer = ctx.optimizer().clone();
        self.saved = Some(Saved { model, optimizer, learning_rate: ctx.learning_rate() });
        self.first_step = ctx.global_step();
        (self.smooth, self.best, self.points) = (SmoothLoss::new(), f64::INFINITY, Vec::new());
        Ok(())
    }

    fn before_step(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let i = ctx.global_step() - self.first_step;
        ctx.set_learning_rate(self.lr_at(i));
        Ok(())
    }

    fn after_step(&mut self, ctx: &mut Context<'_, M>, values: &Fetched<'_>) -> Result<()> {
        let loss: f32 = values.get("loss")?;
        let smooth = self.smooth.add(f64::from(loss));
        self.points.push((ctx.learning_rate(), smooth));
        if smooth < self.best {
            self.best = smooth;
        }
        // fastai's `smooth_loss > 4*best_loss`: false for a NaN, which does not stop the sweep.
        let diverged = smooth > 4.0 * self.best;
        let done = ctx.global_step() - self.first_step >= self.num_it;
        if (self.stop_div && diverged) || done {
            return ctx.cancel(Cancel::Fit);
        }
        Ok(())
    }

    fn before_validate(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        ctx.cancel(Cancel::Valid)
    }

    fn after_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if let Some(saved) = self.saved.take() {
            ctx.state.model = Some(saved.model);
            ctx.state.optimizer = saved.optimizer;
            ctx.set_learning_rate(saved.learning_rate);
        }
        if self.plots && ctx.is_chief() && !self.points.is_empty() {
            self.plot(ctx.log_dir().join(LR_FIND_PLOT), &[Suggestion::Valley])?;
        }
        Ok(())
    }
}
