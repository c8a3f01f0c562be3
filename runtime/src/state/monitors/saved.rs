//! The monitors' state in a checkpoint: what [`Monitors::save_state`] writes and
//! [`Monitors::load_state`] reads back.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value as Json};

use super::Monitors;
use super::journaled::ReadJournal;
use crate::error::{Error, Result};
use crate::state::persist::{json_f64, parse_f64};
use crate::state::record::{EpochStats, StatsRow};

impl Monitors {
    /// The history, the finished epochs' statistics, the current epoch's scalars, the rows of
    /// `stats.json` and the scalars put since the last row, as JSON for a checkpoint. Non-finite
    /// values are kept (as the strings `"NaN"`, `"inf"`, `"-inf"`). With a journal
    /// ([`keep_history_in`](Self::keep_history_in)), the histories and the rows but the last are
    /// appended to it and the checkpoint holds its mark: what it writes does not grow with the run.
    pub(crate) fn save_state(&mut self) -> Result<serde_json::Value> {
        let journal = match self.has_journal() {
            true => Some(self.append_to_journal()?.to_json()),
            false => None,
        };
        let scalars = |map: &mut dyn Iterator<Item = (&str, f64)>| -> Json {
            Json::Object(map.map(|(k, v)| (k.to_string(), json_f64(v))).collect())
        };
        let rows = |rows: &[StatsRow]| -> Vec<Json> {
            rows.iter()
                .map(|r| {
                    serde_json::json!({
                        "epoch_num": r.epoch_num,
                        "global_step": r.global_step,
                        "scalars": scalars(&mut r.scalars.iter().map(|(k, &v)| (k.as_str(), v))),
                    })
                })
                .collect()
        };
        let mut state = serde_json::json!({
            "epochs": self.epochs_json(),
            "current": scalars(&mut self.current.iter().map(|(k, &v)| (&**k, v))),
            "row": scalars(&mut self.row.iter().map(|(k, &v)| (&**k, v))),
        });
        match journal {
            Some(mark) => {
                state["journal"] = mark;
                state["rows"] = Json::from(rows(self.rows_not_journaled()));
            }
            None => {
                state["history"] = Json::Object(self.history_json());
                state["history_epochs"] = Json::Object(
                    self.history_epochs
                        .iter()
                        .map(|(name, e)| (name.to_string(), Json::from(e.clone())))
                        .collect(),
                );
                state["rows"] = Json::from(rows(&self.rows));
            }
        }
        Ok(state)
    }

    /// Every scalar's history, as `[step, value]` pairs by name.
    fn history_json(&self) -> Map<String, Json> {
        self.history
            .iter()
            .map(|(name, values)| {
                let pairs = values.iter().map(|&(step, v)| Json::Array(vec![step.into(), json_f64(v)]));
                (name.to_string(), Json::Array(pairs.collect()))
            })
            .collect()
    }

    /// The finished epochs' statistics.
    fn epochs_json(&self) -> Vec<Json> {
        let scalars = |map: &BTreeMap<String, f64>| -> Json {
            Json::Object(map.iter().map(|(k, &v)| (k.clone(), json_f64(v))).collect())
        };
        self.epochs
            .iter()
            .map(|e| {
                serde_json::json!({
                    "epoch_num": e.epoch_num,
                    "global_step": e.global_step,
                    "scalars": scalars(&e.scalars),
                })
            })
            .collect()
    }

    /// Restore what [`save_state`](Self::save_state) saved, with the journal it names as read
    /// back beforehand ([`ReadJournal::of`]; read now, where it was written, when not given).
    pub(crate) fn load_state(&mut self, state: &Json, journal: Option<ReadJournal>) -> Result<()> {
        let epochs = read_epochs(state)?;
        let current = read_scalars(&state["current"], "current")?;
        let (mut rows, row) = read_rows(state, &epochs, &current)?;
        let journal = match journal {
            Some(journal) => Some(journal),
            None => ReadJournal::of(state, &[])?,
        };
        let history = match journal {
            Some(journal) => {
                let ((history, history_epochs), mut journaled_rows) = self.resume_journal(journal)?;
                journaled_rows.append(&mut rows);
                rows = journaled_rows;
                self.history_epochs = history_epochs;
                history
            }
            None => {
                let history = read_history(state)?;
                self.history_epochs = read_history_epochs(state, &history, &epochs)?;
                history
            }
        };
        self.current = keyed(&history, current);
        self.row = keyed(&history, row);
        self.rows = rows;
        self.history = history;
        self.epochs = epochs;
        self.resumed = true;
        Ok(())
    }
}

/// A scalar's history, as [`Monitors`] keeps it: `(global_step, value)`, oldest first.
type History = BTreeMap<Arc<str>, Vec<(u64, f64)>>;

/// The error for a malformed monitors' state, naming `what` is wrong.
fn bad(what: &str) -> Error {
    Error::bad_state(format!("the monitors' state is malformed: {what}"))
}

/// `v` as a JSON object, else an error naming `what`.
fn object(v: &Json, what: &str) -> Result<Map<String, Json>> {
    v.as_object().cloned().ok_or_else(|| bad(what))
}

/// Scalars saved as an object of name to value (non-finite values as strings).
fn read_scalars(v: &Json, what: &str) -> Result<BTreeMap<String, f64>> {
    object(v, what)?.iter().map(|(k, v)| Ok((k.clone(), parse_f64(v).ok_or_else(|| bad(k))?))).collect()
}

/// Every scalar's history: `[step, value]` pairs by name.
fn read_history(state: &Json) -> Result<History> {
    let mut history = BTreeMap::new();
    for (name, values) in object(&state["history"], "history")? {
        let values = values.as_array().ok_or_else(|| bad(&name))?;
        let mut pairs = Vec::with_capacity(values.len());
        for pair in values {
            let step = pair.get(0).and_then(Json::as_u64).ok_or_else(|| bad(&name))?;
            let value = pair.get(1).and_then(parse_f64).ok_or_else(|| bad(&name))?;
            pairs.push((step, value));
        }
        history.insert(Arc::from(name.as_str()), pairs);
    }
    Ok(history)
}

/// The epoch number, global step and scalars of a saved epoch or row.
fn read_counted(entry: &Json) -> Result<(u64, u64, BTreeMap<String, f64>)> {
    Ok((
        entry["epoch_num"].as_u64().ok_or_else(|| bad("epoch_num"))?,
        entry["global_step"].as_u64().ok_or_else(|| bad("global_step"))?,
        read_scalars(&entry["scalars"], "scalars")?,
    ))
}

/// The finished epochs' statistics.
fn read_epochs(state: &Json) -> Result<Vec<EpochStats>> {
    let mut epochs = Vec::new();
    for entry in state["epochs"].as_array().ok_or_else(|| bad("epochs"))? {
        let (epoch_num, global_step, scalars) = read_counted(entry)?;
        epochs.push(EpochStats { epoch_num, global_step, scalars });
    }
    Ok(epochs)
}

/// The rows of `stats.json` and the scalars put since the last one.
///
/// A checkpoint written before `stats.json` had a row per step holds no rows: its `stats.json`
/// was one row per epoch, and the current epoch's scalars were to join the next one.
fn read_rows(
    state: &Json,
    epochs: &[EpochStats],
    current: &BTreeMap<String, f64>,
) -> Result<(Vec<StatsRow>, BTreeMap<String, f64>)> {
    let Some(saved) = state.get("rows") else {
        let rows = epochs
            .iter()
            .map(|e| StatsRow {
                epoch_num: e.epoch_num,
                global_step: e.global_step,
                scalars: e.scalars.clone(),
            })
            .collect();
        return Ok((rows, current.clone()));
    };
    let mut rows = Vec::new();
    for entry in saved.as_array().ok_or_else(|| bad("rows"))? {
        let (epoch_num, global_step, scalars) = read_counted(entry)?;
        rows.push(StatsRow { epoch_num, global_step, scalars });
    }
    Ok((rows, read_scalars(&state["row"], "row")?))
}

/// The epoch of each value of each scalar's history; a checkpoint written before they were kept
/// gives the epoch whose end was the first at or after the value's step.
fn read_history_epochs(
    state: &Json,
    history: &History,
    epochs: &[EpochStats],
) -> Result<BTreeMap<Arc<str>, Vec<u64>>> {
    let mut history_epochs = BTreeMap::new();
    for (name, values) in history {
        let saved = state.get("history_epochs").and_then(|h| h.get(&**name)).and_then(|e| e.as_array());
        let list: Vec<u64> = match saved {
            Some(list) => list.iter().map(|e| e.as_u64().ok_or_else(|| bad(name))).collect::<Result<_>>()?,
            None => values
                .iter()
                .map(|&(step, _)| {
                    epochs.iter().find(|e| e.global_step >= step).map_or(0, |e: &EpochStats| e.epoch_num)
                })
                .collect(),
        };
        if list.len() != values.len() {
            return Err(bad(name));
        }
        history_epochs.insert(name.clone(), list);
    }
    Ok(history_epochs)
}

/// `map` keyed by the history's own names (one allocation per name shared), a new key for a
/// name without history.
fn keyed(history: &History, map: BTreeMap<String, f64>) -> BTreeMap<Arc<str>, f64> {
    map.into_iter()
        .map(|(name, v)| {
            let key = history
                .get_key_value(name.as_str())
                .map_or_else(|| Arc::from(name.as_str()), |(k, _)| Arc::clone(k));
            (key, v)
        })
        .collect()
}
