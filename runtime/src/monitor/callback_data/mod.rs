//! neon's `callback_data` file (feature `hdf5`): what neon's callbacks share, saved to HDF5 in
//! neon's layout (`Callbacks(model, output_file="data.h5")`, `-o data.h5`).

mod deconv;
mod file;
mod hist;
mod open;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value as Json;

use burn::module::Module;

use crate::callback::{Callback, Context};
use crate::error::{Error, Result, check_setting};
use crate::fetch::{Fetch, FetchKind, Fetched};
pub use deconv::{ConvLayers, Deconv};
use file::{H5File, Layout, index};
use hist::HistSetting;

/// neon's `callback_data` saved to a file: an HDF5 file in neon's own layout, which neon's
/// readers (`nvis`, `neon.visualizations.data.h5_cost_data`) and h5py read. It is neon's
/// `Callbacks(model, output_file=...)`, with what neon's callbacks put in it:
///
/// | path | type, shape | attributes | written |
/// |---|---|---|---|
/// | `config` (group) | | `total_minibatches`, `total_epochs` (int64; -1 when beyond int64, as with `max_epoch(u64::MAX)`) | at setup |
/// | `time_markers/minibatch` | float32, `(epochs,)` | group: `epochs_complete`, `minibatches_complete` (int64) | at each epoch's end: the minibatches done so far |
/// | `cost/train` | float32, `(total_minibatches,)` | `time_markers = "minibatch"` | each minibatch's cost, averaged as `TrainCostCallback` does |
/// | `cost/loss`, `time/loss` | float32, `(epochs // eval_freq,)` | `cost/loss`: `time_markers = "epoch_freq"`, `epoch_freq` | the validation loss and the pass's seconds (`LossCallback`) |
/// | `metrics/<name>` | float32, `(epochs // eval_freq,)` | `time_markers = "epoch_freq"`, `epoch_freq` | each metric (`MetricCallback`) |
/// | `time/train/start_time`, `end_time` | float64, `(1,)` | `units = "seconds"` | the wall clock at the start and the end (`RunTimerCallback`) |
/// | `hist` (group), `hist/<parameter>` | int32, `(64, time_steps)` | group: `bins` (64), `offset` (-48), `time_markers` (`"minibatch"` or `"epoch"`), `time_steps` (int64) | with [`hist`](Self::hist): a column of each weight's and bias's histogram per minibatch or per epoch (`HistCallback`) |
///
/// - **`cost/train`**, neon's `TrainCostCallback`: the mean of the last
///   [`window`](Self::window) (10) minibatch costs at each minibatch, the step's `"loss"`
///   output ([`cost_output`](Self::cost_output)), read back as a deferred fetch: the step never
///   waits for it, and the values are written at each epoch's end. The index is `global_step - 1`.
/// - **`cost/loss` and `time/loss`** (with [`loss`](Self::loss), the scalar the program's
///   validation puts, e.g. `inference::ScalarStats`'s `validation_cost`) and **`metrics/<name>`**
///   (with [`metric`](Self::metric)): at the end of each validation pass that ends epoch `e` with
///   `e` a multiple of [`eval_freq`](Self::eval_freq), index `e / eval_freq - 1` (neon's
///   `epoch // epoch_freq`), the value the pass put; `time/loss` is the pass's duration. A pass
///   elsewhere (in the middle of an epoch, at another epoch) has no place in neon's layout: it
///   is skipped with one warning.
/// - **Space**: the datasets have neon's shapes from the start (zeros where nothing was written
///   yet), but they are chunked (1024 values, or 64 columns of a histogram) and take space a
///   chunk at a time as they are written: a per-minibatch histogram planned over 1,000 epochs of
///   1,000 steps takes nothing for the steps not run. They are growable (no maximum): when the
///   run's size is beyond int64 (`max_epoch(u64::MAX)`, a run a callback stops) they start empty,
///   the totals are -1, and each write extends its dataset.
/// - **Crashes**: the file is flushed (`H5Fflush`) at creation, at each epoch's end, after each
///   validation pass written and at the end of training (also after an error). A process killed
///   (`kill -9`) loses what came after the last flush: at most the epoch in progress and its
///   validation; what was flushed stays readable. The minibatch costs not yet written are saved
///   in each checkpoint, and a resumed run writes them first.
/// - **Resume**: a resumed run goes on writing the file it finds, whose `total_epochs` and
///   `total_minibatches` must be this run's (an error at setup otherwise, naming both); the
///   minibatches and epochs it runs again are written again, so the file ends as an
///   uninterrupted run's; `start_time` stays the first run's. A file HDF5 cannot read (damaged by
///   a crash in the middle of a write) is moved aside to `<name>.bak-<unix seconds>`, with a
///   warning, and a new one started, as when a resumed run finds no file: what came before the
///   resume is not in it. A run that is not resumed replaces a file already there, with a
///   warning, as neon does.
/// - **What is there**: as every file of the log directory, the file is never written through a
///   symlink: a new file is created new (`O_EXCL`) after the entry at its path, a symlink or
///   anything else, is removed; a resumed run's file is opened only when it is a regular file of
///   this user's with one name (a symlink, a FIFO or another user's file there is an error at
///   setup that says so, and nothing is written).
/// - **Chief only**: in data-parallel training, only the chief (rank 0) writes the file.
/// - **Path**: relative to the log directory, or absolute; its folder is created. A path that
///   is a folder, or that cannot be created, is an error at setup, before any step.
/// - **`hist/<parameter>`** (with [`hist`](Self::hist)), neon's `HistCallback`: for each weight
///   and bias (the parameters whose path contains `weight` or `bias`: neon's default
///   `filter_key=['W']` takes both, its `Bias` layer keeping its values in `W`;
///   [`hist_filter`](Self::hist_filter) changes the keys), the counts of `rint(log2(|x|))` in
///   neon's 64 bins from -48 (bin 0: below 2^-47.5 and the zeros; bin `i`: exponent `i - 48`;
///   larger values and NaN uncounted), as neon's backends count them. A column per epoch
///   (column `epoch - 1`, at each epoch's end), or per minibatch (column `global_step - 1`, after
///   each step's update; a read of the weights at every step). The datasets are named by the
///   parameters' paths (`fc1.weight`), where neon names them `<layer>_<index>_<attribute>`.
/// - Differs from neon: the values are the monitors' (`f64`) stored as neon's float32.
///
/// ```no_run
/// use burn_stoker::monitor::CallbackDataWriter;
///
/// // neon's `-o data.h5 --eval_freq 1` with a validation that puts `validation_cost` and
/// // `validation_accuracy`.
/// let data = CallbackDataWriter::new("data.h5").loss("validation_cost").metric("validation_accuracy");
/// # let _ = data;
/// ```
#[derive(Debug)]
pub struct CallbackDataWriter {
    path: PathBuf,
    fetches: [Fetch; 1],
    window: usize,
    eval_freq: u64,
    loss: Option<String>,
    metrics: Vec<String>,
    hist: Option<HistSetting>,
    /// From setup to `before_train`: the file opened, and whether it is new.
    opened: Option<(hdf5::File, PathBuf, bool)>,
    /// The state a checkpoint saved, applied at `before_train`.
    restored: Option<Saved>,
    /// From `before_train` on: the file laid out, and what is not written yet.
    run: Option<Running>,
}
crate::kind::kind!(CallbackDataWriter);

/// What a checkpoint saves: the costs of the window and the averaged costs not written yet.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Saved {
    recent: VecDeque<f64>,
    pending: Vec<(u64, f32)>,
}

/// A run's open file and what is not written yet.
#[derive(Debug)]
struct Running {
    file: H5File,
    /// The last `window` minibatch costs (`TrainCostCallback`'s `cost_history`).
    recent: VecDeque<f64>,
    /// Averaged costs not written yet, by global step.
    pending: Vec<(u64, f32)>,
    /// When the current validation pass began, with the length of each scalar's history then
    /// (the loss first, then the metrics).
    validation: Option<(Instant, Vec<usize>)>,
    /// Whether a validation pass outside neon's layout was reported.
    warned: bool,
}

impl CallbackDataWriter {
    /// Write the file at `path` (relative to the log directory, or absolute): the minibatch
    /// costs of `"loss"`, no validation loss, no metric, evaluations every epoch.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        CallbackDataWriter {
            path: path.into(),
            fetches: [Fetch::deferred("loss")],
            window: 10,
            eval_freq: 1,
            loss: None,
            metrics: Vec::new(),
            hist: None,
            opened: None,
            restored: None,
            run: None,
        }
    }

    /// Average this output of the step instead of `"loss"` (a single value).
    pub fn cost_output(mut self, name: impl Into<String>) -> Self {
        self.fetches = [Fetch { name: name.into().into(), kind: FetchKind::Deferred }];
        self
    }

    /// `cost/train` holds the mean of the last `window` costs (10, neon's `wsz`; 1 keeps each
    /// minibatch's own cost).
    pub fn window(mut self, window: usize) -> Self {
        self.window = window;
        self
    }

    /// The validation runs every `k` epochs (neon's `epoch_freq`, `--eval_freq`; 1 by default).
    pub fn eval_freq(mut self, k: u64) -> Self {
        self.eval_freq = k;
        self
    }

    /// Write `cost/loss` and `time/loss` from the scalar `name` that validation puts.
    pub fn loss(mut self, name: impl Into<String>) -> Self {
        self.loss = Some(name.into());
        self
    }

    /// Write `metrics/<name>` from the scalar `name` that validation puts.
    pub fn metric(mut self, name: impl Into<String>) -> Self {
        self.metrics.push(name.into());
        self
    }

    /// Write neon's `HistCallback` histograms of the weights and biases in `hist/`: a column per minibatch
    /// (`per_minibatch`, neon's `plot_per_mini`, a read of the weights at every step) or per
    /// epoch.
    pub fn hist(mut self, per_minibatch: bool) -> Self {
        let filter = self.hist.take().map_or_else(crate::monitor::hist::default_filter, |h| h.filter);
        self.hist = Some(HistSetting { per_minibatch, filter });
        self
    }

    /// The histograms are of the parameters whose path contains one of `keys` (`["weight",
    /// "bias"]` by default; neon's `filter_key`); turns [`hist`](Self::hist) on, per epoch, if it is off.
    pub fn hist_filter<S: Into<String>>(mut self, keys: impl IntoIterator<Item = S>) -> Self {
        let per_minibatch = self.hist.as_ref().is_some_and(|h| h.per_minibatch);
        self.hist = Some(HistSetting { per_minibatch, filter: keys.into_iter().map(Into::into).collect() });
        self
    }

    /// The file, as given.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    fn check(&self) -> Result<()> {
        check_setting(self.window != 0, "CallbackDataWriter", "window", "at least 1", 0)?;
        check_setting(self.eval_freq != 0, "CallbackDataWriter", "eval_freq", "at least 1", 0)?;
        for name in self.loss.iter().chain(&self.metrics) {
            if name.is_empty() || name.contains('/') || name == "." {
                return Err(Error::invalid(format!(
                    "CallbackDataWriter: the scalar name {name:?} cannot name a dataset: it must be non-empty, without `/`"
                )));
            }
        }
        if self.hist.as_ref().is_some_and(|h| h.filter.is_empty()) {
            return Err(Error::invalid("CallbackDataWriter: an empty hist_filter selects no parameter"));
        }
        if self.fetches[0].name.is_empty() {
            return Err(Error::invalid("CallbackDataWriter: cost_output must be a non-empty output name"));
        }
        Ok(())
    }
}

/// Seconds since the Unix epoch (Python's `time.time()`).
fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

impl Running {
    /// Write the pending costs (each run of consecutive steps in one write).
    fn write_pending(&mut self) -> Result<()> {
        let mut rest = &self.pending[..];
        while let Some(&(first, _)) = rest.first() {
            let run = rest.iter().enumerate().take_while(|&(i, &(step, _))| step == first + i as u64).count();
            let costs: Vec<f32> = rest[..run].iter().map(|&(_, cost)| cost).collect();
            // A cost is fetched at a step, global steps counting from 1.
            self.file.write_costs(index(first.saturating_sub(1), "the global step")?, &costs)?;
            rest = &rest[run..];
        }
        self.pending.clear();
        Ok(())
    }
}

impl CallbackDataWriter {
    fn running(&mut self) -> Result<&mut Running> {
        self.run
            .as_mut()
            .ok_or_else(|| Error::msg("CallbackDataWriter: the file is not open (setup did not run)"))
    }

    /// The scalars watched during validation: the loss first, then the metrics.
    fn watched(&self) -> impl Iterator<Item = &String> {
        self.loss.iter().chain(&self.metrics)
    }

    /// Column `column` of `hist/`: the histograms of the weights now (nothing without a column).
    fn write_hist<M: Module>(&mut self, ctx: &Context<'_, M>, column: Option<u64>) -> Result<()> {
        let (Some(setting), Some(column)) = (&self.hist, column) else { return Ok(()) };
        let histograms: Vec<_> = setting.columns(ctx.model()).into_iter().map(|(_, counts)| counts).collect();
        self.running()?.file.write_hist(index(column, "the hist column")?, &histograms)
    }

    /// Where the validation pass that ends now goes in neon's layout, if it has a place.
    fn evaluation_index<M>(&self, ctx: &Context<'_, M>) -> Option<usize> {
        let counters = ctx.counters();
        let at_epoch_end = counters.local_step() == counters.steps_per_epoch();
        let epoch = counters.epoch_num();
        let evaluation = (epoch / self.eval_freq).checked_sub(1).and_then(|i| usize::try_from(i).ok());
        evaluation
            .filter(|_| at_epoch_end && epoch.is_multiple_of(self.eval_freq) && epoch <= counters.max_epoch())
    }
}

impl<M: Module> Callback<M> for CallbackDataWriter {
    fn fetches(&self) -> &[Fetch] {
        &self.fetches
    }

    fn setup(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.check()?;
        let path = ctx.log_dir().join(&self.path);
        let (file, new) = open::open(&path, ctx.monitors_ref().is_resumed())?;
        self.opened = Some((file, path, new));
        Ok(())
    }

    fn save_state(&self) -> Result<Option<Json>> {
        let Some(run) = &self.run else { return Ok(None) };
        let saved = Saved { recent: run.recent.clone(), pending: run.pending.clone() };
        serde_json::to_value(saved)
            .map(Some)
            .map_err(|e| Error::bad_state(format!("CallbackDataWriter: {e}")))
    }

    fn load_state(&mut self, state: Json) -> Result<()> {
        let saved = serde_json::from_value(state)
            .map_err(|e| Error::bad_state(format!("CallbackDataWriter: a bad saved state: {e}")))?;
        self.restored = Some(saved);
        Ok(())
    }

    fn before_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let Some((file, path, new)) = self.opened.take() else { return Ok(()) };
        // The steps per epoch are known from here on.
        let counters = ctx.counters();
        let layout = Layout {
            total_epochs: counters.max_epoch(),
            total_minibatches: counters.max_epoch().checked_mul(counters.steps_per_epoch()),
            eval_freq: self.eval_freq,
            loss: self.loss.is_some(),
            metrics: self.metrics.clone(),
            hist: self.hist.as_ref().map(|h| (h.per_minibatch, h.names(ctx.model()))),
        };
        let file = H5File::start(file, &path, &layout, new)?;
        if !ctx.monitors_ref().is_resumed() {
            file.start_time(now())?;
        }
        let Saved { mut recent, pending } = self.restored.take().unwrap_or_default();
        recent.reserve(self.window);
        let mut run = Running { file, recent, pending, validation: None, warned: false };
        // What the checkpoint held that the file may lack.
        run.write_pending()?;
        run.file.flush()?;
        self.run = Some(run);
        Ok(())
    }

    fn fetched(&mut self, _ctx: &mut Context<'_, M>, values: &Fetched<'_>) -> Result<()> {
        let name = &self.fetches[0].name;
        let (cost, _) = values.nth(0, name).host(name)?;
        let &[cost] = cost else {
            return Err(Error::fetch(format!(
                "CallbackDataWriter: `{name}` has {} values, not one: the minibatch cost is a single value",
                cost.len()
            )));
        };
        let window = self.window;
        let run = self.running()?;
        while run.recent.len() >= window {
            run.recent.pop_front();
        }
        run.recent.push_back(f64::from(cost));
        let mean = run.recent.iter().sum::<f64>() / run.recent.len() as f64;
        run.pending.push((values.step(), mean as f32));
        Ok(())
    }

    fn trigger_step(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if self.hist.as_ref().is_some_and(|h| h.per_minibatch) {
            let total = ctx.counters().max_epoch().checked_mul(ctx.counters().steps_per_epoch());
            let column = ctx.global_step().checked_sub(1).filter(|&c| total.is_none_or(|total| c < total));
            self.write_hist(ctx, column)?;
        }
        Ok(())
    }

    fn after_epoch(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let (epoch, step) = (ctx.epoch_num(), ctx.global_step());
        if self.hist.as_ref().is_some_and(|h| !h.per_minibatch) {
            let column = epoch.checked_sub(1).filter(|&c| c < ctx.counters().max_epoch());
            self.write_hist(ctx, column)?;
        }
        let run = self.running()?;
        run.write_pending()?;
        if let Some(epoch) = epoch.checked_sub(1) {
            run.file.end_epoch(index(epoch, "the epoch")?, step)?;
        }
        run.file.flush()
    }

    fn before_validate(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let lengths = self.watched().map(|name| ctx.monitors_ref().history(name).len()).collect();
        self.running()?.validation = Some((Instant::now(), lengths));
        Ok(())
    }

    fn after_validate(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let index = self.evaluation_index(ctx);
        let monitors = ctx.monitors_ref();
        // The value each watched scalar was put during the pass, if it was.
        let Some((start, lengths)) = self.running()?.validation.take() else { return Ok(()) };
        let values: Vec<Option<f32>> = self
            .watched()
            .zip(lengths)
            .map(|(name, before)| {
                let history = monitors.history(name);
                (history.len() > before).then(|| history[history.len() - 1].1 as f32)
            })
            .collect();
        if values.is_empty() {
            return Ok(());
        }
        let Some(index) = index else {
            let (epoch, step) = (ctx.epoch_num(), ctx.global_step());
            let run = self.running()?;
            if !std::mem::replace(&mut run.warned, true) {
                crate::logging::warn!(
                    "CallbackDataWriter: the validation at epoch {epoch}, step {step} has no place in neon's layout \
                     (one at the end of every epoch that is a multiple of eval_freq): not written; this is said once"
                );
            }
            return Ok(());
        };
        let (loss, metrics) =
            if self.loss.is_some() { (values[0], &values[1..]) } else { (None, &values[..]) };
        let loss = loss.map(|cost| (cost, start.elapsed().as_secs_f32()));
        let run = self.running()?;
        run.file.write_evaluation(index, loss, metrics)?;
        run.file.flush()
    }

    fn after_train(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        self.opened = None;
        // Training never started: no file laid out.
        let Some(mut run) = self.run.take() else { return Ok(()) };
        run.write_pending()?;
        run.file.end_time(now())?;
        run.file.flush()
    }
}
