//! `stats.json` in tensorpack's layout: a list of objects, one per epoch, each holding the scalars
//! put during that epoch plus `epoch_num` and `global_step`.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value as Json};

use super::{EpochStats, MonitorSink, Record};
use crate::callback::Context;
use crate::error::{Error, Result, io_error_at};
use crate::state::write_atomic;

/// The file name, as tensorpack names it.
pub const STATS_FILE: &str = "stats.json";

/// Writes every scalar to `stats.json` in the log directory at the end of each epoch, atomically
/// (a temporary file, synced, then renamed). On by default.
///
/// A resumed run rewrites `stats.json` from the checkpoint it resumed from (the epochs a crashed
/// run logged after its last complete checkpoint go, after a backup of the file to
/// `stats.json.bak-<unix seconds>`), then appends, so that it ends equal to the file of a run
/// that was never interrupted. Otherwise an existing `stats.json` whose last `epoch_num` is the
/// epoch before the run's starting epoch is appended to, and any other existing file is moved
/// aside to `stats.json.bak-<unix seconds>` with a warning, as tensorpack does.
#[derive(Debug, Default)]
pub struct JsonWriter;

#[crate::callback]
impl JsonWriter {
    #[on(setup)]
    fn open<M>(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let starting_epoch = ctx.counters().starting_epoch();
        let monitors = ctx.monitors_ref();
        let restored = monitors.is_resumed().then(|| monitors.epoch_stats().iter().map(entry).collect());
        let sink = JsonSink::open(ctx.log_dir(), starting_epoch, restored)?;
        ctx.monitors().add_sink(sink);
        Ok(())
    }
}

/// One line of `stats.json`.
fn entry(stats: &EpochStats) -> Json {
    let mut entry: Map<String, Json> =
        stats.scalars.iter().map(|(k, &v)| (k.clone(), Json::from(v))).collect();
    entry.insert("epoch_num".into(), Json::from(stats.epoch_num));
    entry.insert("global_step".into(), Json::from(stats.global_step));
    Json::Object(entry)
}

/// The writer behind [`JsonWriter`].
#[derive(Debug)]
pub struct JsonSink {
    path: PathBuf,
    stats: Vec<Json>,
}

impl JsonSink {
    /// Open `dir/stats.json` for a run starting at `starting_epoch`; a resumed run gives the
    /// lines its checkpoint holds (see [`JsonWriter`]).
    pub fn open(dir: &Path, starting_epoch: u64, restored: Option<Vec<Json>>) -> Result<JsonSink> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let path = dir.join(STATS_FILE);
        let existing = match std::fs::read(&path) {
            Ok(bytes) => Some(serde_json::from_slice::<Vec<Json>>(&bytes).ok()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(Error::io(&path, e)),
        };
        let last_epoch = |s: &[Json]| s.last().and_then(|e| e.get("epoch_num")).and_then(Json::as_u64);
        let (stats, backup_because) = match (existing, restored) {
            (None, restored) => (restored.unwrap_or_default(), None),
            (Some(Some(existing)), Some(restored)) if existing == restored => (restored, None),
            (Some(_), Some(restored)) => {
                (restored, Some("differs from the checkpoint this run resumes from".to_string()))
            }
            (Some(Some(existing)), None) if last_epoch(&existing).map(|e| e + 1) == Some(starting_epoch) => {
                (existing, None)
            }
            (Some(Some(existing)), None) if existing.is_empty() && starting_epoch <= 1 => (existing, None),
            (Some(_), None) => (
                Vec::new(),
                Some(format!(
                    "does not end at epoch {} (the epoch before this run's first)",
                    starting_epoch.saturating_sub(1)
                )),
            ),
        };
        if let Some(reason) = backup_because {
            let seconds =
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
            let backup = dir.join(format!("{STATS_FILE}.bak-{seconds}"));
            eprintln!("stoker: {} {reason}; moved it to {}", path.display(), backup.display());
            std::fs::rename(&path, &backup).map_err(|e| Error::io(&path, e))?;
        }
        let sink = JsonSink { path, stats };
        // Prove the directory is writable now, before any step runs.
        sink.write_file().map_err(|e| Error::io(&sink.path, e))?;
        Ok(sink)
    }

    fn write_file(&self) -> std::io::Result<()> {
        let text = serde_json::to_vec_pretty(&self.stats).map_err(std::io::Error::other)?;
        write_atomic(&self.path, &text)
    }
}

impl MonitorSink for JsonSink {
    fn name(&self) -> &str {
        "stats.json"
    }

    fn write(&mut self, _records: &[Record]) -> std::io::Result<()> {
        Ok(())
    }

    fn end_epoch(&mut self, stats: &EpochStats) -> std::io::Result<()> {
        self.stats.push(entry(stats));
        // The error names the file (a writer's failure is reported with its error alone).
        self.write_file().map_err(|e| io_error_at(&self.path, e))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
