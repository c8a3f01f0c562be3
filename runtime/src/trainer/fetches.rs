//! Who asked for which value at this step: the per-step fetch bookkeeping, next to the fetch
//! plan it drives (the step's outputs, the callbacks that fetch, this step's slots, the deferred
//! askers, the values averaged over the ranks).

use crate::callback::{CallbackInfo, Counters};
use crate::error::{Error, Result};
use crate::fetch::{FetchPlan, Fetched, Outputs};

/// The run's fetches: declared at setup, selected at each step, filled after it.
pub(super) struct StepFetches {
    /// The plan: every declared fetch's slot, the one transfer, the deferred reads.
    pub(super) plan: FetchPlan,
    /// What the step put (the loss among them).
    pub(super) outputs: Outputs,
    /// The callbacks that run here and declare fetches, with their slots.
    fetchers: Vec<(usize, u64)>,
    /// Every callback that declares fetches, chief-only ones included, with its slots.
    all_fetchers: Vec<(usize, u64)>,
    /// The slots of deferred fetches (0 when no callback defers).
    deferred_bits: u64,
    /// The callbacks that asked for this step's deferred values (a buffer kept from step to step).
    deferred_askers: Vec<usize>,
    /// This step's slots.
    mask: u64,
    /// Whether the step's values were read before the data-parallel exchange.
    prefilled: bool,
    /// Whether the step's outputs were checked against the fetched names (at the first step).
    names_checked: bool,
    means: Means,
}

/// The values `World::mean_of` averages over the ranks (nothing on one device).
#[derive(Default)]
struct Means {
    /// Every callback (on any rank) that fetches an averaged value, with those slots.
    fetchers: Vec<(usize, u64)>,
    /// Each averaged value's slot, in `mean_of` order (0 when no callback fetches it).
    slots: Vec<u64>,
    /// The slots to average at this step.
    mask: u64,
    /// Each averaged value at this step: this rank's before the exchange, the mean after.
    values: Vec<Option<f64>>,
}

impl StepFetches {
    pub(super) fn new() -> Self {
        StepFetches {
            plan: FetchPlan::default(),
            outputs: Outputs::new(),
            fetchers: Vec::new(),
            all_fetchers: Vec::new(),
            deferred_bits: 0,
            deferred_askers: Vec::new(),
            mask: 0,
            prefilled: false,
            names_checked: false,
            means: Means::default(),
        }
    }

    /// Declare callback `i`'s fetches (`active`: it runs on this rank).
    pub(super) fn declare(&mut self, i: usize, info: &CallbackInfo<'_>, active: bool) -> Result<()> {
        let mut mask = 0;
        let mut bits = Vec::with_capacity(info.fetches.len());
        for fetch in info.fetches {
            let bit = self.plan.declare(fetch, &info.name)?;
            bits.push(bit);
            mask |= bit;
        }
        self.plan.own(i, &bits);
        if mask != 0 {
            self.all_fetchers.push((i, mask));
            if active {
                self.fetchers.push((i, mask));
            }
        }
        self.deferred_bits = self.plan.deferred_bits();
        Ok(())
    }

    /// The values averaged over the ranks (`World::mean_of`): each must be fetched as a host
    /// value, or not at all (an error, the same on every rank).
    pub(super) fn average(&mut self, names: &[&str]) -> Result<()> {
        for name in names {
            if self.plan.host_bit(name).is_none() && self.plan.declares(name) {
                return Err(Error::fetch(format!(
                    "World::mean_of(\"{name}\"): the callbacks fetch `{name}` only as a device tensor or a deferred value, and only the step's own host values are averaged over the ranks; fetch it as a host value (f32, f64) without `deferred`, or leave it out of mean_of"
                )));
            }
        }
        let slots: Vec<u64> = names.iter().map(|name| self.plan.host_bit(name).unwrap_or(0)).collect();
        let averaged = slots.iter().fold(0, |all, bit| all | bit);
        self.means.fetchers = self
            .all_fetchers
            .iter()
            .filter(|&&(_, slots)| slots & averaged != 0)
            .map(|&(i, slots)| (i, slots & averaged))
            .collect();
        self.means.values = vec![None; slots.len()];
        self.means.slots = slots;
        Ok(())
    }

    /// Whether callback `i` declares fetches (on any rank).
    pub(super) fn fetches(&self, i: usize) -> bool {
        self.all_fetchers.iter().any(|&(j, _)| j == i)
    }

    /// Before a step: the slots of the callbacks that want their fetches at it (`wants`).
    #[inline]
    pub(super) fn select(&mut self, wants: impl Fn(usize) -> bool) {
        let mut mask = 0;
        self.deferred_askers.clear();
        for &(i, slots) in &self.fetchers {
            if wants(i) {
                mask |= slots;
                if slots & self.deferred_bits != 0 {
                    self.deferred_askers.push(i);
                }
            }
        }
        self.mask = mask;
        if !self.means.fetchers.is_empty() {
            self.means.mask =
                self.means.fetchers.iter().filter(|&&(i, _)| wants(i)).fold(0, |all, &(_, s)| all | s);
        }
    }

    /// Before the data-parallel exchange: the values averaged at this step are read (with the
    /// step's other fetches, in the same transfer) to travel in it; `None` for the others.
    #[inline]
    pub(super) fn means_before_exchange(&mut self, global_step: u64) -> Result<&mut [Option<f64>]> {
        if self.means.mask != 0 {
            self.plan.fill(&self.outputs, self.mask | self.means.mask, global_step)?;
            self.prefilled = true;
            for (value, &bit) in self.means.values.iter_mut().zip(&self.means.slots) {
                *value = if bit & self.means.mask != 0 {
                    Some(f64::from(self.plan.host_scalar(bit, "World::mean_of")?))
                } else {
                    None
                };
            }
        } else {
            self.means.values.iter_mut().for_each(|value| *value = None);
        }
        Ok(&mut self.means.values)
    }

    /// After the exchange: each averaged value is the mean over the ranks that read it (every
    /// rank, unless some callback's `wants_fetch` answers differently on different ranks).
    #[inline]
    pub(super) fn means_after_exchange(&mut self) {
        if self.means.mask != 0 {
            for (value, &bit) in self.means.values.iter().zip(&self.means.slots) {
                if let Some(mean) = *value
                    && bit & self.means.mask != 0
                {
                    self.plan.set_host_scalar(bit, mean as f32);
                }
            }
        }
    }

    /// After the step: its values for `after_step` (read unless they were before the
    /// exchange); at the first step, the outputs are checked against the fetched names.
    #[inline]
    pub(super) fn values(
        &mut self,
        counters: &Counters,
        name: impl Fn(usize) -> String,
    ) -> Result<Fetched<'_>> {
        if !self.names_checked && !self.fetchers.is_empty() {
            let owners: Vec<(String, u64)> = self.fetchers.iter().map(|&(i, m)| (name(i), m)).collect();
            self.plan.check_names(&self.outputs, &owners, "the training step")?;
            self.names_checked = true;
        }
        if !std::mem::take(&mut self.prefilled) {
            self.plan.fill(&self.outputs, self.mask, counters.global_step)?;
        }
        Ok(if self.mask == 0 { Fetched::none() } else { self.plan.view() })
    }

    /// After `after_step`: this step's deferred values join the next read, started behind its
    /// work when due.
    #[inline]
    pub(super) fn defer(&mut self, global_step: u64) -> Result<()> {
        if self.mask & self.deferred_bits != 0 {
            self.plan.start_deferred(&self.outputs, self.mask, global_step, &self.deferred_askers)?;
        }
        Ok(())
    }
}
