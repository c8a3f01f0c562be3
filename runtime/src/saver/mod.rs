//! Checkpoints that lose nothing: the model in burn's own format, the optimizer's state, the
//! trainer's counters and data position, every hyper-parameter, every stateful callback's state
//! and the monitors' history, written atomically and verified when read (see [the checkpoint
//! format](#the-checkpoint-format)). [`ModelSaver`] writes them; [`MinSaver`] / [`MaxSaver`] keep a
//! copy of the best; [`Trainer::resume_from`](crate::trainer::Trainer::resume_from) and
//! [`Trainer::auto_resume`](crate::trainer::Trainer::auto_resume) continue a run from them.
//!
//! ## The checkpoint format
//!
//! ```text
//! <log dir>/checkpoints/
//!     index.json              the latest complete checkpoint, those kept forever (atomic rewrite)
//!     step-450/               one checkpoint, named after its global step
//!         model.bpk           the model: burn's burnpack, `Module::load_file` reads it without stoker
//!         optimizer.bpk       the optimizer's state: `ModuleOptimizer::load`
//!         trainer.json        counters, data position, hyper-parameters, callbacks' states
//!         monitors.json       the monitors' history and per-epoch statistics
//!         manifest.json       length and CRC-32C of each file above (written last)
//!     min-validation_error/   a copy kept by MinSaver / MaxSaver, same layout
//! ```
//!
//! A [`ModelSaver`] given a [`checkpoint_dir`](ModelSaver::checkpoint_dir) writes its `step-N/`
//! folders and their `index.json` there instead, in the same layout.
//!
//! A checkpoint is written into a new folder `step-N.<pid>-<n>.tmp/` (a name unique to the
//! process and the write, created new, so that nothing is reused or followed through a symlink),
//! every file synced, the manifest last, then the folder is synced, renamed to `step-N/` and its
//! parent synced; only then is `index.json` replaced (itself written to a temporary file of a
//! unique name, synced and renamed) and old checkpoints removed (renamed `X.<pid>-<n>.deleting`,
//! then deleted; one that cannot be deleted is a warning, not an error: the new checkpoint is
//! complete). A crash at any moment leaves every earlier complete checkpoint as it was. A
//! checkpoint replaced by one of the same name (a MinSaver copy) is set aside as `X.old` until
//! the new one is in place; a reader that finds `X.old` without `X` reads it as `X`, and the next
//! write puts it back. The next write also removes what a crash left half-written, and only that:
//! temporaries of a process that has ended, never another's live one nor a folder of the user's.
//!
//! The manifest's own checksum is the CRC-32C of its bytes as written, up to the line holding
//! `"checksum"`, its last member (format 2; format 1's, over a re-serialization, is still read).
//!
//! Reading verifies each file against the manifest. A file that fails its checksum, is cut short
//! or is missing makes the checkpoint damaged: it is named, and resume falls back to the one
//! before it (the damaged one and any newer ones are set aside as `step-N.abandoned`, or
//! `step-N.<k>.abandoned` when that name is taken; nothing is deleted). Any other failure to read
//! (EIO, EACCES, too many open files, a newer format) is an error naming the file: the
//! checkpoint may be fine, so nothing is set aside.

mod best_state;
pub(crate) mod checkpoint;
mod load;

use std::borrow::Cow;
use std::path::PathBuf;
use std::time::Duration;

pub use best_state::SaveBestState;
pub use checkpoint::{
    CHECKPOINT_DIR, Checkpoint, FORMAT_VERSION, INDEX_FILE, KEEP_FILE, MANIFEST_FILE, MODEL_FILE,
    MONITORS_FILE, OPTIMIZER_FILE, TRAINER_FILE,
};
pub use load::LoadModel;

use crate::callback::{Callback, CheckpointRequest, Context};
use crate::error::{Error, Result, check_setting};
use crate::kind::CallbackKind;
use crate::state::{
    Better, Clock, KeepPolicy, MonotonicClock, Watched, check_copy_name, create_dir_all_synced, json_f64,
    parse_f64,
};

/// Writes a checkpoint when triggered — every epoch by default, or at another period under
/// [`PeriodicTrigger`](crate::trigger::PeriodicTrigger) / `#[every_k_epochs]` — into
/// `<log dir>/checkpoints/step-<global_step>/`, or into
/// [`checkpoint_dir`](Self::checkpoint_dir) (tensorpack's `ModelSaver`), keeping the last
/// `max_to_keep` and, as tensorpack's default, one per half hour of training forever
/// ([`keep_every_n_hours`](Self::keep_every_n_hours)).
///
/// A checkpoint that cannot be written (a full disk, an unwritable folder) is logged and training
/// goes on, as tensorpack's `ModelSaver` does; the earlier checkpoints stay intact and the latest
/// stays the last complete one. [`on_write_error(OnWriteError::Fail)`](Self::on_write_error)
/// fails the run instead.
///
/// The checkpoint is written once every callback has handled the event that asked for it (after
/// the epoch's `trigger_epoch` and the epoch's statistics), so that it holds every callback's
/// state as of that moment. See [the checkpoint format](crate::saver#the-checkpoint-format) for what it holds
/// and how it is written.
///
/// ```
/// use burn_stoker::prelude::*;
/// // Every second epoch, keeping the last 3 and one per 6 hours.
/// let saver = PeriodicTrigger::new(ModelSaver::new(3).keep_every_n_hours(6.0)).every_k_epochs(2);
/// // A second saver in the same run: every 10 epochs, all of them, in a folder of its own.
/// let archive = PeriodicTrigger::new(ModelSaver::new(usize::MAX).checkpoint_dir("archive/run1"))
///     .every_k_epochs(10)
///     .named("archive"); // `ModelSaver(archive)`: a run's callbacks have distinct names
/// # let _ = (saver, archive);
/// ```
///
/// # Checkpoints kept forever
///
/// [`keep_every_n_hours`](Self::keep_every_n_hours), tensorpack's
/// `keep_checkpoint_every_n_hours` (0.5 by default), is `tf.train.Saver`'s rule, which
/// tensorpack hands it to: "keep" means "do not delete", never "write". The hours count from the saver's setup (the start of the run); a checkpoint pushed
/// out of the `max_to_keep` most recent ones is kept forever when it was written more than N
/// hours after the start, and then the next one kept must be written more than 2N hours after
/// the start, and so on. With checkpoints every 20 minutes, `max_to_keep` 1 and N = 0.5, those
/// of minutes 40, 80, 100, 140, 160... are kept. The times come from the saver's
/// [`clock`](Self::clock) (the system's monotonic clock, from the wall time at setup), so a test
/// can move it by hand. Differences from tensorpack, where stoker's checkpoints outlive a run:
/// the kept-forever checkpoints carry a mark (the file `keep`) and stay through every later run;
/// a resumed run counts its hours from its own start, as a new `tf.train.Saver` does, but it
/// also prunes the previous run's checkpoints beyond `max_to_keep` (tensorpack's new saver
/// forgets them, so they are never deleted).
#[derive(Debug, Clone)]
#[doc(alias = "ModelCheckpoint")]
#[doc(alias = "FileCheckpointer")]
#[doc(alias = "Checkpointer")]
pub struct ModelSaver<T = MonotonicClock> {
    policy: KeepPolicy,
    checkpoint_dir: Option<PathBuf>,
    clock: T,
    /// At setup: the wall time (seconds since the Unix epoch) and the clock's reading.
    start: Option<(f64, Duration)>,
    /// The folder of checkpoints, set at setup.
    root: Option<PathBuf>,
    on_write_error: OnWriteError,
}
crate::kind::kind!(ModelSaver<T>);

/// What a [`ModelSaver`] does when a checkpoint cannot be written (a full disk, a folder that
/// became unwritable, a failing device): [`ModelSaver::on_write_error`].
///
/// Either way the checkpoint written before stays complete and the latest (the write goes into a
/// temporary folder renamed only when complete, see [the checkpoint
/// format](crate::saver#the-checkpoint-format)), and nothing half-written is left.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnWriteError {
    /// Log the error (naming the checkpoint, the file and the operating system's reason) and go
    /// on training; the next trigger tries again. tensorpack's `ModelSaver`, which catches
    /// `IOError`, `PermissionDeniedError` and `ResourceExhaustedError` ("Exception in
    /// ModelSaver!"). The default.
    #[default]
    Log,
    /// Fail the run with the error, at the boundary of the checkpoint (`after_train` still runs).
    Fail,
}

impl Default for ModelSaver {
    fn default() -> Self {
        ModelSaver::new(10)
    }
}

impl ModelSaver {
    /// Keep the `max_to_keep` most recent checkpoints (at least 1), and one per half hour of
    /// training forever (tensorpack's defaults are 10 and 0.5 hours).
    pub fn new(max_to_keep: usize) -> Self {
        ModelSaver {
            policy: KeepPolicy { max_to_keep: max_to_keep.max(1), keep_every_n_hours: Some(0.5) },
            checkpoint_dir: None,
            clock: MonotonicClock::new(),
            start: None,
            root: None,
            on_write_error: OnWriteError::Log,
        }
    }
}

impl<T> ModelSaver<T> {
    /// What a checkpoint that cannot be written does: logged and training goes on
    /// ([`OnWriteError::Log`], tensorpack's, the default), or the run fails
    /// ([`OnWriteError::Fail`]). The checkpoints written before are intact either way.
    pub fn on_write_error(mut self, action: OnWriteError) -> Self {
        self.on_write_error = action;
        self
    }
    /// Also keep forever one checkpoint per `hours` hours of training (tensorpack's
    /// `keep_checkpoint_every_n_hours`, 0.5 by default; fractions of an hour are fine;
    /// `f64::INFINITY` keeps none beyond the `max_to_keep` most recent, as TensorFlow's default
    /// of 10,000 hours does). See [the rule](ModelSaver#checkpoints-kept-forever).
    pub fn keep_every_n_hours(mut self, hours: f64) -> Self {
        self.policy.keep_every_n_hours = Some(hours);
        self
    }
    /// Write the checkpoints into `dir` (tensorpack's `checkpoint_dir`) rather than
    /// `<log dir>/checkpoints`: a path as given (relative to the working directory), created at
    /// setup. It holds the checkpoints and their `index.json` as `checkpoints/` does; resume from
    /// it with [`Trainer::resume_from(dir)`](crate::trainer::Trainer::resume_from)
    /// ([`auto_resume`](crate::trainer::Trainer::auto_resume) reads `<log dir>/checkpoints`).
    /// Two savers of a run cannot share a folder (each would prune the other's checkpoints): an
    /// error at setup. The folder is treated as the log directory is: the run holds it with
    /// its lock (a second run writing into it is refused), a folder holding another run's
    /// checkpoints is refused, or backed up, emptied or shared as the run's
    /// [`LogDirPolicy`](crate::trainer::LogDirPolicy) says (`NewVersion` refuses), and a run
    /// resumed from an earlier step sets aside there the checkpoints newer than it. Each
    /// checkpoint and `index.json` record the run that wrote them ([`Checkpoint::run`]); a
    /// resumed run continues its checkpoint's run. The checkpoint just written is never pruned.
    pub fn checkpoint_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.checkpoint_dir = Some(dir.into());
        self
    }
    /// Read the time from `clock` (a [`ManualClock`](crate::state::ManualClock) in a test)
    /// instead of the system's monotonic clock: the time of each checkpoint is the wall time at
    /// setup plus the clock's advance since.
    pub fn clock<C: Clock>(self, clock: C) -> ModelSaver<C> {
        ModelSaver {
            policy: self.policy,
            checkpoint_dir: self.checkpoint_dir,
            clock,
            start: None,
            root: None,
            on_write_error: self.on_write_error,
        }
    }
    /// What this saver keeps.
    pub fn policy(&self) -> KeepPolicy {
        self.policy
    }
}

impl<M, T: Clock> Callback<M> for ModelSaver<T> {
    fn setup(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if let Some(hours) = self.policy.keep_every_n_hours {
            check_setting(hours > 0.0, "ModelSaver", "keep_every_n_hours", "positive", hours)?;
        }
        let root = match &self.checkpoint_dir {
            Some(dir) => dir.clone(),
            None => ctx.log_dir().join(checkpoint::CHECKPOINT_DIR),
        };
        create_dir_all_synced(&root).map_err(|e| Error::io(&root, e))?;
        let same = |other: &std::path::Path| match (root.canonicalize(), other.canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            _ => root == other,
        };
        let default_root = ctx.log_dir().join(checkpoint::CHECKPOINT_DIR);
        let taken = ctx.state.control.savers.iter().any(|s| same(s.root.as_deref().unwrap_or(&default_root)));
        if taken {
            return Err(Error::invalid(format!(
                "ModelSaver: another ModelSaver of this run writes into {} already: two savers in one folder would prune each other's checkpoints; give one a folder of its own with .checkpoint_dir(...)",
                root.display()
            )));
        }
        let start = (checkpoint::now(), self.clock.now());
        self.start = Some(start);
        let request = CheckpointRequest {
            root: self.checkpoint_dir.is_some().then(|| root.clone()),
            policy: self.policy,
            time: None,
            run_start: Some(start.0),
            keep_going: self.on_write_error == OnWriteError::Log,
        };
        ctx.state.control.savers.push(request);
        self.root = Some(root);
        Ok(())
    }

    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let (wall, origin) = self.start.unwrap_or((checkpoint::now(), self.clock.now()));
        let time = wall + self.clock.now().saturating_sub(origin).as_secs_f64();
        ctx.request(CheckpointRequest {
            root: self.checkpoint_dir.as_ref().and(self.root.clone()),
            policy: self.policy,
            time: Some(time),
            run_start: Some(wall),
            keep_going: self.on_write_error == OnWriteError::Log,
        });
        Ok(())
    }
}

/// Keeps a copy of the checkpoint with the lowest (`MinSaver`) or highest (`MaxSaver`) value of a
/// monitored statistic, in `<log dir>/checkpoints/min-<statistic>/` (or `max-`), tensorpack's
/// `MinSaver` / `MaxSaver`. The copy is a complete checkpoint: resume from it, or load its
/// `model.bpk` with plain burn.
///
/// At each trigger (every epoch by default) it reads the statistic's latest value from the
/// monitors: order it after the callback that puts the statistic (`#[order(after =
/// InferenceRunner)]`). Its best value so far is callback state: it survives a resume, so a
/// resumed run does not overwrite a better copy with a worse one.
///
/// ```
/// use burn_stoker::prelude::*;
/// use burn_stoker::saver::{MaxSaver, MinSaver};
/// let best_error = MinSaver::new("validation_error");
/// let best_accuracy = MaxSaver::new("validation_accuracy").copy_name("best-accuracy");
/// # let _ = (best_error, best_accuracy);
/// ```
#[derive(Debug, Clone, PartialEq)]
#[doc(alias = "ModelCheckpoint")]
#[doc(alias = "save_best_only")]
#[doc(alias = "MetricCheckpointingStrategy")]
pub struct BestSaver<const MAX: bool> {
    watched: Watched,
    copy_name: Option<String>,
    best: Option<f64>,
    warned: bool,
}
impl<const MAX: bool> CallbackKind for BestSaver<MAX> {
    const NAME: &'static str = if MAX { "MaxSaver" } else { "MinSaver" };
}

/// [`BestSaver`] keeping the lowest value.
pub type MinSaver = BestSaver<false>;
/// [`BestSaver`] keeping the highest value.
pub type MaxSaver = BestSaver<true>;

impl<const MAX: bool> BestSaver<MAX> {
    /// Watch the monitored scalar `statistic`.
    pub fn new(statistic: impl Into<String>) -> Self {
        BestSaver { watched: Watched::new(statistic), copy_name: None, best: None, warned: false }
    }
    /// The copy's folder name inside `checkpoints/` (default `min-<statistic>` / `max-<statistic>`).
    /// It must be a plain folder name of its own: not empty, no `/`, `\\` or control character,
    /// not starting with `.` or `step-`, not `index.json`, not ending with `.tmp`, `.old`,
    /// `.deleting` or `.abandoned`; another is an error at setup, naming it.
    pub fn copy_name(mut self, name: impl Into<String>) -> Self {
        self.copy_name = Some(name.into());
        self
    }
    /// The best value seen so far.
    pub fn best(&self) -> Option<f64> {
        self.best
    }
    fn kind(&self) -> &'static str {
        <Self as CallbackKind>::NAME
    }
    fn folder(&self) -> String {
        let prefix = if MAX { "max" } else { "min" };
        self.copy_name.clone().unwrap_or_else(|| format!("{prefix}-{}", self.watched.name))
    }
}

impl<M, const MAX: bool> Callback<M> for BestSaver<MAX> {
    fn name(&self) -> Cow<'static, str> {
        crate::kind::detailed::<Self>(&self.watched.name)
    }

    fn save_state(&self) -> Result<Option<serde_json::Value>> {
        Ok(Some(serde_json::json!({ "best": self.best.map(json_f64) })))
    }

    fn load_state(&mut self, state: serde_json::Value) -> Result<()> {
        self.best = match state.get("best") {
            None | Some(serde_json::Value::Null) => None,
            Some(value) => Some(parse_f64(value).ok_or_else(|| {
                Error::bad_state(format!(
                    "{}({}): the saved best value {value} is not a number",
                    self.kind(),
                    self.watched.name
                ))
            })?),
        };
        Ok(())
    }

    fn setup(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let folder = self.folder();
        check_copy_name(&folder).map_err(|why| {
            let hint = if self.copy_name.is_none() {
                " (it comes from the statistic's name: give the copy one with `.copy_name(\"...\")`)"
                    .to_string()
            } else {
                String::new()
            };
            Error::invalid(format!(
                "{}({}): the copy name {folder:?}{hint} {why}",
                self.kind(),
                self.watched.name
            ))
        })?;
        self.watched.declare(if MAX { Better::Higher } else { Better::Lower }, ctx.monitors());
        Ok(())
    }

    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let Some(value) = self.watched.latest(ctx.monitors_ref()) else {
            if !self.warned {
                self.warned = true;
                crate::logging::warn!(
                    "{}({}): no scalar named `{}` has been put yet; order it after the callback that puts it",
                    self.kind(),
                    self.watched.name,
                    self.watched.name
                );
            }
            return Ok(());
        };
        if self.watched.beats(value, self.best) {
            self.best = Some(value);
            ctx.request_checkpoint_copy(self.folder())?;
        }
        Ok(())
    }
}
