//! A base log directory's `version_N` runs and the policies that act on the whole base: a run
//! in one of its `version_N` folders (`LogDirPolicy::NewVersion`) holds a shared lock on the
//! base's `.versions.lock` while it trains (taken before it chooses its folder), and
//! `LogDirPolicy::Delete` / `LogDirPolicy::Backup`, which delete or move the base with every
//! folder in it, take that lock exclusively first. They are refused while a version run is live
//! instead of removing its folder from under it (its own lock is inside that folder, and its
//! later checkpoints would go into unlinked files).
//!
//! Choosing a `version_N` folder and locking it is one act: a run holds the base's
//! `.versions.choose` exclusively from before it looks at the folders until it holds its own
//! folder's lock, so a fresh run's new folder is never taken by a `--resume` started at the
//! same moment, nor the other way round.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::{Error, LogDirError, Result};
use crate::state::open_own;

/// The file of the base log directory that its version runs lock shared.
pub(super) const VERSIONS_LOCK_FILE: &str = ".versions.lock";

/// The file of the base log directory a run locks exclusively while it chooses its folder.
pub(super) const CHOOSE_LOCK_FILE: &str = ".versions.choose";

/// How long a version run waits for a Delete or a Backup of its base that is acting right now.
const POLICY_WAIT: Duration = Duration::from_secs(10);

/// A hold on a base's `.versions.lock`, released when dropped (`None`: held without locks, the
/// opt-out, or nothing to hold).
#[derive(Debug, Default)]
pub(crate) struct VersionsHold {
    /// The locked file, held open for the lock's lifetime (never read).
    _file: Option<File>,
}

impl VersionsHold {
    /// The shared hold a run in a `version_N` folder of `base` keeps while it trains. A Delete
    /// or a Backup of `base` acting at this moment is waited for a while.
    pub(super) fn shared(base: &Path, lock: bool) -> Result<VersionsHold> {
        if !lock {
            return Ok(VersionsHold { _file: None });
        }
        crate::state::create_dir_all_synced(base).map_err(|e| Error::io(base, e))?;
        let file = open(base, VERSIONS_LOCK_FILE)?;
        let started = Instant::now();
        loop {
            match file.try_lock_shared() {
                Ok(()) => return Ok(VersionsHold { _file: Some(file) }),
                Err(TryLockError::WouldBlock) if started.elapsed() < POLICY_WAIT => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(TryLockError::WouldBlock) => {
                    return Err(LogDirError::InUse {
                        dir: base.to_path_buf(),
                        message: format!(
                            "the log directory {} is being deleted or moved aside by another run (LogDirPolicy::Delete or Backup), which has not finished in {} s: wait until it has, or give this run another log_dir",
                            base.display(),
                            POLICY_WAIT.as_secs()
                        ),
                    }
                    .into());
                }
                Err(TryLockError::Error(e)) => return Err(Error::io(base.join(VERSIONS_LOCK_FILE), e)),
            }
        }
    }

    /// The exclusive hold a run keeps on `base` while it chooses its `version_N` folder and
    /// locks it (see the module's doc): waits for another run choosing at this moment.
    pub(super) fn choosing(base: &Path, lock: bool) -> Result<VersionsHold> {
        if !lock {
            return Ok(VersionsHold { _file: None });
        }
        crate::state::create_dir_all_synced(base).map_err(|e| Error::io(base, e))?;
        let file = open(base, CHOOSE_LOCK_FILE)?;
        file.lock().map_err(|e| Error::io(base.join(CHOOSE_LOCK_FILE), e))?;
        Ok(VersionsHold { _file: Some(file) })
    }

    /// The exclusive hold `LogDirPolicy::Backup` (`backup`) or `Delete` takes on `dir` before it
    /// acts: an error when a run trains in one of its `version_N` folders. Nothing to hold when
    /// no version run ever trained there.
    pub(super) fn exclusive(dir: &Path, lock: bool, backup: bool) -> Result<VersionsHold> {
        if !lock || !dir.join(VERSIONS_LOCK_FILE).is_file() {
            return Ok(VersionsHold { _file: None });
        }
        let file = open(dir, VERSIONS_LOCK_FILE)?;
        match file.try_lock() {
            Ok(()) => Ok(VersionsHold { _file: Some(file) }),
            Err(TryLockError::WouldBlock) => {
                let (policy, acts) =
                    if backup { ("Backup", "move it aside") } else { ("Delete", "delete it") };
                Err(LogDirError::InUse {
                    dir: dir.to_path_buf(),
                    message: format!(
                        "the log directory {} holds a run training now in one of its version_N folders (LogDirPolicy::NewVersion): LogDirPolicy::{policy} would {acts} with that run's folder, from under it. Nothing was changed: wait until that run ends, or give this run another log_dir",
                        dir.display()
                    ),
                }
                .into())
            }
            Err(TryLockError::Error(e)) => Err(Error::io(dir.join(VERSIONS_LOCK_FILE), e)),
        }
    }
}

/// `dir`'s lock file `name` (`.versions.lock`, `.versions.choose`), created if needed: never
/// through a symlink, never a FIFO, never another user's file.
fn open(dir: &Path, name: &str) -> Result<File> {
    let path = dir.join(name);
    open_own(OpenOptions::new().read(true).write(true).create(true).truncate(false), &path)
        .map_err(|e| Error::io(&path, e))
}
