//! `stats.json` in tensorpack's layout: a list of objects, one at every step where scalars were
//! put and at each epoch's end, each holding the scalars put since the previous one plus
//! `epoch_num` and `global_step`.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value as Json};

use super::{MonitorSink, Record};
use crate::callback::Context;
use crate::error::{Error, Result, io_error_at};
use crate::state::StatsRow;
use list::ListFile;

mod list;

/// The file name, as tensorpack names it.
pub const STATS_FILE: &str = "stats.json";

/// Writes every scalar to `stats.json` in the log directory, in tensorpack's layout (its
/// `JSONWriter`), appended to in place. On by default.
///
/// The file is a JSON list of rows ([`StatsRow`](crate::state::StatsRow)), each the last value of
/// every scalar put since the previous row plus `epoch_num` and `global_step`: a row after
/// `before_train` (at the epoch before the run's first), one after the callbacks' `trigger_step`
/// at every step where scalars were put (the scalars of an epoch's last step join the next row),
/// one after `trigger_epoch`, so that a callback putting a scalar every 100 steps finds every
/// value in the file. A step where nothing was put makes no row. What `after_train` puts joins the
/// row of the global step it is put at (tensorpack's `JSONWriter` writes it nowhere): the file
/// stays grouped by global step.
///
/// **Writing.** The file is a JSON list with a row on each line. Each time the writer's thread
/// has caught up (off the step's path), the rows that arrived are written over the list's
/// closing `]`, followed by a new `]`, in one write and one sync: a catch-up costs its own rows,
/// whatever the file's size (a row joined by a later one, what `after_train` puts, is written
/// again alone). Between catch-ups the file is a whole JSON list that `json.load` reads. A crash
/// (of the machine) in the middle of a write can leave the list without its end; the next run in
/// the log directory repairs it: a resumed run cuts it back to the checkpoint's rows, and another
/// run moves it aside (below).
///
/// **Resuming.** A resumed run makes the file hold the rows of the checkpoint it resumes from,
/// in place: the rows the file shares with the checkpoint stay where they are, the rows a crashed
/// run logged after its last complete checkpoint (and a row cut short) are cut off, after the
/// complete ones are copied to `stats.json.bak-<unix seconds>` (a JSON list of them), and the
/// checkpoint's rows the file lacks are appended; then the run appends, so that the file ends
/// equal to the file of a run that was never interrupted (tensorpack instead keeps the file when
/// its last row's epoch precedes the resumed epoch, and moves it aside otherwise). The file is
/// read a row at a time, so a resume takes a file of any size. Otherwise an existing `stats.json` whose last `epoch_num` is the
/// epoch before the run's starting epoch is appended to, and any other existing file (one that
/// is no whole list included) is moved aside to `stats.json.bak-<unix seconds>` with a message,
/// as tensorpack does (`-2`, `-3`... appended to a backup's name when a backup made the same
/// second holds it: none is overwritten). As every file of the log directory, `stats.json` is
/// written only when it is a regular file of this user's with one name: a symlink, a FIFO or
/// another user's file there is an error at setup that says so.
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
struct JsonSink {
    path: PathBuf,
    list: ListFile,
    /// The file's last row, as written: a row made at the same moment joins it.
    last: Option<Json>,
    /// Rows not written yet; with `rewrite_last`, the first is `last` with rows joined to it,
    /// written over it.
    pending: Vec<Json>,
    rewrite_last: bool,
}

impl JsonSink {
    /// Open `dir/stats.json` for a run starting at `starting_epoch`; a resumed run gives the
    /// rows its checkpoint holds (see [`JsonWriter`]).
    fn open(dir: &Path, starting_epoch: u64, restored: Option<Vec<Json>>) -> Result<JsonSink> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let path = dir.join(STATS_FILE);
        let at = |e| Error::io(&path, e);
        // A regular file of this user's only: a FIFO, a device or a symlink there is an error at
        // once, with nothing read or written.
        let existing = list::open_existing(&path).map_err(at)?;
        let (list, last) = match (existing, restored) {
            (Some(file), Some(restored)) => Self::resume(&path, file, restored).map_err(at)?,
            (Some(file), None) => Self::go_on(&path, file, starting_epoch).map_err(at)?,
            (None, restored) => {
                let rows = restored.unwrap_or_default();
                (ListFile::create(&path, &render(&rows).map_err(at)?).map_err(at)?, rows.last().cloned())
            }
        };
        Ok(JsonSink { path, list, last, pending: Vec::new(), rewrite_last: false })
    }

    /// The file a resumed run finds, made to hold the checkpoint's rows (`restored`).
    fn resume(
        path: &Path,
        file: std::fs::File,
        restored: Vec<Json>,
    ) -> std::io::Result<(ListFile, Option<Json>)> {
        let (list, resumed) = list::resume(path, file, &render(&restored)?)?;
        let shown = path.display();
        if let Some(moved) = resumed.moved {
            crate::logging::warn!(
                "{shown} held no JSON list; moved it to {} and started it anew",
                moved.display()
            );
        }
        if let Some((rows, kept)) = resumed.dropped {
            crate::logging::info!(
                "{shown}: {rows} rows logged after the checkpoint this run resumes from were cut off; they are in {}",
                kept.display()
            );
        }
        if resumed.torn {
            crate::logging::info!("{shown} ended in a row cut short (a crash during a write): cut off");
        }
        Ok((list, restored.last().cloned()))
    }

    /// The file a run that is not resumed finds: continued when it ends at the epoch before the
    /// run's first (or is empty and the run starts at its first epoch), moved aside otherwise.
    fn go_on(
        path: &Path,
        file: std::fs::File,
        starting_epoch: u64,
    ) -> std::io::Result<(ListFile, Option<Json>)> {
        let reason = match list::continue_list(file)? {
            None => "is not a whole JSON list (a write cut short by a crash?)".to_string(),
            Some((list, last)) => {
                let last: Option<Json> = last.and_then(|row| serde_json::from_slice(&row).ok());
                let last_epoch = last.as_ref().and_then(|e| e.get("epoch_num")).and_then(Json::as_u64);
                match last_epoch {
                    Some(epoch) if epoch.checked_add(1) == Some(starting_epoch) => return Ok((list, last)),
                    None if last.is_none() && starting_epoch <= 1 => return Ok((list, None)),
                    _ => format!(
                        "does not end at epoch {} (the epoch before this run's first)",
                        starting_epoch.saturating_sub(1)
                    ),
                }
            }
        };
        let backup = crate::state::move_aside(path)?;
        crate::logging::info!("{} {reason}; moved it to {}", path.display(), backup.display());
        Ok((ListFile::create(path, &[])?, None))
    }

    /// The bytes written into the file so far (what a catch-up costs).
    #[cfg(test)]
    fn written(&self) -> u64 {
        self.list.written()
    }
}

/// Each row as it is written: compact, on one line.
fn render(rows: &[Json]) -> std::io::Result<Vec<Vec<u8>>> {
    rows.iter().map(|row| serde_json::to_vec(row).map_err(std::io::Error::other)).collect()
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
        let same = |e: &Json| {
            at(e, "epoch_num") == Some(row.epoch_num) && at(e, "global_step") == Some(row.global_step)
        };
        if self.pending.is_empty() && self.last.as_ref().is_some_and(same) {
            // The row joins the one the file ends with, which is written again.
            self.pending.extend(self.last.take());
            self.rewrite_last = true;
        }
        let joins = self.pending.last().is_some_and(same);
        match self.pending.last_mut() {
            Some(Json::Object(last)) if joins => {
                last.extend(row.scalars.iter().map(|(k, &v)| (k.clone(), Json::from(v))));
            }
            _ => self.pending.push(entry(row)),
        }
        Ok(())
    }

    /// Append the rows that arrived since the last catch-up (one write, one sync).
    fn flush(&mut self) -> std::io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let rows = render(&self.pending)?;
        // The error names the file (a writer's failure is reported with its error alone).
        self.list.append(&rows, self.rewrite_last).map_err(|e| io_error_at(&self.path, e))?;
        self.last = self.pending.pop();
        self.pending.clear();
        self.rewrite_last = false;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
