//! `stats.json` in tensorpack's layout: a list of objects, one at every step where scalars were
//! put and at each epoch's end, each holding the scalars put since the previous one plus
//! `epoch_num` and `global_step`.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value as Json};

use super::{MonitorSink, Record};
use crate::callback::Context;
use crate::error::{Error, Result, io_error_at};
use crate::state::{MAX_STATS_BYTES, StatsRow, read_bounded, write_atomic};

/// The file name, as tensorpack names it.
pub const STATS_FILE: &str = "stats.json";

/// Writes every scalar to `stats.json` in the log directory, in tensorpack's layout (its
/// `JSONWriter`), atomically (a temporary file, synced, then renamed). On by default.
///
/// The file is a JSON list of rows ([`StatsRow`](crate::state::StatsRow)), each the last value of
/// every scalar put since the previous row plus `epoch_num` and `global_step`: a row after
/// `before_train` (at the epoch before the run's first), one after the callbacks' `trigger_step`
/// at every step where scalars were put (the scalars of an epoch's last step join the next row),
/// one after `trigger_epoch`, so that a callback putting a scalar every 100 steps finds every
/// value in the file. A step where nothing was put makes no row. What `after_train` puts joins the
/// row of the global step it is put at (tensorpack's `JSONWriter` writes it nowhere): the file
/// stays grouped by global step. The file is rewritten each time the writer's thread has caught
/// up, off the step's path.
///
/// A resumed run rewrites `stats.json` from the checkpoint it resumed from (the rows a crashed
/// run logged after its last complete checkpoint go, after a backup of the file to
/// `stats.json.bak-<unix seconds>`), then appends, so that it ends equal to the file of a run
/// that was never interrupted (tensorpack instead keeps the file when its last row's epoch
/// precedes the resumed epoch, and moves it aside otherwise). Otherwise an existing `stats.json` whose last `epoch_num` is the
/// epoch before the run's starting epoch is appended to, and any other existing file is moved
/// aside to `stats.json.bak-<unix seconds>` with a warning, as tensorpack does (`-2`, `-3`...
/// appended to a backup's name when a backup made the same second holds it: none is overwritten).
///
/// Reading the file back, in Python:
///
/// ```text
/// import json
/// rows = json.load(open("train_log/stats.json"))
/// costs = [(r["global_step"], r["cost"]) for r in rows if "cost" in r]
/// ```
///
/// It is one of the defaults; to turn it off (and keep the others):
///
/// ```
/// use burn_stoker::trainer::DefaultCallbacks;
///
/// let defaults = DefaultCallbacks { json: None, ..DefaultCallbacks::default() };
/// # let _ = defaults;
/// ```
#[derive(Debug, Default)]
pub struct JsonWriter;

#[crate::callback]
impl JsonWriter {
    #[on(setup)]
    fn open<M>(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let starting_epoch = ctx.counters().starting_epoch();
        let monitors = ctx.monitors_ref();
        let restored = monitors.is_resumed().then(|| monitors.stats_rows().iter().map(entry).collect());
        let sink = JsonSink::open(ctx.log_dir(), starting_epoch, restored)?;
        ctx.monitors().add_sink(sink);
        Ok(())
    }
}

/// One row of `stats.json`.
fn entry(row: &StatsRow) -> Json {
    let mut entry: Map<String, Json> = row.scalars.iter().map(|(k, &v)| (k.clone(), Json::from(v))).collect();
    entry.insert("epoch_num".into(), Json::from(row.epoch_num));
    entry.insert("global_step".into(), Json::from(row.global_step));
    Json::Object(entry)
}

/// The writer behind [`JsonWriter`].
#[derive(Debug)]
pub struct JsonSink {
    path: PathBuf,
    stats: Vec<Json>,
    /// Rows arrived since the file was last written.
    dirty: bool,
}

impl JsonSink {
    /// Open `dir/stats.json` for a run starting at `starting_epoch`; a resumed run gives the
    /// rows its checkpoint holds (see [`JsonWriter`]).
    pub fn open(dir: &Path, starting_epoch: u64, restored: Option<Vec<Json>>) -> Result<JsonSink> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let path = dir.join(STATS_FILE);
        // A regular file of a bounded size only: a FIFO or a device there is an error at once.
        let existing = match read_bounded(&path, MAX_STATS_BYTES) {
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
            let backup = crate::state::move_aside(&path).map_err(|e| Error::io(&path, e))?;
            crate::logging::info!("{} {reason}; moved it to {}", path.display(), backup.display());
        }
        let sink = JsonSink { path, stats, dirty: false };
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

    fn stats_row(&mut self, row: &StatsRow) -> std::io::Result<()> {
        let at = |e: &Json, key: &str| e.get(key).and_then(Json::as_u64);
        let same = self.stats.last().is_some_and(|last| {
            at(last, "epoch_num") == Some(row.epoch_num) && at(last, "global_step") == Some(row.global_step)
        });
        match self.stats.last_mut() {
            Some(Json::Object(last)) if same => {
                last.extend(row.scalars.iter().map(|(k, &v)| (k.clone(), Json::from(v))));
            }
            _ => self.stats.push(entry(row)),
        }
        self.dirty = true;
        Ok(())
    }

    /// Rewrite the file if rows arrived since it was last written.
    fn flush(&mut self) -> std::io::Result<()> {
        if !std::mem::take(&mut self.dirty) {
            return Ok(());
        }
        // The error names the file (a writer's failure is reported with its error alone).
        self.write_file().map_err(|e| io_error_at(&self.path, e))
    }
}
