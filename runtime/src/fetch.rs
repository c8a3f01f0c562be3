//! Named values computed along with a training step, and their trip to the callbacks that asked.
//!
//! The training step puts named tensors into [`Outputs`] (the loss is always there as `"loss"`).
//! Callbacks declare what they may want with [`Callback::fetches`](crate::callback::Callback::fetches) and
//! say at each step whether they want it now with
//! [`Callback::wants_fetch`](crate::callback::Callback::wants_fetch). After the step the trainer copies the
//! host values every interested callback asked for to the host in **one** transfer, hands device
//! tensors over as they are, and on a step where nobody asked it transfers nothing.
//!
//! A **deferred** fetch ([`Fetch::deferred`], `#[fetch("cost", deferred)]`) is a host value read
//! back without making the step wait for the device: the trainer keeps the step's tensors, reads
//! them back with a burn `Transaction` executed asynchronously, and goes on with the next step;
//! the values reach the callbacks that asked in the [`fetched`](crate::callback::Callback::fetched)
//! event of a later step, each step's with the step it belongs to ([`Fetched::step`]). At most
//! one read is in flight; the steps that ask meanwhile, or sooner than
//! [`Trainer::deferred_read_interval`](crate::trainer::Trainer::deferred_read_interval) after
//! the last read started, join the next read (on a CPU backend, where a read costs nothing, each
//! step's values arrive at the next step). Before each epoch's `after_epoch`, before a checkpoint
//! and before `after_train` the trainer reads and waits for every step's values and delivers
//! them, so an epoch's values stay in that epoch, a checkpoint holds what its callbacks received
//! and a resumed run receives none twice.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use burn::tensor::{Tensor, TensorData, Transaction};

use crate::error::{Error, Result};

/// A float tensor of rank 1 to 4 produced by a step, type-erased over its rank.
#[derive(Debug, Clone)]
pub enum OutputTensor {
    /// Rank 1 (a scalar is a rank-1 tensor of one element).
    Rank1(Tensor<1>),
    /// Rank 2.
    Rank2(Tensor<2>),
    /// Rank 3.
    Rank3(Tensor<3>),
    /// Rank 4.
    Rank4(Tensor<4>),
}

macro_rules! output_tensor_ranks {
    ($($rank:literal => $variant:ident),*) => {
        $(
            impl From<Tensor<$rank>> for OutputTensor {
                fn from(tensor: Tensor<$rank>) -> Self {
                    OutputTensor::$variant(tensor)
                }
            }

            impl FetchValue for Tensor<$rank> {
                const KIND: FetchKind = FetchKind::Device;

                fn from_fetched(values: &Fetched<'_>, name: &str) -> Result<Self> {
                    match values.device(name)? {
                        OutputTensor::$variant(tensor) => Ok(tensor.clone()),
                        other => Err(Error::Fetch(format!(
                            "`{name}` is a tensor of rank {}, asked for as Tensor<{}>",
                            other.rank(),
                            $rank
                        ))),
                    }
                }
            }
        )*

        impl OutputTensor {
            /// The tensor's rank.
            pub fn rank(&self) -> usize {
                match self { $(OutputTensor::$variant(_) => $rank,)* }
            }

            /// The tensor's shape.
            pub fn dims(&self) -> Vec<usize> {
                match self { $(OutputTensor::$variant(tensor) => tensor.dims().to_vec(),)* }
            }

            /// Append the tensor's shape to `dims` (no allocation once `dims` has room).
            pub(crate) fn extend_dims(&self, dims: &mut Vec<usize>) {
                match self { $(OutputTensor::$variant(tensor) => dims.extend_from_slice(&tensor.dims()),)* }
            }

            /// The number of elements.
            pub fn num_elements(&self) -> usize {
                match self { $(OutputTensor::$variant(tensor) => tensor.dims().iter().product(),)* }
            }

            /// The tensor flattened to rank 1, detached from the autodiff graph (no data moves).
            pub fn flat(&self) -> Tensor<1> {
                let n = self.num_elements();
                match self {
                    $(OutputTensor::$variant(tensor) => tensor.clone().detach().reshape([n]),)*
                }
            }
        }
    };
}

output_tensor_ranks!(1 => Rank1, 2 => Rank2, 3 => Rank3, 4 => Rank4);

/// The named tensors one step (or one inference batch) produced. Reused from step to step: putting
/// the same number of outputs each step allocates nothing.
#[derive(Debug, Default)]
pub struct Outputs {
    entries: Vec<(&'static str, OutputTensor)>,
}

impl Outputs {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Put a named tensor; a second put of the same name replaces the first.
    pub fn put(&mut self, name: &'static str, tensor: impl Into<OutputTensor>) {
        let tensor = tensor.into();
        match self.entries.iter_mut().find(|(n, _)| *n == name) {
            Some(entry) => entry.1 = tensor,
            None => self.entries.push((name, tensor)),
        }
    }

    /// The tensor named `name`, if this step produced it.
    pub fn get(&self, name: &str) -> Option<&OutputTensor> {
        self.entries.iter().find(|(n, _)| *n == name).map(|(_, t)| t)
    }

    /// The names produced, in the order they were put.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.entries.iter().map(|(n, _)| *n)
    }

    /// Remove every output, keeping the storage.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    fn names_list(&self) -> String {
        let names: Vec<String> = self.names().map(|n| format!("`{n}`")).collect();
        if names.is_empty() { "nothing".into() } else { names.join(", ") }
    }
}

/// Where a fetched value is handed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FetchKind {
    /// Copied to the host (f32, f64, `Vec<f32>`, `TensorData`), one transfer per step for all,
    /// handed to `after_step` of the same step.
    Host,
    /// Handed over as a device tensor, no transfer.
    Device,
    /// Copied to the host without stopping the step: handed to the
    /// [`fetched`](crate::callback::Callback::fetched) event of a later step (see the
    /// [module](mod@crate::fetch)).
    Deferred,
}

impl FetchKind {
    /// The deferred form of a host value's kind: what `#[fetch(..., deferred)]` declares. A
    /// device tensor is never read back, so it cannot be deferred: a `static` of fetches that
    /// asks for one fails to compile with this message.
    pub const fn deferred(self) -> FetchKind {
        match self {
            FetchKind::Host | FetchKind::Deferred => FetchKind::Deferred,
            FetchKind::Device => panic!(
                "a device tensor (`Tensor<N>`) cannot be a deferred fetch: it is never read back; fetch it as f32, f64, Vec<f32> or TensorData, or drop `deferred`"
            ),
        }
    }
}

/// One value a callback may ask for: a step output's name and where it wants it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetch {
    /// The output's name, as the step puts it.
    pub name: Cow<'static, str>,
    /// Host copy or device tensor.
    pub kind: FetchKind,
}

impl Fetch {
    /// A value copied to the host.
    pub const fn host(name: &'static str) -> Self {
        Fetch { name: Cow::Borrowed(name), kind: FetchKind::Host }
    }

    /// A tensor that stays on the device.
    pub const fn device(name: &'static str) -> Self {
        Fetch { name: Cow::Borrowed(name), kind: FetchKind::Device }
    }

    /// A value copied to the host without stopping the step: delivered to the callback's
    /// [`fetched`](crate::callback::Callback::fetched) event at a later step, with
    /// [`Fetched::step`] saying which step it belongs to.
    pub const fn deferred(name: &'static str) -> Self {
        Fetch { name: Cow::Borrowed(name), kind: FetchKind::Deferred }
    }

    /// A fetch of the kind `T` is handed over as: `Fetch::of::<f32>("cost")`.
    pub const fn of<T: FetchValue>(name: &'static str) -> Self {
        Fetch { name: Cow::Borrowed(name), kind: T::KIND }
    }
}

/// A type a fetched value can be handed over as.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be fetched from a training step",
    label = "not a fetchable type",
    note = "fetchable types: `f32`, `f64` (scalars), `Vec<f32>`, `TensorData` (copied to the host), \
            `Tensor<1>` .. `Tensor<4>` (stay on the device)"
)]
pub trait FetchValue: Sized {
    /// Whether the value is copied to the host or stays on the device.
    const KIND: FetchKind;

    /// Take the value named `name` out of this step's values.
    fn from_fetched(values: &Fetched<'_>, name: &str) -> Result<Self>;
}

impl FetchValue for f32 {
    const KIND: FetchKind = FetchKind::Host;

    fn from_fetched(values: &Fetched<'_>, name: &str) -> Result<Self> {
        let (data, shape) = values.host(name)?;
        match data {
            [value] => Ok(*value),
            _ => Err(Error::Fetch(format!(
                "`{name}` has shape {shape:?}, not a scalar: fetch it as Vec<f32> or TensorData"
            ))),
        }
    }
}

impl FetchValue for f64 {
    const KIND: FetchKind = FetchKind::Host;

    fn from_fetched(values: &Fetched<'_>, name: &str) -> Result<Self> {
        f32::from_fetched(values, name).map(f64::from)
    }
}

impl FetchValue for Vec<f32> {
    const KIND: FetchKind = FetchKind::Host;

    fn from_fetched(values: &Fetched<'_>, name: &str) -> Result<Self> {
        values.host(name).map(|(data, _)| data.to_vec())
    }
}

impl FetchValue for TensorData {
    const KIND: FetchKind = FetchKind::Host;

    fn from_fetched(values: &Fetched<'_>, name: &str) -> Result<Self> {
        let (data, shape) = values.host(name)?;
        Ok(TensorData::new(data.to_vec(), shape.to_vec()))
    }
}

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
    /// Deferred values being delivered: range in `FetchPlan::deferred` and the shape.
    deferred_range: (usize, usize),
    deferred_dims: Vec<usize>,
}

/// The result of one step's deferred read: one `TensorData` per slot, or the error as text.
type ReadResult = std::result::Result<Vec<TensorData>, String>;

/// One step's deferred read: a burn `Transaction` executed asynchronously, turned into the
/// crate's result type.
async fn read_async(transaction: Transaction) -> ReadResult {
    transaction.execute_async().await.map_err(|e| e.to_string())
}

/// A read that a GPU would make: not done when polled without a waker to call (the trainer's
/// polls at step boundaries), done when the trainer waits for it.
#[cfg(test)]
async fn read_when_waited_for(transaction: Transaction) -> ReadResult {
    std::future::poll_fn(|cx| {
        // `Waker::noop()` carries no data; the waiting thread's waker does.
        if cx.waker().data().is_null() { Poll::Pending } else { Poll::Ready(()) }
    })
    .await;
    read_async(transaction).await
}

pin_project_lite::pin_project! {
    /// The future of a deferred read in a box that outlives it: allocated for the first reads
    /// of a run and then reused, read after read, so that a step with a deferred fetch allocates
    /// nothing that burn's own `Transaction` does not.
    struct ReadSlot<F> {
        start: fn(Transaction) -> F,
        #[pin]
        future: Option<F>,
    }
}

/// A [`ReadSlot`] with its future's type erased (the future of an `async fn` has no name).
trait Read: Send {
    /// Put the read of `transaction` in the slot (the slot is empty).
    fn start(self: Pin<&mut Self>, transaction: Transaction);
    /// Poll the read; once it is ready the slot is empty again.
    fn poll_read(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<ReadResult>;
}

impl<F: Future<Output = ReadResult> + Send> Read for ReadSlot<F> {
    fn start(self: Pin<&mut Self>, transaction: Transaction) {
        let mut this = self.project();
        let future = (this.start)(transaction);
        this.future.set(Some(future));
    }

    fn poll_read(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<ReadResult> {
        let mut this = self.project();
        let Some(future) = this.future.as_mut().as_pin_mut() else {
            return Poll::Ready(Err("no read was started in this slot".into()));
        };
        let result = std::task::ready!(future.poll(cx));
        this.future.set(None);
        Poll::Ready(result)
    }
}

/// One step in a deferred read: its global step and its ranges in the read's lists.
#[derive(Debug, Clone, Copy)]
struct ReadStep {
    step: u64,
    /// Its slots: a range of `PendingRead::slots` (and of the read's values, one per slot).
    slots: (usize, usize),
    /// The callbacks that asked at that step: a range of `PendingRead::receivers`.
    receivers: (usize, usize),
}

/// One deferred read: the values of one or more steps, every step's tensors registered in one
/// burn `Transaction`, and who asked at each step. Recycled, buffers and all, once its values
/// are delivered.
struct PendingRead {
    /// The steps it reads, in order.
    steps: Vec<ReadStep>,
    /// Per step and slot: the slot's index and the range of its shape in `dims`.
    slots: Vec<(u8, (usize, usize))>,
    dims: Vec<usize>,
    receivers: Vec<usize>,
    /// The steps' tensors, one per entry of `slots`, until the read starts.
    tensors: Vec<Tensor<1>>,
    /// The read in flight (its slot empty once it is done).
    read: Pin<Box<dyn Read>>,
    /// The read's values once they are here.
    done: Option<ReadResult>,
    /// How many of `steps` were delivered.
    delivered: usize,
}

impl std::fmt::Debug for PendingRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingRead")
            .field("steps", &self.steps)
            .field("done", &self.done.is_some())
            .field("delivered", &self.delivered)
            .finish()
    }
}

/// Wakes the thread that waits for a read.
struct ThreadWaker(std::thread::Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

impl PendingRead {
    /// An empty read, its box allocated once for the run.
    fn new() -> Self {
        PendingRead {
            steps: Vec::new(),
            slots: Vec::new(),
            dims: Vec::new(),
            receivers: Vec::new(),
            tensors: Vec::new(),
            read: Box::pin(ReadSlot { start: read_async, future: None }),
            done: None,
            delivered: 0,
        }
    }

    /// An empty read whose reads are done only when waited for ([`read_when_waited_for`]).
    #[cfg(test)]
    fn waited_for() -> Self {
        PendingRead { read: Box::pin(ReadSlot { start: read_when_waited_for, future: None }), ..Self::new() }
    }

    /// Empty it for reuse, keeping its buffers.
    fn clear(&mut self) {
        self.steps.clear();
        self.slots.clear();
        self.dims.clear();
        self.receivers.clear();
        self.tensors.clear();
        self.done = None;
        self.delivered = 0;
    }

    /// One poll that never blocks: starts the read on its first call (an `async fn` does
    /// nothing before it is polled). Returns whether the values are here.
    fn poll_now(&mut self) -> bool {
        if self.done.is_none() {
            let mut cx = TaskContext::from_waker(Waker::noop());
            if let Poll::Ready(result) = self.read.as_mut().poll_read(&mut cx) {
                self.done = Some(result);
            }
        }
        self.done.is_some()
    }

    /// Wait until the values are here (parking the thread between polls); returns whether it
    /// had to wait.
    fn wait(&mut self) -> bool {
        if self.poll_now() {
            return false;
        }
        let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
        let mut cx = TaskContext::from_waker(&waker);
        loop {
            match self.read.as_mut().poll_read(&mut cx) {
                Poll::Ready(result) => {
                    self.done = Some(result);
                    return true;
                }
                Poll::Pending => std::thread::park_timeout(std::time::Duration::from_millis(1)),
            }
        }
    }
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
    /// Deferred reads started and not yet delivered, oldest first (the front may be partly
    /// delivered). At most one is in flight, except at a flush.
    pending: VecDeque<PendingRead>,
    /// The steps whose deferred values wait for the next read.
    open: Option<PendingRead>,
    /// Reads delivered, kept for the next ones with their buffers (a few exist in a run).
    spare: Vec<PendingRead>,
    /// The least time between the starts of two reads that are not free
    /// ([`Trainer::deferred_read_interval`](crate::trainer::Trainer::deferred_read_interval)).
    read_interval: Duration,
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
    /// The callbacks the deferred values being delivered go to (flat indices).
    deferred_receivers: Vec<usize>,
    /// The host values' tensors of a step, before they are joined for one transfer (the list
    /// is kept from step to step).
    host_tensors: Vec<Tensor<1>>,
    /// The deferred values being delivered: the slots, the values, their step.
    deferred_filled: u64,
    deferred: Vec<f32>,
    deferred_step: u64,
    /// Deferred reads started, and how many of them the training thread had to wait for.
    deferred_reads: u64,
    deferred_waits: u64,
}

impl FetchPlan {
    /// Register a declared fetch; returns its slot's bit.
    pub(crate) fn declare(&mut self, fetch: &Fetch, owner: &str) -> Result<u64> {
        let index = match self.slots.iter().position(|s| s.fetch == *fetch) {
            Some(index) => index,
            None => {
                if self.slots.len() == 64 {
                    return Err(Error::Fetch(format!(
                        "`{owner}` declares fetch `{}`: at most 64 distinct fetches are supported",
                        fetch.name
                    )));
                }
                if fetch.name.is_empty() {
                    return Err(Error::Fetch(format!("`{owner}` declares a fetch with an empty name")));
                }
                self.slots.push(Slot {
                    fetch: fetch.clone(),
                    output: usize::MAX,
                    range: (0, 0),
                    dims: Vec::new(),
                    device: None,
                    deferred_range: (0, 0),
                    deferred_dims: Vec::new(),
                });
                self.slots.len() - 1
            }
        };
        Ok(1 << index)
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
                return Err(Error::Fetch(format!(
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

    /// The slots of `mask` that are deferred.
    pub(crate) fn deferred_bits(&self) -> u64 {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.fetch.kind == FetchKind::Deferred)
            .fold(0, |bits, (i, _)| bits | 1 << i)
    }

    /// The most steps one read gathers: once this many wait, the next read starts without
    /// waiting for the interval, and if a read is still in flight the training thread waits for
    /// it (the host never runs more than this many fetching steps ahead of the device's reads).
    pub(crate) const MAX_STEPS_PER_READ: usize = 1024;

    /// An empty read for the pool.
    fn new_read(&self) -> PendingRead {
        #[cfg(test)]
        if self.reads_when_waited_for {
            return PendingRead::waited_for();
        }
        PendingRead::new()
    }

    /// The least time between the starts of two reads that are not free.
    pub(crate) fn set_read_interval(&mut self, interval: Duration) {
        self.read_interval = interval;
    }

    /// Add the deferred slots in `mask` from `outputs` (global step `step`), for the callbacks
    /// `receivers`, to the next read, and start that read if it is due: no read is in flight,
    /// and the last one was free or started `read_interval` ago. Never waits for the device.
    pub(crate) fn start_deferred(
        &mut self,
        outputs: &Outputs,
        mask: u64,
        step: u64,
        receivers: &[usize],
    ) -> Result<()> {
        let mut open = match self.open.take() {
            Some(open) => open,
            None => self.spare.pop().unwrap_or_else(|| self.new_read()),
        };
        let (first_slot, first_dim) = (open.slots.len(), open.dims.len());
        for (i, slot) in self.slots.iter_mut().enumerate() {
            if mask & (1 << i) == 0 || slot.fetch.kind != FetchKind::Deferred {
                continue;
            }
            let tensor = match slot.find(outputs) {
                Ok(tensor) => tensor,
                Err(error) => {
                    open.slots.truncate(first_slot);
                    open.tensors.truncate(first_slot);
                    open.dims.truncate(first_dim);
                    self.open = Some(open);
                    return Err(error);
                }
            };
            let start = open.dims.len();
            tensor.extend_dims(&mut open.dims);
            open.slots.push((i as u8, (start, open.dims.len())));
            let flat = tensor.flat();
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
    /// `read_interval` ago, or [`FetchPlan::MAX_STEPS_PER_READ`] steps wait.
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
                && open.steps.len() < Self::MAX_STEPS_PER_READ
                && let Some(last) = self.last_start
                && last.elapsed() < self.read_interval
            {
                return;
            }
        }
        let mut read = self.open.take().expect("steps waiting for a read");
        // A transaction, not `into_data_async`: with burn's default (synchronous) runtime kind,
        // `into_data_async` on a GPU backend returns at once with bytes that copy themselves off
        // the device, blocking, when first read; a transaction's asynchronous execution queues
        // the copies now and completes when the bytes are on the host.
        let mut transaction = Transaction::default();
        for tensor in read.tensors.drain(..) {
            transaction = transaction.register(tensor);
        }
        self.last_start = Some(Instant::now());
        read.read.as_mut().start(transaction);
        // The first poll starts the read (queues the copies behind the steps' work); on a CPU
        // backend the values are already here, for free.
        let ready = read.poll_now();
        self.free_reads = ready && self.reads_wait == Some(false);
        self.deferred_reads += 1;
        self.pending.push_back(read);
    }

    /// The next step's deferred values, of a step before `before`, once they are here: they
    /// become the values that [`FetchPlan::deferred_view`] shows and their callbacks
    /// [`FetchPlan::deferred_receivers`]; returns whether there was one. Waits for a read in
    /// flight only with `flush` (before an epoch's end, a checkpoint, the end: every step waiting
    /// is then read and delivered) or when [`FetchPlan::MAX_STEPS_PER_READ`] steps wait behind it.
    pub(crate) fn next_arrived(&mut self, before: u64, flush: bool) -> Result<bool> {
        if flush {
            self.start_if_due(true);
        }
        let Some(mut read) = self.pending.pop_front() else {
            self.start_if_due(false);
            return Ok(false);
        };
        if !read.poll_now() {
            let behind = self.open.as_ref().is_some_and(|o| o.steps.len() >= Self::MAX_STEPS_PER_READ);
            if !flush && !behind {
                self.pending.push_front(read);
                return Ok(false);
            }
            if read.wait() {
                self.deferred_waits += 1;
            }
        }
        // A read holds at least one step and is recycled once its last is delivered.
        let at = read.steps[read.delivered];
        if at.step >= before {
            self.pending.push_front(read);
            return Ok(false);
        }
        let datas = match read.done.as_ref().expect("the read is done") {
            Ok(datas) => datas,
            Err(e) => {
                let error = Error::Fetch(format!(
                    "reading the deferred values of step {} from the device failed: {e}",
                    at.step
                ));
                read.clear();
                self.spare.push(read);
                return Err(error);
            }
        };
        self.deferred.clear();
        self.deferred_filled = 0;
        for (&(i, (start, end)), data) in
            read.slots[at.slots.0..at.slots.1].iter().zip(&datas[at.slots.0..at.slots.1])
        {
            let first = self.deferred.len();
            match data.as_slice::<f32>() {
                Ok(values) => self.deferred.extend_from_slice(values),
                Err(_) => self.deferred.extend(data.iter::<f32>()),
            }
            let slot = &mut self.slots[usize::from(i)];
            slot.deferred_range = (first, self.deferred.len());
            slot.deferred_dims.clear();
            slot.deferred_dims.extend_from_slice(&read.dims[start..end]);
            self.deferred_filled |= 1 << i;
        }
        self.deferred_step = at.step;
        self.deferred_receivers.clear();
        self.deferred_receivers.extend_from_slice(&read.receivers[at.receivers.0..at.receivers.1]);
        read.delivered += 1;
        if read.delivered == read.steps.len() {
            read.clear();
            self.spare.push(read);
        } else {
            self.pending.push_front(read);
        }
        Ok(true)
    }

    /// The callbacks (flat indices) that asked for the deferred values being delivered.
    pub(crate) fn deferred_receivers(&self) -> &[usize] {
        &self.deferred_receivers
    }

    /// Whether deferred values are yet to be delivered: read, in flight or waiting for a read.
    #[inline]
    pub(crate) fn has_pending(&self) -> bool {
        !self.pending.is_empty() || self.open.as_ref().is_some_and(|open| !open.steps.is_empty())
    }

    /// Drop the reads in flight and the steps waiting for one (training ended by an error:
    /// nobody will receive them).
    pub(crate) fn drop_pending(&mut self) {
        self.pending.clear();
        self.open = None;
    }

    /// Deferred reads started, and how many of them the training thread waited for.
    pub(crate) fn deferred_counts(&self) -> (u64, u64) {
        (self.deferred_reads, self.deferred_waits)
    }

    /// A view of the deferred values being delivered.
    pub(crate) fn deferred_view(&self) -> Fetched<'_> {
        Fetched { plan: Some(self), own: &[], pinned: None, deferred: true }
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

    /// The one host value of slot `bit`, filled at this step; an error when it is not a scalar.
    pub(crate) fn host_scalar(&self, bit: u64, why: &str) -> Result<f32> {
        let slot = &self.slots[bit.trailing_zeros() as usize];
        match &self.host[slot.range.0..slot.range.1] {
            [value] => Ok(*value),
            values => Err(Error::Fetch(format!(
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

    /// A view of the current step's values.
    pub(crate) fn view(&self) -> Fetched<'_> {
        Fetched { plan: Some(self), own: &[], pinned: None, deferred: false }
    }

    /// Record the slots of callback `callback` (its flat index), in the order of its fetches.
    pub(crate) fn own(&mut self, callback: usize, bits: &[u64]) {
        if self.owned.len() <= callback {
            self.owned.resize_with(callback + 1, Box::default);
        }
        self.owned[callback] = bits.iter().map(|bit| bit.trailing_zeros() as u8).collect();
    }

    fn slot(&self, pinned: Option<u8>, name: &str, kind: FetchKind) -> Result<&Slot> {
        let found = match pinned.map(usize::from) {
            Some(i) if self.slots[i].fetch.kind == kind => Some((i, &self.slots[i])),
            _ => self.slots.iter().enumerate().find(|(_, s)| s.fetch.kind == kind && s.fetch.name == name),
        };
        let (i, slot) = found.ok_or_else(|| {
            Error::Fetch(format!(
                "`{name}` was not declared as a {} fetch: list it in the callback's fetches",
                match kind {
                    FetchKind::Host => "host",
                    FetchKind::Device => "device",
                    FetchKind::Deferred => "deferred",
                }
            ))
        })?;
        let filled = if kind == FetchKind::Deferred { self.deferred_filled } else { self.filled };
        if filled & (1 << i) == 0 {
            return Err(Error::Fetch(format!("`{name}` was not fetched at this step")));
        }
        Ok(slot)
    }
}

impl Slot {
    /// This slot's tensor among `outputs` (where it was last found, or by its name).
    fn find<'o>(&mut self, outputs: &'o Outputs) -> Result<&'o OutputTensor> {
        if let Some((name, tensor)) = outputs.entries.get(self.output)
            && *name == self.fetch.name
        {
            return Ok(tensor);
        }
        match outputs.entries.iter().position(|(n, _)| *n == self.fetch.name) {
            Some(index) => {
                self.output = index;
                Ok(&outputs.entries[index].1)
            }
            None => Err(Error::Fetch(format!(
                "`{}` was asked for, but this step did not produce it; it produced {}",
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

/// The values fetched at one step, as handed to `after_step`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Fetched<'a> {
    plan: Option<&'a FetchPlan>,
    /// The slots of the callback these values are handed to, in the order of its `fetches()`,
    /// resolved once at setup (empty when the receiver is not known: then names are searched).
    own: &'a [u8],
    /// The slot that `host` / `device` read without a search (set by [`Fetched::nth`]).
    pinned: Option<u8>,
    /// Whether these are deferred values (the `fetched` event) rather than the step's own.
    deferred: bool,
}

impl<'a> Fetched<'a> {
    /// No values (a step at which nobody asked for anything).
    pub const fn none() -> Self {
        Fetched { plan: None, own: &[], pinned: None, deferred: false }
    }

    /// The global step these values belong to (`global_step` after it): the current step in
    /// `after_step`, an earlier one for deferred values in `fetched`; 0 when nothing was fetched.
    pub fn step(&self) -> u64 {
        match self.plan {
            Some(plan) if self.deferred => plan.deferred_step,
            Some(plan) => plan.step,
            None => 0,
        }
    }

    /// Whether these are deferred values, delivered in the `fetched` event.
    pub fn is_deferred(&self) -> bool {
        self.deferred
    }

    /// The same values, as handed to the callback of flat index `callback`: its fetches are then
    /// read by position ([`Fetched::nth`]) instead of by name. Called by the trainer and by the
    /// sets' dispatch; costs an index.
    #[doc(hidden)]
    #[inline]
    pub fn for_callback(self, callback: usize) -> Self {
        match self.plan {
            Some(plan) => Fetched {
                own: plan.owned.get(callback).map_or(&[], |slots| &slots[..]),
                pinned: None,
                ..self
            },
            None => self,
        }
    }

    /// The values with the receiver's fetch number `k` (its position in the callback's
    /// `fetches()`, named `name`) resolved to its slot: what generated code reads a fetched
    /// parameter through, so that no name is searched at a step. Falls back to the search by
    /// name when the receiver is not known or the slot does not hold `name`.
    #[doc(hidden)]
    #[inline]
    pub fn nth(&self, k: usize, name: &str) -> Self {
        match (self.plan, self.own.get(k)) {
            (Some(plan), Some(&slot)) if plan.slots[usize::from(slot)].fetch.name == name => {
                Fetched { pinned: Some(slot), ..*self }
            }
            _ => Fetched { pinned: None, ..*self },
        }
    }

    /// Whether the receiver's fetch number `k` (its position in the callback's `fetches()`) has
    /// a value here: what a generated deferred hook checks before its call, since one `fetched`
    /// delivery holds only what was asked for at that step.
    #[doc(hidden)]
    #[inline]
    pub fn holds(&self, k: usize) -> bool {
        match (self.plan, self.own.get(k)) {
            (Some(plan), Some(&slot)) => {
                let filled = if self.deferred { plan.deferred_filled } else { plan.filled };
                filled & (1 << slot) != 0
            }
            _ => false,
        }
    }

    /// The value `name`, handed over as `T`: `values.get::<f32>("cost")?`.
    pub fn get<T: FetchValue>(&self, name: &str) -> Result<T> {
        T::from_fetched(self, name)
    }

    /// The host copy of `name`: its values, flattened, and its shape (in `fetched`, the
    /// deferred copy).
    pub fn host(&self, name: &str) -> Result<(&'a [f32], &'a [usize])> {
        let plan = self.plan.ok_or_else(|| Self::nothing(name))?;
        if self.deferred {
            let slot = plan.slot(self.pinned, name, FetchKind::Deferred)?;
            return Ok((&plan.deferred[slot.deferred_range.0..slot.deferred_range.1], &slot.deferred_dims));
        }
        let slot = plan.slot(self.pinned, name, FetchKind::Host)?;
        Ok((&plan.host[slot.range.0..slot.range.1], &slot.dims))
    }

    /// The device tensor `name`.
    pub fn device(&self, name: &str) -> Result<&'a OutputTensor> {
        let plan = self.plan.ok_or_else(|| Self::nothing(name))?;
        let slot = plan.slot(self.pinned, name, FetchKind::Device)?;
        slot.device.as_ref().ok_or_else(|| Self::nothing(name))
    }

    fn nothing(name: &str) -> Error {
        Error::Fetch(format!("`{name}` was not fetched at this step"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two callbacks: #0 fetches `a` and `b`, #1 fetches `b` (the slot #0 declared).
    fn plan() -> FetchPlan {
        let mut plan = FetchPlan::default();
        let first = [
            plan.declare(&Fetch::host("a"), "first").unwrap(),
            plan.declare(&Fetch::host("b"), "first").unwrap(),
        ];
        plan.own(0, &first);
        let second = [plan.declare(&Fetch::host("b"), "second").unwrap()];
        plan.own(1, &second);
        plan
    }

    #[test]
    fn a_callbacks_fetches_are_resolved_to_its_slots_at_setup() {
        let plan = plan();
        assert_eq!(plan.view().for_callback(0).nth(0, "a").pinned, Some(0));
        assert_eq!(plan.view().for_callback(0).nth(1, "b").pinned, Some(1));
        // The second callback's first fetch is the slot the first callback declared for `b`.
        assert_eq!(plan.view().for_callback(1).nth(0, "b").pinned, Some(1));
    }

    #[test]
    fn an_unknown_receiver_or_another_name_falls_back_to_the_name() {
        let plan = plan();
        // No receiver, a position past the callback's fetches, a name the slot does not hold,
        // a callback without fetches: no slot is pinned, `host` / `device` search by name.
        assert_eq!(plan.view().nth(0, "a").pinned, None);
        assert_eq!(plan.view().for_callback(1).nth(1, "b").pinned, None);
        assert_eq!(plan.view().for_callback(0).nth(0, "b").pinned, None);
        assert_eq!(plan.view().for_callback(7).nth(0, "a").pinned, None);
        assert_eq!(Fetched::none().for_callback(0).nth(0, "a").pinned, None);
    }

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
        plan.reads_wait = Some(reads == Reads::WaitInPoll);
        plan.reads_when_waited_for = reads == Reads::WhenWaitedFor;
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
        const MAX: u64 = FetchPlan::MAX_STEPS_PER_READ as u64;
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
}
