//! The bounded queues that feed stoker's background threads (monitor writers, tensor dumps,
//! printers, commands), and what a run reports about them: a writer that failed
//! ([`WriterFailure`]), work a full queue dropped ([`DroppedWork`]), and a live view of one queue
//! ([`WriterQueue`], whose docs say what a full queue does).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, OnceLock};

use crate::error::Error;

/// How many batches of records a monitor writer's queue holds by default (a batch is what the
/// callbacks put during one event). When it is full, training waits for the writer, unless the
/// writer [drops](super::MonitorSink::drops_when_full) (a remote one: then the batch is dropped
/// and counted).
pub const MONITOR_QUEUE_CAPACITY: usize = 256;

/// A background writer that failed during a run: it was disabled at its first error (reported
/// once on stderr) and training went on without it.
///
/// It displays as `writer <name> failed at global step <n> (epoch <e>): <error>`, and is an
/// [`std::error::Error`] whose source is [`error`](Self::error).
#[derive(Debug, Clone)]
pub struct WriterFailure {
    /// The writer's name (`"TensorBoard"`, `"stats.json"`, the name a [`MonitorSink`] gives).
    ///
    /// [`MonitorSink`]: super::MonitorSink
    pub writer: String,
    /// What went wrong: an [`Error::Monitor`] whose message is the writer's error's (the operating
    /// system's message, or the panic's) and whose [`source`](std::error::Error::source) is the
    /// `std::io::Error` the writer returned, to downcast (`None` for a panic). Shared (`Arc`)
    /// because a failure is cloned (each [`TrainReport`](crate::trainer::TrainReport) and
    /// [`Monitors::writer_failures`](super::Monitors::writer_failures) call gets a copy, while the
    /// queue keeps its own) and an error holding an `std::io::Error` cannot be.
    pub error: Arc<Error>,
    /// The global step of the records it failed on: nothing from this step on reached it.
    pub global_step: u64,
    /// The epoch of those records.
    pub epoch_num: u64,
}

impl std::fmt::Display for WriterFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "writer {} failed at global step {} (epoch {}): {}",
            self.writer, self.global_step, self.epoch_num, self.error
        )
    }
}

/// The source is [`error`](WriterFailure::error) (its message is already part of this one's).
impl std::error::Error for WriterFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.error.as_ref())
    }
}

/// Work a full queue dropped during a run (commands, a remote writer's records: see
/// [`WriterQueue`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DroppedWork {
    /// The queue's name (`"SendStat(validation_error)"`...).
    pub queue: String,
    /// How many items it dropped.
    pub dropped: u64,
    /// How many items it holds.
    pub capacity: usize,
}

/// What a queue shares with the threads on both of its ends.
#[derive(Debug)]
struct QueueState {
    name: String,
    capacity: usize,
    waits: AtomicU64,
    dropped: AtomicU64,
    failure: OnceLock<WriterFailure>,
}

/// A live view of one background queue, readable from any thread:
/// [`Monitors::add_sink`](super::Monitors::add_sink) returns it for a monitor writer.
///
/// Every queue that feeds one of stoker's background threads holds a fixed number of items (a
/// monitor writer's [`MonitorSink::queue_capacity`](super::MonitorSink::queue_capacity),
/// [`MONITOR_QUEUE_CAPACITY`] batches of records by default), so a stalled writer cannot grow
/// memory without end. When one is full:
///
/// - a queue of **data** for a local writer (monitor records, tensor dumps, printed tensors,
///   the best model's copies) makes the training thread **wait** for room, after one warning on
///   stderr naming it: nothing is lost, and training goes as fast as the writer.
///   [`waits`](Self::waits) counts the sends that found it full.
/// - a queue of **commands** ([`SendMonitorData`](crate::monitor::SendMonitorData),
///   [`SendStat`](crate::monitor::SendStat)) and the queue of a **remote** monitor writer (one
///   whose [`MonitorSink::drops_when_full`](super::MonitorSink::drops_when_full) says so: the
///   MLflow writer) **drop and count** the newest item, after one warning naming the queue: a
///   hung command or a slow server never stalls training.
///   [`TrainReport::dropped`](crate::trainer::TrainReport::dropped) gives the counts.
///
/// A monitor writer that failed is disabled: nothing more is sent to it, and what was queued is
/// drained without writing, so it never makes training wait.
#[derive(Debug, Clone)]
pub struct WriterQueue {
    state: Arc<QueueState>,
}

impl WriterQueue {
    pub(crate) fn new(name: impl Into<String>, capacity: usize) -> WriterQueue {
        WriterQueue {
            state: Arc::new(QueueState {
                name: name.into(),
                capacity: capacity.max(1),
                waits: AtomicU64::new(0),
                dropped: AtomicU64::new(0),
                failure: OnceLock::new(),
            }),
        }
    }

    /// The queue's name (its writer's).
    pub fn name(&self) -> &str {
        &self.state.name
    }

    /// How many items it holds at most.
    pub fn capacity(&self) -> usize {
        self.state.capacity
    }

    /// How many sends found the queue full and waited for room (counted before waiting).
    pub fn waits(&self) -> u64 {
        self.state.waits.load(Ordering::SeqCst)
    }

    /// How many items the queue dropped because it was full (the queues that drop only).
    pub fn dropped(&self) -> u64 {
        self.state.dropped.load(Ordering::SeqCst)
    }

    /// The writer's failure, once it failed.
    pub fn failure(&self) -> Option<&WriterFailure> {
        self.state.failure.get()
    }

    /// Whether the writer failed (and is disabled).
    #[inline]
    pub(crate) fn failed(&self) -> bool {
        self.state.failure.get().is_some()
    }

    /// Record the writer's first failure and report it once on stderr; later ones are ignored.
    pub(crate) fn fail(&self, error: Error, global_step: u64, epoch_num: u64) {
        let failure =
            WriterFailure { writer: self.state.name.clone(), error: Arc::new(error), global_step, epoch_num };
        if self.state.failure.set(failure).is_ok()
            && let Some(failure) = self.state.failure.get()
        {
            crate::logging::error!("{failure}; it is disabled for the rest of the run, and training goes on");
        }
    }

    /// What this queue dropped, if anything.
    pub(crate) fn dropped_work(&self) -> Option<DroppedWork> {
        let dropped = self.dropped();
        (dropped > 0).then(|| DroppedWork {
            queue: self.state.name.clone(),
            dropped,
            capacity: self.capacity(),
        })
    }
}

/// The sending end of a bounded queue (see [`WriterQueue`] for what happens when it is full).
pub(crate) struct BoundedSender<T> {
    sender: SyncSender<T>,
    queue: WriterQueue,
}

impl<T> std::fmt::Debug for BoundedSender<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundedSender").field("queue", &self.queue.state.name).finish_non_exhaustive()
    }
}

/// A queue of `capacity` items (at least 1) named `name`.
pub(crate) fn bounded<T>(name: impl Into<String>, capacity: usize) -> (BoundedSender<T>, Receiver<T>) {
    let queue = WriterQueue::new(name, capacity);
    let (sender, receiver) = sync_channel(queue.capacity());
    (BoundedSender { sender, queue }, receiver)
}

impl<T> BoundedSender<T> {
    /// The queue's live view.
    pub(crate) fn queue(&self) -> &WriterQueue {
        &self.queue
    }

    /// Send `value`, waiting for room when the queue is full (the first time, with a warning on
    /// stderr). `Err(value)` when the receiving thread has ended.
    pub(crate) fn send_waiting(&self, value: T) -> Result<(), T> {
        match self.sender.try_send(value) {
            Ok(()) => Ok(()),
            Err(TrySendError::Disconnected(value)) => Err(value),
            Err(TrySendError::Full(value)) => {
                self.full_wait();
                self.sender.send(value).map_err(|e| e.0)
            }
        }
    }

    #[cold]
    fn full_wait(&self) {
        let state = &self.queue.state;
        if state.waits.fetch_add(1, Ordering::SeqCst) == 0 {
            crate::logging::warn!(
                "{} is behind: its queue holds {} items; training waits for it (nothing is dropped). Said once per run",
                state.name,
                state.capacity
            );
        }
    }

    /// Send `value` if the queue has room (`Ok(true)`); otherwise drop it and count it, the
    /// first time with a warning on stderr (`Ok(false)`). `Err(value)` when the receiving thread
    /// has ended.
    pub(crate) fn send_or_drop(&self, value: T) -> Result<bool, T> {
        match self.sender.try_send(value) {
            Ok(()) => Ok(true),
            Err(TrySendError::Disconnected(value)) => Err(value),
            Err(TrySendError::Full(_)) => {
                let state = &self.queue.state;
                if state.dropped.fetch_add(1, Ordering::SeqCst) == 0 {
                    crate::logging::warn!(
                        "{} is behind: its queue holds {} items; newer ones are dropped and counted until it catches up. Said once per run",
                        state.name,
                        state.capacity
                    );
                }
                Ok(false)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writer_queue_a_full_queue_drops_and_counts_or_has_room_again_once_drained() {
        let (sender, receiver) = bounded::<u32>("test", 2);
        assert_eq!(sender.send_or_drop(1), Ok(true));
        assert_eq!(sender.send_or_drop(2), Ok(true));
        assert_eq!(sender.send_or_drop(3), Ok(false));
        assert_eq!(sender.send_or_drop(4), Ok(false));
        assert_eq!(sender.queue().dropped(), 2);
        assert_eq!(receiver.recv().unwrap(), 1);
        assert_eq!(sender.send_or_drop(5), Ok(true));
        assert_eq!(receiver.try_iter().collect::<Vec<_>>(), [2, 5]);
        assert_eq!(
            sender.queue().dropped_work(),
            Some(DroppedWork { queue: "test".into(), dropped: 2, capacity: 2 })
        );
    }

    #[test]
    fn writer_queue_a_full_queue_makes_the_sender_wait_and_loses_nothing() {
        let (sender, receiver) = bounded::<u32>("test", 2);
        let queue = sender.queue().clone();
        let pusher = std::thread::spawn(move || {
            for i in 0..5 {
                sender.send_waiting(i).unwrap();
            }
        });
        // Two fit; the third send waits (and says so before waiting).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while queue.waits() == 0 {
            assert!(std::time::Instant::now() < deadline, "the third send never found the queue full");
            std::thread::yield_now();
        }
        let got: Vec<u32> = receiver.iter().collect();
        pusher.join().unwrap();
        assert_eq!(got, [0, 1, 2, 3, 4]);
        assert_eq!(queue.dropped(), 0);
    }
}
