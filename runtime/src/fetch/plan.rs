//! The plan of a run's fetches ([`FetchPlan`]): every distinct fetch the callbacks declared as a
//! slot of the one transfer, each callback's fetches resolved to its slots at setup, and the
//! values of the current step; the deferred reads are its [`DeferredReads`].

use std::time::Duration;

use burn::tensor::{Tensor, TensorData, Transaction};

use super::declare::{Fetch, FetchKind};
use super::deferred::DeferredReads;
use super::outputs::{OutputTensor, Outputs};
use crate::error::{Error, Result};

/// One distinct (name, kind) that some callback declared.
#[derive(Debug)]
struct Slot {
    fetch: Fetch,
    /// Index into the step's outputs where the name was last found.
    output: usize,
    /// Host values: range in `FetchPlan::host` and the original shape.
    range: (usize, usize),
    dims: Vec<usize>,
    /// Device value handed over this step.
    device: Option<OutputTensor>,
}

/// The table of every declared fetch, and the values of the current step.
#[derive(Debug, Default)]
pub(crate) struct FetchPlan {
    slots: Vec<Slot>,
    /// Slots filled at the current step.
    filled: u64,
    host: Vec<f32>,
    /// Device-to-host transfers made so far.
    transfers: u64,
    /// Each callback's slots (by flat index), in the order of its fetches.
    owned: Vec<Box<[u8]>>,
    /// The global step the synchronous values belong to.
    step: u64,
    /// The host values' tensors of a step, before they are joined for one transfer (the list
    /// is kept from step to step).
    host_tensors: Vec<Tensor<1>>,
    /// The deferred reads, and the deferred values being delivered.
    deferred: DeferredReads,
}

impl FetchPlan {
    /// Register a declared fetch; returns its slot's bit.
    pub(crate) fn declare(&mut self, fetch: &Fetch, owner: &str) -> Result<u64> {
        let index = match self.slots.iter().position(|s| s.fetch == *fetch) {
            Some(index) => index,
            None => {
                if self.slots.len() == 64 {
                    return Err(Error::fetch(format!(
                        "`{owner}` declares fetch `{}`: at most 64 distinct fetches are supported",
                        fetch.name
                    )));
                }
                if fetch.name.is_empty() {
                    return Err(Error::fetch(format!("`{owner}` declares a fetch with an empty name")));
                }
                self.slots.push(Slot {
                    fetch: fetch.clone(),
                    output: usize::MAX,
                    range: (0, 0),
                    dims: Vec::new(),
                    device: None,
                });
                self.deferred.add_slot(self.slots.len() - 1);
                self.slots.len() - 1
            }
        };
        Ok(1 << index)
    }

    /// Record the slots of callback `callback` (its flat index), in the order of its fetches.
    pub(crate) fn own(&mut self, callback: usize, bits: &[u64]) {
        if self.owned.len() <= callback {
            self.owned.resize_with(callback + 1, Box::default);
        }
        self.owned[callback] = bits.iter().map(|bit| bit.trailing_zeros() as u8).collect();
    }

    /// Check that every declared name is produced by `producer` (called once outputs exist).
    pub(crate) fn check_names(
        &self,
        outputs: &Outputs,
        owners: &[(String, u64)],
        producer: &str,
    ) -> Result<()> {
        for (i, slot) in self.slots.iter().enumerate() {
            if outputs.get(&slot.fetch.name).is_none() {
                let asking: Vec<&str> = owners
                    .iter()
                    .filter(|(_, mask)| mask & (1 << i) != 0)
                    .map(|(name, _)| name.as_str())
                    .collect();
                return Err(Error::fetch(format!(
                    "{} `{}` asks for `{}`, which {producer} does not produce; it produces {}",
                    if asking.len() == 1 { "callback" } else { "callbacks" },
                    asking.join("`, `"),
                    slot.fetch.name,
                    outputs.names_list()
                )));
            }
        }
        Ok(())
    }

    /// The slots that are deferred.
    pub(crate) fn deferred_bits(&self) -> u64 {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.fetch.kind == FetchKind::Deferred)
            .fold(0, |bits, (i, _)| bits | 1 << i)
    }

    /// The bit of the host fetch named `name`, when some callback declared one.
    pub(crate) fn host_bit(&self, name: &str) -> Option<u64> {
        self.slots
            .iter()
            .position(|s| s.fetch.name == name && s.fetch.kind == FetchKind::Host)
            .map(|i| 1 << i)
    }

    /// Whether some callback declared a fetch named `name`, of either kind.
    pub(crate) fn declares(&self, name: &str) -> bool {
        self.slots.iter().any(|s| s.fetch.name == name)
    }

    /// Device-to-host transfers made so far.
    pub(crate) fn transfers(&self) -> u64 {
        self.transfers
    }

    /// Fill the slots in `mask` from `outputs` at global step `step`: all host values in one
    /// transfer. Deferred slots are left to [`FetchPlan::start_deferred`].
    pub(crate) fn fill(&mut self, outputs: &Outputs, mask: u64, step: u64) -> Result<()> {
        self.filled = mask;
        self.step = step;
        if mask == 0 {
            return Ok(());
        }
        let mut offset = 0;
        for (i, slot) in self.slots.iter_mut().enumerate() {
            if mask & (1 << i) == 0 {
                continue;
            }
            let tensor = slot.find(outputs)?;
            match slot.fetch.kind {
                FetchKind::Deferred => {}
                FetchKind::Device => slot.device = Some(tensor.clone()),
                FetchKind::Host => {
                    let n = tensor.num_elements();
                    slot.range = (offset, offset + n);
                    slot.dims.clear();
                    tensor.extend_dims(&mut slot.dims);
                    offset += n;
                    self.host_tensors.push(tensor.flat());
                }
            }
        }
        if self.host_tensors.is_empty() {
            return Ok(());
        }
        let data = read_now(joined(&mut self.host_tensors));
        self.transfers += 1;
        self.host.clear();
        match data.as_slice::<f32>() {
            Ok(values) => self.host.extend_from_slice(values),
            Err(_) => self.host.extend(data.iter::<f32>()),
        }
        Ok(())
    }

    /// The one host value of slot `bit`, filled at this step; an error when it is not a scalar.
    pub(crate) fn host_scalar(&self, bit: u64, why: &str) -> Result<f32> {
        let slot = &self.slots[bit.trailing_zeros() as usize];
        match &self.host[slot.range.0..slot.range.1] {
            [value] => Ok(*value),
            values => Err(Error::fetch(format!(
                "{why} averages scalars over the ranks, and `{}` has {} elements",
                slot.fetch.name,
                values.len()
            ))),
        }
    }

    /// Replace the one host value of slot `bit`.
    pub(crate) fn set_host_scalar(&mut self, bit: u64, value: f32) {
        let slot = &self.slots[bit.trailing_zeros() as usize];
        self.host[slot.range.0] = value;
    }
}

/// The deferred fetches: the plan finds a step's tensors, its [`DeferredReads`] reads them back
/// and hands them over.
impl FetchPlan {
    /// The least time between the starts of two deferred reads that are not free.
    pub(crate) fn set_read_interval(&mut self, interval: Duration) {
        self.deferred.set_read_interval(interval);
    }

    /// The most bytes of deferred values held on the device (for steps waiting for a read, and
    /// in reads in flight) before the oldest read is waited for.
    pub(crate) fn set_read_budget(&mut self, bytes: u64) {
        self.deferred.set_byte_budget(bytes);
    }

    /// Add the deferred slots in `mask` from `outputs` (global step `step`), for the callbacks
    /// `receivers`, to the next read, and start that read if it is due: no read is in flight,
    /// and the last one was free or started the read interval ago. Never waits for the device.
    pub(crate) fn start_deferred(
        &mut self,
        outputs: &Outputs,
        mask: u64,
        step: u64,
        receivers: &[usize],
    ) -> Result<()> {
        let tensors = self
            .slots
            .iter_mut()
            .enumerate()
            .filter(|(i, slot)| mask & (1 << i) != 0 && slot.fetch.kind == FetchKind::Deferred)
            .map(|(i, slot)| slot.find(outputs).map(|tensor| (i as u8, tensor)));
        self.deferred.add_step(tensors, step, receivers)
    }

    /// The next step's deferred values, of a step before `before`, once they are here: they
    /// become the values that [`FetchPlan::deferred_view`] shows and their callbacks
    /// [`FetchPlan::deferred_receivers`]; returns whether there was one. Waits for a read in
    /// flight only with `flush` (before an epoch's end, a checkpoint, the end: every step waiting
    /// is then read and delivered) or when [`DeferredReads::MAX_STEPS_PER_READ`] steps wait behind
    /// it, or the deferred values held on the device reach the byte budget.
    pub(crate) fn next_arrived(&mut self, before: u64, flush: bool) -> Result<bool> {
        self.deferred.next_arrived(before, flush)
    }

    /// The callbacks (flat indices) that asked for the deferred values being delivered.
    pub(crate) fn deferred_receivers(&self) -> &[usize] {
        self.deferred.receivers()
    }

    /// Whether deferred values are yet to be delivered: read, in flight or waiting for a read.
    #[inline]
    pub(crate) fn has_pending(&self) -> bool {
        self.deferred.has_pending()
    }

    /// Drop the reads in flight and the steps waiting for one (training ended by an error:
    /// nobody will receive them).
    pub(crate) fn drop_pending(&mut self) {
        self.deferred.drop_pending();
    }

    /// Deferred reads started, and how many of them the training thread waited for.
    pub(crate) fn deferred_counts(&self) -> (u64, u64) {
        self.deferred.counts()
    }

    /// The deferred reads, for tests that make them behave as a GPU's.
    #[cfg(test)]
    pub(super) fn deferred_mut(&mut self) -> &mut DeferredReads {
        &mut self.deferred
    }
}

/// What a [`Fetched`] view reads: the plan's slots and values.
impl FetchPlan {
    /// The slots of callback `callback` (its flat index), in the order of its fetches; empty
    /// for a callback that declared none.
    #[inline]
    pub(super) fn owned(&self, callback: usize) -> &[u8] {
        self.owned.get(callback).map_or(&[], |slots| &slots[..])
    }

    /// The name of slot `slot`'s fetch.
    #[inline]
    pub(super) fn slot_name(&self, slot: u8) -> &str {
        &self.slots[usize::from(slot)].fetch.name
    }

    /// The slots filled at the current step, or (`deferred`) by the deferred values being
    /// delivered.
    #[inline]
    pub(super) fn filled(&self, deferred: bool) -> u64 {
        if deferred { self.deferred.filled() } else { self.filled }
    }

    /// The global step of the current step's values, or (`deferred`) of the deferred values
    /// being delivered.
    #[inline]
    pub(super) fn step(&self, deferred: bool) -> u64 {
        if deferred { self.deferred.step() } else { self.step }
    }

    /// The host values of the fetch `name` of kind `kind` (host or deferred): slot `pinned`
    /// when it has that kind, else the slot of that name. An error when no callback declared it
    /// or this step did not fill it.
    pub(super) fn host_values(
        &self,
        pinned: Option<u8>,
        name: &str,
        kind: FetchKind,
    ) -> Result<(&[f32], &[usize])> {
        let i = self.slot(pinned, name, kind)?;
        if kind == FetchKind::Deferred {
            return Ok(self.deferred.values(i));
        }
        let slot = &self.slots[i];
        Ok((&self.host[slot.range.0..slot.range.1], &slot.dims))
    }

    /// The device tensor of the fetch `name`, found as [`FetchPlan::host_values`] finds a host
    /// value; `None` when the slot holds none.
    pub(super) fn device_value(&self, pinned: Option<u8>, name: &str) -> Result<Option<&OutputTensor>> {
        let i = self.slot(pinned, name, FetchKind::Device)?;
        Ok(self.slots[i].device.as_ref())
    }

    /// The index of the slot of `name` and `kind` (`pinned` when it has that kind), checked to
    /// be filled.
    fn slot(&self, pinned: Option<u8>, name: &str, kind: FetchKind) -> Result<usize> {
        let found = match pinned.map(usize::from) {
            Some(i) if self.slots[i].fetch.kind == kind => Some(i),
            _ => self.slots.iter().position(|s| s.fetch.kind == kind && s.fetch.name == name),
        };
        let i = found.ok_or_else(|| {
            Error::fetch(format!(
                "`{name}` was not declared as a {} fetch: list it in the callback's fetches",
                match kind {
                    FetchKind::Host => "host",
                    FetchKind::Device => "device",
                    FetchKind::Deferred => "deferred",
                }
            ))
        })?;
        if self.filled(kind == FetchKind::Deferred) & (1 << i) == 0 {
            return Err(Error::fetch(format!("`{name}` was not fetched at this step")));
        }
        Ok(i)
    }
}

impl Slot {
    /// This slot's tensor among `outputs` (where it was last found, or by its name).
    fn find<'o>(&mut self, outputs: &'o Outputs) -> Result<&'o OutputTensor> {
        if let Some((name, tensor)) = outputs.at(self.output)
            && name == self.fetch.name
        {
            return Ok(tensor);
        }
        match outputs.position(&self.fetch.name) {
            Some(index) => {
                self.output = index;
                Ok(outputs.at(index).expect("an output found at this index").1)
            }
            None => Err(Error::fetch(format!(
                "`{}` was asked for, but this step did not produce it; it produces {}",
                self.fetch.name,
                outputs.names_list()
            ))),
        }
    }
}

/// `tensor`'s values on the host, read at once: through a burn `Transaction`, which copies them
/// off the device eagerly, where `into_data` on a GPU backend first hands back bytes that copy
/// themselves when read (two blocking calls instead of one).
pub(crate) fn read_now(tensor: Tensor<1>) -> TensorData {
    Transaction::default().register(tensor).execute().pop().expect("one tensor registered, one read")
}

/// Several rank-1 tensors as one, for one transfer (the tensor itself when there is one), leaving
/// `tensors` empty: a single tensor leaves the list's storage for the next use; several go to
/// burn's `cat`, which takes the list.
pub(crate) fn joined(tensors: &mut Vec<Tensor<1>>) -> Tensor<1> {
    if tensors.len() == 1 {
        tensors.pop().expect("one tensor")
    } else {
        Tensor::cat(std::mem::take(tensors), 0)
    }
}
