//! The folders a run's `ModelSaver`s write into of their own (`checkpoint_dir`), treated as the
//! log directory is: the chief holds each with the lock, a folder holding another run's
//! checkpoints is refused (or backed up, emptied, shared) as the run's `LogDirPolicy` says, and
//! a resumed run sets aside there the checkpoints newer than the one it resumes from. A folder
//! is this run's when the run resumes from a checkpoint in it, or when its `index.json` records
//! this run (a resumed run continues the run of its checkpoint).

use std::path::{Path, PathBuf};

use burn::module::Module;

use super::lock::LogDirLock;
use super::log_dir::{self, LogDirPolicy, checkpoint_steps, entries, is_within};
use super::run::Run;
use crate::callback::Callbacks;
use crate::error::{CheckpointError, Result};
use crate::saver::checkpoint::{self, CHECKPOINT_DIR};

impl<M: Module, K, C: Callbacks<M, K>> Run<M, C, K> {
    /// Hold every saver folder but the log directory's `checkpoints/` (the log directory's lock
    /// and policy cover it) and make it this run's; only the chief calls this, after the
    /// callbacks' setup (which names the folders).
    pub(super) fn hold_saver_folders(&mut self) -> Result<()> {
        let default = self.state.log_dir.join(CHECKPOINT_DIR);
        let roots: Vec<PathBuf> = self.state.control.savers.iter().filter_map(|s| s.root.clone()).collect();
        let resumed = self.resumed.as_ref().map(|r| (r.dir.as_path(), r.global_step));
        let locks = self.lock.as_ref().is_none_or(LogDirLock::locks);
        for root in roots {
            if same_folder(&root, &default) {
                continue;
            }
            let lock = LogDirLock::acquire(&root, locks)?;
            self.saver_locks.push(claim(&root, lock, &self.run_id, self.log_dir_policy, resumed)?);
        }
        Ok(())
    }
}

/// Whether `a` and `b` name the same folder (as canonical paths; spelled alike when missing).
pub(super) fn same_folder(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// Make the saver folder `root`, held by `lock`, this run's (`run`): the lock the run holds from
/// now on (a new one when the folder was moved aside).
fn claim(
    root: &Path,
    lock: LogDirLock,
    run: &str,
    policy: LogDirPolicy,
    resumed: Option<(&Path, u64)>,
) -> Result<LogDirLock> {
    let resumed_here = resumed.is_some_and(|(dir, _)| is_within(dir, root));
    if resumed_here || checkpoint::run_of(root).as_deref() == Some(run) {
        if let Some((_, step)) = resumed {
            checkpoint::abandon_newer(root, step)?;
        }
        return Ok(lock);
    }
    let names: Vec<String> =
        entries(root)?.iter().map(|entry| entry.file_name().to_string_lossy().into_owned()).collect();
    let Some(found) = checkpoint_steps(&names) else { return Ok(lock) };
    match policy {
        LogDirPolicy::Refuse | LogDirPolicy::NewVersion => {
            Err(CheckpointError::OtherRun { dir: root.to_path_buf(), found }.into())
        }
        LogDirPolicy::Keep | LogDirPolicy::Backup | LogDirPolicy::Delete => {
            log_dir::prepare(root, policy, lock)
        }
    }
}
