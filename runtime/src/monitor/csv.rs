//! A CSV file of the scalars, one row per epoch, as Keras's `CSVLogger` writes it.

mod table;

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use table::{EPOCH, GLOBAL_STEP, Row, Table, merge_into, read_existing, remove_reserved, warn_reserved};

use super::{EpochStats, MonitorSink, Record};
use crate::callback::{Callback, Context};
use crate::error::{Error, Result, io_error_at};
use crate::state::{open_own, write_atomic};

/// The default file name, in the log directory.
pub const CSV_FILE: &str = "stats.csv";

/// Writes the scalars of every epoch to a CSV file in the log directory (`stats.csv` by default),
/// one row per epoch, as Keras's `CSVLogger` does: the `epoch` and `global_step` columns first,
/// then one column per scalar in sorted order, the last value put during the epoch in each cell
/// (`stats.json` has a row at every step where scalars were put; this file one per epoch), an
/// empty cell where a scalar was not put. Python's `csv` module
/// and pandas read it as it is (`pandas.read_csv(path, index_col="epoch")`).
///
/// - `epoch` is stoker's 1-based `epoch_num` (Keras counts from 0); `global_step` is the step
///   count when the epoch ended (Keras has no such column; `stats.json` has it). Scalars put at
///   every step (tensorpack's step-level curves) are in the epoch's row with their last value;
///   TensorBoard and `stats.json` keep every step.
/// - Values are written in their shortest form that reads back to the same `f64` (`0.1`, `1.0`,
///   `1e-7`, `NaN`, `inf`, `-inf`); fields holding the separator, a quote or a line break (in a
///   scalar's name) are quoted as RFC 4180 says; lines end with `\n`.
/// - A scalar that first appears in a later epoch widens the header: the file is rewritten
///   atomically (a temporary file, then a rename) with the new column, earlier rows getting an
///   empty cell. Otherwise each epoch appends one line, whole or not at all: when the disk fills
///   up in the middle of it, the file is cut back to its last whole row, the error is reported,
///   and the next epoch writes the file whole again with every row.
/// - Scalars put after the last epoch ended (in `after_train`) join that epoch's row.
/// - A scalar named `epoch` or `global_step` is left out (with a warning): those columns hold the
///   counters.
/// - Resume, as [`JsonWriter`](crate::monitor::JsonWriter) does with `stats.json`: a resumed run keeps the
///   rows of the epochs before the one it resumes at, drops the rows a crashed run wrote after its
///   checkpoint, then appends. When the file's earlier rows differ from the checkpoint's history,
///   the file is moved aside to `stats.csv.bak-<unix seconds>` (`-2`, `-3`... when a backup of
///   the same second holds that name) and rewritten from the checkpoint.
///   A run that is not resumed appends to a file whose last row is the epoch before its
///   `starting_epoch` (Keras's `append=True`), and moves any other existing file aside.
///
/// ```
/// use burn_stoker::prelude::*;
/// use burn_stoker::monitor::CsvWriter;
/// // `<log dir>/stats.csv`, and a tab-separated copy beside it.
/// let callbacks = (CsvWriter::new(), CsvWriter::new().file("stats.tsv").separator('\t'));
/// # let _ = callbacks;
/// ```
#[derive(Debug, Clone)]
#[doc(alias = "CSVLogger")]
#[doc(alias = "CsvLogger")]
pub struct CsvWriter {
    file: PathBuf,
    separator: char,
}
crate::kind::kind!(CsvWriter);

impl Default for CsvWriter {
    fn default() -> Self {
        CsvWriter::new()
    }
}

impl CsvWriter {
    /// `stats.csv` in the log directory, comma-separated.
    pub fn new() -> Self {
        CsvWriter { file: PathBuf::from(CSV_FILE), separator: ',' }
    }
    /// Write to this file instead: relative to the log directory, or absolute.
    pub fn file(mut self, file: impl Into<PathBuf>) -> Self {
        self.file = file.into();
        self
    }
    /// Separate the fields with this character instead of `,`. A quote, a line break or a
    /// character outside ASCII (the `csv` crate separates with one byte) is an error at setup.
    pub fn separator(mut self, separator: char) -> Self {
        self.separator = separator;
        self
    }
}

impl<M> Callback<M> for CsvWriter {
    fn name(&self) -> Cow<'static, str> {
        if self.file == Path::new(CSV_FILE) {
            crate::kind::name_of::<Self>()
        } else {
            crate::kind::detailed::<Self>(self.file.display())
        }
    }
    fn setup(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let path = ctx.log_dir().join(&self.file);
        let starting_epoch = ctx.counters().starting_epoch();
        let monitors = ctx.monitors_ref();
        let restored = monitors.is_resumed().then(|| monitors.epoch_stats());
        let sink = CsvSink::open(&path, self.separator, starting_epoch, restored)?;
        ctx.monitors().add_sink(sink);
        Ok(())
    }
}

/// The writer behind [`CsvWriter`].
#[derive(Debug)]
struct CsvSink {
    path: PathBuf,
    separator: char,
    /// The scalar columns, sorted (`epoch` and `global_step` come first and are not listed).
    columns: Vec<String>,
    rows: Vec<Row>,
    warned_epoch: bool,
    /// A row failed to be written: the file lacks it, and is written whole at the next epoch.
    behind: bool,
}

impl CsvSink {
    /// Open the CSV file `path` for a run starting at `starting_epoch`; a resumed run gives the
    /// epochs its checkpoint holds (see [`CsvWriter`]). The file is written at once (so that an
    /// unwritable directory fails before any step).
    fn open(
        path: &Path,
        separator: char,
        starting_epoch: u64,
        restored: Option<&[EpochStats]>,
    ) -> Result<CsvSink> {
        if matches!(separator, '"' | '\r' | '\n') || !separator.is_ascii() {
            return Err(Error::invalid(format!(
                "CsvWriter: {separator:?} cannot separate fields (it is a quote, a line break or not ASCII)"
            )));
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        }
        let existing = read_existing(path, separator)?;
        let mut warned_epoch = false;
        let restored = restored.map(|stats| restored_rows(stats, &mut warned_epoch));
        let (rows, columns, backup_because) = reconcile(path, existing, restored, starting_epoch);
        if let Some(reason) = backup_because {
            back_up(path, &reason)?;
        }
        let mut sink =
            CsvSink { path: path.to_path_buf(), separator, columns, rows, warned_epoch, behind: false };
        sink.widen();
        sink.write_file().map_err(|e| Error::io(path, e))?;
        Ok(sink)
    }

    /// The file written.
    #[cfg(test)]
    fn path(&self) -> &Path {
        &self.path
    }

    /// Add the columns of scalars the rows hold that the header lacks; whether any was added.
    fn widen(&mut self) -> bool {
        let mut columns: BTreeSet<&str> = self.columns.iter().map(String::as_str).collect();
        let before = columns.len();
        columns.extend(self.rows.iter().flat_map(|r| r.values.keys().map(String::as_str)));
        if columns.len() == before && self.columns.windows(2).all(|w| w[0] < w[1]) {
            return false;
        }
        self.columns = columns.into_iter().map(str::to_string).collect();
        true
    }

    /// A `csv` writer into `out` with this sink's separator, lines ending with `\n`, fields
    /// quoted when they must be (RFC 4180).
    fn writer<'a>(&self, out: &'a mut Vec<u8>) -> csv::Writer<&'a mut Vec<u8>> {
        csv::WriterBuilder::new()
            .delimiter(self.separator as u8)
            .terminator(csv::Terminator::Any(b'\n'))
            .from_writer(out)
    }

    fn header(&self, out: &mut Vec<u8>) -> std::io::Result<()> {
        let mut writer = self.writer(out);
        writer
            .write_record([EPOCH, GLOBAL_STEP].into_iter().chain(self.columns.iter().map(String::as_str)))?;
        writer.flush()
    }

    fn row(&self, row: &Row, out: &mut Vec<u8>) -> std::io::Result<()> {
        let mut writer = self.writer(out);
        let cells = self.columns.iter().map(|column| {
            // Debug is the shortest text that parses back to the same f64, with an exponent
            // for very large or small values; Python's float() and pandas read every form.
            row.values.get(column).map_or_else(String::new, |v| format!("{v:?}"))
        });
        writer.write_record([row.epoch.to_string(), row.global_step.to_string()].into_iter().chain(cells))?;
        writer.flush()
    }

    fn write_file(&self) -> std::io::Result<()> {
        let mut text = Vec::new();
        self.header(&mut text)?;
        for row in &self.rows {
            self.row(row, &mut text)?;
        }
        write_atomic(&self.path, &text)
    }
}

/// The rows of the epochs a checkpoint holds, without the scalars named as the counters' columns
/// (warned of once, through `warned_epoch`).
fn restored_rows(stats: &[EpochStats], warned_epoch: &mut bool) -> Vec<Row> {
    let mut rows: Vec<Row> = Vec::new();
    for s in stats {
        merge_into(&mut rows, s);
    }
    for row in &mut rows {
        if remove_reserved(row) && !*warned_epoch {
            warn_reserved();
            *warned_epoch = true;
        }
    }
    rows
}

/// The rows and columns a run starts from, given the file already at `path` (if any, readable or
/// not) and the rows of a resumed run's checkpoint; and why the file is to be moved aside, when
/// it is (see [`CsvWriter`] on resume).
fn reconcile(
    path: &Path,
    existing: Option<std::result::Result<Table, String>>,
    restored: Option<Vec<Row>>,
    starting_epoch: u64,
) -> (Vec<Row>, Vec<String>, Option<String>) {
    match (existing, restored) {
        (None, restored) => (restored.unwrap_or_default(), Vec::new(), None),
        (Some(Ok(file)), Some(restored)) => {
            let (before, after): (Vec<Row>, Vec<Row>) =
                file.rows.into_iter().partition(|r| r.epoch < starting_epoch);
            if before == restored {
                if let (Some(first), Some(last)) = (after.first(), after.last()) {
                    crate::logging::info!(
                        "{}: dropped the rows of epochs {} to {}, logged after the checkpoint this run resumes from",
                        path.display(),
                        first.epoch,
                        last.epoch
                    );
                }
                (restored, file.columns, None)
            } else {
                (restored, Vec::new(), Some("differs from the checkpoint this run resumes from".to_string()))
            }
        }
        (Some(Err(why)), Some(restored)) => (restored, Vec::new(), Some(format!("cannot be read ({why})"))),
        (Some(Ok(file)), None)
            if file.rows.last().map(|r| r.epoch + 1) == Some(starting_epoch)
                || (file.rows.is_empty() && starting_epoch <= 1) =>
        {
            (file.rows, file.columns, None)
        }
        (Some(Ok(_)), None) => (
            Vec::new(),
            Vec::new(),
            Some(format!(
                "does not end at epoch {} (the epoch before this run's first)",
                starting_epoch.saturating_sub(1)
            )),
        ),
        (Some(Err(why)), None) => (Vec::new(), Vec::new(), Some(format!("cannot be read ({why})"))),
    }
}

/// Move the file at `path` aside to `<name>.bak-<unix seconds>` (`-2`, `-3`... when taken),
/// saying why (`reason`).
fn back_up(path: &Path, reason: &str) -> Result<()> {
    let backup = crate::state::move_aside(path).map_err(|e| Error::io(path, e))?;
    crate::logging::info!("{} {reason}; moved it to {}", path.display(), backup.display());
    Ok(())
}

/// Append `line` to `file` whole or not at all: on an error (a full disk), the file is cut back
/// to its length before, so that no row is left torn.
fn append_whole(mut file: std::fs::File, line: &[u8]) -> std::io::Result<()> {
    let before = file.metadata()?.len();
    let Err(error) = file.write_all(line) else { return Ok(()) };
    match file.set_len(before) {
        Ok(()) => Err(error),
        Err(cut) => Err(std::io::Error::new(
            error.kind(),
            format!(
                "{error}; cutting the file back to its last whole row (at byte {before}) failed too: {cut}"
            ),
        )),
    }
}

impl MonitorSink for CsvSink {
    fn name(&self) -> &str {
        "CsvWriter"
    }

    fn write(&mut self, _records: &[Record]) -> std::io::Result<()> {
        Ok(())
    }

    fn end_epoch(&mut self, stats: &EpochStats) -> std::io::Result<()> {
        let appended = merge_into(&mut self.rows, stats);
        if let Some(last) = self.rows.last_mut()
            && remove_reserved(last)
            && !self.warned_epoch
        {
            self.warned_epoch = true;
            warn_reserved();
        }
        let written = if self.widen() || !appended || self.behind {
            self.write_file()
        } else {
            let mut line = Vec::new();
            self.row(self.rows.last().expect("a row was added"), &mut line)?;
            // Never through a symlink, never into another user's file or a FIFO.
            match open_own(std::fs::OpenOptions::new().append(true), &self.path) {
                Ok(file) => append_whole(file, &line),
                // Removed meanwhile, or replaced by what is not this run's file (a symlink, a
                // FIFO): written whole again, by a rename that replaces the entry, not follows it.
                Err(_) => self.write_file(),
            }
        };
        // The rows stay in memory: the file gets them all at the next epoch that writes.
        self.behind = written.is_err();
        // The error names the file (a writer's failure is reported with its error alone).
        written.map_err(|e| io_error_at(&self.path, e))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests;
