//! The checkpoints of a folder, found by listing it: `step-N` folders and their `.old` windows.

use std::fs;
use std::path::{Path, PathBuf};

pub(super) fn step_of(name: &str) -> Option<u64> {
    name.strip_prefix("step-")
        .and_then(|n| if n.bytes().all(|b| b.is_ascii_digit()) { n.parse().ok() } else { None })
}

/// The entries of `root`; `None` when it does not exist (a folder nothing was saved into yet).
pub(super) fn entries_of(root: &Path) -> std::io::Result<Option<fs::ReadDir>> {
    match fs::read_dir(root) {
        Ok(entries) => Ok(Some(entries)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The checkpoints in `root` named `step-N`, by increasing N.
pub(super) fn list(root: &Path) -> std::io::Result<Vec<(u64, String)>> {
    let mut found = Vec::new();
    let Some(entries) = entries_of(root)? else { return Ok(found) };
    for entry in entries {
        let entry = entry?;
        if let Some(name) = entry.file_name().to_str()
            && let Some(step) = step_of(name)
            && entry.file_type()?.is_dir()
        {
            found.push((step, name.to_string()));
        }
    }
    found.sort();
    Ok(found)
}

/// The suffix of a checkpoint set aside while one of the same name replaces it.
pub(super) const OLD: &str = ".old";

/// `X.old`, where a writer sets the checkpoint `X` aside while it replaces it.
pub(super) fn old_of(dir: &Path) -> PathBuf {
    let mut old = dir.as_os_str().to_os_string();
    old.push(OLD);
    PathBuf::from(old)
}

/// Whether anything (a symlink included) is at `path`; an error other than "not found" counts
/// as something, so that nothing is put there.
pub(super) fn occupied(path: &Path) -> bool {
    !matches!(fs::symlink_metadata(path), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
}

/// The checkpoints a reader may take in `root`, newest first: each `step-N`, and its `step-N.old`
/// (the window a writer replacing `step-N` leaves, see `write::write_dir`) right after it.
pub(super) fn list_readable(root: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut found: Vec<(std::cmp::Reverse<u64>, bool, PathBuf)> = Vec::new();
    let Some(entries) = entries_of(root)? else { return Ok(Vec::new()) };
    for entry in entries {
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else { continue };
        let (base, old) = match name.strip_suffix(OLD) {
            Some(base) => (base, true),
            None => (name.as_str(), false),
        };
        if let Some(step) = step_of(base)
            && entry.file_type()?.is_dir()
        {
            found.push((std::cmp::Reverse(step), old, entry.path()));
        }
    }
    found.sort();
    Ok(found.into_iter().map(|(_, _, path)| path).collect())
}
