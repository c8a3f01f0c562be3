//! What a fresh run does with a log directory that holds an earlier run: tensorpack's
//! `logger.set_logger_dir` choice (keep, back up, delete, quit), made by the program instead of
//! asked at a prompt, with a default that loses nothing and mixes nothing.

use std::fs;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use super::lock::{LOCK_FILE, LogDirLock};
use super::versions::{VERSIONS_LOCK_FILE, VersionsHold};
use crate::error::{Error, LogDirError, Result};
use crate::monitor::STATS_FILE;
use crate::saver::{CHECKPOINT_DIR, Checkpoint};
use crate::state::sync_dir;

/// How a TensorBoard event file's name starts (`TensorBoardWriter`'s, and TensorFlow's).
const EVENT_FILE_PREFIX: &str = "events.out.tfevents.";

/// What a fresh run (one that resumes nothing from its log directory) does when the log directory
/// already holds an earlier run's files: tensorpack's `logger.set_logger_dir` actions, chosen with
/// [`Trainer::log_dir_policy`](crate::trainer::Trainer::log_dir_policy).
///
/// "An earlier run" is what a run leaves that a second one would mix with: checkpoints (a
/// `checkpoints/` folder that is not empty: keep-N would count them, a resume would load them),
/// TensorBoard event files (`events.out.tfevents.*`: TensorBoard would draw both runs as one)
/// and `stats.json`. Other files do not make one: `model_summary.txt` (each run writes its
/// own), a `hyper.txt` or an `InjectShell` trigger file you put there before the run, a CSV file
/// (the CSV writer moves aside one it does not continue), the lock file. An empty or missing directory is used as it is, whatever the policy.
///
/// A resume is not a fresh run: [`Trainer::resume_from`](crate::trainer::Trainer::resume_from) a
/// checkpoint inside the log directory (however its path is spelled) keeps the directory and
/// continues the run in it, and so does [`Trainer::auto_resume`](crate::trainer::Trainer::auto_resume),
/// which says that the directory is this run's: it continues from the latest checkpoint, or, when
/// there is none (a run killed before its first checkpoint), starts the run again in it. The
/// policy is not consulted then. `resume_from` a checkpoint outside the log directory is a fresh
/// run as far as the log directory goes.
///
/// In a data-parallel world only the chief (rank 0) looks at the directory and acts; the other
/// ranks never write there. The chief acts while it holds the directory's lock, so a directory
/// another run is training in is never moved or deleted (that run's lock refuses this one first).
///
/// The default, [`Refuse`](Self::Refuse), loses nothing and mixes nothing, and does not start a
/// run that was probably meant to be a resume: its error says what the directory holds and how
/// to choose. Parsed from `"refuse"`, `"backup"`, `"delete"`, `"keep"` or `"version"`
/// ([`FromStr`], any case) for a command line, and written back by [`name`](Self::name).
///
/// ```
/// use burn_stoker::trainer::LogDirPolicy;
/// let policy: LogDirPolicy = "backup".parse()?;
/// assert_eq!(policy, LogDirPolicy::Backup);
/// assert_eq!(LogDirPolicy::default(), LogDirPolicy::Refuse);
/// # Ok::<(), burn_stoker::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LogDirPolicy {
    /// Do not train: return an error naming the directory, what it holds, and the remedies
    /// (resume it, choose another policy, or another log directory). Nothing is touched. The
    /// default.
    #[default]
    Refuse,
    /// Move the whole directory aside to `LOG_DIR.backup-YYYYMMDD-HHMMSS` (UTC; `-2`, `-3`...
    /// appended if that name is taken) next to it, with a line on stderr saying so, and train in
    /// a new, empty `LOG_DIR` (tensorpack's `b`). The backup is the directory as it was, every
    /// file in it, renamed: nothing is copied, nothing is lost, and a run can resume from it
    /// later (`resume_from("LOG_DIR.backup-.../checkpoints")`, into another log directory).
    /// Refused, nothing moved, while a run trains in one of the directory's `version_N` folders
    /// ([`NewVersion`](Self::NewVersion)).
    Backup,
    /// Delete everything in the directory but the lock files, with a line on stderr saying what
    /// was deleted, and train in it (tensorpack's `d`). The earlier run is lost: choose it only
    /// for runs you do not want. Refused, nothing deleted, while a run trains in one of the
    /// directory's `version_N` folders ([`NewVersion`](Self::NewVersion)).
    Delete,
    /// Leave the earlier run's files where they are and write this run beside them (tensorpack's
    /// `k`), with a warning on stderr. The two runs then mix: the earlier run's checkpoints count
    /// toward this run's `ModelSaver` keep-N (a newer one of theirs pushes this run's out), a
    /// later resume takes the newest checkpoint of either run, and TensorBoard shows both runs'
    /// event files as one run. Meant for continuing a run by hand (`starting_epoch` and weights
    /// you loaded yourself, without its checkpoints): `stats.json` and the CSV file are then
    /// appended to when they end just before `starting_epoch`.
    Keep,
    /// Never refuse, never mix, never delete: each fresh run trains in a new folder
    /// `LOG_DIR/version_N` (N one more than the highest there, from 0), as Lightning's
    /// `version_N` and tensorpack's new timestamped directory do, and
    /// [`Trainer::auto_resume`](crate::trainer::Trainer::auto_resume) continues the newest
    /// `version_N` (or starts `version_0` when there is none). The folder is created before
    /// anything is written, so two runs started at once never share one. The run's log directory
    /// is then that folder: [`Context::log_dir`](crate::callback::Context::log_dir) and
    /// [`TrainSummary::log_dir`](crate::trainer::TrainSummary::log_dir) name it. In a
    /// data-parallel world the chief chooses it; the other ranks never write there.
    NewVersion,
}

impl LogDirPolicy {
    /// The policy's name on a command line, which [`FromStr`] parses back: `refuse`, `backup`,
    /// `delete`, `keep`, or `version` for [`NewVersion`](Self::NewVersion).
    pub fn name(self) -> &'static str {
        match self {
            LogDirPolicy::Refuse => "refuse",
            LogDirPolicy::Backup => "backup",
            LogDirPolicy::Delete => "delete",
            LogDirPolicy::Keep => "keep",
            LogDirPolicy::NewVersion => "version",
        }
    }
}

impl FromStr for LogDirPolicy {
    type Err = Error;

    /// `refuse`, `backup`, `delete`, `keep` or `version` (any case); anything else is an error
    /// listing them.
    fn from_str(text: &str) -> Result<Self> {
        match text.to_ascii_lowercase().as_str() {
            "refuse" => Ok(LogDirPolicy::Refuse),
            "backup" => Ok(LogDirPolicy::Backup),
            "delete" => Ok(LogDirPolicy::Delete),
            "keep" => Ok(LogDirPolicy::Keep),
            "version" => Ok(LogDirPolicy::NewVersion),
            _ => Err(LogDirError::UnknownPolicy(text.to_owned()).into()),
        }
    }
}

/// The entries of `dir`; none when it is missing.
pub(super) fn entries(dir: &Path) -> Result<Vec<fs::DirEntry>> {
    match fs::read_dir(dir) {
        Ok(entries) => entries.map(|entry| entry.map_err(|e| Error::io(dir, e))).collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(Error::io(dir, e)),
    }
}

/// The prefix of [`LogDirPolicy::NewVersion`]'s folders.
const VERSION_PREFIX: &str = "version_";

/// The `version_N` folders in `base`, by N.
fn versions(base: &Path) -> Result<Vec<u64>> {
    let mut found = Vec::new();
    for entry in entries(base)? {
        let name = entry.file_name();
        let number = name.to_str().and_then(version_number);
        if let Some(number) = number
            && entry.path().is_dir()
        {
            found.push(number);
        }
    }
    found.sort_unstable();
    Ok(found)
}

/// N of a folder named `version_N`: digits only (`version_+5` and `version_ 5` are not one).
fn version_number(name: &str) -> Option<u64> {
    let digits = name.strip_prefix(VERSION_PREFIX)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The folder `base/version_N`.
pub(super) fn version_dir(base: &Path, number: u64) -> PathBuf {
    base.join(format!("{VERSION_PREFIX}{number}"))
}

/// The log directory a run under [`LogDirPolicy::NewVersion`] trains in, and its N. With
/// `resume`: the newest `base/version_N` that holds a readable checkpoint, with that checkpoint
/// (newer folders without one, a run that failed in setup or was killed before its first
/// checkpoint, are named in a warning and left as they are); the newest folder when none holds
/// one; `version_0`, created, when there is none. Otherwise a new `base/version_N`, created here
/// (`create_dir` fails on one that exists, so a run started at the same moment takes the next
/// number).
pub(super) fn versioned_dir(base: &Path, resume: bool) -> Result<(PathBuf, u64, Option<Checkpoint>)> {
    crate::state::create_dir_all_synced(base).map_err(|e| Error::io(base, e))?;
    let existing = versions(base)?;
    if resume && let Some(&newest) = existing.last() {
        let mut skipped = Vec::new();
        for &number in existing.iter().rev() {
            let dir = version_dir(base, number);
            match Checkpoint::latest(&dir) {
                Ok(Some(checkpoint)) => {
                    if !skipped.is_empty() {
                        crate::logging::warn!(
                            "resuming {} (its checkpoint {}): the newer {} no checkpoint to resume ({}); left as they are",
                            dir.display(),
                            checkpoint.dir().display(),
                            if skipped.len() == 1 { "folder holds" } else { "folders hold" },
                            skipped.join("; ")
                        );
                    }
                    return Ok((dir, number, Some(checkpoint)));
                }
                Ok(None) => skipped.push(format!("{VERSION_PREFIX}{number}: none")),
                Err(error) => skipped.push(format!("{VERSION_PREFIX}{number}: {error}")),
            }
        }
        return Ok((version_dir(base, newest), newest, None));
    }
    let mut next = existing.last().map_or(0, |n| n + 1);
    loop {
        let dir = version_dir(base, next);
        match fs::create_dir(&dir) {
            Ok(()) => {
                sync_dir(base).map_err(|e| Error::io(base, e))?;
                return Ok((dir, next, None));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => next += 1,
            Err(e) => return Err(Error::io(&dir, e)),
        }
    }
}

/// Whether `path` lies inside `dir` (or is `dir`), comparing canonical paths: a symlink, `./`,
/// `..`, a relative or an absolute spelling of the same place agree. A path that does not exist
/// is inside nothing.
pub(super) fn is_within(path: &Path, dir: &Path) -> bool {
    match (fs::canonicalize(path), fs::canonicalize(dir)) {
        (Ok(path), Ok(dir)) => path.starts_with(dir),
        _ => false,
    }
}

/// What marks `dir` as holding an earlier run, for a message: a non-empty `checkpoints/` (with
/// how many `step-N` checkpoints and the newest), `stats.json`, TensorBoard event files (at
/// most three named); empty when there is none, or when `dir` is missing.
fn earlier_run(dir: &Path) -> Result<Vec<String>> {
    let mut names: Vec<String> =
        entries(dir)?.iter().map(|entry| entry.file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    let mut found = Vec::new();
    let checkpoints = dir.join(CHECKPOINT_DIR);
    if checkpoints.is_dir() {
        let inside: Vec<String> = fs::read_dir(&checkpoints)
            .map_err(|e| Error::io(&checkpoints, e))?
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        let steps: Vec<u64> = inside.iter().filter_map(|n| n.strip_prefix("step-")?.parse().ok()).collect();
        match steps.iter().max() {
            Some(newest) => found.push(format!(
                "{CHECKPOINT_DIR}/ with {} checkpoints, the newest step-{newest}",
                steps.len()
            )),
            None if !inside.is_empty() => {
                found.push(format!("{CHECKPOINT_DIR}/ holding {}", inside.join(", ")))
            }
            None => {}
        }
    }
    // A folder of checkpoints itself (a `ModelSaver`'s `checkpoint_dir`).
    if let Some(newest) = checkpoint_steps(&names) {
        found.push(newest);
    }
    if names.iter().any(|n| n == STATS_FILE) {
        found.push(STATS_FILE.to_string());
    }
    let events: Vec<&String> = names.iter().filter(|n| n.starts_with(EVENT_FILE_PREFIX)).collect();
    const SHOWN: usize = 3;
    found.extend(events.iter().take(SHOWN).map(|n| n.to_string()));
    if events.len() > SHOWN {
        found.push(format!("{} more event files", events.len() - SHOWN));
    }
    Ok(found)
}

/// `"N checkpoints, the newest step-K"` of the `step-N` names among `names`; `None` when there is
/// none.
pub(super) fn checkpoint_steps(names: &[String]) -> Option<String> {
    let steps: Vec<u64> = names.iter().filter_map(|n| n.strip_prefix("step-")?.parse().ok()).collect();
    let newest = steps.iter().max()?;
    Some(format!("{} checkpoints, the newest step-{newest}", steps.len()))
}

/// Make the log directory, held by `lock`, ready for a fresh run under `policy`: returns the lock
/// the run holds from now on (a new one when the directory was moved aside). Only the chief
/// calls this, after taking the lock and only when the run resumes nothing from this directory.
pub(super) fn prepare(dir: &Path, policy: LogDirPolicy, lock: LogDirLock) -> Result<LogDirLock> {
    let found = earlier_run(dir)?;
    if found.is_empty() {
        return Ok(lock);
    }
    let holds = found.join(", ");
    match policy {
        LogDirPolicy::Refuse => Err(LogDirError::EarlierRun { dir: dir.to_path_buf(), found }.into()),
        // Chosen before the lock was taken (`versioned_dir`): the version folder is new.
        LogDirPolicy::NewVersion => Ok(lock),
        LogDirPolicy::Keep => {
            crate::logging::warn!(
                "the log directory {} holds an earlier run ({holds}); LogDirPolicy::Keep writes this fresh run beside it: its checkpoints count toward this run's keep-N, and a resume takes the newest checkpoint of either run",
                dir.display()
            );
            Ok(lock)
        }
        LogDirPolicy::Delete => {
            let _versions = VersionsHold::exclusive(dir, lock.locks(), false)?;
            delete_contents(dir)?;
            crate::logging::info!("deleted the earlier run in the log directory {} ({holds})", dir.display());
            Ok(lock)
        }
        LogDirPolicy::Backup => {
            let versions = VersionsHold::exclusive(dir, lock.locks(), true)?;
            let backup = backup_path(dir)?;
            // The lock file moves with the directory (this run still holds it there, and drops it
            // below); the new directory gets a new lock before anything is written into it.
            fs::rename(dir, &backup).map_err(|e| Error::Other {
                message: format!(
                    "moving the earlier run in the log directory {} aside to {} failed: {e}; nothing was moved. \
                     Move it yourself, choose LogDirPolicy::Delete, or give this run another log_dir",
                    dir.display(),
                    backup.display()
                ),
                source: Box::new(e),
            })?;
            let parent = parent_dir(&backup);
            sync_dir(parent).map_err(|e| Error::io(parent, e))?;
            crate::logging::info!(
                "the log directory {} held an earlier run ({holds}); moved it to {}",
                dir.display(),
                backup.display()
            );
            let fresh = LogDirLock::acquire(dir, lock.locks())?;
            drop((lock, versions));
            Ok(fresh)
        }
    }
}

/// The folder `path` is in: `.` for a bare relative name (`Path::parent` gives `""` there).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

/// Remove every entry of `dir` but its lock files (a symlink is removed, not followed).
fn delete_contents(dir: &Path) -> Result<()> {
    for entry in fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        if entry.file_name() == LOCK_FILE || entry.file_name() == VERSIONS_LOCK_FILE {
            continue;
        }
        let path = entry.path();
        let is_dir = entry.file_type().map_err(|e| Error::io(&path, e))?.is_dir();
        let removed = if is_dir { fs::remove_dir_all(&path) } else { fs::remove_file(&path) };
        removed.map_err(|e| Error::Other {
            message: format!(
                "deleting the earlier run in the log directory {} failed at {}: {e}; what is left of it is still there",
                dir.display(),
                path.display()
            ),
            source: Box::new(e),
        })?;
    }
    sync_dir(dir).map_err(|e| Error::io(dir, e))
}

/// `LOG_DIR.backup-YYYYMMDD-HHMMSS` (UTC) next to `dir`, with `-2`, `-3`... when taken.
fn backup_path(dir: &Path) -> Result<PathBuf> {
    // `train_log/.` or `..` have no name of their own: name the directory by its real path.
    let dir = match dir.file_name() {
        Some(_) => dir.to_path_buf(),
        None => fs::canonicalize(dir).map_err(|e| Error::io(dir, e))?,
    };
    let name = dir.file_name().ok_or_else(|| LogDirError::Unnamed { dir: dir.clone() })?;
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let base = format!("{}.backup-{}", name.to_string_lossy(), utc_stamp(secs));
    let mut candidate = dir.with_file_name(&base);
    let mut n = 2;
    while fs::symlink_metadata(&candidate).is_ok() {
        candidate = dir.with_file_name(format!("{base}-{n}"));
        n += 1;
    }
    Ok(candidate)
}

/// `YYYYMMDD-HHMMSS` of `secs` seconds since the Unix epoch, in UTC.
fn utc_stamp(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rest = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}{month:02}{day:02}-{:02}{:02}{:02}", rest / 3600, rest % 3600 / 60, rest % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_stamps_are_the_calendar_date_and_time() {
        assert_eq!(utc_stamp(0), "19700101-000000");
        // 2000-02-29 23:59:59 UTC, a leap day.
        assert_eq!(utc_stamp(951_868_799), "20000229-235959");
        // 2026-11-24 00:47:22 UTC.
        assert_eq!(utc_stamp(1_795_481_242), "20261124-004722");
    }

    #[test]
    fn the_backup_of_a_bare_relative_log_directory_is_in_the_current_directory() {
        assert_eq!(parent_dir(Path::new("d.backup-20261124-004722")), Path::new("."));
        assert_eq!(parent_dir(Path::new("logs/d.backup-20261124-004722")), Path::new("logs"));
        assert_eq!(parent_dir(Path::new("/d.backup-20261124-004722")), Path::new("/"));
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("stoker-log-dir-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("run")).unwrap();
        fs::write(dir.join("run").join(STATS_FILE), "[]").unwrap();
        dir
    }

    #[test]
    fn after_a_backup_the_run_holds_the_new_directory_and_the_old_one_is_let_go() {
        let scratch = scratch("backup-lock");
        let dir = scratch.join("run");
        let held = prepare(&dir, LogDirPolicy::Backup, LogDirLock::acquire(&dir, true).unwrap()).unwrap();
        let backup = fs::read_dir(&scratch)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("run.backup-"))
            .expect("a backup");
        assert!(backup.join(STATS_FILE).exists());
        assert!(!dir.join(STATS_FILE).exists());
        let error = LogDirLock::acquire(&dir, true).expect_err("the new directory is held").to_string();
        assert!(error.contains("is in use by another run"), "{error}");
        LogDirLock::acquire(&backup, true).expect("the backup is nobody's");
        drop(held);
        LogDirLock::acquire(&dir, true).expect("released with the run");
        let _ = fs::remove_dir_all(&scratch);
    }

    #[test]
    fn a_delete_keeps_the_lock_file_and_the_hold() {
        let scratch = scratch("delete-lock");
        let dir = scratch.join("run");
        fs::create_dir_all(dir.join(CHECKPOINT_DIR).join("step-4")).unwrap();
        let held = prepare(&dir, LogDirPolicy::Delete, LogDirLock::acquire(&dir, true).unwrap()).unwrap();
        let left: Vec<_> = fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, [LOCK_FILE]);
        assert!(LogDirLock::acquire(&dir, true).is_err(), "still held");
        drop(held);
        let _ = fs::remove_dir_all(&scratch);
    }

    #[test]
    fn policies_parse_from_their_names() {
        for policy in [
            LogDirPolicy::Refuse,
            LogDirPolicy::Backup,
            LogDirPolicy::Delete,
            LogDirPolicy::Keep,
            LogDirPolicy::NewVersion,
        ] {
            assert_eq!(policy.name().parse::<LogDirPolicy>().unwrap(), policy);
        }
        let error = "move".parse::<LogDirPolicy>().unwrap_err().to_string();
        assert!(
            error.contains("`move`") && error.contains("refuse, backup, delete, keep or version"),
            "{error}"
        );
    }
}
