//! A monitor writer ([`MonitorSink`]) and the thread that runs it.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{Error, Result, panic_message};
use crate::state::queue::{BoundedSender, MONITOR_QUEUE_CAPACITY, WriterQueue};
use crate::state::record::{EpochStats, Record, StatsRow};

/// The I/O half of a monitor writer, run on its own thread.
///
/// The trainer hands it what the callbacks put through a bounded queue of
/// [`queue_capacity`](Self::queue_capacity) batches: when the writer falls that far behind,
/// training waits for it (one warning on stderr), so memory stays bounded and nothing is lost;
/// a remote writer (a tracking server, whose pace is the network's) says
/// [`drops_when_full`](Self::drops_when_full) instead, and what its full queue cannot take is
/// dropped and counted. At the end the trainer waits for the writer to finish, at most
/// [`close_timeout`](Self::close_timeout) when it gives one.
/// The first error a method returns disables the writer for the rest of the run: it is reported
/// once on stderr (the writer, the error, the global step and epoch of the records it failed on),
/// nothing more is written to it, training goes on, and the run's
/// [`TrainReport::writer_failures`](crate::trainer::TrainReport::writer_failures) lists it.
pub trait MonitorSink: Send + 'static {
    /// The writer's name, for error messages.
    fn name(&self) -> &str;
    /// How many batches of records (one per event that put something) may wait for this writer;
    /// [`MONITOR_QUEUE_CAPACITY`] by default, at least 1.
    fn queue_capacity(&self) -> usize {
        MONITOR_QUEUE_CAPACITY
    }
    /// Whether a batch that finds this writer's queue full is dropped and counted (one warning
    /// on stderr naming the writer; the run's
    /// [`TrainReport::dropped`](crate::trainer::TrainReport::dropped) gives the count) rather
    /// than making training wait for room. `false` by default: a local file loses nothing.
    /// `true` for a writer that talks to a server, so that a slow or hung server never sets
    /// the pace of the steps.
    fn drops_when_full(&self) -> bool {
        false
    }
    /// How long the end of training waits for this writer to write what is left and
    /// [`close`](Self::close); `None` (the default): until it is done. Past it, the writer is
    /// reported failed (in
    /// [`TrainReport::writer_failures`](crate::trainer::TrainReport::writer_failures)), what it
    /// had not written is lost, and its thread is left to end on its own: set it for a writer
    /// whose last requests may never be answered.
    fn close_timeout(&self) -> Option<Duration> {
        None
    }
    /// Write a batch of records.
    fn write(&mut self, records: &[Record]) -> std::io::Result<()>;
    /// Every record of an epoch has been written; `stats` holds the last value of each scalar
    /// put during it (sent only when some scalar was put). After `after_train`, the scalars put
    /// since the last epoch ended arrive the same way.
    fn end_epoch(&mut self, stats: &EpochStats) -> std::io::Result<()> {
        let _ = stats;
        Ok(())
    }
    /// A row of `stats.json` was made ([`StatsRow`]: tensorpack's layout, a row at every step
    /// where scalars were put and at each epoch's end). A row at the same `epoch_num` and
    /// `global_step` as the previous one belongs to it ([`StatsRow::append`] merges them).
    /// Nothing by default.
    fn stats_row(&mut self, row: &StatsRow) -> std::io::Result<()> {
        let _ = row;
        Ok(())
    }
    /// Push what is buffered to the operating system. Called each time the writer has caught
    /// up (nothing more waits in its queue) after handling something, so that a writer that
    /// fell behind writes what waited in one go.
    fn flush(&mut self) -> std::io::Result<()>;
    /// When this writer wants [`flush`](Self::flush) called again though nothing new arrived:
    /// a writer that holds records for a while (the TensorBoard writer's `flush_secs`) says
    /// until when. `None` (the default): only when something arrives.
    fn flush_due(&self) -> Option<Instant> {
        None
    }
    /// The run ended (after `after_train`, also after an error): write what is left. Not called
    /// on a writer that failed before (it is dropped instead).
    fn close(&mut self) -> std::io::Result<()> {
        self.flush()
    }
}

/// What a writer's thread receives. One event's records and the row of `stats.json` made right
/// after it travel together, so that a writer's queue holds one batch per event that put
/// something ([`MonitorSink::queue_capacity`]).
pub(super) enum Message {
    Records(Arc<[Record]>, Option<Arc<StatsRow>>),
    EndEpoch(Arc<EpochStats>),
}

/// A writer's thread and the sending end of its queue.
pub(super) struct SinkThread {
    pub(super) sender: BoundedSender<Message>,
    pub(super) handle: JoinHandle<()>,
    /// [`MonitorSink::drops_when_full`].
    pub(super) drops_when_full: bool,
    /// [`MonitorSink::close_timeout`].
    pub(super) close_timeout: Option<Duration>,
    /// Disconnected when the thread ends (its sender is dropped there), so that the end can
    /// wait for it a bounded time.
    pub(super) ended: Receiver<()>,
}

impl SinkThread {
    /// Send `message` as the writer asks when its queue is full: waiting for room, or dropping
    /// and counting it.
    #[inline]
    pub(super) fn send(&self, message: Message) {
        // A writer whose thread ended was recorded as failed, or is when joined.
        let _ = if self.drops_when_full {
            self.sender.send_or_drop(message).map(drop)
        } else {
            self.sender.send_waiting(message)
        };
    }

    /// Close the queue and wait for the thread to write what is left and end: at most its
    /// [`close_timeout`](MonitorSink::close_timeout), after which the writer is recorded as
    /// failed at `at` (global step, epoch) and its thread left behind.
    pub(super) fn close(self, at: (u64, u64)) {
        let queue = self.sender.queue().clone();
        drop(self.sender);
        if let Some(limit) = self.close_timeout
            && let Err(RecvTimeoutError::Timeout) = self.ended.recv_timeout(limit)
        {
            let message = format!(
                "it had not finished {limit:?} after training ended (its close_timeout): what it had \
                 not written is lost, and its thread is left to end on its own"
            );
            queue.fail(Error::Monitor { message, source: None }, at.0, at.1);
            return;
        }
        if let Err(payload) = self.handle.join() {
            let message = format!("the writer thread panicked: {}", panic_message(&*payload));
            queue.fail(Error::Monitor { message, source: None }, at.0, at.1);
        }
    }
}

/// The writer thread: writes until the channel closes, then closes the writer; it flushes the
/// writer each time it has caught up (nothing more waits in the queue). At the first error the
/// writer is disabled (recorded and reported once by `queue`, then dropped); what still arrives
/// is drained without writing, so that the trainer never waits for it.
pub(super) fn run_sink(sink: impl MonitorSink, receiver: &Receiver<Message>, queue: &WriterQueue) {
    let mut sink = Some(sink);
    // The global step and epoch of the last records seen, and of the first ones since the last
    // flush (what a failed flush failed to write).
    let mut at = (0, 0);
    let mut unflushed = None;
    let mut next = receiver.recv().ok();
    while let Some(message) = next {
        if queue.failed() {
            // Failed from outside: the end stopped waiting for it.
            sink = None;
        }
        if let Some(writer) = sink.as_mut() {
            match &message {
                Message::Records(records, row) => {
                    if let Some(first) = records.first() {
                        at = (first.global_step, first.epoch_num);
                    } else if let Some(row) = row {
                        at = (row.global_step, row.epoch_num);
                    }
                }
                Message::EndEpoch(stats) => at = (stats.global_step, stats.epoch_num),
            }
            unflushed.get_or_insert(at);
            let result = shielded(|| match message {
                Message::Records(records, row) => {
                    if !records.is_empty() {
                        writer.write(&records)?;
                    }
                    row.map_or(Ok(()), |row| writer.stats_row(&row))
                }
                Message::EndEpoch(stats) => writer.end_epoch(&stats),
            });
            if let Err(error) = result {
                queue.fail(error, at.0, at.1);
                sink = None;
            }
        }
        next = match receiver.try_recv() {
            Ok(message) => Some(message),
            // Caught up: push what is buffered out, then wait for more (or until the writer
            // wants to flush again).
            Err(TryRecvError::Empty) => loop {
                if let Some(writer) = sink.as_mut()
                    && let Err(error) = shielded(|| writer.flush())
                {
                    let (step, epoch) = unflushed.unwrap_or(at);
                    queue.fail(error, step, epoch);
                    sink = None;
                }
                let Some(due) = sink.as_ref().and_then(|w| w.flush_due()) else {
                    unflushed = None;
                    break receiver.recv().ok();
                };
                match receiver.recv_timeout(due.saturating_duration_since(Instant::now())) {
                    Ok(message) => break Some(message),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => break None,
                }
            },
            Err(TryRecvError::Disconnected) => None,
        };
    }
    if let Some(mut writer) = sink.filter(|_| !queue.failed())
        && let Err(error) = shielded(|| writer.close())
    {
        let (step, epoch) = unflushed.unwrap_or(at);
        queue.fail(error, step, epoch);
    }
}

/// `write`, its error or its panic turned into an [`Error::Monitor`]: the writer's
/// `std::io::Error` is kept as the source, its message as the message.
fn shielded(write: impl FnOnce() -> std::io::Result<()>) -> Result<()> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(write)) {
        Ok(result) => {
            result.map_err(|e| Error::Monitor { message: e.to_string(), source: Some(Box::new(e)) })
        }
        Err(payload) => Err(Error::Monitor {
            message: format!("the writer panicked: {}", panic_message(&*payload)),
            source: None,
        }),
    }
}
