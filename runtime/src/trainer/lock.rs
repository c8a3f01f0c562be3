//! One run at a time in a log directory: the run holds an exclusive lock on `LOG_DIR/.lock` (the
//! operating system's advisory file lock, released when the run ends or its process dies), and
//! writes into it who holds it, so that a second trainer is told which run is in the way instead
//! of pruning its checkpoints and racing on its files.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::state::open_own;

/// The lock file's name inside the log directory.
pub(super) const LOCK_FILE: &str = ".lock";

/// A run's hold on its log directory; dropping it releases the lock.
#[derive(Debug)]
pub(crate) struct LogDirLock {
    _file: File,
    /// The directory, as held in [`HELD`].
    dir: PathBuf,
}

/// The log directories this process holds. A lock file naming this process that no run here
/// holds is a lock on its way out: the run that held it has ended, but a child process that
/// another thread was starting at that moment still has a copy of the file until its `exec`
/// closes it (the lock belongs to the open file, which the child shares). Taking it is retried
/// for a while then, instead of reporting the directory in use.
static HELD: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// How long a lock naming this process but held by no run here is waited for.
const LINGERING_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

fn held() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    HELD.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Drop for LogDirLock {
    fn drop(&mut self) {
        let mut held = held();
        if let Some(at) = held.iter().position(|dir| *dir == self.dir) {
            held.swap_remove(at);
        }
    }
}

impl LogDirLock {
    /// Create `dir` if needed and lock it for this run; an error naming the holder when another
    /// run (in this process or another) holds it.
    pub(crate) fn acquire(dir: &Path) -> Result<LogDirLock> {
        // A new log directory is synced into its parent: it survives a crash with what is in it.
        crate::state::create_dir_all_synced(dir).map_err(|e| Error::io(dir, e))?;
        crate::state::warn_if_shared(dir);
        let path: PathBuf = dir.join(LOCK_FILE);
        // Never through a symlink planted there (`.lock -> ~/.bashrc` would be truncated below),
        // never a FIFO, never another user's file.
        let mut file =
            open_own(OpenOptions::new().read(true).write(true).create(true).truncate(false), &path)
                .map_err(|e| Error::io(&path, e))?;
        let held_dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        let started = std::time::Instant::now();
        let mut result = file.try_lock();
        while matches!(result, Err(TryLockError::WouldBlock))
            && started.elapsed() < LINGERING_WAIT
            && !held().contains(&held_dir)
            && holder(&mut file).starts_with(&format!("process {} ", std::process::id()))
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
            result = file.try_lock();
        }
        match result {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let holder = holder(&mut file);
                let holder = holder.trim();
                let holder = if holder.is_empty() { "a run that has not said who it is" } else { holder };
                return Err(Error::LogDirInUse {
                    dir: dir.to_path_buf(),
                    message: format!(
                        "the log directory {} is in use by another run ({holder}): give this run another log_dir, or wait until that one ends",
                        dir.display()
                    ),
                });
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
        held().push(held_dir.clone());
        Ok(LogDirLock { _file: file, dir: held_dir })
    }
}

/// What the lock file says about its holder.
fn holder(file: &mut File) -> String {
    let mut text = String::new();
    let _ = file.seek(SeekFrom::Start(0)).and_then(|_| file.read_to_string(&mut text));
    text
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

    /// A lock that outlives its run in a copy of the file (as a child process being started
    /// holds one until its exec) is waited for, not reported as another run.
    #[test]
    fn a_lock_lingering_in_a_copy_of_the_file_after_its_run_ended_is_waited_for() {
        let dir = std::env::temp_dir().join(format!("stoker-lock-linger-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let first = LogDirLock::acquire(&dir).expect("a free directory");
        // The copy a forked child would hold: the same open file, another descriptor.
        let copy = first._file.try_clone().expect("a second descriptor");
        drop(first);
        let release = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(100));
            drop(copy);
        });
        LogDirLock::acquire(&dir).expect("waited for the lingering copy to close");
        release.join().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
