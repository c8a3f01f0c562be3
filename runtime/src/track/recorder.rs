//! fastai's `Recorder`: the losses and learning rates of every step, the metrics of every epoch,
//! and their plots.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value as Json;

use super::lr_suggest::SmoothLoss;
use super::plot::{Plot, Series, XAxis, write_plot};
use crate::callback::{Callback, Context};
use crate::error::{Error, Result};
use crate::fetch::{Fetch, Fetched};
use crate::state::{
    JOURNAL_DIR, Journal, Mark as JournalMark, journal_entries, journal_missing_or_mismatched, json_f64,
    parse_f64, push_journal_line,
};

/// The file `plot_loss` writes at the end of training, in the log directory.
pub const LOSS_PLOT: &str = "loss.png";
/// The file `plot_lr` writes at the end of training, in the log directory.
pub const LR_PLOT: &str = "lr.png";

/// The colour of the training loss and of the learning rate (RGB): matplotlib's first, `#1f77b4`.
pub(crate) const TRAIN_COLOR: [u8; 3] = [31, 119, 180];
/// The colour of the validation loss (RGB): matplotlib's second, `#ff7f0e`.
pub(crate) const VALID_COLOR: [u8; 3] = [255, 127, 14];

mod lr_find;

pub use lr_find::LR_FIND_SKIP_END;
pub(crate) use lr_find::plot_lr_find;

static LOSS: [Fetch; 1] = [Fetch::deferred("loss")];

/// A value of every step: `(global_step, value)`.
type Steps = Vec<(u64, f64)>;

/// One epoch as the [`Recorder`] saw it (fastai's `Recorder.values`).
#[derive(Debug, Clone, PartialEq)]
pub struct EpochValues {
    /// The epoch (1-based).
    pub epoch_num: u64,
    /// The global step at its end.
    pub global_step: u64,
    /// The training loss fastai's `Recorder` logs at the epoch's end: its smoothed loss
    /// (`AvgSmoothLoss(beta=0.98)` over every step from the first recorded) after the epoch's
    /// last step; `NaN` before any step.
    pub train_loss: f64,
    /// The validation loss put during the epoch (the scalar named by
    /// [`Recorder::valid_loss`]), if any.
    pub valid_loss: Option<f64>,
    /// Each metric named by [`Recorder::metrics`] that was put during the epoch: its last value.
    pub metrics: BTreeMap<String, f64>,
}

/// Records the training loss and the learning rate of every step, and the training loss, the
/// validation loss and the metrics of every epoch, then plots them: fastai's `Recorder`, with
/// `plot_loss` and `plot_lr` (fastai v1's name; v2's is `plot_sched`).
///
/// - The loss of every step is the step's `"loss"` output, a deferred fetch at every step
///   ([`Fetch::deferred`](crate::fetch::Fetch::deferred)): read back at every step, as fastai reads
///   `loss.item()` at every batch, but without making the step wait for the device; each loss
///   arrives a step later, with the step it belongs to, and every loss of an epoch has arrived
///   before the epoch's end. fastai plots a smoothed loss; this records the raw one; an epoch's
///   `train_loss` is the smoothed one at its end, as fastai logs it.
/// - The learning rate of every step is the `learning_rate` hyper-parameter the step used.
/// - At each epoch's end (`trigger_epoch`, ordered after the callbacks that put the validation
///   loss and the metrics: register it after them), the validation loss and each metric are the
///   values put during the epoch, read from the monitors' history: fastai's `Recorder` computes
///   them itself; here the validation (an `InferenceRunner`) puts them and the recorder reads
///   them by name. After a cancelled pass (`CancelValid`, `ShortEpochCallback`'s cut) the epoch has
///   none, as fastai's `Recorder` logs none.
/// - At the end of training (`after_train`, also after a stop or an error), `loss.png` and
///   `lr.png` are written to the log directory (on the chief), unless
///   [`plots(false)`](Self::plots); [`plot_loss`](Self::plot_loss) and
///   [`plot_lr`](Self::plot_lr) write them anywhere at any time.
/// - Its records are saved with the checkpoints: a resumed run's plots show the whole run. The
///   loss and learning rate of every step go into a journal in the log directory
///   (`history/recorder-<id>.jsonl`), each checkpoint appending the steps since the one before
///   and holding only the journal's length and checksum: a checkpoint's cost does not grow with
///   the run. A resume reads the journal up to its checkpoint's length (checked) and cuts off
///   what a later checkpoint left after it.
///
/// The plots are 640 × 480 PNG images ([`PLOT_SIZE`](super::PLOT_SIZE)) drawn with plotters: white, the plot's
/// area inside a [`PLOT_MARGIN`](super::PLOT_MARGIN) border, in a grey frame with a light grid at the ticks; the x
/// axis the global step, each line scaled to the area (from its minimum near the bottom to its
/// maximum near the top: each axis runs 5 % of its values' span past them at either end, so no
/// point lies on the frame). Around the area: a title above (`Training and validation loss`,
/// `Training loss` when there is no validation loss, `Learning rate`), a legend under it (each
/// line's colour and name), tick numbers on the axes, and the axes' labels (`step`, `training
/// loss` on the left; `validation loss` on the right, whose ticks are the validation loss's own
/// scale; `learning rate`). The text is drawn with DejaVu Sans, embedded in the crate (about
/// 31 KB, its licence in the crate's `fonts/` folder): no system font is read, so the image
/// does not depend on the fonts a machine has (a headless server draws what a desktop does).
/// The training loss and the learning rate are drawn in blue (`#1f77b4`, matplotlib's first
/// colour), the validation loss, one point per epoch joined by a line, in orange (`#ff7f0e`,
/// its second).
///
/// ```
/// use burn_stoker::track::Recorder;
///
/// // fastai: learn.recorder.plot_loss(); here at the end of training, into the log directory.
/// let recorder = Recorder::new().valid_loss("validation_cost").metrics(["validation_error"]);
/// # let _ = recorder;
/// ```
#[derive(Debug, Clone, Default)]
#[doc(alias = "LearningRateMonitor")]
pub struct Recorder {
    valid_loss: Option<String>,
    metrics: Vec<String>,
    no_plots: bool,
    losses: Vec<(u64, f64)>,
    lrs: Vec<(u64, f64)>,
    values: Vec<EpochValues>,
    /// fastai's smoothed loss over `losses[..smoothed]` (caught up at each epoch's end).
    smooth: (SmoothLoss, usize, f64),
    /// A validation pass of this epoch was cancelled (fastai's `cancel_valid`): no validation
    /// values for it.
    cancel_valid: bool,
    /// Where the losses and learning rates go at each checkpoint (a journal in the log directory).
    journal: RecorderJournal,
}

/// The [`Recorder`]'s journal: its losses and learning rates of every step, appended at each
/// checkpoint to `history/recorder-<id>.jsonl` in the log directory, which the checkpoint names
/// by its length instead of holding them (its cost does not grow with the run). Locked only at a
/// checkpoint. A clone of a recorder starts without one.
#[derive(Debug, Default)]
struct RecorderJournal(std::sync::Mutex<Journaled>);

/// The journal, and how many losses and learning rates it holds; the mark of a checkpoint's
/// journal to read back at `before_train` (where the log directory is known).
#[derive(Debug, Default)]
struct Journaled {
    journal: Journal,
    losses: usize,
    lrs: usize,
    resume: Option<JournalMark>,
}

impl Clone for RecorderJournal {
    fn clone(&self) -> Self {
        RecorderJournal::default()
    }
}

impl RecorderJournal {
    fn lock(&self) -> std::sync::MutexGuard<'_, Journaled> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
crate::kind::kind!(Recorder);

impl Recorder {
    /// Records the training loss and learning rate; no validation loss, no metrics.
    pub fn new() -> Self {
        Recorder::default()
    }

    /// Read the validation loss of each epoch from the scalar `name` (what validation puts, e.g.
    /// `validation_cost`).
    pub fn valid_loss(mut self, name: impl Into<String>) -> Self {
        self.valid_loss = Some(name.into());
        self
    }

    /// Read these scalars as the metrics of each epoch.
    pub fn metrics<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.metrics = names.into_iter().map(Into::into).collect();
        self
    }

    /// Whether to write `loss.png` and `lr.png` at the end of training (yes by default).
    pub fn plots(mut self, write: bool) -> Self {
        self.no_plots = !write;
        self
    }

    /// The training loss of every step, `(global_step, loss)`.
    pub fn losses(&self) -> &[(u64, f64)] {
        &self.losses
    }

    /// The learning rate of every step, `(global_step, learning rate)`.
    pub fn lrs(&self) -> &[(u64, f64)] {
        &self.lrs
    }

    /// Every finished epoch.
    pub fn values(&self) -> &[EpochValues] {
        &self.values
    }

    /// Plot the training loss of every step (blue, on the left axis) and the validation loss of
    /// every epoch (orange, at the epoch's last step, on the right axis) to a PNG file at `path`,
    /// written atomically.
    pub fn plot_loss(&self, path: impl AsRef<Path>) -> Result<()> {
        let valid: Vec<(f64, f64)> =
            self.values.iter().filter_map(|v| Some((v.global_step as f64, v.valid_loss?))).collect();
        let has_valid = valid.iter().any(|(_, v)| v.is_finite());
        let plot = Plot {
            title: if has_valid { "Training and validation loss" } else { "Training loss" },
            left: Series { points: &by_step(&self.losses), color: TRAIN_COLOR, label: "training loss" },
            right: has_valid.then_some(Series {
                points: &valid,
                color: VALID_COLOR,
                label: "validation loss",
            }),
            x: XAxis::Steps,
            marks: &[],
        };
        write_plot(path.as_ref(), &plot)
    }

    /// Plot the learning rate of every step (blue) to a PNG file at `path`, written atomically.
    pub fn plot_lr(&self, path: impl AsRef<Path>) -> Result<()> {
        let plot = Plot {
            title: "Learning rate",
            left: Series { points: &by_step(&self.lrs), color: TRAIN_COLOR, label: "learning rate" },
            right: None,
            x: XAxis::Steps,
            marks: &[],
        };
        write_plot(path.as_ref(), &plot)
    }
}

/// `(global_step, value)` pairs as a plot's points.
fn by_step(points: &[(u64, f64)]) -> Vec<(f64, f64)> {
    points.iter().map(|&(step, value)| (step as f64, value)).collect()
}

impl<M> Callback<M> for Recorder {
    fn fetches(&self) -> &[Fetch] {
        &LOSS
    }

    fn before_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let dir = ctx.log_dir().join(JOURNAL_DIR);
        let mark = self.journal.lock().resume.take();
        if let Some(mark) = mark {
            (self.losses, self.lrs) = self.resume_journal(&mark, &dir)?;
        }
        // The chief's journal is in its log directory: a resumed run's when the checkpoint was
        // written there, else a new one that the next checkpoint fills with the whole history.
        let held = self.journal.0.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner);
        if ctx.is_chief() && !held.journal.is_in(&dir) {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            let name = format!("recorder-{nanos:x}-{:x}.jsonl", std::process::id());
            *held = Journaled { journal: Journal::at(dir.join(name)), ..Journaled::default() };
        }
        Ok(())
    }

    fn after_step(&mut self, ctx: &mut Context<'_, M>, _values: &Fetched<'_>) -> Result<()> {
        self.lrs.push((ctx.global_step(), ctx.learning_rate()));
        Ok(())
    }

    fn before_epoch(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        self.cancel_valid = false;
        Ok(())
    }

    fn after_cancel_validate(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        self.cancel_valid = true;
        Ok(())
    }

    fn fetched(&mut self, _ctx: &mut Context<'_, M>, values: &Fetched<'_>) -> Result<()> {
        let loss: f32 = values.get("loss")?;
        self.losses.push((values.step(), f64::from(loss)));
        Ok(())
    }

    fn trigger_epoch(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let epoch = ctx.epoch_num();
        let monitors = ctx.monitors_ref();
        // The last value of `name` put during this epoch.
        let this_epoch = |name: &str| {
            let history = monitors.history(name);
            let epochs = monitors.history_epochs(name);
            history.iter().zip(epochs).rev().find(|&(_, &e)| e == epoch).map(|(&(_, v), _)| v)
        };
        let (smooth, smoothed, train_loss) = &mut self.smooth;
        if *smoothed == 0 {
            *train_loss = f64::NAN;
        }
        for &(_, loss) in &self.losses[(*smoothed).min(self.losses.len())..] {
            *train_loss = smooth.add(loss);
        }
        *smoothed = self.losses.len();
        let train_loss = *train_loss;
        // fastai's `_valid_mets`: none after a cancelled pass (`ShortEpochCallback`'s too).
        let this_epoch = |name: &str| if self.cancel_valid { None } else { this_epoch(name) };
        let valid_loss = self.valid_loss.as_deref().and_then(this_epoch);
        let metrics = self.metrics.iter().filter_map(|m| Some((m.clone(), this_epoch(m)?))).collect();
        self.values.push(EpochValues {
            epoch_num: epoch,
            global_step: ctx.global_step(),
            train_loss,
            valid_loss,
            metrics,
        });
        Ok(())
    }

    fn after_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if self.no_plots || self.losses.is_empty() {
            return Ok(());
        }
        self.plot_loss(ctx.log_dir().join(LOSS_PLOT))?;
        self.plot_lr(ctx.log_dir().join(LR_PLOT))
    }

    fn save_state(&self) -> Result<Option<Json>> {
        let pairs = |p: &[(u64, f64)]| {
            Json::Array(p.iter().map(|&(s, v)| Json::from(vec![Json::from(s), json_f64(v)])).collect())
        };
        let journal = self.append_to_journal()?;
        let values: Vec<Json> = self
            .values
            .iter()
            .map(|v| {
                let metrics: serde_json::Map<String, Json> =
                    v.metrics.iter().map(|(k, &x)| (k.clone(), json_f64(x))).collect();
                serde_json::json!({
                    "epoch_num": v.epoch_num,
                    "global_step": v.global_step,
                    "train_loss": json_f64(v.train_loss),
                    "valid_loss": v.valid_loss.map(json_f64),
                    "metrics": metrics,
                })
            })
            .collect();
        let mut state = serde_json::json!({ "values": values });
        match journal {
            Some(mark) => state["journal"] = mark.to_json(),
            None => {
                state["losses"] = pairs(&self.losses);
                state["lrs"] = pairs(&self.lrs);
            }
        }
        Ok(Some(state))
    }

    fn load_state(&mut self, state: Json) -> Result<()> {
        let bad = || Error::bad_state(format!("the saved state of Recorder is malformed: {state}"));
        let pairs = |key: &str| -> Result<Vec<(u64, f64)>> {
            state[key]
                .as_array()
                .ok_or_else(bad)?
                .iter()
                .map(|p| Some((p.get(0)?.as_u64()?, parse_f64(p.get(1)?)?)))
                .collect::<Option<_>>()
                .ok_or_else(bad)
        };
        // A journal is read back at `before_train`, in the log directory then known.
        let (losses, lrs) = match state.get("journal") {
            Some(mark) => {
                self.journal.lock().resume = Some(JournalMark::from_json(mark).ok_or_else(bad)?);
                (Vec::new(), Vec::new())
            }
            None => (pairs("losses")?, pairs("lrs")?),
        };
        let mut values = Vec::new();
        for v in state["values"].as_array().ok_or_else(bad)? {
            let metrics = v["metrics"]
                .as_object()
                .ok_or_else(bad)?
                .iter()
                .map(|(k, x)| Some((k.clone(), parse_f64(x)?)))
                .collect::<Option<_>>()
                .ok_or_else(bad)?;
            values.push(EpochValues {
                epoch_num: v["epoch_num"].as_u64().ok_or_else(bad)?,
                global_step: v["global_step"].as_u64().ok_or_else(bad)?,
                train_loss: parse_f64(&v["train_loss"]).ok_or_else(bad)?,
                valid_loss: if v["valid_loss"].is_null() {
                    None
                } else {
                    Some(parse_f64(&v["valid_loss"]).ok_or_else(bad)?)
                },
                metrics,
            });
        }
        // The smoothed loss catches up over the restored losses at the next epoch's end.
        self.smooth = (SmoothLoss::new(), 0, f64::NAN);
        (self.losses, self.lrs, self.values) = (losses, lrs, values);
        Ok(())
    }
}

impl Recorder {
    /// Append the losses and learning rates recorded since the last checkpoint to the journal,
    /// synced: its mark; `None` without a journal (off the chief, or before training).
    fn append_to_journal(&self) -> Result<Option<JournalMark>> {
        let mut held = self.journal.lock();
        if !held.journal.is_named() {
            return Ok(None);
        }
        let failed = |e: std::io::Error| {
            Error::bad_state_from(format!("appending Recorder's losses to its journal: {e}"), e)
        };
        let mut lines = Vec::new();
        let losses = self.losses.iter().skip(held.losses).map(|p| ("l", p));
        for (kind, &(step, value)) in losses.chain(self.lrs.iter().skip(held.lrs).map(|p| ("r", p))) {
            push_journal_line(&mut lines, &(kind, step, json_f64(value))).map_err(failed)?;
        }
        let mark = held.journal.append(&lines).map_err(failed)?;
        (held.losses, held.lrs) = (self.losses.len(), self.lrs.len());
        Ok(Some(mark))
    }

    /// The losses and learning rates in the journal a checkpoint marks (looked for in `dir`, this
    /// run's `history/` folder, first), read back and verified; appends go on after them.
    fn resume_journal(&mut self, mark: &JournalMark, dir: &std::path::Path) -> Result<(Steps, Steps)> {
        let bad = |what: &str| Error::bad_state(format!("the saved state of Recorder is malformed: {what}"));
        let (journal, bytes) = match Journal::resume(mark, &[dir.to_path_buf()]) {
            Ok(found) => found,
            // Gone with its log directory, or cut back by another timeline: a shorter record.
            Err(e) if journal_missing_or_mismatched(&e) => {
                crate::logging::warn!(
                    "Recorder: the losses recorded before this checkpoint cannot be read from {}: {e}; it records from here on",
                    mark.file.display()
                );
                *self.journal.lock() = Journaled::default();
                return Ok((Vec::new(), Vec::new()));
            }
            Err(e) => {
                let what = format!("reading Recorder's losses from {}: {e}", mark.file.display());
                return Err(Error::bad_state_from(what, e));
            }
        };
        let (mut losses, mut lrs) = (Vec::new(), Vec::new());
        for (_, entry) in journal_entries(&bytes) {
            let entry = entry.ok_or_else(|| bad("a line of its journal"))?;
            let pair = match entry.as_slice() {
                [_, step, value] => step.as_u64().zip(parse_f64(value)),
                _ => None,
            };
            let pair = pair.ok_or_else(|| bad("a line of its journal"))?;
            match entry[0].as_str() {
                Some("l") => losses.push(pair),
                Some("r") => lrs.push(pair),
                _ => return Err(bad("a line of its journal")),
            }
        }
        *self.journal.lock() = Journaled { journal, losses: losses.len(), lrs: lrs.len(), resume: None };
        Ok((losses, lrs))
    }
}
