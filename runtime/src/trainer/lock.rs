//! One run at a time in a log directory: the run holds an exclusive lock on `LOG_DIR/.lock` (the
//! operating system's advisory file lock, released when the run ends or its process dies), and
//! writes into it who holds it, so that a second trainer is told which run is in the way instead
//! of pruning its checkpoints and racing on its files.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The lock file's name inside the log directory.
pub(super) const LOCK_FILE: &str = ".lock";

/// A run's hold on its log directory; dropping it releases the lock.
#[derive(Debug)]
pub(crate) struct LogDirLock {
    _file: File,
}

impl LogDirLock {
    /// Create `dir` if needed and lock it for this run; an error naming the holder when another
    /// run (in this process or another) holds it.
    pub(crate) fn acquire(dir: &Path) -> Result<LogDirLock> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let path: PathBuf = dir.join(LOCK_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                let holder = if holder.is_empty() { "a run that has not said who it is" } else { holder };
                return Err(Error::msg(format!(
                    "the log directory {} is in use by another run ({holder}): give this run another log_dir, or wait until that one ends",
                    dir.display()
                )));
            }
            Err(TryLockError::Error(e)) => return Err(Error::io(&path, e)),
        }
        let since =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let who = format!("process {} since unix time {since}", std::process::id());
        let written = file
            .set_len(0)
            .and_then(|()| file.seek(SeekFrom::Start(0)))
            .and_then(|_| file.write_all(who.as_bytes()))
            .and_then(|()| file.flush());
        written.map_err(|e| Error::io(&path, e))?;
        Ok(LogDirLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_hold_on_a_held_directory_names_the_holder_and_the_first_release_frees_it() {
        let dir = std::env::temp_dir().join(format!("stoker-lock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let first = LogDirLock::acquire(&dir).expect("a free directory");
        let error = LogDirLock::acquire(&dir).expect_err("a held directory").to_string();
        assert!(error.contains("is in use by another run"), "{error}");
        assert!(error.contains(&format!("process {}", std::process::id())), "{error}");
        drop(first);
        LogDirLock::acquire(&dir).expect("released when the first run ended");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
