//! One run at a time in a log directory: the run holds an exclusive lock on `LOG_DIR/.lock` (the
//! operating system's advisory file lock, released when the run ends or its process dies), and
//! writes into it who holds it (process, host, since when), so that a second trainer is told
//! which run is in the way instead of pruning its checkpoints and racing on its files. A file
//! system that cannot lock is an error naming the opt-out (`Trainer::lock_log_dir(false)`,
//! `STOKER_NO_LOCK=1`), which trains without the lock.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::versions::VersionsHold;
use crate::error::{Error, LogDirError, Result};
use crate::state::open_own;

/// The lock file's name inside the log directory.
pub(super) const LOCK_FILE: &str = ".lock";

/// The environment variable that turns the log directory's lock off when set to `1` (as
/// [`Trainer::lock_log_dir(false)`](crate::trainer::Trainer::lock_log_dir) does).
pub(super) const NO_LOCK_VAR: &str = "STOKER_NO_LOCK";

/// What the lock file says once its run has released it, before the holder's words.
const RELEASED: &str = "released: ";

/// Whether a run locks its log directory: yes unless `lock` is false or [`NO_LOCK_VAR`] is `1`.
pub(super) fn locking(lock: bool) -> bool {
    lock && std::env::var_os(NO_LOCK_VAR).is_none_or(|v| v != "1")
}

/// A run's hold on its log directory; dropping it releases the lock.
#[derive(Debug)]
pub(crate) struct LogDirLock {
    /// The lock file, locked; `None` for a directory held without the lock (the opt-out).
    file: Option<File>,
    /// The directory, as held in [`HELD`].
    dir: PathBuf,
    /// A run in a `version_N` folder: its shared hold on the base directory.
    versions: VersionsHold,
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
        let Some(file) = self.file.as_mut() else { return };
        // Still locked here: the next run reads that this one ended (a holder named without
        // `released: ` is a run that is live, or was killed).
        let words = holder(file);
        if !words.starts_with(RELEASED) {
            let _ = write_holder(file, &format!("{RELEASED}{}", words.trim()));
        }
        let mut held = held();
        if let Some(at) = held.iter().position(|dir| *dir == self.dir) {
            held.swap_remove(at);
        }
    }
}

/// Who this process is, as the lock file says it: `process <pid> on <host>`.
fn this_process() -> String {
    format!("process {} on {}", std::process::id(), crate::state::host_name())
}

impl LogDirLock {
    /// Create `dir` if needed and lock it for this run (without the lock when `lock` is false:
    /// a warning says that nothing keeps another run out); an error naming the holder when another
    /// run (in this process or another) holds it, and one naming the opt-out when the file system
    /// cannot lock.
    pub(crate) fn acquire(dir: &Path, lock: bool) -> Result<LogDirLock> {
        // A new log directory is synced into its parent: it survives a crash with what is in it.
        crate::state::create_dir_all_synced(dir).map_err(|e| Error::io(dir, e))?;
        crate::state::warn_if_shared(dir);
        let held_dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        if !lock {
            crate::logging::warn!(
                "the log directory {} is not locked (Trainer::lock_log_dir(false) or {NO_LOCK_VAR}=1): nothing keeps a second run from writing into it at the same time; make sure that only one run uses it",
                dir.display()
            );
            return Ok(LogDirLock { file: None, dir: held_dir, versions: VersionsHold::default() });
        }
        let path: PathBuf = dir.join(LOCK_FILE);
        // Never through a symlink planted there (`.lock -> ~/.bashrc` would be truncated below),
        // never a FIFO, never another user's file.
        let mut file =
            open_own(OpenOptions::new().read(true).write(true).create(true).truncate(false), &path)
                .map_err(|e| Error::io(&path, e))?;
        let me = this_process();
        let started = std::time::Instant::now();
        let mut result = file.try_lock();
        while matches!(result, Err(TryLockError::WouldBlock))
            && started.elapsed() < LINGERING_WAIT
            && !held().contains(&held_dir)
            && holder(&mut file).trim_start_matches(RELEASED).starts_with(&format!("{me} "))
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
            result = file.try_lock();
        }
        match result {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Err(in_use(dir, &mut file)),
            Err(TryLockError::Error(e)) if cannot_lock(&e) => return Err(no_locks(dir, &path, e)),
            Err(TryLockError::Error(e)) => return Err(Error::io(&path, e)),
        }
        warn_if_another_host_held(dir, &holder(&mut file), &me);
        let since =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        write_holder(&mut file, &format!("{me} since unix time {since}")).map_err(|e| Error::io(&path, e))?;
        held().push(held_dir.clone());
        Ok(LogDirLock { file: Some(file), dir: held_dir, versions: VersionsHold::default() })
    }

    /// Keep `versions`, the base's hold of a run in a `version_N` folder, as long as this lock.
    pub(super) fn with_versions(mut self, versions: VersionsHold) -> LogDirLock {
        self.versions = versions;
        self
    }

    /// Whether it holds the lock (false: the directory is held without it, the opt-out).
    pub(crate) fn locks(&self) -> bool {
        self.file.is_some()
    }
}

/// The error for a directory another run holds, naming it.
#[cold]
fn in_use(dir: &Path, file: &mut File) -> Error {
    let holder = holder(file);
    let holder = holder.trim();
    let holder = if holder.is_empty() { "a run that has not said who it is" } else { holder };
    LogDirError::InUse {
        dir: dir.to_path_buf(),
        message: format!(
            "the log directory {} is in use by another run ({holder}): give this run another log_dir, or wait until that one ends",
            dir.display()
        ),
    }
    .into()
}

/// Whether `error` says that the file system cannot lock at all (rather than that it failed).
fn cannot_lock(error: &std::io::Error) -> bool {
    if error.kind() == std::io::ErrorKind::Unsupported {
        return true;
    }
    #[cfg(unix)]
    if let Some(code) = error.raw_os_error() {
        return [libc::ENOLCK, libc::EOPNOTSUPP, libc::ENOTSUP, libc::ENOSYS].contains(&code);
    }
    false
}

/// The error for a file system that cannot lock, naming the opt-out and what it costs.
#[cold]
fn no_locks(dir: &Path, path: &Path, error: std::io::Error) -> Error {
    Error::context(
        format!(
            "cannot lock {}: the file system of the log directory {} does not support file locks (NFS without a lock manager, some cluster and FUSE file systems).              To train there without the lock, call Trainer::lock_log_dir(false) or set the environment variable {NO_LOCK_VAR}=1:              then nothing keeps a second run from writing into {} at the same time (see the guide's page on the log directory)",
            path.display(),
            dir.display(),
            dir.display()
        ),
        error,
    )
}

/// A lock taken from a file that names a run of another host that did not release it: that run
/// was killed, or it is still training and this file system's locks do not reach across hosts.
fn warn_if_another_host_held(dir: &Path, words: &str, me: &str) {
    if let Some(words) = another_host_held(words, me) {
        crate::logging::warn!(
            "the lock file of {} names a run of another host that did not release it ({words}): either it was killed, or it is still training and this file system's locks are local to each host (both runs hold the lock and write into the same directory). If that run is live, stop this one",
            dir.display()
        );
    }
}

/// What the lock file says (`words`), when it names a run of a host other than `me`'s that did
/// not release it.
fn another_host_held<'w>(words: &'w str, me: &str) -> Option<&'w str> {
    let words = words.trim();
    if words.is_empty() || words.starts_with(RELEASED) {
        return None;
    }
    let host_of =
        |w: &str| w.split(" on ").nth(1).and_then(|rest| rest.split(' ').next()).map(str::to_string);
    (host_of(words)? != host_of(me)?).then_some(words)
}

/// Replace what the lock file says with `words`.
fn write_holder(file: &mut File, words: &str) -> std::io::Result<()> {
    file.set_len(0)?;
    file.seek(SeekFrom::Start(0))?;
    file.write_all(words.as_bytes())?;
    file.flush()
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
    fn a_file_system_without_locks_is_told_from_a_failure() {
        for code in [libc::ENOLCK, libc::EOPNOTSUPP, libc::ENOSYS] {
            assert!(cannot_lock(&std::io::Error::from_raw_os_error(code)), "{code}");
        }
        assert!(cannot_lock(&std::io::Error::from(std::io::ErrorKind::Unsupported)));
        assert!(!cannot_lock(&std::io::Error::from_raw_os_error(libc::EIO)));
        let text = no_locks(
            Path::new("log"),
            Path::new("log/.lock"),
            std::io::Error::from_raw_os_error(libc::ENOLCK),
        )
        .to_string();
        assert!(text.contains("Trainer::lock_log_dir(false)") && text.contains("STOKER_NO_LOCK=1"), "{text}");
    }

    /// A run that ends writes that it released the lock; a lock file that names another host's
    /// run without that is a run killed there, or a live one whose host's locks this host does
    /// not see.
    #[test]
    fn a_lock_file_naming_another_host_s_unreleased_run_is_noticed() {
        let dir = std::env::temp_dir().join(format!("stoker-lock-host-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let me = this_process();
        drop(LogDirLock::acquire(&dir, true).unwrap());
        let words = std::fs::read_to_string(dir.join(LOCK_FILE)).unwrap();
        assert!(words.starts_with(&format!("{RELEASED}{me} since unix time ")), "{words}");
        assert_eq!(another_host_held(&words, &me), None, "released");
        let other = "process 12 on node-b since unix time 5";
        assert_eq!(another_host_held(other, &me), Some(other));
        assert_eq!(another_host_held(&format!("{RELEASED}{other}"), &me), None);
        assert_eq!(another_host_held(&format!("{me} since unix time 5"), &me), None, "this host");
        assert_eq!(another_host_held("process 12 since unix time 5", &me), None, "an earlier version's");
        // Without the lock: no lock file is written, nothing is held.
        let unlocked = dir.join("unlocked");
        let hold = LogDirLock::acquire(&unlocked, false).unwrap();
        assert!(!hold.locks() && !unlocked.join(LOCK_FILE).exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_second_hold_on_a_held_directory_names_the_holder_and_the_first_release_frees_it() {
        let dir = std::env::temp_dir().join(format!("stoker-lock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let first = LogDirLock::acquire(&dir, true).expect("a free directory");
        let error = LogDirLock::acquire(&dir, true).expect_err("a held directory").to_string();
        assert!(error.contains("is in use by another run"), "{error}");
        assert!(error.contains(&format!("process {}", std::process::id())), "{error}");
        drop(first);
        LogDirLock::acquire(&dir, true).expect("released when the first run ended");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A lock that outlives its run in a copy of the file (as a child process being started
    /// holds one until its exec) is waited for, not reported as another run.
    #[test]
    fn a_lock_lingering_in_a_copy_of_the_file_after_its_run_ended_is_waited_for() {
        let dir = std::env::temp_dir().join(format!("stoker-lock-linger-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let first = LogDirLock::acquire(&dir, true).expect("a free directory");
        // The copy a forked child would hold: the same open file, another descriptor.
        let copy = first.file.as_ref().unwrap().try_clone().expect("a second descriptor");
        drop(first);
        let release = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(100));
            drop(copy);
        });
        LogDirLock::acquire(&dir, true).expect("waited for the lingering copy to close");
        release.join().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
