//! neon's `output_file`: the monitors' whole history of scalars in one file a user loads without
//! stoker.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{EpochStats, MonitorSink, Record, Value};
use crate::callback::Context;
use crate::error::{Error, Result, io_error_at};
use crate::state::{json_f64, write_atomic};

/// The default file name, in the log directory.
pub const HISTORY_FILE: &str = "history.jsonl";

/// Saves every scalar put during training, with its global step and epoch, in one file: neon's
/// `output_file` of callback data (`Callbacks(model, output_file="data.h5")`), which holds every
/// value neon's callbacks recorded.
///
/// The file (`history.jsonl` in the log directory by default) is JSON lines, one object per
/// value put, in the order training put them (by global step, then epoch, then name; a scalar
/// put twice at one step keeps its order):
///
/// ```text
/// {"name":"cost","global_step":3,"epoch_num":1,"value":0.25}
/// ```
///
/// Python reads it with `[json.loads(line) for line in open(path)]` or pandas with
/// `pandas.read_json(path, lines=True)`. Values are exact (an `f64` in its shortest form that
/// reads back to the same number); NaN and the infinities, which JSON has no number for, are the
/// strings `"NaN"`, `"inf"` and `"-inf"`. Images, histograms and texts are not in it.
///
/// Differs from neon: neon writes HDF5 (one dataset per series, indexed by minibatch or epoch,
/// with `time_markers`); stoker has no HDF5 writer (the `hdf5` crate needs the C library), and
/// its numpy writer stores float32, which would round global steps and values: JSON lines
/// hold every value exactly, with its own step and epoch, and need nothing to read.
///
/// The file is replaced atomically (a temporary file, synced, then renamed) when the writer
/// starts, at each epoch's end and at the end of training, on the writer's thread: a crash
/// leaves the file of the last epoch's end whole. A resumed run starts the file from the history
/// in its checkpoint, so that it ends equal to the file of a run that was never interrupted.
///
/// ```
/// use burn_stoker::monitor::HistoryWriter;
///
/// // neon's `-o data.h5`: the history in `data.jsonl` in the log directory.
/// let history = HistoryWriter::new().file("data.jsonl");
/// # let _ = history;
/// ```
#[derive(Debug, Clone)]
pub struct HistoryWriter {
    file: PathBuf,
}

impl Default for HistoryWriter {
    fn default() -> Self {
        HistoryWriter::new()
    }
}

impl HistoryWriter {
    /// `history.jsonl` in the log directory.
    pub fn new() -> Self {
        HistoryWriter { file: PathBuf::from(HISTORY_FILE) }
    }

    /// Write to this file instead: relative to the log directory, or absolute.
    pub fn file(mut self, file: impl Into<PathBuf>) -> Self {
        self.file = file.into();
        self
    }
}

#[crate::callback]
impl HistoryWriter {
    #[on(setup)]
    fn open<M>(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let path = ctx.log_dir().join(&self.file);
        // What was put before (restored from a checkpoint, or put by a callback set up earlier
        // whose record was sent already); what is still waiting reaches the writer.
        let earlier = ctx.monitors_ref().published_scalars();
        let sink = HistorySink::create(&path, earlier)?;
        ctx.monitors().add_sink(sink);
        Ok(())
    }
}

/// One value put.
#[derive(Debug, Clone)]
struct Entry {
    name: Arc<str>,
    global_step: u64,
    epoch_num: u64,
    value: f64,
}

/// The writer behind [`HistoryWriter`].
#[derive(Debug)]
struct HistorySink {
    path: PathBuf,
    entries: Vec<Entry>,
    /// Values arrived since the file was last written.
    dirty: bool,
}

impl HistorySink {
    /// Start `path` (its directory created if missing) with `earlier` values, `(name,
    /// global_step, epoch_num, value)`, and write it once, so that a file that cannot be written
    /// is an error before any step runs.
    fn create(path: &Path, earlier: Vec<(Arc<str>, u64, u64, f64)>) -> Result<HistorySink> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        }
        let entries = earlier
            .into_iter()
            .map(|(name, global_step, epoch_num, value)| Entry { name, global_step, epoch_num, value })
            .collect();
        let mut sink = HistorySink { path: path.to_path_buf(), entries, dirty: true };
        sink.write_file().map_err(|e| Error::io(path, e))?;
        Ok(sink)
    }

    fn write_file(&mut self) -> std::io::Result<()> {
        if !std::mem::take(&mut self.dirty) {
            return Ok(());
        }
        // Training's order: by step, then epoch (what before_epoch puts comes after the previous
        // epoch's end, at the same step), then name; a stable sort keeps one scalar's order.
        self.entries.sort_by(|a, b| {
            (a.global_step, a.epoch_num, &a.name).cmp(&(b.global_step, b.epoch_num, &b.name))
        });
        let mut text = Vec::with_capacity(self.entries.len() * 64);
        for e in &self.entries {
            let line = serde_json::json!({
                "name": &*e.name,
                "global_step": e.global_step,
                "epoch_num": e.epoch_num,
                "value": json_f64(e.value),
            });
            serde_json::to_writer(&mut text, &line).map_err(std::io::Error::other)?;
            text.push(b'\n');
        }
        write_atomic(&self.path, &text)
    }
}

impl MonitorSink for HistorySink {
    fn name(&self) -> &str {
        "history"
    }

    fn write(&mut self, records: &[Record]) -> std::io::Result<()> {
        for record in records {
            if let Value::Scalar(value) = record.value {
                self.entries.push(Entry {
                    name: record.name.clone(),
                    global_step: record.global_step,
                    epoch_num: record.epoch_num,
                    value,
                });
                self.dirty = true;
            }
        }
        Ok(())
    }

    fn end_epoch(&mut self, _stats: &EpochStats) -> std::io::Result<()> {
        // The error names the file (a writer's failure is reported with its error alone).
        self.write_file().map_err(|e| io_error_at(&self.path, e))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }

    fn close(&mut self) -> std::io::Result<()> {
        self.write_file().map_err(|e| io_error_at(&self.path, e))
    }
}
