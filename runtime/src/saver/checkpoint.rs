//! The checkpoint format on disk (described in the `saver` module's docs), and how it is written
//! and read back.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use crate::error::{BoxError, Error, Result};
use crate::state::{
    KeepPolicy, check_copy_name, create_dir_all_synced, leftover_of, process_is_gone, sync_dir,
    temporary_name, write_atomic, write_new_file,
};

/// The folder of checkpoints inside the log directory.
pub const CHECKPOINT_DIR: &str = "checkpoints";
/// The index naming the latest complete checkpoint, inside [`CHECKPOINT_DIR`].
pub const INDEX_FILE: &str = "index.json";
/// The model's file inside a checkpoint (burnpack, loadable by plain burn with
/// `Module::load_file`).
pub const MODEL_FILE: &str = "model.bpk";
/// The optimizer's file inside a checkpoint (burnpack, `ModuleOptimizer::load`).
pub const OPTIMIZER_FILE: &str = "optimizer.bpk";
/// Counters, data position, hyper-parameters and callbacks' states inside a checkpoint.
pub const TRAINER_FILE: &str = "trainer.json";
/// The monitors' history inside a checkpoint.
pub const MONITORS_FILE: &str = "monitors.json";
/// Each file's length and CRC-32C, written last inside a checkpoint.
pub const MANIFEST_FILE: &str = "manifest.json";
/// An empty file marking a checkpoint kept forever (`keep_every_n_hours`), so that the mark
/// survives the loss of the index.
pub const KEEP_FILE: &str = "keep";
/// The version of this layout, in every manifest. Format 2 checksums the manifest's bytes as
/// written; format 1 (read, no longer written) checksummed a re-serialization of it.
pub const FORMAT_VERSION: u64 = 2;
/// The oldest format this version reads.
const OLDEST_FORMAT: u64 = 1;

const FILES: [&str; 4] = [MODEL_FILE, OPTIMIZER_FILE, TRAINER_FILE, MONITORS_FILE];

/// What the trainer hands over to be written.
pub(crate) struct Content {
    pub(crate) model: Vec<u8>,
    pub(crate) optimizer: Vec<u8>,
    pub(crate) trainer: Json,
    pub(crate) monitors: Json,
    pub(crate) epoch_num: u64,
    pub(crate) global_step: u64,
    /// When it is written, in seconds since the Unix epoch (the manifest's `time`).
    pub(crate) time: f64,
}

#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    format: u64,
    epoch_num: u64,
    global_step: u64,
    /// Seconds since the Unix epoch when it was written.
    time: f64,
    files: std::collections::BTreeMap<String, FileSum>,
    /// CRC-32C of the manifest itself: from format 2 on, of the file's bytes before the line
    /// holding this member, the last one (see [`Manifest::seal`]); in format 1, of its compact
    /// JSON without this field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    checksum: Option<u32>,
}

/// The last line of a manifest of format 2 or later, `checksum` its CRC-32C.
fn checksum_tail(checksum: u32) -> String {
    format!("  \"checksum\": {checksum}\n}}\n")
}

impl Manifest {
    /// The manifest's bytes: its JSON with `checksum` as the last member, on a line of its own,
    /// holding the CRC-32C of every byte before that line. A reader verifies the bytes it reads,
    /// whatever the order of the other members (which serde_json's `preserve_order` feature,
    /// enabled by any crate of a build, changes).
    fn seal(&self) -> std::io::Result<Vec<u8>> {
        debug_assert!(self.checksum.is_none());
        let body = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        let Some(open) = body.strip_suffix(b"\n}") else {
            return Err(std::io::Error::other("the manifest's JSON does not end with `}`"));
        };
        let mut sealed = open.to_vec();
        sealed.extend_from_slice(b",\n");
        let checksum = crc32c::crc32c(&sealed);
        sealed.extend_from_slice(checksum_tail(checksum).as_bytes());
        Ok(sealed)
    }

    /// Whether `bytes`, read as this manifest, pass its own checksum.
    fn verifies(&self, bytes: &[u8]) -> bool {
        let Some(checksum) = self.checksum else { return false };
        if self.format == 1 {
            return checksum == self.format_1_checksum();
        }
        let tail = checksum_tail(checksum);
        bytes.strip_suffix(tail.as_bytes()).is_some_and(|body| crc32c::crc32c(body) == checksum)
    }

    /// Format 1's checksum: of the compact JSON re-serialized without the checksum.
    fn format_1_checksum(&self) -> u32 {
        let mut unsigned = serde_json::to_value(self).unwrap_or_default();
        if let Some(object) = unsigned.as_object_mut() {
            object.remove("checksum");
        }
        crc32c::crc32c(unsigned.to_string().as_bytes())
    }
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct FileSum {
    len: u64,
    crc32c: u32,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Index {
    /// The latest complete checkpoint's folder name.
    latest: String,
    /// Every complete checkpoint kept, oldest first.
    checkpoints: Vec<String>,
    /// Checkpoints kept forever by `keep_every_n_hours`.
    #[serde(default)]
    kept_forever: Vec<String>,
    /// When the run that last wrote here started (seconds since the Unix epoch), from which
    /// `keep_every_n_hours` counts.
    #[serde(default)]
    run_start: Option<f64>,
    /// A checkpoint pushed out of the most recent ones is kept forever when it was written after
    /// this time (`run_start` plus one period, one more period for each kept).
    #[serde(default)]
    next_keep: Option<f64>,
}

/// The system's time, in seconds since the Unix epoch.
pub(crate) fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// The name of the checkpoint at `global_step`.
pub fn checkpoint_name(global_step: u64) -> String {
    format!("step-{global_step}")
}

fn step_of(name: &str) -> Option<u64> {
    name.strip_prefix("step-")
        .and_then(|n| if n.bytes().all(|b| b.is_ascii_digit()) { n.parse().ok() } else { None })
}

/// The checkpoints in `root` named `step-N`, by increasing N.
fn list(root: &Path) -> std::io::Result<Vec<(u64, String)>> {
    let mut found = Vec::new();
    let entries = match fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(found),
        Err(e) => return Err(e),
    };
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
const OLD: &str = ".old";

/// `X.old`, where a writer sets the checkpoint `X` aside while it replaces it.
fn old_of(dir: &Path) -> PathBuf {
    let mut old = dir.as_os_str().to_os_string();
    old.push(OLD);
    PathBuf::from(old)
}

/// Whether anything (a symlink included) is at `path`; an error other than "not found" counts
/// as something, so that nothing is put there.
fn occupied(path: &Path) -> bool {
    !matches!(fs::symlink_metadata(path), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
}

/// The checkpoints a reader may take in `root`, newest first: each `step-N`, and its `step-N.old`
/// (the window a writer replacing `step-N` leaves, see [`write_dir`]) right after it.
fn list_readable(root: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut found: Vec<(std::cmp::Reverse<u64>, bool, PathBuf)> = Vec::new();
    let entries = match fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
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
/// `name.old` without `name` takes it for `name` ([`Checkpoint::latest`]), and the next write puts
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

/// Clean what a crash in the middle of a write left in `root`, and only that:
///
/// - a temporary folder or file `X.<pid>-<n>.tmp` goes once its process `<pid>` has certainly
///   ended (a live process's, this one's included, stays: it may be writing it);
/// - a folder being removed, `X.<pid>-<n>.deleting`, goes when its process has ended or is this
///   one (an earlier removal that failed is tried again);
/// - `step-N.tmp` and `step-N.deleting`, the names earlier versions used, go;
/// - a checkpoint set aside while another of its name replaced it, `X.old` holding a manifest,
///   goes when `X` is there, and is put back as `X` when `X` is missing.
///
/// Anything else, whatever its name ends with, is not stoker's and stays. The run's lock on the
/// log directory already keeps any other trainer out.
fn remove_leftovers(root: &Path) {
    let Ok(entries) = fs::read_dir(root) else { return };
    let own = std::process::id();
    for entry in entries.flatten() {
        let Some(name) = entry.file_name().to_str().map(str::to_string) else { continue };
        let Ok(kind) = entry.file_type() else { continue };
        let path = entry.path();
        if let Some((_, pid)) = leftover_of(&name, "tmp") {
            if pid != own && process_is_gone(pid) {
                let _ = if kind.is_dir() { fs::remove_dir_all(&path) } else { fs::remove_file(&path) };
            }
        } else if let Some((_, pid)) = leftover_of(&name, "deleting") {
            if kind.is_dir() && (pid == own || process_is_gone(pid)) {
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
struct RemoveFailure {
    /// The folder.
    path: PathBuf,
    /// Where it was moved before its removal failed; `None` when it could not be moved.
    moved_to: Option<PathBuf>,
    error: std::io::Error,
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
fn remove_checkpoint(path: &Path) -> std::result::Result<(), RemoveFailure> {
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

fn read_index(root: &Path) -> Option<Index> {
    let bytes = fs::read(root.join(INDEX_FILE)).ok()?;
    serde_json::from_slice(&bytes).ok()
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
        Error::checkpoint_from(
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
        if position >= recent_from || index.kept_forever.contains(old) {
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
    index.checkpoints = present.into_iter().map(|(_, n)| n).filter(|n| !remove.contains(n)).collect();
    let index_path = root.join(INDEX_FILE);
    let text = serde_json::to_vec_pretty(&index).map_err(|e| {
        Error::checkpoint_from(format!("serializing {}: {e}", root.join(INDEX_FILE).display()), e)
    })?;
    write_atomic(&index_path, &text).map_err(|e| {
        Error::checkpoint_from(
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
        .map_err(|why| Error::checkpoint(format!("the checkpoint copy name {name:?} {why}")))?;
    create_dir_all_synced(root).map_err(|e| Error::io(root, e))?;
    remove_leftovers(root);
    write_dir(root, name, content).map_err(|e| {
        Error::checkpoint_from(
            format!(
                "writing the checkpoint copy {} failed: {e}; the previous copy is intact",
                root.join(name).display()
            ),
            e,
        )
    })
}

/// Why a checkpoint could not be read.
enum Unreadable {
    /// It is damaged: a file fails its checksum, is shorter or longer than the manifest says, is
    /// missing, or does not parse. A reader goes on to the checkpoint before it.
    Corrupt {
        /// What is wrong, naming the file (`manifest.json is malformed: <serde's message>`).
        reason: String,
        /// The error that found it, when one did: serde's for a file that does not parse, the
        /// `std::io::Error` of a missing file. `None` for stoker's own checks (checksums, lengths).
        source: Option<BoxError>,
    },
    /// Anything else (a read error such as EIO, EMFILE or EACCES, a format this version does not
    /// read): the checkpoint may well be fine, so it is returned to the user as it is, and
    /// nothing is set aside.
    Error(Error),
}

impl Unreadable {
    /// Damage found by stoker's own checks.
    fn corrupt(reason: String) -> Unreadable {
        Unreadable::Corrupt { reason, source: None }
    }

    /// Damage that `source` found; `reason` already quotes it.
    fn corrupt_from(reason: String, source: impl Into<BoxError>) -> Unreadable {
        Unreadable::Corrupt { reason, source: Some(source.into()) }
    }

    /// The public error for the checkpoint `dir`, keeping the cause as its source.
    fn into_error(self, dir: &Path) -> Error {
        match self {
            Unreadable::Corrupt { reason, source } => Error::Checkpoint {
                message: format!("checkpoint {} is incomplete or corrupt: {reason}", dir.display()),
                source,
            },
            Unreadable::Error(error) => error,
        }
    }
}

/// The bytes of `dir/file`: a missing file makes the checkpoint incomplete, any other error is
/// not a sign of damage.
fn read_file(dir: &Path, file: &str) -> Result<Vec<u8>, Unreadable> {
    let path = dir.join(file);
    fs::read(&path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            Unreadable::corrupt_from(format!("{file}: {e}"), e)
        } else {
            Unreadable::Error(Error::checkpoint_from(
                format!(
                    "reading {} failed: {e}; a read error is no sign of a damaged checkpoint, so nothing was set aside or removed: fix the cause (permissions, open files, the disk) and try again",
                    path.display()
                ),
                e,
            ))
        }
    })
}

fn read_manifest(dir: &Path) -> Result<Manifest, Unreadable> {
    let bytes = read_file(dir, MANIFEST_FILE)?;
    let manifest: Manifest = serde_json::from_slice(&bytes)
        .map_err(|e| Unreadable::corrupt_from(format!("{MANIFEST_FILE} is malformed: {e}"), e))?;
    if !(OLDEST_FORMAT..=FORMAT_VERSION).contains(&manifest.format) {
        return Err(Unreadable::Error(Error::checkpoint(format!(
            "checkpoint {} has format {}, this version of stoker reads formats {OLDEST_FORMAT} to {FORMAT_VERSION}",
            dir.display(),
            manifest.format
        ))));
    }
    match manifest.checksum {
        Some(_) if manifest.verifies(&bytes) => Ok(manifest),
        Some(_) => Err(Unreadable::corrupt(format!("{MANIFEST_FILE} fails its own checksum"))),
        None => Err(Unreadable::corrupt(format!("{MANIFEST_FILE} has no checksum"))),
    }
}

/// A complete checkpoint read back from disk, every file verified against its manifest.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    dir: PathBuf,
    epoch_num: u64,
    global_step: u64,
    pub(crate) model: Vec<u8>,
    pub(crate) optimizer: Vec<u8>,
    pub(crate) trainer: Json,
    pub(crate) monitors: Json,
}

impl Checkpoint {
    /// Read and verify the checkpoint in `dir` (a `step-N` folder or a MinSaver copy). A missing,
    /// truncated or altered file is an error naming the checkpoint and the file, and so is a read
    /// error (naming the file). When `dir` is missing but `dir.old` is there (a writer replacing
    /// it was stopped midway), that is the checkpoint read.
    pub fn read(dir: impl AsRef<Path>) -> Result<Checkpoint> {
        let dir = dir.as_ref();
        let old = old_of(dir);
        let dir = if !occupied(dir) && old.is_dir() { old.as_path() } else { dir };
        Checkpoint::read_verified(dir).map_err(|unreadable| unreadable.into_error(dir))
    }

    fn read_verified(dir: &Path) -> Result<Checkpoint, Unreadable> {
        let corrupt = Unreadable::corrupt;
        let manifest = read_manifest(dir)?;
        let mut contents = Vec::with_capacity(FILES.len());
        for file in FILES {
            let sum = manifest
                .files
                .get(file)
                .ok_or_else(|| corrupt(format!("the manifest does not list {file}")))?;
            let bytes = read_file(dir, file)?;
            if bytes.len() as u64 != sum.len {
                return Err(corrupt(format!(
                    "{file} is {} bytes long, the manifest says {}",
                    bytes.len(),
                    sum.len
                )));
            }
            let crc = crc32c::crc32c(&bytes);
            if crc != sum.crc32c {
                return Err(corrupt(format!(
                    "{file} fails its checksum (CRC-32C {crc:#010x}, the manifest says {:#010x})",
                    sum.crc32c
                )));
            }
            contents.push(bytes);
        }
        let monitors = contents.pop().unwrap_or_default();
        let trainer = contents.pop().unwrap_or_default();
        let optimizer = contents.pop().unwrap_or_default();
        let model = contents.pop().unwrap_or_default();
        let json = |bytes: &[u8], file: &str| -> Result<Json, Unreadable> {
            serde_json::from_slice(bytes)
                .map_err(|e| Unreadable::corrupt_from(format!("{file} is malformed: {e}"), e))
        };
        Ok(Checkpoint {
            dir: dir.to_path_buf(),
            epoch_num: manifest.epoch_num,
            global_step: manifest.global_step,
            trainer: json(&trainer, TRAINER_FILE)?,
            monitors: json(&monitors, MONITORS_FILE)?,
            model,
            optimizer,
        })
    }

    /// The latest complete checkpoint under `path`: a log directory, its `checkpoints` folder, or
    /// a checkpoint itself. A damaged checkpoint (a file that fails its checksum, is cut short or
    /// missing) is reported on stderr and the one before it is tried; any other failure to read
    /// one (EIO, EACCES, too many open files, a newer format) is returned as an error naming the
    /// file, since that checkpoint may be fine. A `step-N.old` without its `step-N` (a writer
    /// replacing `step-N` was stopped midway) is read as `step-N`, as the next write restores
    /// it. `Ok(None)` when there is no checkpoint at all; an error when every checkpoint there is
    /// damaged.
    ///
    /// "Latest" is the `step-N` folder with the highest N that verifies, found by listing the
    /// folder, not by reading [`INDEX_FILE`]. The index is the writer's bookkeeping for keep-N
    /// and `keep_every_n_hours` (which checkpoints are kept, which forever, since when), and a
    /// summary for people and tools; it is replaced only after the checkpoint it names is
    /// complete, so a crash between the two leaves it one checkpoint behind, and a resume from an
    /// earlier checkpoint leaves it naming a checkpoint set aside as `.abandoned` until the next
    /// one is written. The listing, each entry verified against its manifest, is right in both
    /// cases. Otherwise the two agree: a log directory holds one run (see
    /// [`LogDirPolicy`](crate::trainer::LogDirPolicy)), so within it a higher step is a later
    /// checkpoint. Only [`LogDirPolicy::Keep`](crate::trainer::LogDirPolicy::Keep) mixes two runs'
    /// checkpoints, and then this is the one with the highest step of either run.
    pub fn latest(path: impl AsRef<Path>) -> Result<Option<Checkpoint>> {
        let path = path.as_ref();
        if path.join(MANIFEST_FILE).exists() || (!occupied(path) && old_of(path).join(MANIFEST_FILE).exists())
        {
            return Checkpoint::read(path).map(Some);
        }
        let root =
            if path.join(CHECKPOINT_DIR).is_dir() { path.join(CHECKPOINT_DIR) } else { path.to_path_buf() };
        let candidates = list_readable(&root).map_err(|e| Error::io(&root, e))?;
        // Each damaged checkpoint's error, newest first.
        let mut failures: Vec<Error> = Vec::new();
        for dir in candidates {
            match Checkpoint::read_verified(&dir) {
                Ok(checkpoint) => {
                    let name = dir.file_name().unwrap_or_default().to_string_lossy();
                    for failure in &failures {
                        crate::logging::warn!("{failure}; resuming from the checkpoint before it, {name}");
                    }
                    return Ok(Some(checkpoint));
                }
                Err(corrupt @ Unreadable::Corrupt { .. }) => failures.push(corrupt.into_error(&dir)),
                Err(Unreadable::Error(error)) => return Err(error),
            }
        }
        if failures.is_empty() {
            return Ok(None);
        }
        // The message lists every damaged checkpoint; the source is the newest one's error (with
        // its own cause, serde's or the file system's), the one a resume would have used.
        let message = format!(
            "no complete checkpoint in {}: {}",
            root.display(),
            failures.iter().map(Error::to_string).collect::<Vec<_>>().join("; ")
        );
        Err(Error::Checkpoint { message, source: Some(Box::new(failures.swap_remove(0))) })
    }

    /// The checkpoint's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    /// The epoch it was written in.
    pub fn epoch_num(&self) -> u64 {
        self.epoch_num
    }
    /// The global step it was written at.
    pub fn global_step(&self) -> u64 {
        self.global_step
    }
    /// The model's burnpack bytes (`ModuleRecord::from_bytes`).
    pub fn model_bytes(&self) -> &[u8] {
        &self.model
    }
    /// The optimizer's burnpack bytes (`ModuleOptimizer::from_bytes`).
    pub fn optimizer_bytes(&self) -> &[u8] {
        &self.optimizer
    }
    /// The trainer's state: counters, data position, hyper-parameters, callbacks' states.
    pub fn trainer_state(&self) -> &Json {
        &self.trainer
    }
    /// The saved state of the callback named `name`, if it had one.
    pub fn callback_state(&self, name: &str) -> Option<&Json> {
        self.trainer.get("callbacks").and_then(|c| c.get(name))
    }
    /// A hyper-parameter's saved value.
    pub fn hyper_param(&self, name: &str) -> Option<f64> {
        self.trainer.get("hyper_params").and_then(|h| h.get(name)).and_then(crate::state::parse_f64)
    }
    /// The monitors' saved state (history, per-epoch statistics).
    pub fn monitors_state(&self) -> &Json {
        &self.monitors
    }
}

/// Set aside the checkpoints in `root` newer than `global_step` (a run resumed from an earlier
/// one makes them stale), and the `.old` windows of such checkpoints: each is renamed
/// `<name>.abandoned`, or `<name>.<k>.abandoned` with the first `k` from 2 that is free when an
/// earlier rollback set one of that name aside already. Nothing is deleted.
pub(crate) fn abandon_newer(root: &Path, global_step: u64) -> Result<()> {
    for from in list_readable(root).map_err(|e| Error::io(root, e))? {
        let name = from.file_name().unwrap_or_default().to_string_lossy().into_owned();
        let step = step_of(name.strip_suffix(OLD).unwrap_or(&name));
        if step.is_some_and(|step| step > global_step) {
            let mut to = root.join(format!("{name}.abandoned"));
            let mut k = 1u64;
            while occupied(&to) {
                k += 1;
                to = root.join(format!("{name}.{k}.abandoned"));
            }
            crate::logging::warn!(
                "{} is newer than the checkpoint this run resumes from; moved it to {}",
                from.display(),
                to.display()
            );
            fs::rename(&from, &to).map_err(|e| Error::io(&from, e))?;
        }
    }
    sync_dir(root).map_err(|e| Error::io(root, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(format: u64) -> Manifest {
        let mut files = std::collections::BTreeMap::new();
        files.insert(MODEL_FILE.to_string(), FileSum { len: 3, crc32c: 7 });
        Manifest { format, epoch_num: 2, global_step: 10, time: 1.5, files, checksum: None }
    }

    #[test]
    fn a_sealed_manifest_verifies_and_a_changed_byte_does_not() {
        let sealed = manifest(FORMAT_VERSION).seal().unwrap();
        let text = String::from_utf8(sealed.clone()).unwrap();
        assert!(text.ends_with("\n}\n") && text.contains("\n  \"checksum\": "), "{text}");
        let read: Manifest = serde_json::from_slice(&sealed).unwrap();
        assert!(read.verifies(&sealed));
        let altered = text.replacen("\"global_step\": 10", "\"global_step\": 11", 1);
        let read: Manifest = serde_json::from_str(&altered).unwrap();
        assert!(!read.verifies(altered.as_bytes()));
    }

    #[test]
    fn a_format_1_manifest_still_verifies() {
        // As format 1 wrote it: the checksum of the compact JSON re-serialized without it.
        let mut old = manifest(1);
        old.checksum = Some(old.format_1_checksum());
        let bytes = serde_json::to_vec_pretty(&old).unwrap();
        let read: Manifest = serde_json::from_slice(&bytes).unwrap();
        assert!(read.verifies(&bytes));
        let mut wrong = manifest(1);
        wrong.checksum = Some(old.checksum.unwrap() ^ 1);
        assert!(!wrong.verifies(&serde_json::to_vec_pretty(&wrong).unwrap()));
    }

    #[test]
    fn the_index_file_is_not_a_copy_name() {
        assert!(check_copy_name(INDEX_FILE).is_err());
        assert!(
            check_copy_name(CHECKPOINT_DIR).is_ok(),
            "inside checkpoints/, a folder of that name is fine"
        );
    }

    /// Writes a checkpoint of `global_step` at `minutes` after `base` into `root`, for a run
    /// started `start` minutes after `base`, keeping 1 and one per half hour.
    fn write_at(root: &Path, base: f64, global_step: u64, minutes: f64, start: f64) {
        let content = Content {
            model: vec![1],
            optimizer: vec![2],
            trainer: serde_json::json!({}),
            monitors: serde_json::json!({}),
            epoch_num: 1,
            global_step,
            time: base + minutes * 60.0,
        };
        let policy = KeepPolicy { max_to_keep: 1, keep_every_n_hours: Some(0.5) };
        write(root, &content, &policy, base + start * 60.0).unwrap();
    }

    #[test]
    fn checkpoint_keep_every_n_hours_counts_from_each_runs_own_start() {
        let root = std::env::temp_dir().join(format!("stoker-unit-keep-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let base = 1.0e9;
        // Run A, started at 0: minutes 27, 47, ..., 167 (steps 5..40). Kept (thresholds 30, 60,
        // 90, 120, then 150): 47, 67, 107, 127.
        for (k, minutes) in [27.0, 47.0, 67.0, 87.0, 107.0, 127.0, 147.0, 167.0].into_iter().enumerate() {
            write_at(&root, base, 5 * (k as u64 + 1), minutes, 0.0);
        }
        let kept = |root: &Path| read_index(root).unwrap().kept_forever;
        assert_eq!(kept(&root), ["step-10", "step-15", "step-25", "step-30"]);
        // Run B, resumed at minute 200, counts from its own start (threshold 230), as a new
        // `tf.train.Saver` does: step-40 (167) and step-45 (227) are not kept, step-50 (247) is.
        // Had it gone on from run A's threshold (150), step-40 would have been kept.
        for (step, minutes) in [(45, 227.0), (50, 247.0), (55, 267.0)] {
            write_at(&root, base, step, minutes, 200.0);
        }
        assert_eq!(kept(&root), ["step-10", "step-15", "step-25", "step-30", "step-50"]);
        let mut on_disk: Vec<String> = list(&root).unwrap().into_iter().map(|(_, n)| n).collect();
        on_disk.sort_by_key(|n| step_of(n));
        assert_eq!(on_disk, ["step-10", "step-15", "step-25", "step-30", "step-50", "step-55"]);
        fs::remove_dir_all(&root).unwrap();
    }
}
