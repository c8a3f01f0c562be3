//! The checkpoint format's names and version, and what the trainer hands over to be written.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value as Json;

/// The folder of checkpoints inside the log directory.
pub const CHECKPOINT_DIR: &str = crate::state::CHECKPOINTS;
/// The index naming the latest complete checkpoint, inside [`CHECKPOINT_DIR`].
pub const INDEX_FILE: &str = "index.json";
/// The model's file inside a checkpoint (burnpack, loadable by plain burn with
/// `Module::load_file`).
pub const MODEL_FILE: &str = "model.bpk";
/// The optimizer's file inside a checkpoint (burnpack, `ModuleOptimizer::load`).
pub const OPTIMIZER_FILE: &str = "optimizer.bpk";
/// Counters, data position, hyper-parameters and callbacks' states inside a checkpoint.
pub const TRAINER_FILE: &str = crate::state::TRAINER;
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
pub(super) const OLDEST_FORMAT: u64 = 1;

pub(super) const FILES: [&str; 4] = [MODEL_FILE, OPTIMIZER_FILE, TRAINER_FILE, MONITORS_FILE];

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
    /// The run that writes it (the manifest's and the index's `run`): a fresh run's own, or the
    /// one of the checkpoint a resumed run continues.
    pub(crate) run: String,
}

/// The system's time, in seconds since the Unix epoch.
pub(crate) fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// A new run's id: the time in nanoseconds and the process id, in hexadecimal; unique to a run
/// started on this machine (two runs of one process start at different nanoseconds).
pub(crate) fn new_run_id() -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    format!("{nanos:x}-{:x}", std::process::id())
}

/// Whether `run` is a run id a checkpoint may carry: what [`new_run_id`] makes, and any other
/// name of 1 to 64 ASCII letters, digits, `-` and `_` (a file name's part, never a path).
pub(crate) fn is_run_id(run: &str) -> bool {
    (1..=64).contains(&run.len()) && run.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The name of the checkpoint at `global_step`.
pub(super) fn checkpoint_name(global_step: u64) -> String {
    format!("step-{global_step}")
}
