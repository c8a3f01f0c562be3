//! The table a CSV file holds: its rows, and the file read back.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{Error, Result};
use crate::state::EpochStats;

/// The name of the first column.
pub(super) const EPOCH: &str = "epoch";
/// The name of the second column.
pub(super) const GLOBAL_STEP: &str = "global_step";

/// One row: an epoch and its scalars (absent: an empty cell).
#[derive(Debug, Clone)]
pub(super) struct Row {
    pub(super) epoch: u64,
    pub(super) global_step: u64,
    pub(super) values: BTreeMap<String, f64>,
}

impl PartialEq for Row {
    /// Equal values, NaN equal to NaN (a file read back must equal what was written).
    fn eq(&self, other: &Row) -> bool {
        self.epoch == other.epoch
            && self.global_step == other.global_step
            && self.values.len() == other.values.len()
            && self.values.iter().zip(&other.values).all(|((ka, va), (kb, vb))| {
                ka == kb && (va.to_bits() == vb.to_bits() || (va.is_nan() && vb.is_nan()) || va == vb)
            })
    }
}

/// Remove the scalars named as the counters' columns; whether there were any.
pub(super) fn remove_reserved(row: &mut Row) -> bool {
    let epoch = row.values.remove(EPOCH).is_some();
    row.values.remove(GLOBAL_STEP).is_some() || epoch
}

/// Warn that scalars named as the counters' columns are left out.
pub(super) fn warn_reserved() {
    crate::logging::warn!(
        "CsvWriter: scalars named `{EPOCH}` or `{GLOBAL_STEP}` are not written (those columns hold the counters)"
    );
}

/// Add an epoch's scalars to `rows`: a new row, or the last one when it is the same epoch (the
/// scalars put after the last epoch ended). Returns whether a new row was added.
pub(super) fn merge_into(rows: &mut Vec<Row>, stats: &EpochStats) -> bool {
    let values = stats.scalars.iter().map(|(k, &v)| (k.clone(), v));
    match rows.last_mut() {
        Some(last) if last.epoch == stats.epoch_num => {
            last.global_step = last.global_step.max(stats.global_step);
            last.values.extend(values);
            false
        }
        _ => {
            rows.push(Row {
                epoch: stats.epoch_num,
                global_step: stats.global_step,
                values: values.collect(),
            });
            true
        }
    }
}

/// A CSV file read back: its scalar columns and its rows.
pub(super) struct Table {
    pub(super) columns: Vec<String>,
    pub(super) rows: Vec<Row>,
}

/// Read a file this writer wrote: RFC 4180 fields, a header starting with `epoch,global_step`,
/// numbers or empty cells.
pub(super) fn parse(text: &str, separator: char) -> std::result::Result<Table, String> {
    let records = split_records(text, separator)?;
    let mut records = records.into_iter();
    let Some(header) = records.next() else { return Ok(Table { columns: Vec::new(), rows: Vec::new() }) };
    if header.len() < 2 || header[0] != EPOCH || header[1] != GLOBAL_STEP {
        return Err(format!("its header does not start with `{EPOCH}`, `{GLOBAL_STEP}`"));
    }
    let columns: Vec<String> = header[2..].to_vec();
    let mut rows: Vec<Row> = Vec::new();
    for (line, record) in records.enumerate() {
        if record.len() != header.len() {
            return Err(format!("row {} has {} fields, the header {}", line + 1, record.len(), header.len()));
        }
        let epoch =
            record[0].parse::<u64>().map_err(|_| format!("row {} has epoch `{}`", line + 1, record[0]))?;
        if rows.last().is_some_and(|r| r.epoch >= epoch) {
            return Err(format!("row {} goes back to epoch {epoch}", line + 1));
        }
        let global_step = record[1]
            .parse::<u64>()
            .map_err(|_| format!("row {} has global step `{}`", line + 1, record[1]))?;
        let mut values = BTreeMap::new();
        for (column, cell) in columns.iter().zip(&record[2..]) {
            if cell.is_empty() {
                continue;
            }
            let v =
                cell.parse::<f64>().map_err(|_| format!("row {} holds `{cell}` for `{column}`", line + 1))?;
            values.insert(column.clone(), v);
        }
        rows.push(Row { epoch, global_step, values });
    }
    Ok(Table { columns, rows })
}

/// Split CSV text into records of fields with the `csv` crate (RFC 4180: quoted fields may hold
/// separators, doubled quotes and line breaks; lines end with `\n` or `\r\n`). A file cut short
/// by a crash (a last line without its line break, or inside a quoted field) is an error.
pub(super) fn split_records(text: &str, separator: char) -> std::result::Result<Vec<Vec<String>>, String> {
    // Every quote this writer writes is paired (opening and closing, or doubled): an odd count
    // means the text ends inside a quoted field.
    if text.bytes().filter(|&b| b == b'"').count() % 2 == 1 {
        return Err("it ends inside a quoted field".into());
    }
    if !text.is_empty() && !text.ends_with('\n') {
        return Err("its last line is incomplete".into());
    }
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .delimiter(separator as u8)
        .from_reader(text.as_bytes());
    reader
        .records()
        .map(|record| {
            record.map(|r| r.iter().map(str::to_string).collect()).map_err(|e| format!("it is not CSV: {e}"))
        })
        .collect()
}

/// The file at `path` read back: `None` when there is none, the reason it cannot be used when it
/// is not this writer's CSV (not UTF-8 included); any other read error is an error.
pub(super) fn read_existing(
    path: &Path,
    separator: char,
) -> Result<Option<std::result::Result<Table, String>>> {
    // A regular file of a bounded size only: a FIFO or a device there is an error at once.
    match crate::state::read_text_bounded(path, crate::state::MAX_STATS_BYTES) {
        Ok(text) => Ok(Some(parse(&text, separator))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => Ok(Some(Err("it is not UTF-8".into()))),
        Err(e) => Err(Error::io(path, e)),
    }
}
