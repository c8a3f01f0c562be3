//! One deferred read ([`PendingRead`]): the values of one or more steps, read back from the device
//! by a burn `Transaction` executed asynchronously, polled without blocking at a step and waited
//! for only when asked to.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll, Wake, Waker};

use burn::tensor::{Tensor, TensorData, Transaction};

/// The result of one deferred read: one `TensorData` per slot, or the error as text.
pub(super) type ReadResult = std::result::Result<Vec<TensorData>, String>;

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
pub(super) struct ReadStep {
    pub(super) step: u64,
    /// Its slots: a range of `PendingRead::slots` (and of the read's values, one per slot).
    pub(super) slots: (usize, usize),
    /// The callbacks that asked at that step: a range of `PendingRead::receivers`.
    pub(super) receivers: (usize, usize),
}

/// One deferred read: the values of one or more steps, every step's tensors registered in one
/// burn `Transaction`, and who asked at each step. Recycled, buffers and all, once its values
/// are delivered.
pub(super) struct PendingRead {
    /// The steps it reads, in order.
    pub(super) steps: Vec<ReadStep>,
    /// Per step and slot: the slot's index and the range of its shape in `dims`.
    pub(super) slots: Vec<(u8, (usize, usize))>,
    pub(super) dims: Vec<usize>,
    pub(super) receivers: Vec<usize>,
    /// The steps' tensors, one per entry of `slots`, until the read starts.
    pub(super) tensors: Vec<Tensor<1>>,
    /// The bytes of those tensors: what the device holds for this read until it is done.
    pub(super) bytes: u64,
    /// The read in flight (its slot empty once it is done).
    read: Pin<Box<dyn Read>>,
    /// The read's values once they are here.
    pub(super) done: Option<ReadResult>,
    /// How many of `steps` were delivered.
    pub(super) delivered: usize,
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
    pub(super) fn new() -> Self {
        PendingRead {
            steps: Vec::new(),
            slots: Vec::new(),
            dims: Vec::new(),
            receivers: Vec::new(),
            tensors: Vec::new(),
            bytes: 0,
            read: Box::pin(ReadSlot { start: read_async, future: None }),
            done: None,
            delivered: 0,
        }
    }

    /// An empty read whose reads are done only when waited for ([`read_when_waited_for`]).
    #[cfg(test)]
    pub(super) fn waited_for() -> Self {
        PendingRead { read: Box::pin(ReadSlot { start: read_when_waited_for, future: None }), ..Self::new() }
    }

    /// Empty it for reuse, keeping its buffers.
    pub(super) fn clear(&mut self) {
        self.steps.clear();
        self.slots.clear();
        self.dims.clear();
        self.receivers.clear();
        self.tensors.clear();
        self.bytes = 0;
        self.done = None;
        self.delivered = 0;
    }

    /// Start reading the tensors of its steps, leaving `tensors` empty for the next use.
    pub(super) fn start(&mut self) {
        // A transaction, not `into_data_async`: with burn's default (synchronous) runtime kind,
        // `into_data_async` on a GPU backend returns at once with bytes that copy themselves off
        // the device, blocking, when first read; a transaction's asynchronous execution queues
        // the copies now and completes when the bytes are on the host.
        let mut transaction = Transaction::default();
        for tensor in self.tensors.drain(..) {
            transaction = transaction.register(tensor);
        }
        self.read.as_mut().start(transaction);
    }

    /// One poll that never blocks: starts the read on its first call (an `async fn` does
    /// nothing before it is polled). Returns whether the values are here.
    pub(super) fn poll_now(&mut self) -> bool {
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
    pub(super) fn wait(&mut self) -> bool {
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
