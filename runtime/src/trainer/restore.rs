//! Resuming from a checkpoint: the model, the optimizer, the hyper-parameters and the counters
//! read back ([`Restored::read`]), and what is restored once the callbacks are set up.

use burn::module::Module;
use burn::optim::ModuleOptimizer;
use burn::store::ModuleRecord;
use burn::tensor::Bytes;
use serde_json::{Map, Value as Json};
use std::path::PathBuf;

use crate::callback::Counters;
use crate::error::{BoxError, CheckpointError, Error, Result};
use crate::monitor::parse_f64;
use crate::saver::Checkpoint;
use crate::state::{HyperParams, ReadJournal};

/// How far the trainer is in its data: passes started, batches taken from the current pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct DataPosition {
    pub(super) passes: u64,
    pub(super) batches: u64,
}

/// What a checkpoint restores after the model, optimizer, hyper-parameters and counters.
pub(super) struct Restored {
    /// The checkpoint's folder.
    pub(super) dir: PathBuf,
    /// The run it continues (`None`: a checkpoint written before runs were recorded).
    pub(super) run: Option<String>,
    pub(super) global_step: u64,
    /// The local step the first epoch starts at (a checkpoint taken in the middle of an epoch).
    pub(super) local_step: u64,
    pub(super) data_position: DataPosition,
    /// Each stateful callback's state, by name.
    pub(super) callbacks: Map<String, Json>,
    /// The monitors' state.
    pub(super) monitors: Json,
    /// The number of ranks that wrote the checkpoint, and the batches in each rank's pass
    /// (`None`: a checkpoint written before they were recorded, or data of unknown length).
    pub(super) world_size: Option<u64>,
    pub(super) pass_len: Option<u64>,
    /// Whether the run resumes even where the data position no longer means the same samples
    /// (`Trainer::resume_inexact`).
    pub(super) inexact: bool,
    /// The monitors' journal, read back before the log directory's policy acted.
    pub(super) journal: Option<ReadJournal>,
    /// Whether the log directory holds the checkpoint's run (it goes back there to the
    /// checkpoint's step, whatever folder the checkpoint is in).
    pub(super) continues: bool,
}

fn malformed(checkpoint: &Checkpoint, what: &str) -> Error {
    let dir = checkpoint.dir().display().to_string();
    mismatch(&dir, format!("checkpoint {dir} is malformed: {what}"), None)
}

/// A [`CheckpointError::Mismatch`] of the checkpoint `dir` (as shown).
fn mismatch(dir: &str, message: String, source: Option<BoxError>) -> Error {
    CheckpointError::Mismatch { dir: dir.into(), message, source }.into()
}

impl Restored {
    /// Apply `checkpoint` to the model, the optimizer, the hyper-parameters and the counters
    /// (its bytes move, nothing is copied).
    pub(super) fn read<M: Module>(
        mut checkpoint: Checkpoint,
        model: &mut M,
        optimizer: &mut ModuleOptimizer,
        hyper: &mut HyperParams,
        counters: &mut Counters,
    ) -> Result<Restored> {
        let dir = checkpoint.dir().display().to_string();
        load_model(&mut checkpoint, model, &dir)?;
        load_optimizer(&mut checkpoint, optimizer, &dir)?;
        note_default_device(model, &dir);
        let number = |path: &[&str]| saved_number(&checkpoint, path);
        let epoch = number(&["resume_at", "epoch"])?;
        let local_step = number(&["resume_at", "local_step"])?;
        let global_step = number(&["counters", "global_step"])?;
        let saved_steps = number(&["counters", "steps_per_epoch"])?;
        let data_position =
            DataPosition { passes: number(&["data", "passes"])?, batches: number(&["data", "batches"])? };
        check_bounds(global_step, data_position, &dir)?;
        restore_hyper(&checkpoint, hyper, &dir)?;
        resume_counters(counters, epoch, global_step, saved_steps, &dir)?;
        crate::logging::info!("resuming from {dir} (epoch {epoch}, global step {global_step})");
        let callbacks = match checkpoint.trainer.get_mut("callbacks").map(Json::take) {
            Some(Json::Object(states)) => states,
            _ => Map::new(),
        };
        Ok(Restored {
            dir: checkpoint.dir().to_path_buf(),
            run: checkpoint.run().map(str::to_string),
            global_step,
            local_step,
            data_position,
            callbacks,
            monitors: checkpoint.monitors.take(),
            world_size: checkpoint.trainer.pointer("/world/size").and_then(Json::as_u64),
            pass_len: checkpoint.trainer.pointer("/data/batches_per_pass").and_then(Json::as_u64),
            inexact: false,
            journal: None,
            continues: false,
        })
    }

    /// A checkpoint written by a world of another size is refused (unless the run resumes
    /// inexactly): each rank's position in its shard names other samples in a world of another
    /// size.
    pub(super) fn refuse_other_world(&self, size: usize) -> Result<()> {
        match self.world_size {
            Some(saved) if saved != size as u64 => self.refuse(&format!(
                "was written by a world of {saved} rank(s), this run has {size}: each rank's position in its shard of the data names other samples in a world of another size"
            )),
            _ => Ok(()),
        }
    }

    /// A checkpoint written with passes of another length is refused (unless the run resumes
    /// inexactly): the data changed, and its position names other samples.
    pub(super) fn refuse_other_data(&self, pass_len: Option<u64>) -> Result<()> {
        match (self.pass_len, pass_len) {
            (Some(saved), Some(now)) if saved != now => self.refuse(&format!(
                "was written with {saved} batches in each rank's pass over the data, this run has {now}: the data changed, and its saved position names other samples"
            )),
            _ => Ok(()),
        }
    }

    #[cold]
    fn refuse(&self, what: &str) -> Result<()> {
        let dir = self.dir.display();
        if self.inexact {
            crate::logging::warn!(
                "checkpoint {dir} {what}; resuming anyway (Trainer::resume_inexact): the data from here differs from the uninterrupted run's"
            );
            return Ok(());
        }
        let message = format!(
            "checkpoint {dir} {what}. Resume with the world and the data that wrote it, or call Trainer::resume_inexact(true) to continue anyway: the model, the optimizer, the counters and the callbacks' state are restored as saved, but the samples of the rest of this epoch differ from the uninterrupted run's (some seen twice, some skipped)"
        );
        Err(mismatch(&dir.to_string(), message, None))
    }
}

/// Counters read from disk that no run could have written are a malformed checkpoint, refused
/// before any arithmetic on them: a global step that leaves no room to count, a data position
/// past what the steps taken could reach (each pass gives at least one step).
fn check_bounds(global_step: u64, position: DataPosition, dir: &str) -> Result<()> {
    let reachable = global_step.saturating_add(1);
    if global_step > u64::MAX / 2 {
        let message = format!(
            "checkpoint {dir} is malformed: global step {global_step} leaves no room to count further"
        );
        return Err(mismatch(dir, message, None));
    }
    if position.passes > reachable || position.batches > reachable {
        let message = format!(
            "checkpoint {dir} is malformed: its data position (pass {}, batch {}) cannot follow from global step {global_step}",
            position.passes, position.batches
        );
        return Err(mismatch(dir, message, None));
    }
    Ok(())
}

/// Load the checkpoint's model bytes (moved out of it) into `model`.
fn load_model<M: Module>(checkpoint: &mut Checkpoint, model: &mut M, dir: &str) -> Result<()> {
    let record = ModuleRecord::from_bytes(Bytes::from_bytes_vec(std::mem::take(&mut checkpoint.model)))
        .map_err(|e| mismatch(dir, format!("reading the model of checkpoint {dir}: {e}"), Some(e.into())))?;
    *model = model.clone().try_load_record(record).map_err(|e| {
        let message = format!(
            "loading the model of checkpoint {dir}: {e} (is it the same architecture as the model being trained?)"
        );
        mismatch(dir, message, Some(e.into()))
    })?;
    Ok(())
}

/// Load the checkpoint's optimizer bytes (moved out of it) into `optimizer`.
fn load_optimizer(checkpoint: &mut Checkpoint, optimizer: &mut ModuleOptimizer, dir: &str) -> Result<()> {
    *optimizer = optimizer
        .clone()
        .from_bytes(Bytes::from_bytes_vec(std::mem::take(&mut checkpoint.optimizer)))
        .map_err(|e| {
            mismatch(dir, format!("loading the optimizer of checkpoint {dir}: {e}"), Some(e.into()))
        })?;
    Ok(())
}

/// burn's `ModuleOptimizer::load_record` puts the optimizer's state on burn's default device
/// (`BURN_DEVICE`, else the first GPU backend of the build), whatever the run's; the state moves
/// to each parameter's device at the first step. When that is another device than the model's
/// (a `cpu` run of a build with a GPU backend), that device was started for the load: say how to
/// avoid it.
#[cold]
fn note_default_device<M: Module>(model: &M, dir: &str) {
    let Some(run) = model.devices().into_iter().next() else { return };
    let default = burn::tensor::Device::default();
    if default != run {
        crate::logging::info!(
            "burn loaded the optimizer's state of checkpoint {dir} on its default device ({default:?}), not this run's ({run:?}); it moves to the run's device at the first step. Set the environment variable BURN_DEVICE to the run's backend (flex for the CPU) before the program starts so that burn starts no other device"
        );
    }
}

/// The number at `path` in the checkpoint's trainer state, or an error naming it.
fn saved_number(checkpoint: &Checkpoint, path: &[&str]) -> Result<u64> {
    path.iter()
        .try_fold(&checkpoint.trainer, |v, key| v.get(key))
        .and_then(Json::as_u64)
        .ok_or_else(|| malformed(checkpoint, &format!("{} is missing", path.join("."))))
}

/// Set the hyper-parameters the checkpoint saved; one this trainer does not register is a
/// warning.
fn restore_hyper(checkpoint: &Checkpoint, hyper: &mut HyperParams, dir: &str) -> Result<()> {
    let Some(saved) = checkpoint.trainer.get("hyper_params").and_then(Json::as_object) else { return Ok(()) };
    for (name, value) in saved {
        let value =
            parse_f64(value).ok_or_else(|| malformed(checkpoint, &format!("hyper-parameter {name}")))?;
        if hyper.get(name).is_some() {
            hyper.set(name, value)?;
        } else {
            crate::logging::warn!(
                "checkpoint {dir} holds hyper-parameter `{name}` = {value}, which this trainer does not register; ignored"
            );
        }
    }
    Ok(())
}

/// Set the counters to resume at `epoch` and `global_step`: the steps per epoch the run had
/// when this trainer does not know them (a warning when they differ), an error past `max_epoch`.
fn resume_counters(
    counters: &mut Counters,
    epoch: u64,
    global_step: u64,
    saved_steps: u64,
    dir: &str,
) -> Result<()> {
    if counters.steps_per_epoch == 0 {
        counters.steps_per_epoch = saved_steps;
    } else if counters.steps_per_epoch != saved_steps {
        crate::logging::warn!(
            "the run in {dir} had {saved_steps} steps per epoch, this one has {}; the epochs will not line up",
            counters.steps_per_epoch
        );
    }
    if epoch == 0 || epoch > counters.max_epoch.saturating_add(1) {
        let message = format!(
            "checkpoint {dir} resumes at epoch {epoch}, past max_epoch {}: raise max_epoch to train further",
            counters.max_epoch
        );
        return Err(mismatch(dir, message, None));
    }
    counters.starting_epoch = epoch;
    counters.epoch_num = epoch - 1;
    counters.global_step = global_step;
    counters.local_step = 0;
    Ok(())
}
