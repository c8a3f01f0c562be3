//! The deferred reads ([`DeferredReads`]): which steps' values wait for a read, when a read
//! starts (one in flight at a time, spaced by the read interval where reads are not free), and
//! the values of one step at a time handed to the callbacks that asked at that step.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::outputs::OutputTensor;
use super::read::{PendingRead, ReadStep};
use crate::error::{Error, Result};

/// The deferred values of one slot, for the step being delivered.
#[derive(Debug, Default)]
struct Delivered {
    /// Its values: a range of `DeferredReads::values`.
    range: (usize, usize),
    /// Its shape.
    dims: Vec<usize>,
}

/// Every deferred read of a run: started and not yet delivered, the steps waiting for the next
/// one, the spent ones kept for reuse, and the values being delivered. Owned by the
/// [`FetchPlan`](super::plan::FetchPlan), which finds a step's tensors among its outputs.
#[derive(Debug)]
pub(super) struct DeferredReads {
    /// Reads started and not yet delivered, oldest first (the front may be partly delivered).
    /// At most one is in flight, except at a flush.
    pending: VecDeque<PendingRead>,
    /// The steps whose deferred values wait for the next read.
    open: Option<PendingRead>,
    /// Reads delivered, kept for the next ones with their buffers (a few exist in a run).
    spare: Vec<PendingRead>,
    /// The least time between the starts of two reads that are not free
    /// ([`Trainer::deferred_read_interval`](crate::trainer::Trainer::deferred_read_interval)).
    read_interval: Duration,
    /// The most bytes of deferred values the device holds for the reads (waiting for one or in
    /// one in flight) before the oldest read is waited for
    /// ([`Trainer::deferred_read_budget`](crate::trainer::Trainer::deferred_read_budget)).
    byte_budget: u64,
    /// When the last read started, and whether it was free: done at its first poll, on a
    /// runtime that does not wait for the device in that poll.
    last_start: Option<Instant>,
    free_reads: bool,
    /// Whether the deferred values' device waits for the device in a read's first poll
    /// ([`crate::device::reads_wait_in_poll`]), found at the first deferred step.
    reads_wait: Option<bool>,
    /// Tests: reads done only when waited for, as a GPU's would be at a step boundary.
    #[cfg(test)]
    reads_when_waited_for: bool,
    /// The callbacks the values being delivered go to (flat indices).
    receivers: Vec<usize>,
    /// The values being delivered: the slots filled, the values, each slot's part, their step.
    filled: u64,
    values: Vec<f32>,
    slots: Vec<Delivered>,
    step: u64,
    /// Reads started, and how many of them the training thread had to wait for.
    reads: u64,
    waits: u64,
}

impl Default for DeferredReads {
    fn default() -> Self {
        DeferredReads {
            pending: VecDeque::new(),
            open: None,
            spare: Vec::new(),
            read_interval: Duration::ZERO,
            byte_budget: u64::MAX,
            last_start: None,
            free_reads: false,
            reads_wait: None,
            #[cfg(test)]
            reads_when_waited_for: false,
            receivers: Vec::new(),
            filled: 0,
            values: Vec::new(),
            slots: Vec::new(),
            step: 0,
            reads: 0,
            waits: 0,
        }
    }
}

impl DeferredReads {
    /// The most steps one read gathers: once this many wait, the next read starts without
    /// waiting for the interval, and if a read is still in flight the training thread waits for
    /// it (the host never runs more than this many fetching steps ahead of the device's reads).
    pub(super) const MAX_STEPS_PER_READ: usize = 1024;

    /// Make room for the values of slot `slot` (at setup, for every slot declared).
    pub(super) fn add_slot(&mut self, slot: usize) {
        if self.slots.len() <= slot {
            self.slots.resize_with(slot + 1, Delivered::default);
        }
    }

    /// The least time between the starts of two reads that are not free.
    pub(super) fn set_read_interval(&mut self, interval: Duration) {
        self.read_interval = interval;
    }

    /// The most bytes of deferred values held on the device before the oldest read is waited for.
    pub(super) fn set_byte_budget(&mut self, bytes: u64) {
        self.byte_budget = bytes;
    }

    /// Whether the values the device holds for the reads (the steps waiting for one, the reads in
    /// flight, `taken`: the bytes of one taken out of `pending`) reach the byte budget, or the
    /// steps waiting reach [`Self::MAX_STEPS_PER_READ`].
    fn over_budget(&self, taken: u64) -> bool {
        let Some(open) = &self.open else { return false };
        let in_flight: u64 = self.pending.iter().filter(|r| r.done.is_none()).map(|r| r.bytes).sum();
        let held = open.bytes.saturating_add(in_flight).saturating_add(taken);
        open.steps.len() >= Self::MAX_STEPS_PER_READ || held >= self.byte_budget
    }

    /// An empty read for the pool.
    fn new_read(&self) -> PendingRead {
        #[cfg(test)]
        if self.reads_when_waited_for {
            return PendingRead::waited_for();
        }
        PendingRead::new()
    }

    /// Add the tensors of step `step`, each with its slot, for the callbacks `receivers`, to the
    /// next read, and start that read if it is due: no read is in flight, and the last one was
    /// free or started `read_interval` ago. Never waits for the device. On an error from
    /// `tensors` the step adds nothing.
    pub(super) fn add_step<'o>(
        &mut self,
        tensors: impl Iterator<Item = Result<(u8, &'o OutputTensor)>>,
        step: u64,
        receivers: &[usize],
    ) -> Result<()> {
        let mut open = match self.open.take() {
            Some(open) => open,
            None => self.spare.pop().unwrap_or_else(|| self.new_read()),
        };
        let (first_slot, first_dim, first_bytes) = (open.slots.len(), open.dims.len(), open.bytes);
        for found in tensors {
            let (slot, tensor) = match found {
                Ok(found) => found,
                Err(error) => {
                    open.slots.truncate(first_slot);
                    open.tensors.truncate(first_slot);
                    open.dims.truncate(first_dim);
                    open.bytes = first_bytes;
                    self.open = Some(open);
                    return Err(error);
                }
            };
            let start = open.dims.len();
            tensor.extend_dims(&mut open.dims);
            open.slots.push((slot, (start, open.dims.len())));
            let flat = tensor.flat();
            let bytes = flat.shape().num_elements().saturating_mul(flat.dtype().size());
            open.bytes = open.bytes.saturating_add(bytes as u64);
            if self.reads_wait.is_none() {
                self.reads_wait = Some(crate::device::reads_wait_in_poll(&flat.device()));
            }
            open.tensors.push(flat);
        }
        if open.slots.len() > first_slot {
            let first_receiver = open.receivers.len();
            open.receivers.extend_from_slice(receivers);
            open.steps.push(ReadStep {
                step,
                slots: (first_slot, open.slots.len()),
                receivers: (first_receiver, open.receivers.len()),
            });
        }
        self.open = Some(open);
        self.start_if_due(false);
        Ok(())
    }

    /// Start the read of the steps waiting for one, if there are any and it is due (or at
    /// once with `now`): no read is in flight, and the last read was free, or started
    /// `read_interval` ago, or [`DeferredReads::MAX_STEPS_PER_READ`] steps wait, or their values
    /// reach the byte budget.
    fn start_if_due(&mut self, now: bool) {
        let Some(open) = &self.open else { return };
        if open.steps.is_empty() {
            return;
        }
        if !now {
            if self.pending.back().is_some_and(|read| read.done.is_none()) {
                return;
            }
            if !self.free_reads
                && !self.over_budget(0)
                && let Some(last) = self.last_start
                && last.elapsed() < self.read_interval
            {
                return;
            }
        }
        let mut read = self.open.take().expect("steps waiting for a read");
        self.last_start = Some(Instant::now());
        read.start();
        // The first poll starts the read (queues the copies behind the steps' work); on a CPU
        // backend the values are already here, for free.
        let ready = read.poll_now();
        self.free_reads = ready && self.reads_wait == Some(false);
        self.reads += 1;
        self.pending.push_back(read);
    }

    /// The next step's values, of a step before `before`, once they are here: they become the
    /// values being delivered ([`DeferredReads::values`], [`DeferredReads::receivers`]);
    /// returns whether there was one. Waits for a read in flight only with `flush` (every step
    /// waiting is then read and delivered) or when [`DeferredReads::MAX_STEPS_PER_READ`] steps
    /// wait behind it, or the values the device holds for the reads reach the byte budget (the
    /// oldest read is then waited for first).
    pub(super) fn next_arrived(&mut self, before: u64, flush: bool) -> Result<bool> {
        if flush {
            self.start_if_due(true);
        }
        let Some(mut read) = self.pending.pop_front() else {
            self.start_if_due(false);
            return Ok(false);
        };
        if !read.poll_now() {
            if !flush && !self.over_budget(read.bytes) {
                self.pending.push_front(read);
                return Ok(false);
            }
            if read.wait() {
                self.waits += 1;
            }
        }
        // A read holds at least one step and is recycled once its last is delivered.
        let at = read.steps[read.delivered];
        if at.step >= before {
            self.pending.push_front(read);
            return Ok(false);
        }
        if let Err(error) = self.take_values(&read, at) {
            read.clear();
            self.spare.push(read);
            return Err(error);
        }
        read.delivered += 1;
        if read.delivered == read.steps.len() {
            read.clear();
            self.spare.push(read);
        } else {
            self.pending.push_front(read);
        }
        Ok(true)
    }

    /// Make the values of `at`, one of `read`'s steps (done), the values being delivered.
    fn take_values(&mut self, read: &PendingRead, at: ReadStep) -> Result<()> {
        let datas = match read.done.as_ref().expect("the read is done") {
            Ok(datas) => datas,
            Err(e) => {
                return Err(Error::fetch(format!(
                    "reading the deferred values of step {} from the device failed: {e}",
                    at.step
                )));
            }
        };
        self.values.clear();
        self.filled = 0;
        for (&(i, (start, end)), data) in
            read.slots[at.slots.0..at.slots.1].iter().zip(&datas[at.slots.0..at.slots.1])
        {
            let first = self.values.len();
            match data.as_slice::<f32>() {
                Ok(values) => self.values.extend_from_slice(values),
                Err(_) => self.values.extend(data.iter::<f32>()),
            }
            let slot = &mut self.slots[usize::from(i)];
            slot.range = (first, self.values.len());
            slot.dims.clear();
            slot.dims.extend_from_slice(&read.dims[start..end]);
            self.filled |= 1 << i;
        }
        self.step = at.step;
        self.receivers.clear();
        self.receivers.extend_from_slice(&read.receivers[at.receivers.0..at.receivers.1]);
        Ok(())
    }

    /// The callbacks (flat indices) that asked for the values being delivered.
    #[inline]
    pub(super) fn receivers(&self) -> &[usize] {
        &self.receivers
    }

    /// The slots that the values being delivered fill (a bit per slot).
    #[inline]
    pub(super) fn filled(&self) -> u64 {
        self.filled
    }

    /// The global step the values being delivered belong to.
    #[inline]
    pub(super) fn step(&self) -> u64 {
        self.step
    }

    /// The values of slot `slot` being delivered, flattened, and their shape.
    #[inline]
    pub(super) fn values(&self, slot: usize) -> (&[f32], &[usize]) {
        let delivered = &self.slots[slot];
        (&self.values[delivered.range.0..delivered.range.1], &delivered.dims)
    }

    /// Whether values are yet to be delivered: read, in flight or waiting for a read.
    #[inline]
    pub(super) fn has_pending(&self) -> bool {
        !self.pending.is_empty() || self.open.as_ref().is_some_and(|open| !open.steps.is_empty())
    }

    /// Drop the reads in flight and the steps waiting for one (nobody will receive them).
    pub(super) fn drop_pending(&mut self) {
        self.pending.clear();
        self.open = None;
    }

    /// Reads started, and how many of them the training thread waited for.
    pub(super) fn counts(&self) -> (u64, u64) {
        (self.reads, self.waits)
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::Tensor;

    use super::*;
    use crate::fetch::{Fetch, FetchPlan, Outputs};

    /// How the reads of [`deferred_run`] behave.
    #[derive(Clone, Copy, PartialEq)]
    enum Reads {
        /// Done at their first poll, free: a CPU backend's.
        Free,
        /// Done at their first poll, which waited for the device: CUDA's.
        WaitInPoll,
        /// Done only when waited for: a GPU that never catches up between two boundaries.
        WhenWaitedFor,
    }

    /// Steps 1 to `steps` of a deferred fetch of `loss` (the step's number as its value), on the
    /// CPU, with reads that behave as `reads` says and `interval` between them; the steps'
    /// values delivered at each step's boundary, then at a flush. Returns each delivery as
    /// (step delivered at, step of the values, value), the reads started and those waited for.
    fn deferred_run(steps: u64, reads: Reads, interval: Duration) -> (Vec<(u64, u64, f32)>, u64, u64) {
        let mut plan = FetchPlan::default();
        let bit = plan.declare(&Fetch::deferred("loss"), "receiver").unwrap();
        plan.own(0, &[bit]);
        plan.set_read_interval(interval);
        plan.deferred_mut().reads_wait = Some(reads == Reads::WaitInPoll);
        plan.deferred_mut().reads_when_waited_for = reads == Reads::WhenWaitedFor;
        let device = crate::device::cpu();
        let mut delivered = Vec::new();
        let mut outputs = Outputs::new();
        for step in 1..=steps {
            outputs.clear();
            outputs.put("loss", Tensor::<1>::from_floats([step as f32], &device));
            plan.start_deferred(&outputs, bit, step, &[0]).unwrap();
            while plan.next_arrived(step, false).unwrap() {
                assert_eq!(plan.deferred_receivers(), [0]);
                let value = plan.deferred_view().for_callback(0).get::<f32>("loss").unwrap();
                delivered.push((step, plan.deferred_view().step(), value));
            }
        }
        while plan.next_arrived(u64::MAX, true).unwrap() {
            let value = plan.deferred_view().for_callback(0).get::<f32>("loss").unwrap();
            delivered.push((u64::MAX, plan.deferred_view().step(), value));
        }
        assert!(!plan.has_pending());
        let (reads, waits) = plan.deferred_counts();
        (delivered, reads, waits)
    }

    #[test]
    fn free_reads_deliver_each_step_at_the_next() {
        let (delivered, reads, waits) = deferred_run(4, Reads::Free, Duration::from_secs(3600));
        assert_eq!(delivered, [(2, 1, 1.0), (3, 2, 2.0), (4, 3, 3.0), (u64::MAX, 4, 4.0)]);
        assert_eq!((reads, waits), (4, 0));
    }

    #[test]
    fn reads_that_cost_a_sync_are_spaced_and_carry_every_step_with_its_own_values() {
        // The first read starts at once; the interval has not passed at the later steps, so
        // their values wait on the device and one read at the flush brings them all, each
        // delivered with its own step.
        let (delivered, reads, waits) = deferred_run(5, Reads::WaitInPoll, Duration::from_secs(3600));
        assert_eq!(
            delivered,
            [(2, 1, 1.0), (u64::MAX, 2, 2.0), (u64::MAX, 3, 3.0), (u64::MAX, 4, 4.0), (u64::MAX, 5, 5.0)]
        );
        assert_eq!((reads, waits), (2, 0));
        // No interval: a read starts whenever none is in flight.
        let (delivered, reads, _) = deferred_run(3, Reads::WaitInPoll, Duration::ZERO);
        assert_eq!(delivered, [(2, 1, 1.0), (3, 2, 2.0), (u64::MAX, 3, 3.0)]);
        assert_eq!(reads, 3);
    }

    #[test]
    fn a_device_that_falls_behind_is_waited_for_once_a_read_gathers_the_most_steps() {
        const MAX: u64 = DeferredReads::MAX_STEPS_PER_READ as u64;
        let steps = 2 * MAX + 52;
        let (delivered, reads, waits) = deferred_run(steps, Reads::WhenWaitedFor, Duration::from_secs(3600));
        // Every step once, in order, with its own value.
        let of: Vec<u64> = delivered.iter().map(|d| d.1).collect();
        assert_eq!(of, (1..=steps).collect::<Vec<u64>>());
        assert!(delivered.iter().all(|&(_, step, value)| value == step as f32));
        // Step 1's read is waited for when steps 2..=MAX+1 wait behind it; their read starts
        // at once (the interval has not passed) and is waited for when the next MAX wait.
        assert_eq!(delivered[0], (MAX + 1, 1, 1.0));
        assert_eq!(delivered[1].0, 2 * MAX + 1);
        assert_eq!(delivered[MAX as usize], (2 * MAX + 1, MAX + 1, (MAX + 1) as f32));
        assert_eq!(delivered[MAX as usize + 1].0, u64::MAX);
        // Four reads (1; 2..=MAX+1; MAX+2..=2 MAX+1; the rest at the flush), each waited for.
        assert_eq!((reads, waits), (4, 4));
    }

    /// The steps whose values are on the device and not yet read back: waiting for a read, or
    /// in a read in flight.
    fn steps_on_device(reads: &DeferredReads) -> usize {
        let open = reads.open.as_ref().map_or(0, |open| open.steps.len());
        let in_flight: usize =
            reads.pending.iter().filter(|read| read.done.is_none()).map(|read| read.steps.len()).sum();
        open + in_flight
    }

    /// A deferred fetch of large tensors (1 MiB each) at every step, on a device that falls
    /// behind and with reads spaced an hour apart: what the device holds for the reads stays
    /// within the byte budget (256 MiB by default), plus the one step that reaches it; the oldest
    /// read is waited for first. Every step's values are delivered once, in order.
    #[test]
    fn deferred_values_held_on_the_device_stay_within_the_byte_budget() {
        const ELEMENTS: usize = 1 << 18;
        const STEP_BYTES: u64 = 4 * ELEMENTS as u64;
        let budget: u64 = 256 << 20;
        let steps = 300u64;
        let mut plan = FetchPlan::default();
        let bit = plan.declare(&Fetch::deferred("activations"), "receiver").unwrap();
        plan.own(0, &[bit]);
        plan.set_read_interval(Duration::from_secs(3600));
        plan.set_read_budget(budget);
        plan.deferred_mut().reads_wait = Some(true);
        plan.deferred_mut().reads_when_waited_for = true;
        let device = crate::device::cpu();
        let (mut outputs, mut delivered, mut most_held) = (Outputs::new(), Vec::new(), 0);
        for step in 1..=steps {
            outputs.clear();
            outputs.put(
                "activations",
                Tensor::<1>::from_floats(vec![step as f32; ELEMENTS].as_slice(), &device),
            );
            plan.start_deferred(&outputs, bit, step, &[0]).unwrap();
            while plan.next_arrived(step, false).unwrap() {
                delivered.push(plan.deferred_view().step());
            }
            most_held = most_held.max(steps_on_device(plan.deferred_mut()) as u64 * STEP_BYTES);
        }
        while plan.next_arrived(u64::MAX, true).unwrap() {
            delivered.push(plan.deferred_view().step());
        }
        assert_eq!(delivered, (1..=steps).collect::<Vec<u64>>());
        assert!(
            most_held <= budget + STEP_BYTES,
            "{} MiB of deferred values held on the device, over the budget of {} MiB",
            most_held >> 20,
            budget >> 20
        );
    }
}
