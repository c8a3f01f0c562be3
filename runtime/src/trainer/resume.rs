//! Writing the trainer's checkpoints and resuming from them.

use std::fs;
use std::path::{Path, PathBuf};

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::ModuleOptimizer;
use burn::store::ModuleRecord;
use burn::tensor::{Bytes, Tensor};
use serde_json::{Map, Value as Json};

use super::run::{Run, wrap};
use crate::callback::{Callbacks, Counters, StateOp};
use crate::error::{Error, Result};
use crate::monitor::{json_f64, parse_f64};
use crate::saver::Checkpoint;
use crate::saver::checkpoint::{self, CHECKPOINT_DIR, Content};
use crate::state::HyperParams;

/// Where a checkpoint is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Boundary {
    /// After `before_train`, before the first step (the first batch is already taken).
    BeforeTrain,
    /// After a step's `trigger_step`.
    Step,
    /// After an epoch's `trigger_epoch` and its statistics.
    EpochEnd,
}

/// How far the trainer is in its data: passes started, batches taken from the current pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct DataPosition {
    pub(super) passes: u64,
    pub(super) batches: u64,
}

/// What a checkpoint restores after the model, optimizer, hyper-parameters and counters.
pub(super) struct Restored {
    dir: PathBuf,
    global_step: u64,
    local_step: u64,
    pub(super) data_position: DataPosition,
    callbacks: Map<String, Json>,
    monitors: Json,
}

fn malformed(checkpoint: &Checkpoint, what: &str) -> Error {
    Error::checkpoint(format!("checkpoint {} is malformed: {what}", checkpoint.dir().display()))
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
        let record = ModuleRecord::from_bytes(Bytes::from_bytes_vec(std::mem::take(&mut checkpoint.model)))
            .map_err(|e| {
            Error::checkpoint_from(format!("reading the model of checkpoint {dir}: {e}"), e)
        })?;
        *model = model.clone().try_load_record(record).map_err(|e| {
            Error::checkpoint_from(
                format!(
                    "loading the model of checkpoint {dir}: {e} (is it the same architecture as the model being trained?)"
                ),
                e,
            )
        })?;
        *optimizer = optimizer
            .clone()
            .from_bytes(Bytes::from_bytes_vec(std::mem::take(&mut checkpoint.optimizer)))
            .map_err(|e| {
                Error::checkpoint_from(format!("loading the optimizer of checkpoint {dir}: {e}"), e)
            })?;

        let trainer = &checkpoint.trainer;
        let number = |path: &[&str]| -> Result<u64> {
            path.iter()
                .try_fold(trainer, |v, key| v.get(key))
                .and_then(Json::as_u64)
                .ok_or_else(|| malformed(&checkpoint, &format!("{} is missing", path.join("."))))
        };
        let epoch = number(&["resume_at", "epoch"])?;
        let local_step = number(&["resume_at", "local_step"])?;
        let global_step = number(&["counters", "global_step"])?;
        let saved_steps = number(&["counters", "steps_per_epoch"])?;
        let data_position =
            DataPosition { passes: number(&["data", "passes"])?, batches: number(&["data", "batches"])? };
        if let Some(saved) = trainer.get("hyper_params").and_then(Json::as_object) {
            for (name, value) in saved {
                let value = parse_f64(value)
                    .ok_or_else(|| malformed(&checkpoint, &format!("hyper-parameter {name}")))?;
                if hyper.get(name).is_some() {
                    hyper.set(name, value)?;
                } else {
                    crate::logging::warn!(
                        "checkpoint {dir} holds hyper-parameter `{name}` = {value}, which this trainer does not register; ignored"
                    );
                }
            }
        }
        if counters.steps_per_epoch == 0 {
            counters.steps_per_epoch = saved_steps;
        } else if counters.steps_per_epoch != saved_steps {
            crate::logging::warn!(
                "the run in {dir} had {saved_steps} steps per epoch, this one has {}; the epochs will not line up",
                counters.steps_per_epoch
            );
        }
        if epoch == 0 || epoch > counters.max_epoch + 1 {
            return Err(Error::checkpoint(format!(
                "checkpoint {dir} resumes at epoch {epoch}, past max_epoch {}: raise max_epoch to train further",
                counters.max_epoch
            )));
        }
        counters.starting_epoch = epoch;
        counters.epoch_num = epoch - 1;
        counters.global_step = global_step;
        counters.local_step = 0;
        crate::logging::info!("resuming from {dir} (epoch {epoch}, global step {global_step})");
        let callbacks = match checkpoint.trainer.get_mut("callbacks").map(Json::take) {
            Some(Json::Object(states)) => states,
            _ => Map::new(),
        };
        Ok(Restored {
            dir: checkpoint.dir().to_path_buf(),
            global_step,
            local_step,
            data_position,
            callbacks,
            monitors: checkpoint.monitors.take(),
        })
    }
}

impl<M: Module, K, C: Callbacks<M, K>> Run<M, C, K> {
    /// Restore the monitors, remember the rest for after setup, and set aside checkpoints newer
    /// than the one resumed from.
    pub(super) fn restore(&mut self, restored: Restored) -> Result<()> {
        self.state.monitors.load_state(&restored.monitors)?;
        self.state.monitors.global_step = restored.global_step;
        self.first_local_step = restored.local_step;
        let root = self.state.log_dir.join(CHECKPOINT_DIR);
        // The checkpoint may be named through a symlink, `./`, `..`, or relative where the log
        // directory is absolute: the same folder is the same canonical path.
        let same_folder = |a: &Path, b: &Path| match (fs::canonicalize(a), fs::canonicalize(b)) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        };
        if self.is_chief() && restored.dir.parent().is_some_and(|parent| same_folder(parent, &root)) {
            checkpoint::abandon_newer(&root, restored.global_step)?;
        }
        self.last_checkpoint = Some(restored.dir.clone());
        self.resumed = Some(restored);
        Ok(())
    }

    /// Give each stateful callback its saved state (right after setup).
    pub(super) fn load_callback_states(&mut self) -> Result<()> {
        let Some(restored) = self.resumed.as_mut() else { return Ok(()) };
        let mut saved = std::mem::take(&mut restored.callbacks);
        // The callbacks that run here (off the chief, not the chief-only ones).
        for &i in &self.order {
            let name = &self.names[i];
            match saved.remove(name.as_ref()) {
                Some(state) => {
                    self.callbacks.state(i, StateOp::Load(state)).map_err(|e| wrap(name, "load_state", e))?;
                }
                None => {
                    if self
                        .callbacks
                        .state(i, StateOp::Save)
                        .map_err(|e| wrap(name, "save_state", e))?
                        .is_some()
                    {
                        crate::logging::warn!(
                            "the checkpoint holds no state for callback `{name}`; it starts afresh"
                        );
                    }
                }
            }
        }
        for name in saved.keys() {
            if self.names.iter().any(|n| n == name) {
                // A chief-only callback, off the chief.
                continue;
            }
            crate::logging::warn!(
                "the checkpoint holds the state of callback `{name}`, which this run does not have; ignored"
            );
        }
        Ok(())
    }

    /// Write the checkpoint (and copies) asked for at this boundary.
    #[cold]
    pub(super) fn write_checkpoint(&mut self, at: Boundary) -> Result<()> {
        let requests = std::mem::take(&mut self.state.control.checkpoints);
        let copies = std::mem::take(&mut self.state.control.copies);
        if !self.is_chief() {
            // Only the chief writes into the log directory; every rank resumes from its checkpoints.
            return Ok(());
        }
        if self.state.control.non_finite.is_none()
            && let Some(reason) = self.check_finite()
        {
            self.state.control.non_finite = Some((reason.clone(), self.state.counters.global_step));
            if self.state.control.stop.is_none() {
                self.state.control.stop = Some(reason);
            }
        }
        if let Some((reason, _)) = &self.state.control.non_finite {
            // Never a checkpoint of non-finite numbers: the last good one stays the latest.
            let last = match &self.last_checkpoint {
                Some(dir) => format!("the latest checkpoint stays {}", dir.display()),
                None => "no checkpoint was written before".to_string(),
            };
            crate::logging::warn!(bare:
                "{reason}: training stops at global step {} without writing a checkpoint; {last}",
                self.state.counters.global_step
            );
            return Ok(());
        }
        let mut content = self.content(at)?;
        let root = self.state.log_dir.join(CHECKPOINT_DIR);
        // The copies first: the checkpoint records the savers' new best values, so a crash
        // between the two must leave the older checkpoint, from which the copy is made again.
        for copy in copies {
            checkpoint::write_copy(&root, &copy, &content)?;
        }
        // One checkpoint per folder asked for (each ModelSaver's `checkpoint_dir`), the same
        // content in each, stamped with the time its saver's clock gives; `<log dir>/checkpoints`
        // last, so that the run's last checkpoint is the one `auto_resume` reads when it has one.
        let mut requests = requests;
        requests.sort_by_key(|request| request.root.is_none());
        for request in requests {
            let folder = request.root.as_deref().unwrap_or(&root);
            content.time = request.time.unwrap_or_else(checkpoint::now);
            let run_start = request.run_start.unwrap_or(self.started_at);
            self.last_checkpoint = Some(checkpoint::write(folder, &content, &request.policy, run_start)?);
        }
        Ok(())
    }

    fn content(&mut self, at: Boundary) -> Result<Content> {
        let model = self.state.model.as_ref().ok_or_else(|| Error::msg("the model was lost"))?;
        let model = model
            .clone()
            .into_record()
            .into_bytes()
            .map_err(|e| Error::checkpoint_from(format!("serializing the model: {e}"), e))?
            .to_vec();
        let optimizer = self
            .state
            .optimizer
            .into_bytes()
            .map_err(|e| Error::checkpoint_from(format!("serializing the optimizer: {e}"), e))?
            .to_vec();
        let mut callbacks = Map::new();
        for i in 0..self.names.len() {
            let name = &self.names[i];
            if let Some(state) =
                self.callbacks.state(i, StateOp::Save).map_err(|e| wrap(name, "save_state", e))?
            {
                callbacks.insert(name.to_string(), state);
            }
        }
        let c = self.state.counters;
        let (epoch, local_step, batches) = match at {
            // The first batch is taken but its step has not run.
            Boundary::BeforeTrain => {
                (c.starting_epoch, self.first_local_step, self.data_position.batches.saturating_sub(1))
            }
            Boundary::Step => (c.epoch_num, c.local_step, self.data_position.batches),
            Boundary::EpochEnd => (c.epoch_num + 1, 0, self.data_position.batches),
        };
        let hyper: Map<String, Json> = self
            .state
            .hyper
            .names()
            .map(|n| (n.to_string(), json_f64(self.state.hyper.get(n).unwrap_or(f64::NAN))))
            .collect();
        let trainer = serde_json::json!({
            "format": checkpoint::FORMAT_VERSION,
            "stoker_version": env!("CARGO_PKG_VERSION"),
            "counters": {
                "epoch_num": c.epoch_num,
                "global_step": c.global_step,
                "local_step": c.local_step,
                "steps_per_epoch": c.steps_per_epoch,
                "max_epoch": c.max_epoch,
            },
            "resume_at": { "epoch": epoch, "local_step": local_step },
            "data": { "passes": self.data_position.passes, "batches": batches },
            "hyper_params": hyper,
            "callbacks": callbacks,
        });
        Ok(Content {
            model,
            optimizer,
            trainer,
            monitors: self.state.monitors.save_state(),
            epoch_num: c.epoch_num,
            global_step: c.global_step,
            time: checkpoint::now(),
        })
    }

    /// Whether the loss or the weights are not finite, and which (tensorpack's `CheckNumerics`
    /// at the moment it matters): one device-to-host transfer of two numbers. `None` when they
    /// are finite.
    fn check_finite(&self) -> Option<String> {
        let c = self.state.counters;
        if let Some(loss) = self.outputs.get("loss") {
            let values = loss.flat().into_data();
            if let Some(bad) = values.iter::<f32>().find(|v| !v.is_finite()) {
                return Some(format!(
                    "the loss is {bad} at global step {} (epoch {})",
                    c.global_step, c.epoch_num
                ));
            }
        }
        let mut visitor = NonFinite { count: None };
        if let Some(model) = &self.state.model {
            model.visit(&mut visitor);
        }
        if let Some(count) = visitor.count {
            let count = count.into_data().iter::<f32>().next().unwrap_or(0.0);
            if count > 0.0 {
                return Some(format!(
                    "{count} weights are not finite at global step {} (epoch {})",
                    c.global_step, c.epoch_num
                ));
            }
        }
        None
    }
}

/// Counts the non-finite values of every float parameter, on the device.
struct NonFinite {
    count: Option<Tensor<1>>,
}

impl ModuleVisitor for NonFinite {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let bad = param.val().is_finite().bool_not().float().sum();
        self.count = Some(match self.count.take() {
            Some(count) => count + bad,
            None => bad,
        });
    }
}
