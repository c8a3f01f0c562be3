//! The checkpoint format on disk (described in the `saver` module's docs), and how it is written
//! and read back.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use crate::error::{Error, Result};
use crate::state::{KeepPolicy, sync_dir, write_atomic};

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
/// The version of this layout, in every manifest.
pub const FORMAT_VERSION: u64 = 1;

const FILES: [&str; 4] = [MODEL_FILE, OPTIMIZER_FILE, TRAINER_FILE, MONITORS_FILE];

/// What the trainer hands over to be written.
pub(crate) struct Content {
    pub(crate) model: Vec<u8>,
    pub(crate) optimizer: Vec<u8>,
    pub(crate) trainer: Json,
    pub(crate) monitors: Json,
    pub(crate) epoch_num: u64,
    pub(crate) global_step: u64,
}

#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    format: u64,
    epoch_num: u64,
    global_step: u64,
    /// Seconds since the Unix epoch when it was written.
    time: f64,
    files: std::collections::BTreeMap<String, FileSum>,
    /// CRC-32C of the manifest itself (its compact JSON without this field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    checksum: Option<u32>,
}

impl Manifest {
    fn own_checksum(&self) -> u32 {
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
    /// The time the last checkpoint kept forever was written (or the first checkpoint's).
    #[serde(default)]
    anchor_time: Option<f64>,
}

fn now() -> f64 {
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

fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<FileSum> {
    let mut file = File::create(path)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    Ok(FileSum { len: bytes.len() as u64, crc32c: crc32c::crc32c(bytes) })
}

/// Write `content` as the complete checkpoint `root/name`, replacing one of that name only once
/// the new one is complete.
fn write_dir(root: &Path, name: &str, content: &Content) -> std::io::Result<PathBuf> {
    let dir = root.join(name);
    let tmp = root.join(format!("{name}.tmp"));
    if tmp.exists() {
        fs::remove_dir_all(&tmp)?;
    }
    let result = (|| {
        fs::create_dir_all(&tmp)?;
        let trainer = serde_json::to_vec_pretty(&content.trainer).map_err(std::io::Error::other)?;
        let monitors = serde_json::to_vec(&content.monitors).map_err(std::io::Error::other)?;
        let mut files = std::collections::BTreeMap::new();
        for (file, bytes) in FILES.iter().zip([&content.model[..], &content.optimizer, &trainer, &monitors]) {
            files.insert(file.to_string(), write_synced(&tmp.join(file), bytes)?);
        }
        let mut manifest = Manifest {
            format: FORMAT_VERSION,
            epoch_num: content.epoch_num,
            global_step: content.global_step,
            time: now(),
            files,
            checksum: None,
        };
        manifest.checksum = Some(manifest.own_checksum());
        let manifest = serde_json::to_vec_pretty(&manifest).map_err(std::io::Error::other)?;
        write_synced(&tmp.join(MANIFEST_FILE), &manifest)?;
        sync_dir(&tmp)?;
        if dir.exists() {
            // Set the old one aside first: a rename cannot replace a non-empty directory.
            let old = root.join(format!("{name}.old"));
            if old.exists() {
                fs::remove_dir_all(&old)?;
            }
            fs::rename(&dir, &old)?;
            fs::rename(&tmp, &dir)?;
            sync_dir(root)?;
            remove_checkpoint(&old)?;
        } else {
            fs::rename(&tmp, &dir)?;
        }
        sync_dir(root)
    })();
    if result.is_err() {
        // A full disk must not stay full of a half-written checkpoint.
        let _ = fs::remove_dir_all(&tmp);
    }
    result.map(|()| dir)
}

/// Clean what a crash in the middle of a write left behind: half-written `X.tmp` and
/// half-removed `X.deleting` folders go; an `X.old` (set aside while `X` was replaced) goes when
/// `X` is complete, and is put back as `X` when `X` is missing.
fn remove_leftovers(root: &Path) {
    let Ok(entries) = fs::read_dir(root) else { return };
    for entry in entries.flatten() {
        let Some(name) = entry.file_name().to_str().map(str::to_string) else { continue };
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        if name.ends_with(".tmp") || name.ends_with(".deleting") {
            let _ = fs::remove_dir_all(entry.path());
        } else if let Some(base) = name.strip_suffix(".old") {
            let target = root.join(base);
            if target.exists() {
                let _ = fs::remove_dir_all(entry.path());
            } else {
                let _ = fs::rename(entry.path(), &target);
            }
        }
    }
}

/// Remove a checkpoint folder so that a crash midway cannot leave a folder that looks like a
/// checkpoint: it is renamed `X.deleting` first.
fn remove_checkpoint(path: &Path) -> std::io::Result<()> {
    let mut doomed = path.as_os_str().to_os_string();
    doomed.push(".deleting");
    let doomed = PathBuf::from(doomed);
    fs::rename(path, &doomed)?;
    fs::remove_dir_all(&doomed)
}

fn read_index(root: &Path) -> Option<Index> {
    let bytes = fs::read(root.join(INDEX_FILE)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Write `content` as checkpoint `step-<global_step>` in `root`, name it in the index, and remove
/// the checkpoints `policy` does not keep. Returns the checkpoint's directory.
pub(crate) fn write(root: &Path, content: &Content, policy: &KeepPolicy) -> Result<PathBuf> {
    let name = checkpoint_name(content.global_step);
    let fail = |what: &str, path: &Path, e: std::io::Error| {
        Error::Checkpoint(format!(
            "writing checkpoint {name} failed ({what} {}: {e}); the checkpoints written before are intact",
            path.display()
        ))
    };
    fs::create_dir_all(root).map_err(|e| fail("creating", root, e))?;
    remove_leftovers(root);
    let dir = write_dir(root, &name, content).map_err(|e| fail("writing into", root, e))?;

    let present = list(root).map_err(|e| fail("listing", root, e))?;
    let written_at = |name: &str| read_manifest(&root.join(name)).map_or(0.0, |m| m.time);
    let mut index = read_index(root).unwrap_or_default();
    // The checkpoints kept forever carry a mark of their own: the index may be lost.
    index.kept_forever =
        present.iter().map(|(_, n)| n.clone()).filter(|n| root.join(n).join(KEEP_FILE).exists()).collect();
    if index.anchor_time.is_none() {
        index.anchor_time = match index.kept_forever.last() {
            Some(kept) => Some(written_at(kept)),
            None => present.first().map(|(_, first)| written_at(first)),
        };
    }
    let recent_from = present.len().saturating_sub(policy.max_to_keep.max(1));
    let mut remove = Vec::new();
    for (position, (_, old)) in present.iter().enumerate() {
        if position >= recent_from || index.kept_forever.contains(old) {
            continue;
        }
        if let (Some(hours), Some(anchor)) = (policy.keep_every_n_hours, index.anchor_time) {
            let written = written_at(old);
            if written >= anchor + hours * 3600.0 {
                let mark = root.join(old).join(KEEP_FILE);
                write_synced(&mark, b"").map_err(|e| fail("marking", &mark, e))?;
                index.kept_forever.push(old.clone());
                index.anchor_time = Some(written);
                continue;
            }
        }
        remove.push(old.clone());
    }
    index.latest = name.clone();
    index.checkpoints = present.into_iter().map(|(_, n)| n).filter(|n| !remove.contains(n)).collect();
    let index_path = root.join(INDEX_FILE);
    let text = serde_json::to_vec_pretty(&index).map_err(|e| Error::Checkpoint(e.to_string()))?;
    write_atomic(&index_path, &text).map_err(|e| {
        Error::Checkpoint(format!(
            "checkpoint {name} is complete, but updating {} failed: {e}; resume finds {name} all the same",
            index_path.display()
        ))
    })?;
    for old in remove {
        let path = root.join(&old);
        remove_checkpoint(&path).map_err(|e| fail("removing the old checkpoint", &path, e))?;
    }
    Ok(dir)
}

/// Write `content` as the checkpoint copy `root/name` (MinSaver's `min-<statistic>`), replacing
/// the previous copy only once the new one is complete.
pub(crate) fn write_copy(root: &Path, name: &str, content: &Content) -> Result<PathBuf> {
    fs::create_dir_all(root).map_err(|e| Error::io(root, e))?;
    remove_leftovers(root);
    write_dir(root, name, content).map_err(|e| {
        Error::Checkpoint(format!(
            "writing the checkpoint copy {} failed: {e}; the previous copy is intact",
            root.join(name).display()
        ))
    })
}

fn read_manifest(dir: &Path) -> Result<Manifest, String> {
    let path = dir.join(MANIFEST_FILE);
    let bytes = fs::read(&path).map_err(|e| format!("{MANIFEST_FILE}: {e}"))?;
    let manifest: Manifest =
        serde_json::from_slice(&bytes).map_err(|e| format!("{MANIFEST_FILE} is malformed: {e}"))?;
    match manifest.checksum {
        Some(sum) if sum == manifest.own_checksum() => Ok(manifest),
        Some(_) => Err(format!("{MANIFEST_FILE} fails its own checksum")),
        None => Err(format!("{MANIFEST_FILE} has no checksum")),
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
    /// truncated or altered file is an error naming the checkpoint and the file.
    pub fn read(dir: impl AsRef<Path>) -> Result<Checkpoint> {
        let dir = dir.as_ref();
        let corrupt = |why: String| {
            Error::Checkpoint(format!("checkpoint {} is incomplete or corrupt: {why}", dir.display()))
        };
        let manifest = read_manifest(dir).map_err(corrupt)?;
        if manifest.format != FORMAT_VERSION {
            return Err(Error::Checkpoint(format!(
                "checkpoint {} has format {}, this version of stoker reads format {FORMAT_VERSION}",
                dir.display(),
                manifest.format
            )));
        }
        let mut contents = Vec::with_capacity(FILES.len());
        for file in FILES {
            let sum = manifest
                .files
                .get(file)
                .ok_or_else(|| corrupt(format!("the manifest does not list {file}")))?;
            let bytes = fs::read(dir.join(file)).map_err(|e| corrupt(format!("{file}: {e}")))?;
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
        let json = |bytes: &[u8], file: &str| -> Result<Json> {
            serde_json::from_slice(bytes).map_err(|e| corrupt(format!("{file} is malformed: {e}")))
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
    /// a checkpoint itself. A checkpoint that fails verification is reported on stderr and the one
    /// before it is tried. `Ok(None)` when there is no checkpoint at all; an error when every
    /// checkpoint there is corrupt.
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
        if path.join(MANIFEST_FILE).exists() {
            return Checkpoint::read(path).map(Some);
        }
        let root =
            if path.join(CHECKPOINT_DIR).is_dir() { path.join(CHECKPOINT_DIR) } else { path.to_path_buf() };
        let present = list(&root).map_err(|e| Error::io(&root, e))?;
        let mut failures = Vec::new();
        for (_, name) in present.iter().rev() {
            match Checkpoint::read(root.join(name)) {
                Ok(checkpoint) => {
                    for failure in &failures {
                        eprintln!(
                            "stoker: warning: {failure}; resuming from the checkpoint before it, {name}"
                        );
                    }
                    return Ok(Some(checkpoint));
                }
                Err(e) => failures.push(e.to_string()),
            }
        }
        if failures.is_empty() {
            Ok(None)
        } else {
            Err(Error::Checkpoint(format!(
                "no complete checkpoint in {}: {}",
                root.display(),
                failures.join("; ")
            )))
        }
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
/// one makes them stale): each is renamed `<name>.abandoned`, nothing is deleted.
pub(crate) fn abandon_newer(root: &Path, global_step: u64) -> Result<()> {
    for (step, name) in list(root).map_err(|e| Error::io(root, e))? {
        if step > global_step {
            let from = root.join(&name);
            let to = root.join(format!("{name}.abandoned"));
            if to.exists() {
                fs::remove_dir_all(&to).map_err(|e| Error::io(&to, e))?;
            }
            eprintln!(
                "stoker: warning: {} is newer than the checkpoint this run resumes from; moved it to {}",
                from.display(),
                to.display()
            );
            fs::rename(&from, &to).map_err(|e| Error::io(&from, e))?;
        }
    }
    sync_dir(root).map_err(|e| Error::io(root, e))
}
