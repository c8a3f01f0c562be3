//! Removing a checkpoint so that a crash midway leaves nothing that looks like one, cleaning what
//! a crash left, and setting aside the checkpoints newer than the one a run resumes from.

use std::fs;
use std::path::{Path, PathBuf};

use super::format::MANIFEST_FILE;
use super::listing::{OLD, entries_of, list_readable, occupied, step_of};
use super::read::read_manifest;
use crate::error::{Error, Result};
use crate::state::{check_copy_name, is_leftover, leftover_of, sync_dir, temporary_name};

/// Clean what a crash in the middle of a write left in `root`, and only that:
///
/// - a temporary folder or file `X.<pid>-<n>-<host>.tmp` goes once nobody can be writing it
///   (`state::is_leftover`): this host's once its process `<pid>` has certainly ended (a live
///   process's, this one's included, stays); another host's, whose process cannot be asked from
///   here, once it has not changed for a day; an earlier version's `X.<pid>-<n>.tmp` (no host)
///   once both hold;
/// - a folder being removed, `X.<pid>-<n>-<host>.deleting`, goes when it is this process's (an
///   earlier removal that failed is tried again) or by the same rule;
/// - `step-N.tmp` and `step-N.deleting`, the names earlier versions used, go;
/// - a checkpoint set aside while another of its name replaced it, `X.old` holding a manifest,
///   goes when `X` is there, and is put back as `X` when `X` is missing.
///
/// Anything else, whatever its name ends with, is not stoker's and stays. The run's lock on the
/// log directory already keeps any other trainer out.
pub(super) fn remove_leftovers(root: &Path) {
    let Ok(entries) = fs::read_dir(root) else { return };
    for entry in entries.flatten() {
        let Some(name) = entry.file_name().to_str().map(str::to_string) else { continue };
        let Ok(kind) = entry.file_type() else { continue };
        let path = entry.path();
        if let Some((_, maker)) = leftover_of(&name, "tmp") {
            if is_leftover(&path, maker) {
                let _ = if kind.is_dir() { fs::remove_dir_all(&path) } else { fs::remove_file(&path) };
            }
        } else if let Some((_, maker)) = leftover_of(&name, "deleting") {
            if kind.is_dir() && (maker.is_this_process() || is_leftover(&path, maker)) {
                let _ = fs::remove_dir_all(&path);
            }
        } else if kind.is_dir()
            && [".tmp", ".deleting"]
                .iter()
                .any(|suffix| name.strip_suffix(suffix).and_then(step_of).is_some())
        {
            let _ = fs::remove_dir_all(&path);
        } else if let Some(base) = name.strip_suffix(OLD)
            && kind.is_dir()
            && path.join(MANIFEST_FILE).is_file()
        {
            let target = root.join(base);
            if occupied(&target) {
                let _ = remove_checkpoint(&path);
            } else {
                let _ = fs::rename(&path, &target);
            }
        }
    }
}

/// Why a checkpoint folder was not removed.
#[derive(Debug)]
pub(super) struct RemoveFailure {
    /// The folder.
    pub(super) path: PathBuf,
    /// Where it was moved before its removal failed; `None` when it could not be moved.
    pub(super) moved_to: Option<PathBuf>,
    pub(super) error: std::io::Error,
}

impl std::fmt::Display for RemoveFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.moved_to {
            Some(doomed) => write!(
                f,
                "removing {} failed: it was moved to {}, which is no longer a checkpoint, but deleting that failed ({}); stoker tries again at the next checkpoint, or delete it by hand",
                self.path.display(),
                doomed.display(),
                self.error
            ),
            None => write!(
                f,
                "removing {} failed ({}); it stays, and stoker tries again at the next checkpoint",
                self.path.display(),
                self.error
            ),
        }
    }
}

/// Remove a checkpoint folder so that a crash midway cannot leave a folder that looks like a
/// checkpoint: it is renamed `X.<pid>-<n>.deleting` first, then deleted.
pub(super) fn remove_checkpoint(path: &Path) -> std::result::Result<(), RemoveFailure> {
    let name = path.file_name().unwrap_or_default();
    let doomed = path.with_file_name(temporary_name(name, "deleting"));
    if let Err(error) = fs::rename(path, &doomed) {
        return Err(RemoveFailure { path: path.to_path_buf(), moved_to: None, error });
    }
    fs::remove_dir_all(&doomed).map_err(|error| RemoveFailure {
        path: path.to_path_buf(),
        moved_to: Some(doomed),
        error,
    })
}

/// Set aside the checkpoints in `root` newer than `global_step` (a run resumed from an earlier
/// one makes them stale), the copies of MinSaver / MaxSaver written after it (the abandoned
/// timeline's best, which the resumed run's first improvement would otherwise overwrite with a
/// worse model), and the `.old` windows of both: each is renamed `<name>.abandoned`, or
/// `<name>.<k>.abandoned` with the first `k` from 2 that is free when an earlier rollback set one
/// of that name aside already. Nothing is deleted.
pub(crate) fn abandon_newer(root: &Path, global_step: u64) -> Result<()> {
    let mut newer = list_readable(root).map_err(|e| Error::io(root, e))?;
    newer.retain(|from| {
        let name = from.file_name().unwrap_or_default().to_string_lossy();
        step_of(name.strip_suffix(OLD).unwrap_or(&name)).is_some_and(|step| step > global_step)
    });
    let copies = copies_newer(root, global_step).map_err(|e| Error::io(root, e))?;
    // A checkpoint newer than the one resumed from means the run was sent back on purpose: a
    // warning. A best copy newer than it alone is what a crash between the copy and the next
    // checkpoint leaves, which the resumed run writes again: a note, as for `stats.json`.
    let stepped_back = !newer.is_empty();
    for (from, checkpoint) in
        newer.into_iter().map(|p| (p, true)).chain(copies.into_iter().map(|p| (p, false)))
    {
        set_aside(&from, checkpoint || stepped_back)?;
    }
    sync_dir(root).map_err(|e| Error::io(root, e))
}

/// Set aside the complete checkpoint at `path` (a SaveBestState's best state) when it was written
/// after `global_step`, the step a run resumes from: it is the abandoned timeline's best, which
/// the resumed run's first improvement would otherwise replace with a worse one. Returns where
/// it went.
pub(crate) fn abandon_if_newer(path: &Path, global_step: u64) -> Result<Option<PathBuf>> {
    let newer = read_manifest(path).is_ok_and(|manifest| manifest.global_step > global_step);
    if !newer {
        return Ok(None);
    }
    let to = set_aside(path, true)?;
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        sync_dir(parent).map_err(|e| Error::io(parent, e))?;
    }
    Ok(Some(to))
}

/// Rename `from` to `<name>.abandoned` beside it, or `<name>.<k>.abandoned` with the first `k`
/// from 2 that is free when an earlier rollback set one of that name aside already; a warning
/// (`loud`) or a note says so.
fn set_aside(from: &Path, loud: bool) -> Result<PathBuf> {
    let name = from.file_name().unwrap_or_default().to_string_lossy().into_owned();
    let root = from.parent().unwrap_or(Path::new(""));
    let mut to = root.join(format!("{name}.abandoned"));
    let mut k = 1u64;
    while occupied(&to) {
        k += 1;
        to = root.join(format!("{name}.{k}.abandoned"));
    }
    let (from_shown, to_shown) = (from.display(), to.display());
    if loud {
        crate::logging::warn!(
            "{from_shown} is newer than the checkpoint this run resumes from; moved it to {to_shown}"
        );
    } else {
        crate::logging::info!(
            "{from_shown} is newer than the checkpoint this run resumes from; moved it to {to_shown}"
        );
    }
    fs::rename(from, &to).map_err(|e| Error::io(from, e))?;
    Ok(to)
}

/// The checkpoint copies in `root` (a folder of a copy's name, or its `.old` window, holding a
/// manifest that reads) written after `global_step`.
fn copies_newer(root: &Path, global_step: u64) -> std::io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    let Some(entries) = entries_of(root)? else { return Ok(found) };
    for entry in entries {
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else { continue };
        let base = name.strip_suffix(OLD).unwrap_or(&name);
        if check_copy_name(base).is_err() || !entry.file_type()?.is_dir() {
            continue;
        }
        if read_manifest(&entry.path()).is_ok_and(|manifest| manifest.global_step > global_step) {
            found.push(entry.path());
        }
    }
    Ok(found)
}
