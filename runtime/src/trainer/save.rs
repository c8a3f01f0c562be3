//! Writing the trainer's checkpoints: what a checkpoint holds, where it goes, and the check
//! that no checkpoint of non-finite numbers is ever written.

use std::path::Path;

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::Tensor;
use serde_json::{Map, Value as Json};

use super::run::Run;
use crate::callback::{Callbacks, CheckpointRequest, StopReason};
use crate::error::{Error, Result};
use crate::monitor::json_f64;
use crate::saver::checkpoint::{self, CHECKPOINT_DIR, Content};
use crate::state::JOURNAL_DIR;

/// A write of a checkpoint boundary that failed, logged: training goes on, the latest complete
/// checkpoint stays the latest (tensorpack's ModelSaver: "Exception in ModelSaver!").
fn skipped(error: &Error) -> Result<()> {
    crate::logging::error!(
        "ModelSaver: {error}; this boundary's checkpoint is not written, training goes on"
    );
    Ok(())
}

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

impl<M: Module, K, C: Callbacks<M, K>> Run<M, C, K> {
    /// Write the checkpoint (and copies) asked for at this boundary.
    #[cold]
    pub(super) fn write_checkpoint(&mut self, at: Boundary) -> Result<()> {
        let requests = std::mem::take(&mut self.state.control.checkpoints);
        let copies = std::mem::take(&mut self.state.control.copies);
        if !self.is_chief() {
            // Only the chief writes into the log directory; every rank resumes from its checkpoints.
            return Ok(());
        }
        if self.state.control.stop.non_finite().is_none()
            && let Some(reason) = self.check_finite()
        {
            let global_step = self.state.counters.global_step;
            self.state.control.stop.record(StopReason::NonFinite { reason, global_step });
        }
        if let Some(reason) = self.state.control.stop.non_finite() {
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
        let started = std::time::Instant::now();
        // Every write of this boundary follows the savers' policy: training goes on after a
        // failed write (a full disk) unless a checkpoint asked here says otherwise
        // (`OnWriteError::Fail`, a checkpoint asked by a callback or a signal).
        let keep_going = requests.iter().all(|request| request.keep_going);
        let content = match self.content(at) {
            Ok(content) => content,
            // The journals' append (a full disk); a callback whose state fails is an error.
            Err(error @ (Error::Checkpoint(_) | Error::Io { .. })) if keep_going => {
                return skipped(&error);
            }
            Err(error) => return Err(error),
        };
        let root = self.state.log_dir.join(CHECKPOINT_DIR);
        // The copies first: the checkpoint records the savers' new best values, so a crash
        // between the two must leave the older checkpoint, from which the copy is made again
        // (and a copy that failed leaves this boundary's checkpoints unwritten, for that reason).
        for (parent, name) in copies {
            match checkpoint::write_copy(parent.as_deref().unwrap_or(&root), &name, &content) {
                Ok(_) => {}
                Err(error) if keep_going => return skipped(&error),
                Err(error) => return Err(error),
            }
        }
        self.write_into_folders(requests, content, &root)?;
        self.state.execution.checkpoint_written(started.elapsed());
        Ok(())
    }

    /// Write `content` into every folder this boundary's `requests` name.
    fn write_into_folders(
        &mut self,
        mut requests: Vec<CheckpointRequest>,
        mut content: Content,
        root: &Path,
    ) -> Result<()> {
        // One checkpoint per folder asked for (each ModelSaver's `checkpoint_dir`), the same
        // content in each, stamped with the time its saver's clock gives; `<log dir>/checkpoints`
        // last, so that the run's last checkpoint is the one `auto_resume` reads when it has one.
        requests.sort_by_key(|request| request.root.is_none());
        for request in requests {
            let folder = request.root.as_deref().unwrap_or(root);
            // A saver's own folder holds a copy of the monitors' history its checkpoints name:
            // it resumes without the log directory.
            if !super::saver_dirs::same_folder(folder, root)
                && let Err(error) = self.state.monitors().mirror_journal(&folder.join(JOURNAL_DIR))
            {
                match request.keep_going {
                    true => crate::logging::error!(
                        "ModelSaver: {error}; its checkpoint in {} is not written, training goes on",
                        folder.display()
                    ),
                    false => return Err(error),
                }
                continue;
            }
            content.time = request.time.unwrap_or_else(checkpoint::now);
            let run_start = request.run_start.unwrap_or(self.started_at);
            match checkpoint::write(folder, &content, &request.policy, run_start) {
                Ok(dir) => self.last_checkpoint = Some(dir),
                // tensorpack's ModelSaver: "Exception in ModelSaver!", and training goes on.
                Err(error) if request.keep_going => {
                    crate::logging::error!("ModelSaver: {error}; training goes on");
                }
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    fn content(&mut self, at: Boundary) -> Result<Content> {
        let model = self.state.model.as_ref().ok_or_else(|| Error::msg("the model was lost"))?;
        // BatchNorm's last update of its running statistics, which waits aside until the next
        // forward, is part of what the next step uses: saved with the rest.
        crate::world::buffers::sync(model);
        let model = model
            .clone()
            .into_record()
            .into_bytes()
            .map_err(|e| Error::checkpoint_write(format!("serializing the model: {e}"), e))?
            .to_vec();
        let optimizer = self
            .state
            .optimizer
            .into_bytes()
            .map_err(|e| Error::checkpoint_write(format!("serializing the optimizer: {e}"), e))?
            .to_vec();
        let callbacks = self.dispatch.save_states()?;
        let c = self.state.counters;
        let (epoch, local_step, batches) = match at {
            // The first batch is taken but its step has not run.
            Boundary::BeforeTrain => {
                (c.starting_epoch, self.first_local_step, self.position.batches.saturating_sub(1))
            }
            Boundary::Step => (c.epoch_num, c.local_step, self.position.batches),
            Boundary::EpochEnd => (c.epoch_num.saturating_add(1), 0, self.position.batches),
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
            "data": { "passes": self.position.passes, "batches": batches, "batches_per_pass": self.pass_len },
            "world": { "size": self.state.execution.size() },
            "hyper_params": hyper,
            "callbacks": callbacks,
        });
        Ok(Content {
            model,
            optimizer,
            trainer,
            monitors: self.state.monitors().save_state()?,
            epoch_num: c.epoch_num,
            global_step: c.global_step,
            time: checkpoint::now(),
            run: self.run_id.clone(),
        })
    }

    /// Whether the loss or the weights are not finite, and which (tensorpack's `CheckNumerics`
    /// at the moment it matters): one device-to-host transfer of two numbers. `None` when they
    /// are finite.
    fn check_finite(&self) -> Option<String> {
        let c = self.state.counters;
        if let Some(loss) = self.fetches.outputs.get("loss") {
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
