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

use std::borrow::Cow;

pub use best_state::SaveBestState;
pub use checkpoint::{
    CHECKPOINT_DIR, Checkpoint, FORMAT_VERSION, INDEX_FILE, KEEP_FILE, MANIFEST_FILE, MODEL_FILE,
    MONITORS_FILE, OPTIMIZER_FILE, TRAINER_FILE,
};

use crate::callback::{Callback, Context};
use crate::error::{Error, Result, check_setting};
use crate::state::{KeepPolicy, check_copy_name, create_dir_all_synced, json_f64, parse_f64};

/// Writes a checkpoint when triggered — every epoch by default, or at another period under
/// [`PeriodicTrigger`](crate::trigger::PeriodicTrigger) / `#[every_k_epochs]` — into
/// `<log dir>/checkpoints/step-<global_step>/` (tensorpack's `ModelSaver`), keeping the last
/// `max_to_keep` and, with [`keep_every_n_hours`](Self::keep_every_n_hours), one per that many
/// hours forever.
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
/// # let _ = saver;
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelSaver {
    policy: KeepPolicy,
}

impl Default for ModelSaver {
    fn default() -> Self {
        ModelSaver::new(10)
    }
}

impl ModelSaver {
    /// Keep the `max_to_keep` most recent checkpoints (at least 1).
    pub fn new(max_to_keep: usize) -> Self {
        ModelSaver { policy: KeepPolicy { max_to_keep: max_to_keep.max(1), keep_every_n_hours: None } }
    }
    /// Also keep forever one checkpoint per `hours` hours of training (tensorpack's
    /// `keep_checkpoint_every_n_hours`; fractions of an hour are fine).
    pub fn keep_every_n_hours(mut self, hours: f64) -> Self {
        self.policy.keep_every_n_hours = Some(hours);
        self
    }
    /// What this saver keeps.
    pub fn policy(&self) -> KeepPolicy {
        self.policy
    }
}

impl<M> Callback<M> for ModelSaver {
    fn setup(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if let Some(hours) = self.policy.keep_every_n_hours {
            check_setting(hours > 0.0, "ModelSaver", "keep_every_n_hours", "positive", hours)?;
        }
        ctx.state.checkpoint_policy = self.policy;
        let root = ctx.log_dir().join(checkpoint::CHECKPOINT_DIR);
        create_dir_all_synced(&root).map_err(|e| Error::io(&root, e))
    }

    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        ctx.request_checkpoint(self.policy);
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
pub struct BestSaver<const MAX: bool> {
    statistic: String,
    copy_name: Option<String>,
    best: Option<f64>,
    warned: bool,
}

/// [`BestSaver`] keeping the lowest value.
pub type MinSaver = BestSaver<false>;
/// [`BestSaver`] keeping the highest value.
pub type MaxSaver = BestSaver<true>;

impl<const MAX: bool> BestSaver<MAX> {
    /// Watch the monitored scalar `statistic`.
    pub fn new(statistic: impl Into<String>) -> Self {
        BestSaver { statistic: statistic.into(), copy_name: None, best: None, warned: false }
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
        if MAX { "MaxSaver" } else { "MinSaver" }
    }
    fn folder(&self) -> String {
        let prefix = if MAX { "max" } else { "min" };
        self.copy_name.clone().unwrap_or_else(|| format!("{prefix}-{}", self.statistic))
    }
}

impl<M, const MAX: bool> Callback<M> for BestSaver<MAX> {
    fn name(&self) -> Cow<'static, str> {
        Cow::Owned(format!("{}({})", self.kind(), self.statistic))
    }

    fn save_state(&self) -> Result<Option<serde_json::Value>> {
        Ok(Some(serde_json::json!({ "best": self.best.map(json_f64) })))
    }

    fn load_state(&mut self, state: serde_json::Value) -> Result<()> {
        self.best = match state.get("best") {
            None | Some(serde_json::Value::Null) => None,
            Some(value) => Some(parse_f64(value).ok_or_else(|| {
                Error::checkpoint(format!(
                    "{}({}): the saved best value {value} is not a number",
                    self.kind(),
                    self.statistic
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
            Error::msg(format!("{}({}): the copy name {folder:?}{hint} {why}", self.kind(), self.statistic))
        })?;
        let better = if MAX { crate::state::Better::Higher } else { crate::state::Better::Lower };
        ctx.monitors().declare_better(&self.statistic, better);
        Ok(())
    }

    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let Some(&(_, value)) = ctx.monitors_ref().history(&self.statistic).last() else {
            if !self.warned {
                self.warned = true;
                eprintln!(
                    "stoker: warning: {}({}): no scalar named `{}` has been put yet; order it after the callback that puts it",
                    self.kind(),
                    self.statistic,
                    self.statistic
                );
            }
            return Ok(());
        };
        if value.is_nan() {
            return Ok(());
        }
        let better = self.best.is_none_or(|best| if MAX { value > best } else { value < best });
        if better {
            self.best = Some(value);
            ctx.request_checkpoint_copy(self.folder())?;
        }
        Ok(())
    }
}
