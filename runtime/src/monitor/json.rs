//! `stats.json` in tensorpack's layout: a list of objects, one per epoch, each holding the scalars
//! put during that epoch plus `epoch_num` and `global_step`.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value as Json};

use super::{MonitorSink, Record, Value};
use crate::callback::Context;
use crate::error::{Error, Result};
use crate::saver::write_atomic;

/// The file name, as tensorpack names it.
pub const STATS_FILE: &str = "stats.json";

/// Writes every scalar to `stats.json` in the log directory at the end of each epoch, atomically
/// (a temporary file, synced, then renamed). On by default.
///
/// An existing `stats.json` whose last `epoch_num` is the epoch before the run's starting epoch is
/// appended to (a resumed run); any other existing file is moved aside to
/// `stats.json.bak-<unix seconds>` with a warning, as tensorpack does.
#[derive(Debug, Default)]
pub struct JsonWriter;

#[crate::callback]
impl JsonWriter {
    #[on(setup)]
    fn open<M>(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let starting_epoch = ctx.counters().starting_epoch();
        let sink = JsonSink::open(ctx.log_dir(), starting_epoch)?;
        ctx.monitors().add_sink(sink);
        Ok(())
    }
}

/// The writer behind [`JsonWriter`].
#[derive(Debug)]
pub struct JsonSink {
    path: PathBuf,
    stats: Vec<Json>,
    current: Map<String, Json>,
    last_stamp: (u64, u64),
}

impl JsonSink {
    /// Open `dir/stats.json` for a run starting at `starting_epoch` (see [`JsonWriter`]).
    pub fn open(dir: &Path, starting_epoch: u64) -> Result<JsonSink> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let path = dir.join(STATS_FILE);
        let mut stats = Vec::new();
        match std::fs::read(&path) {
            Ok(bytes) => {
                let parsed: Option<Vec<Json>> = serde_json::from_slice(&bytes).ok();
                let last_epoch = parsed
                    .as_ref()
                    .and_then(|s| s.last())
                    .and_then(|e| e.get("epoch_num"))
                    .and_then(Json::as_u64);
                match (parsed, last_epoch) {
                    (Some(existing), Some(last)) if last + 1 == starting_epoch => stats = existing,
                    (Some(existing), None) if existing.is_empty() && starting_epoch <= 1 => {}
                    _ => {
                        let seconds = std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map_or(0, |d| d.as_secs());
                        let backup = dir.join(format!("{STATS_FILE}.bak-{seconds}"));
                        eprintln!(
                            "stoker: {} does not end at epoch {} (the epoch before this run's first); moved it to {}",
                            path.display(),
                            starting_epoch.saturating_sub(1),
                            backup.display()
                        );
                        std::fs::rename(&path, &backup).map_err(|e| Error::io(&path, e))?;
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(&path, e)),
        }
        let sink = JsonSink { path, stats, current: Map::new(), last_stamp: (0, 0) };
        // Prove the directory is writable now, before any step runs.
        sink.write_file().map_err(|e| Error::io(&sink.path, e))?;
        Ok(sink)
    }

    fn write_file(&self) -> std::io::Result<()> {
        let text = serde_json::to_vec_pretty(&self.stats).map_err(std::io::Error::other)?;
        write_atomic(&self.path, &text)
    }

    fn push_current(&mut self, epoch_num: u64, global_step: u64) -> std::io::Result<()> {
        if self.current.is_empty() {
            return Ok(());
        }
        let mut entry = std::mem::take(&mut self.current);
        entry.insert("epoch_num".into(), Json::from(epoch_num));
        entry.insert("global_step".into(), Json::from(global_step));
        self.stats.push(Json::Object(entry));
        self.write_file()
    }
}

impl MonitorSink for JsonSink {
    fn name(&self) -> &str {
        "stats.json"
    }

    fn write(&mut self, records: &[Record]) -> std::io::Result<()> {
        for record in records {
            if let Value::Scalar(v) = record.value {
                self.current.insert(record.name.to_string(), Json::from(v));
                self.last_stamp = (record.epoch_num, record.global_step);
            }
        }
        Ok(())
    }

    fn end_epoch(&mut self, epoch_num: u64, global_step: u64) -> std::io::Result<()> {
        self.push_current(epoch_num, global_step)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }

    fn close(&mut self) -> std::io::Result<()> {
        let (epoch_num, global_step) = self.last_stamp;
        self.push_current(epoch_num, global_step)
    }
}
