//! Writing a checkpoint (or a MinSaver copy) atomically, and the index that decides which are
//! kept.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::format::{Content, FILES, FORMAT_VERSION, INDEX_FILE, KEEP_FILE, MANIFEST_FILE, checkpoint_name};
use super::listing::{list, occupied, old_of};
use super::manifest::{FileSum, Manifest};
use super::read::read_manifest;
use super::remove::{RemoveFailure, remove_checkpoint, remove_leftovers};
use crate::error::{CheckpointError, Error, Result};
use crate::state::{
    KeepPolicy, MAX_INDEX_BYTES, check_copy_name, create_dir_all_synced, read_bounded, sync_dir,
    temporary_name, write_atomic, write_new_file,
};

/// `index.json`: the writer's bookkeeping of the checkpoints kept.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(super) struct Index {
    /// The latest complete checkpoint's folder name.
    pub(super) latest: String,
    /// Every complete checkpoint kept, oldest first.
    pub(super) checkpoints: Vec<String>,
    /// Checkpoints kept forever by `keep_every_n_hours`.
    #[serde(default)]
    pub(super) kept_forever: Vec<String>,
    /// When the run that last wrote here started (seconds since the Unix epoch), from which
    /// `keep_every_n_hours` counts.
    #[serde(default)]
    pub(super) run_start: Option<f64>,
    /// A checkpoint pushed out of the most recent ones is kept forever when it was written after
    /// this time (`run_start` plus one period, one more period for each kept).
    #[serde(default)]
    pub(super) next_keep: Option<f64>,
    /// The run whose checkpoints these are (absent before runs were recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) run: Option<String>,
}

/// Write `bytes` as the new file `path`, synced; its length and CRC-32C.
fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<FileSum> {
    write_new_file(path, bytes)?;
    Ok(FileSum { len: bytes.len() as u64, crc32c: crc32c::crc32c(bytes) })
}

/// Mark the checkpoint `dir` as kept forever: the empty file [`KEEP_FILE`], synced, and its
/// directory entry synced, so that the mark survives a crash and the loss of the index.
fn mark_kept_forever(dir: &Path) -> std::io::Result<()> {
    let mark = dir.join(KEEP_FILE);
    match write_new_file(&mark, b"") {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && mark.is_file() => {}
        Err(e) => return Err(e),
    }
    sync_dir(dir)
}

/// Write `content` as the complete checkpoint `root/name`, replacing one of that name only once
/// the new one is complete.
///
/// The files go into a new folder `name.<pid>-<n>.tmp` (a name no other write uses, created new
/// so that nothing is followed or reused), synced, the manifest last; the folder is renamed
/// `name`. A checkpoint of that name already there is first renamed `name.old` (a rename cannot
/// replace a non-empty folder), then removed once the new one is in place: a reader that finds
/// `name.old` without `name` takes it for `name` ([`Checkpoint::latest`](super::Checkpoint::latest)), and the next write puts
/// it back ([`remove_leftovers`]).
fn write_dir(root: &Path, name: &str, content: &Content) -> std::io::Result<PathBuf> {
    let dir = root.join(name);
    let tmp = root.join(temporary_name(OsStr::new(name), "tmp"));
    fs::create_dir(&tmp)?;
    let result = (|| {
        let trainer = serde_json::to_vec_pretty(&content.trainer).map_err(std::io::Error::other)?;
        let monitors = serde_json::to_vec(&content.monitors).map_err(std::io::Error::other)?;
        let mut files = std::collections::BTreeMap::new();
        for (file, bytes) in FILES.iter().zip([&content.model[..], &content.optimizer, &trainer, &monitors]) {
            files.insert(file.to_string(), write_synced(&tmp.join(file), bytes)?);
        }
        let manifest = Manifest {
            format: FORMAT_VERSION,
            epoch_num: content.epoch_num,
            global_step: content.global_step,
            time: content.time,
            files,
            run: Some(content.run.clone()),
            checksum: None,
        };
        write_synced(&tmp.join(MANIFEST_FILE), &manifest.seal()?)?;
        sync_dir(&tmp)?;
        if occupied(&dir) {
            let old = old_of(&dir);
            if occupied(&old) {
                // A replaced one a crash left beside a complete `name`: out of the way first. Once
                // it is moved, its name is free, deleted or not.
                match remove_checkpoint(&old) {
                    Ok(()) => {}
                    Err(RemoveFailure { moved_to: None, error, .. }) => return Err(error),
                    Err(failure) => crate::logging::warn!("{failure}"),
                }
            }
            fs::rename(&dir, &old)?;
            fs::rename(&tmp, &dir)?;
            sync_dir(root)?;
            if let Err(failure) = remove_checkpoint(&old) {
                crate::logging::warn!("checkpoint {} is complete, but {failure}", dir.display());
            }
        } else {
            fs::rename(&tmp, &dir)?;
        }
        sync_dir(root)
    })();
    if result.is_err() {
        // A full disk must not stay full of a half-written checkpoint (the folder is ours).
        let _ = fs::remove_dir_all(&tmp);
    }
    result.map(|()| dir)
}

/// The index of `root`, when there is one that reads: a regular file of a bounded size (a FIFO
/// or a device there is a warning, never a wait), holding an index.
pub(super) fn read_index(root: &Path) -> Option<Index> {
    let path = root.join(INDEX_FILE);
    let bytes = match read_bounded(&path, MAX_INDEX_BYTES) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            crate::logging::warn!(
                "cannot read {}: {e}; it is replaced by a new index of the checkpoints listed there",
                path.display()
            );
            return None;
        }
    };
    serde_json::from_slice(&bytes).ok()
}

/// The run whose checkpoints `root` holds, as its index says; `None` when it has no index or an
/// index of before runs were recorded.
pub(crate) fn run_of(root: &Path) -> Option<String> {
    read_index(root)?.run
}

/// Write `content` as checkpoint `step-<global_step>` in `root`, name it in the index, and remove
/// the checkpoints `policy` does not keep. Returns the checkpoint's directory.
///
/// `keep_every_n_hours` is `tf.train.Saver`'s rule (tensorpack's `ModelSaver` hands it over):
/// from the start of the run (`run_start`), a checkpoint pushed out of the `max_to_keep` most
/// recent ones is kept forever when it was written more than N hours after the start, and the
/// next one kept must be written more than N hours after that threshold (2N, 3N... from the
/// start). Kept forever means not deleted: nothing extra is written.
pub(crate) fn write(root: &Path, content: &Content, policy: &KeepPolicy, run_start: f64) -> Result<PathBuf> {
    let name = checkpoint_name(content.global_step);
    let fail = |what: &str, path: &Path, e: std::io::Error| {
        Error::checkpoint_write(
            format!(
                "writing checkpoint {name} failed ({what} {}: {e}); the checkpoints written before are intact",
                path.display()
            ),
            e,
        )
    };
    create_dir_all_synced(root).map_err(|e| fail("creating", root, e))?;
    remove_leftovers(root);
    let dir = write_dir(root, &name, content).map_err(|e| fail("writing into", root, e))?;

    let present = list(root).map_err(|e| fail("listing", root, e))?;
    let written_at = |name: &str| read_manifest(&root.join(name)).map_or(0.0, |m| m.time);
    let mut index = read_index(root).unwrap_or_default();
    // The checkpoints kept forever carry a mark of their own: the index may be lost.
    index.kept_forever =
        present.iter().map(|(_, n)| n.clone()).filter(|n| root.join(n).join(KEEP_FILE).exists()).collect();
    // A new run counts its hours from its own start, as a new `tf.train.Saver` does.
    let period = policy.keep_every_n_hours.map(|hours| hours * 3600.0);
    if index.run_start != Some(run_start) || index.next_keep.is_none() {
        index.run_start = Some(run_start);
        index.next_keep = period.map(|period| run_start + period);
    }
    let recent_from = present.len().saturating_sub(policy.max_to_keep.max(1));
    let mut remove = Vec::new();
    for (position, (_, old)) in present.iter().enumerate() {
        // The checkpoint just written is never pruned, whatever higher steps an earlier run
        // left in the folder.
        if position >= recent_from || index.kept_forever.contains(old) || *old == name {
            continue;
        }
        if let (Some(period), Some(next_keep)) = (period, index.next_keep)
            && written_at(old) > next_keep
        {
            let kept = root.join(old);
            mark_kept_forever(&kept).map_err(|e| fail("marking", &kept.join(KEEP_FILE), e))?;
            index.kept_forever.push(old.clone());
            index.next_keep = Some(next_keep + period);
            continue;
        }
        remove.push(old.clone());
    }
    index.latest = name.clone();
    index.run = Some(content.run.clone());
    index.checkpoints = present.into_iter().map(|(_, n)| n).filter(|n| !remove.contains(n)).collect();
    let index_path = root.join(INDEX_FILE);
    let text = serde_json::to_vec_pretty(&index).map_err(|e| {
        Error::checkpoint_write(format!("serializing {}: {e}", root.join(INDEX_FILE).display()), e)
    })?;
    write_atomic(&index_path, &text).map_err(|e| {
        Error::checkpoint_write(
            format!(
                "checkpoint {name} is complete, but updating {} failed: {e}; resume finds {name} all the same",
                index_path.display()
            ),
            e,
        )
    })?;
    // The new checkpoint is complete and indexed: an old one that cannot be removed (a busy
    // `.nfs*` file, a file of another user) is worth a warning, not the run.
    for old in remove {
        if let Err(failure) = remove_checkpoint(&root.join(&old)) {
            crate::logging::warn!("checkpoint {name} is complete, but {failure}");
        }
    }
    Ok(dir)
}

/// Write `content` as the checkpoint copy `root/name` (MinSaver's `min-<statistic>`), replacing
/// the previous copy only once the new one is complete.
pub(crate) fn write_copy(root: &Path, name: &str, content: &Content) -> Result<PathBuf> {
    check_copy_name(name)
        .map_err(|why| CheckpointError::CopyName { name: name.to_owned(), why: why.to_string() })?;
    create_dir_all_synced(root).map_err(|e| Error::io(root, e))?;
    remove_leftovers(root);
    write_dir(root, name, content).map_err(|e| {
        Error::checkpoint_write(
            format!(
                "writing the checkpoint copy {} failed: {e}; the previous copy is intact",
                root.join(name).display()
            ),
            e,
        )
    })
}
