//! Reading a checkpoint back, every file verified against its manifest.

use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use super::format::{
    CHECKPOINT_DIR, FILES, FORMAT_VERSION, MANIFEST_FILE, MONITORS_FILE, OLDEST_FORMAT, TRAINER_FILE,
};
use super::listing::{list_readable, occupied, old_of};
use super::manifest::Manifest;
use crate::error::{BoxError, CheckpointError, Error, Result};
use crate::state::{LengthRead, MAX_INDEX_BYTES, read_bounded, read_exact_len};

/// Why a checkpoint could not be read.
pub(super) enum Unreadable {
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
            Unreadable::Corrupt { reason, source } => CheckpointError::Damaged {
                message: format!("checkpoint {} is incomplete or corrupt: {reason}", dir.display()),
                source,
            }
            .into(),
            Unreadable::Error(error) => error,
        }
    }
}

/// The bytes of `dir/file`, read only when it is a regular file of at most `len` bytes (`bound`)
/// or of exactly `len` bytes (the manifest's length): a missing file, a FIFO, a device or a file
/// of another length makes the checkpoint damaged, found before it is read; any other error is
/// not a sign of damage.
fn read_file(dir: &Path, file: &str, len: u64, bound: bool) -> Result<Vec<u8>, Unreadable> {
    let path = dir.join(file);
    let read =
        if bound { read_bounded(&path, len).map_err(LengthRead::Io) } else { read_exact_len(&path, len) };
    read.map_err(|e| match e {
        LengthRead::Length(size) => {
            Unreadable::corrupt(format!("{file} is {size} bytes long, the manifest says {len}"))
        }
        LengthRead::Io(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound
                    | std::io::ErrorKind::InvalidInput
                    | std::io::ErrorKind::FileTooLarge
            ) =>
        {
            Unreadable::corrupt_from(format!("{file}: {e}"), e)
        }
        LengthRead::Io(source) => Unreadable::Error(CheckpointError::Read { path, source }.into()),
    })
}

pub(super) fn read_manifest(dir: &Path) -> Result<Manifest, Unreadable> {
    let bytes = read_file(dir, MANIFEST_FILE, MAX_INDEX_BYTES, true)?;
    let manifest: Manifest = serde_json::from_slice(&bytes)
        .map_err(|e| Unreadable::corrupt_from(format!("{MANIFEST_FILE} is malformed: {e}"), e))?;
    if !(OLDEST_FORMAT..=FORMAT_VERSION).contains(&manifest.format) {
        return Err(Unreadable::Error(
            CheckpointError::Format {
                dir: dir.to_path_buf(),
                format: manifest.format,
                oldest: OLDEST_FORMAT,
                newest: FORMAT_VERSION,
            }
            .into(),
        ));
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
    run: Option<String>,
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
        if let Some(run) = manifest.run.as_deref().filter(|run| !super::format::is_run_id(run)) {
            // It names the run's journals (`history/monitors-<run>.jsonl`): a crafted one such as
            // `x/../../data/train` would reach any `.jsonl` file the user can write.
            return Err(corrupt(format!(
                "the manifest's run id {run:?} is not one stoker writes (1 to 64 letters, digits, `-` or `_`)"
            )));
        }
        let mut contents = Vec::with_capacity(FILES.len());
        for file in FILES {
            let sum = manifest
                .files
                .get(file)
                .ok_or_else(|| corrupt(format!("the manifest does not list {file}")))?;
            // Its length is checked before it is read: a sparse terabyte is refused at once.
            let bytes = read_file(dir, file, sum.len, false)?;
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
            run: manifest.run,
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
    /// folder, not by reading [`INDEX_FILE`](super::INDEX_FILE). The index is the writer's bookkeeping for keep-N
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
        Err(CheckpointError::Damaged { message, source: Some(Box::new(failures.swap_remove(0))) }.into())
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
    /// The run that wrote it, as its manifest records (`None` for a checkpoint written before
    /// runs were recorded). A resumed run continues this run: its checkpoints carry the same.
    pub fn run(&self) -> Option<&str> {
        self.run.as_deref()
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
