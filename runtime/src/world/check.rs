//! The layout every rank checks before the first exchange whose length depends on it: the
//! model's float parameters (their number of elements, their number, their paths and shapes),
//! the hyper-parameters registered, the `World::mean_of` names and the number of control words.
//! Ranks that differ there would call the large all-reduce with different lengths (undefined
//! behaviour in MPI) or add unrelated gradients; instead every rank fails with an error naming
//! what differs, on which ranks.
//!
//! Two exchanges of a length every rank knows from the world's size alone: the chief's facts
//! (each a [`put_reference`] the others leave at zero), then, facet by facet, one word per
//! rank set where that rank's facts are not the chief's.

use burn::module::Module;

use super::World;
use super::flat::{self, Fingerprint};
use super::words::{failed, put_reference, reference};
use crate::error::{Error, Result, WorldError};
use crate::state::HyperParams;

/// What one rank brings to the check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Facts {
    model: Fingerprint,
    /// The number of hyper-parameters and a hash of their names, in order.
    hypers: (u64, u64),
    /// The number of `mean_of` names and a hash of them, in order.
    means: (u64, u64),
    /// The number of control words each exchange carries.
    words: u64,
}

/// The facets compared, as the error names them.
const FACETS: [&str; 4] = [
    "the model's float parameters differ",
    "the hyper-parameters differ",
    "the `mean_of` names differ",
    "the number of control words differs",
];

impl Facts {
    pub(crate) fn of<M: Module>(model: &M, hyper: &HyperParams, means: &[&str], words: usize) -> Facts {
        let names = |names: &mut dyn Iterator<Item = &str>| {
            names.fold((0, flat::FNV_OFFSET), |(n, h), name| {
                (n + 1, flat::fnv1a(h, format!("{name}\0").as_bytes()))
            })
        };
        Facts {
            model: flat::fingerprint(model),
            hypers: names(&mut hyper.names()),
            means: names(&mut means.iter().copied()),
            words: words as u64,
        }
    }

    fn values(&self) -> [u64; 8] {
        let m = self.model;
        [m.params, m.tensors, m.hash, self.hypers.0, self.hypers.1, self.means.0, self.means.1, self.words]
    }

    /// Each facet's values: which of [`values`](Self::values) it compares.
    fn facet(values: &[u64; 8], facet: usize) -> &[u64] {
        match facet {
            0 => &values[0..3],
            1 => &values[3..5],
            2 => &values[5..7],
            _ => &values[7..8],
        }
    }

    /// How a facet reads in the error.
    fn describe(values: &[u64], facet: usize) -> String {
        match facet {
            0 => format!(
                "{} parameters in {} tensors, path-and-shape hash {:016x}",
                values[0], values[1], values[2]
            ),
            1 => format!("{} registered (learning rate included), names hash {:016x}", values[0], values[1]),
            2 => format!("{} names, hash {:016x}", values[0], values[1]),
            _ => format!("{}", values[0]),
        }
    }
}

/// Check that every rank has the chief's layout; an error on every rank when one differs.
pub(crate) fn check<M: Module>(world: &mut World, model: &M, facts: &Facts) -> Result<()> {
    let (rank, size) = (world.rank(), world.size());
    // The words before `failed(size)` are the failure flags (a thread that left is marked there).
    let base = failed(size);
    let own = facts.values();
    let mut words = vec![0.0; base + 2 * own.len()];
    if rank == 0 {
        for (i, value) in own.iter().enumerate() {
            put_reference(&mut words, base + 2 * i, *value);
        }
    }
    exchange(world, model, &mut words)?;
    let mut chief = [0u64; 8];
    for (i, value) in chief.iter_mut().enumerate() {
        *value = reference(&words, base + 2 * i)
            .ok_or_else(|| Error::ranks_differ("the world's layout check was garbled"))?;
    }
    let mut differing = vec![0.0; base + FACETS.len() * size];
    for facet in 0..FACETS.len() {
        if Facts::facet(&own, facet) != Facts::facet(&chief, facet) {
            differing[base + facet * size + rank] = 1.0;
        }
    }
    exchange(world, model, &mut differing)?;
    let mut found = Vec::new();
    for (facet, name) in FACETS.iter().enumerate() {
        let ranks: Vec<String> =
            (0..size).filter(|r| differing[base + facet * size + r] != 0.0).map(|r| r.to_string()).collect();
        if ranks.is_empty() {
            continue;
        }
        let here = if differing[base + facet * size + rank] != 0.0 {
            Facts::describe(Facts::facet(&own, facet), facet)
        } else {
            "the same as rank 0".to_owned()
        };
        found.push(format!(
            "{name} on rank {} (rank 0: {}; here, rank {rank}: {here})",
            ranks.join(", rank "),
            Facts::describe(Facts::facet(&chief, facet), facet)
        ));
    }
    if found.is_empty() {
        return Ok(());
    }
    // Every rank saw the same sums and fails here: none exchanges again.
    world.settled = true;
    Err(Error::ranks_differ(format!(
        "the ranks of the data-parallel world do not line up, checked before the first exchange: {}. Every rank must build the same model, register the same hyper-parameters (with the trainer's builder) and give its world the same `mean_of` names",
        found.join("; ")
    )))
}

/// One words-only exchange; a rank that left is an error naming it.
fn exchange<M: Module>(world: &mut World, model: &M, words: &mut [f64]) -> Result<()> {
    world.sum_words(model, words);
    match (0..world.size()).find(|&r| words[failed(r)] != 0.0) {
        Some(rank) => {
            world.settled = true;
            Err(WorldError::RankFailed { rank }.into())
        }
        None => Ok(()),
    }
}
