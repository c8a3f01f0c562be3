//! Sending what was put to the writers: starting a writer's thread, the batches, the rows of
//! `stats.json` and the epochs' statistics, closing.

use std::sync::Arc;

use super::Monitors;
use super::sink::{Message, MonitorSink, SinkThread, run_sink};
use crate::state::queue::{DroppedWork, WriterFailure, WriterQueue, bounded};
use crate::state::record::{EpochStats, Record, StatsRow};

impl Monitors {
    /// Start a writer on its own thread; every record put from now on reaches it, through a
    /// queue of [`MonitorSink::queue_capacity`] batches (which, full, makes training wait, or
    /// drops and counts when the writer [drops](MonitorSink::drops_when_full)). Returns a view of
    /// that queue (how often training waited for the writer or it dropped, whether it failed),
    /// readable from any thread.
    ///
    /// # Panics
    /// If the operating system cannot start a thread.
    pub fn add_sink(&mut self, sink: impl MonitorSink) -> WriterQueue {
        let name = sink.name().to_string();
        let (sender, receiver) = bounded(name.clone(), sink.queue_capacity());
        let queue = sender.queue().clone();
        let thread_queue = queue.clone();
        let (drops_when_full, close_timeout) = (sink.drops_when_full(), sink.close_timeout());
        let (ending, ended) = std::sync::mpsc::channel();
        let handle = std::thread::Builder::new()
            .name(format!("stoker-{name}"))
            .spawn(move || {
                let _ending = ending;
                run_sink(sink, &receiver, &thread_queue);
            })
            .expect("spawning a monitor writer thread");
        self.sinks.push(SinkThread { sender, handle, drops_when_full, close_timeout, ended });
        self.queues.push(queue.clone());
        queue
    }

    /// Report what `queue` (a callback's own background queue) dropped in the run's
    /// [`TrainReport::dropped`](crate::trainer::TrainReport::dropped).
    pub(crate) fn track_queue(&mut self, queue: WriterQueue) {
        self.queues.push(queue);
    }

    /// Whether records wait to be sent to the writers.
    #[inline]
    pub(crate) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Send the waiting records to every writer that has not failed (waiting for a writer
    /// whose queue is full, or dropping for one that [drops](MonitorSink::drops_when_full)).
    pub(crate) fn publish(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        self.send_batch(None);
    }

    /// Send the waiting records (maybe none) and `row` in one batch.
    fn send_batch(&mut self, row: Option<Arc<StatsRow>>) {
        let batch: Arc<[Record]> = self.pending.drain(..).collect();
        for sink in &self.sinks {
            if !sink.sender.queue().failed() {
                sink.send(Message::Records(batch.clone(), row.clone()));
            }
        }
    }

    /// Whether scalars were put since the last row of `stats.json`.
    #[inline]
    pub(crate) fn has_row(&self) -> bool {
        !self.row.is_empty()
    }

    /// Make a row of `stats.json` of the scalars put since the last one (if any), at the current
    /// counters, and send it to every writer in one batch with the records waiting.
    pub(crate) fn end_row(&mut self) {
        if self.row.is_empty() {
            self.publish();
            return;
        }
        let scalars = std::mem::take(&mut self.row).into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        let row = StatsRow { epoch_num: self.epoch_num, global_step: self.global_step, scalars };
        StatsRow::append(&mut self.rows, row.clone());
        self.send_batch(Some(Arc::new(row)));
    }

    /// Tell every writer that the epoch ended, with the epoch's statistics.
    pub(crate) fn end_epoch(&mut self) {
        self.publish();
        if self.current.is_empty() {
            return;
        }
        let scalars =
            std::mem::take(&mut self.current).into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        let stats = EpochStats { epoch_num: self.epoch_num, global_step: self.global_step, scalars };
        self.epochs.push(stats.clone());
        let stats = Arc::new(stats);
        for sink in &self.sinks {
            if !sink.sender.queue().failed() {
                sink.send(Message::EndEpoch(stats.clone()));
            }
        }
    }

    /// Send what waits (the scalars put since the last row as a last [`StatsRow`], those put
    /// since the last epoch ended as a last [`EpochStats`]), stop every writer and wait for it
    /// to finish writing (at most its [`close_timeout`](MonitorSink::close_timeout), one writer
    /// after the other). A writer that failed, now or
    /// before, is in [`writer_failures`](Self::writer_failures); nothing here is an error.
    pub(crate) fn close(&mut self) {
        self.end_row();
        self.end_epoch();
        for sink in self.sinks.drain(..) {
            sink.close((self.global_step, self.epoch_num));
        }
    }

    /// The writers that failed so far, in the order they were added.
    pub fn writer_failures(&self) -> Vec<WriterFailure> {
        self.queues.iter().filter_map(|q| q.failure().cloned()).collect()
    }

    /// What the queues reported here dropped so far.
    pub(crate) fn dropped(&self) -> Vec<DroppedWork> {
        self.queues.iter().filter_map(WriterQueue::dropped_work).collect()
    }
}

impl Drop for Monitors {
    fn drop(&mut self) {
        if !self.sinks.is_empty() {
            self.close();
        }
    }
}
