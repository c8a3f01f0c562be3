//! The batch size the inferencers that weigh batches need, read off the forward function's
//! per-sample outputs when it does not return it.

use crate::error::{Error, Result};
use crate::fetch::Outputs;
use crate::inference::Inferencer;

/// The names of the inferencers that need the batch size, for error messages.
fn needing(inferencers: &[Box<dyn Inferencer>]) -> String {
    let names: Vec<String> =
        inferencers.iter().filter(|i| i.needs_batch_size()).map(|i| format!("`{}`", i.name())).collect();
    names.join(", ")
}

/// The current batch's size, read off its per-sample outputs (`per_sample`, learnt on the first
/// batch).
pub(super) fn inferred_batch_size(
    outputs: &Outputs,
    per_sample: &mut Vec<&'static str>,
    inferencers: &[Box<dyn Inferencer>],
) -> Result<usize> {
    let describe = |names: &mut dyn Iterator<Item = &'static str>| -> String {
        let list: Vec<String> =
            names.filter_map(|n| outputs.get(n).map(|t| format!("`{n}` {:?}", t.dims()))).collect();
        list.join(", ")
    };
    let fix = "return the batch size from the forward function (`|model, batch, out| { ...; batch_size }`)";
    if per_sample.is_empty() {
        let candidates: Vec<&'static str> =
            outputs.names().filter(|n| outputs.get(n).is_some_and(|t| t.num_elements() > 1)).collect();
        let Some(&first) = candidates.first() else {
            return Err(Error::fetch(format!(
                "InferenceRunner: {} needs each batch's number of datapoints, which cannot be read off the forward function's outputs: each holds one value ({}); {fix}",
                needing(inferencers),
                describe(&mut outputs.names())
            )));
        };
        let size = outputs.get(first).map_or(0, |t| t.dims()[0]);
        if candidates.iter().any(|n| outputs.get(n).is_some_and(|t| t.dims()[0] != size)) {
            return Err(Error::fetch(format!(
                "InferenceRunner: {} needs each batch's number of datapoints, which cannot be read off the forward function's outputs: their first dimensions differ ({}); {fix}",
                needing(inferencers),
                describe(&mut candidates.iter().copied())
            )));
        }
        *per_sample = candidates;
        return Ok(size);
    }
    let mut size = None;
    for &name in per_sample.iter() {
        let Some(tensor) = outputs.get(name) else {
            return Err(Error::fetch(format!(
                "InferenceRunner: the forward function put `{name}` on an earlier batch, and the batch size was read off it, but not on this one; {fix}"
            )));
        };
        let first = tensor.dims()[0];
        if size.is_some_and(|s| s != first) {
            return Err(Error::fetch(format!(
                "InferenceRunner: the per-sample outputs' first dimensions differ on this batch ({}); {fix}",
                describe(&mut per_sample.iter().copied())
            )));
        }
        size = Some(first);
    }
    Ok(size.unwrap_or(0))
}
