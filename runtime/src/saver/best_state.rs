//! neon's `SaveBestStateCallback`: the best model so far, in one file.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver};
use std::thread::JoinHandle;

use burn::module::Module;
use serde_json::{Value as Json, json};

use super::checkpoint::MANIFEST_FILE;
use crate::callback::{Callback, Context};
use crate::error::{CheckpointError, Error, Result};
use crate::state::Direction;
use crate::state::{BoundedSender, Watched, bounded, check_copy_name, json_f64, parse_f64, write_atomic};

/// Saves the state of training whenever a monitored statistic reaches its best value so far:
/// neon's `SaveBestStateCallback`, which writes `model.serialize(keep_states=True)`: the weights
/// with the optimizer's states and the epoch, a file a run continues from.
///
/// At `path` it writes a complete checkpoint (see [the checkpoint
/// format](crate::saver#the-checkpoint-format)): the model (`model.bpk`, which plain burn reads
/// back with `Module::load_file`), the optimizer's state, the counters and data position, the
/// hyper-parameters, the callbacks' states and the monitors. A run resumes from it with
/// [`Trainer::resume_from(path)`](crate::trainer::Trainer::resume_from), and
/// [`LoadModel`](super::LoadModel) (neon's `--model_file`) starts a new run from its weights.
/// [`weights_only`](Self::weights_only) writes the model alone, a burnpack file at `path`.
///
/// At each trigger (every epoch by default) where the statistic has a new value (order this
/// callback after the one that puts it), a value lower than the best so far (`Direction::Min`, the
/// default, as neon keeps the lowest validation loss; higher with `Direction::Max`) makes the
/// checkpoint of that boundary (after the epoch's `trigger_epoch`) also written at `path`,
/// replacing the previous best only once the new one is complete, as a
/// [`MinSaver`](super::MinSaver) copy is. NaN is never the best. A trigger where the statistic
/// has no new value is skipped, as neon skips the epochs its `LossCallback` did not evaluate
/// (`--eval_freq 2`: epoch 1), including those before its first value; a run at whose end it was
/// never put logs a warning naming the scalars there are. The checkpoint is written on the training thread, at the
/// boundary; with `weights_only`, reading the weights off the device and writing them happen on a
/// thread of its own, so training goes on meanwhile (with at most two models waiting for that
/// thread: past that, training waits for it, after one warning on stderr), a failed write fails
/// the run at the next trigger, or at the end of training, naming the file, and every write is
/// finished when training returns.
///
/// A relative `path` is taken inside the log directory (neon takes it from the working
/// directory); an absolute one is used as it is. Its last component names the checkpoint folder
/// as a [`MinSaver`](super::MinSaver)'s copy name is checked (not starting with `.` or `step-`,
/// no `.tmp`, `.old`, `.deleting`, `.abandoned` ending); a folder already there that is not a
/// checkpoint, or a file, is an error at setup (nothing of the user's is replaced). The best
/// value is callback state: a resumed run does not replace the best state with a worse one. A
/// run resumed from an earlier checkpoint (sent back in time) sets the best state written after
/// that checkpoint aside as `<name>.abandoned` (nothing is deleted) before it trains: that
/// abandoned timeline's best would otherwise be replaced by the resumed run's next improvement,
/// which can be worse. A `weights_only` file records no step and is not set aside.
///
/// ```
/// use burn_stoker::prelude::*;
/// use burn_stoker::saver::SaveBestState;
/// use burn_stoker::state::Direction;
///
/// // `<log dir>/best/`: the state with the lowest validation cost so far; resume from it with
/// // `Trainer::resume_from("<log dir>/best")`.
/// let best_cost = SaveBestState::new("best", "validation_cost");
/// // The weights alone of the model with the highest validation accuracy so far.
/// let best_accuracy =
///     SaveBestState::new("/models/best-accuracy.bpk", "validation_accuracy").mode(Direction::Max).weights_only();
/// # let _ = (best_cost, best_accuracy);
/// ```
#[derive(Debug)]
pub struct SaveBestState {
    path: PathBuf,
    target: PathBuf,
    watched: Watched,
    mode: Direction,
    best: Option<f64>,
    best_epoch: u64,
    weights_only: bool,
    writer: Option<Writer>,
    /// Whether the run resumed (its state was loaded): the best state written after the
    /// checkpoint it resumed from is set aside before training.
    resumed: bool,
}
crate::kind::kind!(SaveBestState);

impl SaveBestState {
    /// Write the state of training to `path` whenever the monitored scalar `statistic` reaches
    /// its lowest value so far.
    pub fn new(path: impl Into<PathBuf>, statistic: impl Into<String>) -> Self {
        SaveBestState {
            path: path.into(),
            target: PathBuf::new(),
            watched: Watched::new(statistic),
            mode: Direction::Min,
            best: None,
            best_epoch: 0,
            weights_only: false,
            writer: None,
            resumed: false,
        }
    }
    /// Write the model's weights alone, a burnpack file at `path` (what this callback wrote
    /// before it saved neon's whole state): smaller, written off the training thread, but no
    /// run can continue from it.
    pub fn weights_only(mut self) -> Self {
        self.weights_only = true;
        self
    }
    /// Whether lower (`Direction::Min`, the default) or higher (`Direction::Max`) is better; `Direction::Auto`
    /// tells from the statistic's name (see [`Direction::resolve`]).
    pub fn mode(mut self, mode: Direction) -> Self {
        self.mode = mode;
        self
    }
    /// The best value so far.
    pub fn best(&self) -> Option<f64> {
        self.best
    }
    /// The epoch of the best value, 0 before any.
    pub fn best_epoch(&self) -> u64 {
        self.best_epoch
    }
    /// The file written, as given.
    pub fn path(&self) -> &Path {
        &self.path
    }
    fn label(&self) -> String {
        crate::kind::detailed::<Self>(&self.watched.name).into_owned()
    }
    /// The folder the checkpoint goes into, and its name there.
    fn copy_place(&self) -> (PathBuf, String) {
        let parent = self.target.parent().map(Path::to_path_buf).unwrap_or_default();
        let name = self.target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        (parent, name)
    }
    /// The target is a file (weights only) or a checkpoint's folder, never something of the
    /// user's that would be replaced.
    fn check_target(&self) -> Result<()> {
        let owner = self.label();
        let shown = self.target.display();
        if self.weights_only {
            if self.target.is_dir() {
                return Err(Error::invalid(format!(
                    "{owner}: {shown} is a directory; give the path of the file to write"
                )));
            }
            return Ok(());
        }
        let (_, name) = self.copy_place();
        check_copy_name(&name).map_err(|why| {
            Error::invalid(format!("{owner}: the checkpoint folder name {name:?} of {shown} {why}"))
        })?;
        if self.target.exists() && !self.target.join(MANIFEST_FILE).is_file() {
            let what = if self.target.is_dir() { "a folder that is not a checkpoint" } else { "a file" };
            return Err(Error::invalid(format!(
                "{owner}: {shown} is {what}; the best state is a checkpoint folder written there \
                 (weights_only() writes a file): give a path that is free or holds an earlier best state"
            )));
        }
        Ok(())
    }
}

/// How many models may wait for the writer thread (each is a copy of the model).
const BEST_STATE_QUEUE_CAPACITY: usize = 2;

/// A job for the writer thread: read the weights, write the file.
type Job = Box<dyn FnOnce() -> Result<()> + Send>;

/// The thread writing the best model, and the failures it reports back.
#[derive(Debug)]
struct Writer {
    jobs: Option<BoundedSender<Job>>,
    failures: Receiver<Error>,
    handle: Option<JoinHandle<()>>,
}

impl Writer {
    fn start() -> Self {
        let (jobs, receiver) = bounded::<Job>("SaveBestState", BEST_STATE_QUEUE_CAPACITY);
        let (report, failures) = mpsc::channel();
        let handle = std::thread::Builder::new()
            .name("stoker-SaveBestState".into())
            .spawn(move || {
                for job in receiver {
                    if let Err(error) = job() {
                        let _ = report.send(error);
                    }
                }
            })
            .expect("spawning the SaveBestState writer thread");
        Writer { jobs: Some(jobs), failures, handle: Some(handle) }
    }

    fn send(&self, job: Job) {
        if let Some(jobs) = &self.jobs {
            // A thread that ended has reported why.
            let _ = jobs.send_waiting(job);
        }
    }

    /// The first failure reported so far.
    fn check(&self) -> Result<()> {
        match self.failures.try_recv() {
            Ok(error) => Err(error),
            Err(_) => Ok(()),
        }
    }

    /// Wait for every write, then report the first failure.
    fn finish(&mut self) -> Result<()> {
        drop(self.jobs.take());
        if let Some(handle) = self.handle.take()
            && handle.join().is_err()
        {
            return Err(CheckpointError::Write {
                message: "the SaveBestState writer thread panicked".into(),
                source: None,
            }
            .into());
        }
        self.check()
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if let Err(error) = self.finish() {
            crate::logging::error!("{error}");
        }
    }
}

impl<M: Module + 'static> Callback<M> for SaveBestState {
    fn name(&self) -> Cow<'static, str> {
        Cow::Owned(self.label())
    }

    fn save_state(&self) -> Result<Option<Json>> {
        Ok(Some(json!({
            "best": self.best.map(json_f64),
            "best_epoch": self.best_epoch,
            "seen": self.watched.seen,
        })))
    }

    fn load_state(&mut self, state: Json) -> Result<()> {
        let owner = self.label();
        let bad =
            |key: &str| Error::bad_state(format!("{owner}: the saved state has no valid `{key}`: {state}"));
        self.best = match state.get("best") {
            None | Some(Json::Null) => None,
            Some(value) => Some(parse_f64(value).ok_or_else(|| bad("best"))?),
        };
        self.best_epoch = state.get("best_epoch").and_then(Json::as_u64).ok_or_else(|| bad("best_epoch"))?;
        self.watched.seen = state.get("seen").and_then(Json::as_u64).ok_or_else(|| bad("seen"))? as usize;
        self.resumed = true;
        Ok(())
    }

    /// A run sent back to an earlier checkpoint: the best state at `path` written after it (the
    /// abandoned timeline's best, better than anything the restored best value knows of) is set
    /// aside as `<name>.abandoned`, as MinSaver's copies are, instead of being replaced by the
    /// resumed run's next improvement. A weights-only file records no step, and stays.
    fn before_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if self.resumed && !self.weights_only && ctx.is_chief() {
            crate::saver::checkpoint::abandon_if_newer(&self.target, ctx.global_step())?;
        }
        Ok(())
    }

    fn setup(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let owner = self.label();
        self.watched.declare(self.mode.better(&self.watched.name, &owner)?, ctx.monitors());
        if self.path.as_os_str().is_empty() {
            return Err(Error::invalid(format!("{owner}: the path is empty")));
        }
        self.target =
            if self.path.is_absolute() { self.path.clone() } else { ctx.log_dir().join(&self.path) };
        self.check_target()?;
        if let Some(parent) = self.target.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        Ok(())
    }

    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if let Some(writer) = &self.writer {
            writer.check()?;
        }
        let owner = self.label();
        let Some(value) = self.watched.fresh_if_put(ctx.monitors_ref()) else { return Ok(()) };
        if !self.watched.beats(value, self.best) {
            return Ok(());
        }
        self.best = Some(value);
        self.best_epoch = ctx.epoch_num();
        if !self.weights_only {
            let (parent, name) = self.copy_place();
            ctx.request_checkpoint_copy_at(parent, name);
            return Ok(());
        }
        // A clone keeps this step's weights (the optimizer makes new tensors); the writer thread
        // reads them off the device.
        let model = ctx.model().clone();
        let target = self.target.clone();
        self.writer.get_or_insert_with(Writer::start).send(Box::new(move || {
            let bytes = model
                .into_record()
                .into_bytes()
                .map_err(|e| Error::checkpoint_write(format!("{owner}: serializing the model: {e}"), e))?;
            write_atomic(&target, &bytes).map_err(|e| {
                Error::checkpoint_write(format!("{owner}: writing {}: {e}", target.display()), e)
            })
        }));
        Ok(())
    }

    fn after_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.watched.warn_if_never_put(ctx.monitors_ref(), &self.label());
        match self.writer.take() {
            Some(mut writer) => writer.finish(),
            None => Ok(()),
        }
    }
}
