//! The monitors' long histories beside the checkpoints: every scalar's values and the rows of
//! `stats.json` go into the run's journal ([`Journal`], `history/monitors-<run>.jsonl` in the log
//! directory), each checkpoint appending what was put since the one before, as JSON lines:
//!
//! - `["h", name, global_step, epoch_num, value]`: a value of scalar `name`;
//! - `["r", epoch_num, global_step, {name: value, ...}]`: a row of `stats.json` (the last row
//!   stays in the checkpoint: a later row made at the same moment merges into it).
//!
//! A checkpoint holds the journal's mark (its length and checksum) instead of the histories, so
//! that its size and the time it takes do not grow with the run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value as Json;

use super::Monitors;
use crate::error::{Error, Result};
use crate::state::journal::{Journal, Mark, entries, is_missing_or_mismatched, push_line};
use crate::state::persist::{json_f64, parse_f64};
use crate::state::record::StatsRow;

/// A scalar's history and the epoch of each value, as [`Monitors`] keeps them.
pub(super) type Histories = (BTreeMap<Arc<str>, Vec<(u64, f64)>>, BTreeMap<Arc<str>, Vec<u64>>);

/// The name of the monitors' journal of the run `run` in a log directory's `history/` folder.
pub(crate) fn journal_name(run: &str) -> String {
    format!("monitors-{run}.jsonl")
}

impl Monitors {
    /// Keep the histories in the journal at `path` from the next checkpoint on (the chief, at the
    /// start of a run). A run resumed from a checkpoint whose journal is that file appends to it;
    /// any other starts it anew, writing the whole history at its next checkpoint.
    pub(crate) fn keep_history_in(&mut self, path: PathBuf) {
        // A journal resumed from a file since removed or moved away (the log directory's policy
        // acted after the resume read it) starts anew too.
        if !self.journal.is_at(&path) || !path.is_file() {
            self.journal = Journal::at(path);
            self.journaled.clear();
            self.journaled_rows = 0;
        }
    }

    /// Whether the histories go into a journal (else a checkpoint holds them whole).
    pub(super) fn has_journal(&self) -> bool {
        self.journal.is_named()
    }

    /// Append what was put since the last checkpoint to the journal, synced: the mark of the
    /// history now, for the checkpoint. The rows of `stats.json` go in but the last.
    pub(super) fn append_to_journal(&mut self) -> Result<Mark> {
        let mut lines = Vec::new();
        let mut counts = Vec::new();
        for (name, values) in &self.history {
            let from = self.journaled.get(name).copied().unwrap_or(0);
            let epochs = self.history_epochs.get(name).map_or(&[][..], Vec::as_slice);
            for (i, &(step, value)) in values.iter().enumerate().skip(from) {
                let epoch = epochs.get(i).copied().unwrap_or(0);
                write_line(&mut lines, &("h", &**name, step, epoch, json_f64(value)))?;
            }
            counts.push((name.clone(), values.len()));
        }
        let rows_end = self.rows.len().saturating_sub(1).max(self.journaled_rows);
        for row in &self.rows[self.journaled_rows..rows_end] {
            let scalars: serde_json::Map<String, Json> =
                row.scalars.iter().map(|(k, &v)| (k.clone(), json_f64(v))).collect();
            write_line(&mut lines, &("r", row.epoch_num, row.global_step, scalars))?;
        }
        let mark = self.journal.append(&lines).map_err(|e| {
            Error::bad_state_from(format!("appending the monitors' history to its journal: {e}"), e)
        })?;
        self.journaled.extend(counts);
        self.journaled_rows = rows_end;
        Ok(mark)
    }

    /// The rows a checkpoint holds itself: those not in the journal.
    pub(super) fn rows_not_journaled(&self) -> &[StatsRow] {
        &self.rows[self.journaled_rows.min(self.rows.len())..]
    }

    /// Resume the journal a checkpoint marks, read back beforehand ([`ReadJournal::of`]): the
    /// histories and the rows it holds, verified; appends go on after them. A journal that is
    /// missing, or holds another history (removed with its log directory, cut back by another
    /// timeline), is a warning: the run resumes with the history the checkpoint holds itself, and
    /// a new journal keeps it from there on.
    pub(super) fn resume_journal(&mut self, read: ReadJournal) -> Result<(Histories, Vec<StatsRow>)> {
        let bad = |what: String| Error::bad_state(format!("the monitors' history is malformed: {what}"));
        let (journal, bytes) = match read.read {
            Ok(found) => found,
            Err(e) if is_missing_or_mismatched(&e) => {
                crate::logging::warn!(
                    "the monitors' history up to this checkpoint cannot be read from {}: {e}; resuming with the part the checkpoint holds itself (the epochs' statistics, the last rows of stats.json), the scalars' earlier values are not restored",
                    read.file.display()
                );
                self.journal = Journal::default();
                (self.journaled, self.journaled_rows) = (BTreeMap::new(), 0);
                return Ok(((BTreeMap::new(), BTreeMap::new()), Vec::new()));
            }
            Err(e) => {
                return Err(Error::bad_state_from(
                    format!("reading the monitors' history from {}: {e}", read.file.display()),
                    e,
                ));
            }
        };
        let (histories, rows) = read_lines(&bytes).map_err(bad)?;
        self.journal = journal;
        self.journaled = histories.0.iter().map(|(name, values)| (name.clone(), values.len())).collect();
        self.journaled_rows = rows.len();
        Ok((histories, rows))
    }

    /// Keep a copy of the journal's history in `dir` (the `history/` folder of a saver's own
    /// folder), as [`Journal::mirror_into`] does; nothing without a journal.
    pub(crate) fn mirror_journal(&mut self, dir: &Path) -> Result<()> {
        if !self.has_journal() {
            return Ok(());
        }
        self.journal.mirror_into(dir).map_err(|e| {
            Error::bad_state_from(format!("copying the monitors' history into {}: {e}", dir.display()), e)
        })
    }
}

/// The journal a checkpoint's monitors name, read back before anything could move or remove it
/// (a log-directory policy acting on the folder it is in): its history's bytes, or why they
/// could not be read.
#[derive(Debug)]
pub(crate) struct ReadJournal {
    /// The file the checkpoint names (for messages).
    file: PathBuf,
    read: std::io::Result<(Journal, Vec<u8>)>,
}

impl ReadJournal {
    /// The journal the monitors' state `state` (a checkpoint's) names, looked for in each of
    /// `dirs` first (see [`Journal::resume`]); `None` when the state holds its history itself.
    pub(crate) fn of(state: &Json, dirs: &[PathBuf]) -> Result<Option<ReadJournal>> {
        let Some(mark) = state.get("journal") else { return Ok(None) };
        let mark = Mark::from_json(mark)
            .ok_or_else(|| Error::bad_state("the monitors' history is malformed: journal"))?;
        Ok(Some(ReadJournal { file: mark.file.clone(), read: Journal::resume(&mark, dirs) }))
    }
}

/// One JSON line.
fn write_line(out: &mut Vec<u8>, value: &impl serde::Serialize) -> Result<()> {
    push_line(out, value).map_err(|e| Error::bad_state_from(format!("{e}"), e))
}

/// The histories and rows of a journal's lines; what is wrong, naming the line, otherwise.
fn read_lines(bytes: &[u8]) -> std::result::Result<(Histories, Vec<StatsRow>), String> {
    let (mut history, mut epochs): Histories = (BTreeMap::new(), BTreeMap::new());
    let mut rows = Vec::new();
    for (n, entry) in entries(bytes) {
        let bad = || format!("line {n} of its journal");
        let entry = entry.ok_or_else(bad)?;
        match entry.as_slice() {
            [kind, name, step, epoch, value] if kind == "h" => {
                let name = name.as_str().ok_or_else(bad)?;
                let (step, epoch) = (step.as_u64().ok_or_else(bad)?, epoch.as_u64().ok_or_else(bad)?);
                let value = parse_f64(value).ok_or_else(bad)?;
                let key = match history.get_key_value(name) {
                    Some((key, _)) => Arc::clone(key),
                    None => Arc::from(name),
                };
                history.entry(key.clone()).or_insert_with(Vec::new).push((step, value));
                epochs.entry(key).or_insert_with(Vec::new).push(epoch);
            }
            [kind, epoch, step, scalars] if kind == "r" => {
                let scalars = scalars
                    .as_object()
                    .ok_or_else(bad)?
                    .iter()
                    .map(|(k, v)| Some((k.clone(), parse_f64(v)?)))
                    .collect::<Option<_>>()
                    .ok_or_else(bad)?;
                let (epoch_num, global_step) =
                    (epoch.as_u64().ok_or_else(bad)?, step.as_u64().ok_or_else(bad)?);
                rows.push(StatsRow { epoch_num, global_step, scalars });
            }
            _ => return Err(bad()),
        }
    }
    Ok(((history, epochs), rows))
}
