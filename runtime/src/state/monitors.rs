//! The monitor store: what callbacks put (scalars, images, histograms, texts), the history every
//! callback can query, and the threads of the writers that take it to disk.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::thread::JoinHandle;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use super::persist::{json_f64, parse_f64};
use super::queue::{BoundedSender, DroppedWork, MONITOR_QUEUE_CAPACITY, WriterFailure, WriterQueue, bounded};
use super::record::{EpochStats, Histogram, Image, Record, StatsRow, Value};
use crate::error::{Error, Result, panic_message};

/// The I/O half of a monitor writer, run on its own thread.
///
/// The trainer hands it what the callbacks put through a bounded queue of
/// [`queue_capacity`](Self::queue_capacity) batches: when the writer falls that far behind,
/// training waits for it (one warning on stderr), so memory stays bounded and nothing is lost.
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
enum Message {
    Records(Arc<[Record]>, Option<Arc<StatsRow>>),
    EndEpoch(Arc<EpochStats>),
}

struct SinkThread {
    sender: BoundedSender<Message>,
    handle: JoinHandle<()>,
}

/// Which way a monitored scalar improves: what makes one of its values the best so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Better {
    /// Lower is better (a loss, an error).
    Lower,
    /// Higher is better (an accuracy, a score).
    Higher,
}

/// The monitors of a run: the history of scalars, the statistics of each epoch, the rows of
/// `stats.json`, and the writers.
pub struct Monitors {
    history: BTreeMap<Arc<str>, Vec<(u64, f64)>>,
    /// The `epoch_num` of each value in `history`, in the same order.
    history_epochs: BTreeMap<Arc<str>, Vec<u64>>,
    epochs: Vec<EpochStats>,
    current: BTreeMap<Arc<str>, f64>,
    /// The rows of `stats.json` made so far (those of the runs a resumed run continues too).
    rows: Vec<StatsRow>,
    /// The scalars put since the last row.
    row: BTreeMap<Arc<str>, f64>,
    resumed: bool,
    pending: Vec<Record>,
    sinks: Vec<SinkThread>,
    /// Every writer's queue (also after its thread was joined) and the other queues a callback
    /// asked to report ([`track_queue`](Self::track_queue)).
    queues: Vec<WriterQueue>,
    /// Which way each watched scalar improves, as the callbacks watching it declared.
    better: BTreeMap<Arc<str>, Better>,
    pub(crate) global_step: u64,
    pub(crate) epoch_num: u64,
}

impl std::fmt::Debug for Monitors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Monitors")
            .field("scalars", &self.history.keys().collect::<Vec<_>>())
            .field("writers", &self.sinks.iter().map(|s| s.sender.queue().name()).collect::<Vec<_>>())
            .finish()
    }
}

impl Default for Monitors {
    fn default() -> Self {
        Self::new()
    }
}

impl Monitors {
    /// No history, no writers.
    pub fn new() -> Self {
        Monitors {
            history: BTreeMap::new(),
            history_epochs: BTreeMap::new(),
            epochs: Vec::new(),
            current: BTreeMap::new(),
            rows: Vec::new(),
            row: BTreeMap::new(),
            resumed: false,
            pending: Vec::new(),
            sinks: Vec::new(),
            queues: Vec::new(),
            better: BTreeMap::new(),
            global_step: 0,
            epoch_num: 0,
        }
    }

    fn key(&mut self, name: &str) -> Arc<str> {
        match self.history.get_key_value(name) {
            Some((key, _)) => key.clone(),
            None => Arc::from(name),
        }
    }

    fn push(&mut self, name: Arc<str>, value: Value) {
        let wall_time = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        self.pending.push(Record {
            name,
            value,
            global_step: self.global_step,
            epoch_num: self.epoch_num,
            wall_time,
        });
    }

    /// Put a scalar: it joins the history and goes to every writer.
    pub fn put_scalar(&mut self, name: &str, value: f64) {
        let key = self.key(name);
        self.history.entry(key.clone()).or_default().push((self.global_step, value));
        self.history_epochs.entry(key.clone()).or_default().push(self.epoch_num);
        self.current.insert(key.clone(), value);
        self.row.insert(key.clone(), value);
        self.push(key, Value::Scalar(value));
    }

    /// Put an image (TensorBoard shows it; other writers skip it).
    pub fn put_image(&mut self, name: &str, image: Image) {
        let key = Arc::from(name);
        self.push(key, Value::Image(Arc::new(image)));
    }

    /// Put a histogram of `values` in `buckets` equal buckets between their minimum and maximum.
    pub fn put_histogram(&mut self, name: &str, values: &[f32], buckets: usize) {
        let key = Arc::from(name);
        self.push(key, Value::Histogram(Arc::new(Histogram::of(values, buckets))));
    }

    /// Put a text.
    pub fn put_text(&mut self, name: &str, text: &str) {
        let key = Arc::from(name);
        self.push(key, Value::Text(Arc::from(text)));
    }

    /// The latest value of scalar `name`.
    pub fn latest(&self, name: &str) -> Option<f64> {
        self.history.get(name).and_then(|h| h.last()).map(|&(_, v)| v)
    }

    /// Every value of scalar `name`, as `(global_step, value)`, oldest first.
    pub fn history(&self, name: &str) -> &[(u64, f64)] {
        self.history.get(name).map_or(&[], Vec::as_slice)
    }

    /// The `epoch_num` at which each value of scalar `name` was put, in the order of
    /// [`history`](Self::history).
    pub fn history_epochs(&self, name: &str) -> &[u64] {
        self.history_epochs.get(name).map_or(&[], Vec::as_slice)
    }

    /// Every scalar put whose record was already sent to the writers, as `(name, global_step,
    /// epoch_num, value)`, each name's values in the order they were put: what a writer added
    /// now has not received and will not (the records still waiting reach it).
    pub(crate) fn published_scalars(&self) -> Vec<(Arc<str>, u64, u64, f64)> {
        let mut waiting: BTreeMap<&str, usize> = BTreeMap::new();
        for record in &self.pending {
            if matches!(record.value, Value::Scalar(_)) {
                *waiting.entry(&*record.name).or_default() += 1;
            }
        }
        let mut out = Vec::new();
        for (name, values) in &self.history {
            let sent = values.len() - waiting.get(&**name).copied().unwrap_or(0).min(values.len());
            let epochs = self.history_epochs(name);
            for (i, &(step, value)) in values.iter().take(sent).enumerate() {
                out.push((name.clone(), step, epochs.get(i).copied().unwrap_or(0), value));
            }
        }
        out
    }

    /// The names of every scalar put so far.
    pub fn scalar_names(&self) -> impl Iterator<Item = &str> {
        self.history.keys().map(|k| &**k)
    }

    /// Declare which way scalar `name` improves. The callbacks that watch a scalar for its best
    /// value declare it at setup (`MinSaver` / `MaxSaver`, `SaveBestState`, `EarlyStopping`,
    /// `ReduceLrOnPlateau`), so that what reports a best value (the trainer's end-of-training
    /// summary) agrees with them; the latest declaration of a name wins. Declaring costs nothing
    /// per step and changes nothing a writer writes.
    pub fn declare_better(&mut self, name: &str, better: Better) {
        let key = self.key(name);
        self.better.insert(key, better);
    }

    /// Which way scalar `name` improves, if a callback declared it
    /// ([`declare_better`](Self::declare_better)).
    pub fn better(&self, name: &str) -> Option<Better> {
        self.better.get(name).copied()
    }

    /// The statistics of every finished epoch, oldest first, including the epochs of the runs a
    /// resumed run continues.
    pub fn epoch_stats(&self) -> &[EpochStats] {
        &self.epochs
    }

    /// The rows of `stats.json` made so far, oldest first (see [`StatsRow`]), including the rows
    /// of the runs a resumed run continues.
    pub fn stats_rows(&self) -> &[StatsRow] {
        &self.rows
    }

    /// Whether the history was restored from a checkpoint (the run is a resumed one).
    pub fn is_resumed(&self) -> bool {
        self.resumed
    }

    /// The history, the finished epochs' statistics, the current epoch's scalars, the rows of
    /// `stats.json` and the scalars put since the last row, as JSON for a checkpoint. Non-finite values are kept (as the strings `"NaN"`, `"inf"`, `"-inf"`).
    pub(crate) fn save_state(&self) -> serde_json::Value {
        use serde_json::{Map, Value as Json};
        let history: Map<String, Json> = self
            .history
            .iter()
            .map(|(name, values)| {
                let pairs = values.iter().map(|&(step, v)| Json::Array(vec![step.into(), json_f64(v)]));
                (name.to_string(), Json::Array(pairs.collect()))
            })
            .collect();
        let scalars = |map: &mut dyn Iterator<Item = (&str, f64)>| -> Json {
            Json::Object(map.map(|(k, v)| (k.to_string(), json_f64(v))).collect())
        };
        let epochs: Vec<Json> = self
            .epochs
            .iter()
            .map(|e| {
                serde_json::json!({
                    "epoch_num": e.epoch_num,
                    "global_step": e.global_step,
                    "scalars": scalars(&mut e.scalars.iter().map(|(k, &v)| (k.as_str(), v))),
                })
            })
            .collect();
        let rows: Vec<Json> = self
            .rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "epoch_num": r.epoch_num,
                    "global_step": r.global_step,
                    "scalars": scalars(&mut r.scalars.iter().map(|(k, &v)| (k.as_str(), v))),
                })
            })
            .collect();
        let history_epochs: Map<String, Json> =
            self.history_epochs.iter().map(|(name, e)| (name.to_string(), Json::from(e.clone()))).collect();
        serde_json::json!({
            "history": history,
            "history_epochs": history_epochs,
            "epochs": epochs,
            "current": scalars(&mut self.current.iter().map(|(k, &v)| (&**k, v))),
            "rows": rows,
            "row": scalars(&mut self.row.iter().map(|(k, &v)| (&**k, v))),
        })
    }

    /// Restore what [`save_state`](Self::save_state) saved.
    pub(crate) fn load_state(&mut self, state: &serde_json::Value) -> Result<()> {
        let bad = |what: &str| Error::checkpoint(format!("the monitors' state is malformed: {what}"));
        let object = |v: &serde_json::Value, what: &str| v.as_object().cloned().ok_or_else(|| bad(what));
        let mut history = BTreeMap::new();
        for (name, values) in object(&state["history"], "history")? {
            let values = values.as_array().ok_or_else(|| bad(&name))?;
            let mut pairs = Vec::with_capacity(values.len());
            for pair in values {
                let step = pair.get(0).and_then(serde_json::Value::as_u64).ok_or_else(|| bad(&name))?;
                let value = pair.get(1).and_then(parse_f64).ok_or_else(|| bad(&name))?;
                pairs.push((step, value));
            }
            history.insert(Arc::from(name.as_str()), pairs);
        }
        let scalars = |v: &serde_json::Value, what: &str| -> Result<BTreeMap<String, f64>> {
            object(v, what)?
                .iter()
                .map(|(k, v)| Ok((k.clone(), parse_f64(v).ok_or_else(|| bad(k))?)))
                .collect()
        };
        let mut epochs = Vec::new();
        for entry in state["epochs"].as_array().ok_or_else(|| bad("epochs"))? {
            epochs.push(EpochStats {
                epoch_num: entry["epoch_num"].as_u64().ok_or_else(|| bad("epoch_num"))?,
                global_step: entry["global_step"].as_u64().ok_or_else(|| bad("global_step"))?,
                scalars: scalars(&entry["scalars"], "scalars")?,
            });
        }
        let current = scalars(&state["current"], "current")?;
        // A checkpoint written before `stats.json` had a row per step holds no rows: its
        // `stats.json` was one row per epoch, and the current epoch's scalars were to join the
        // next one.
        let (rows, row) = match state.get("rows") {
            Some(saved) => {
                let mut rows = Vec::new();
                for entry in saved.as_array().ok_or_else(|| bad("rows"))? {
                    rows.push(StatsRow {
                        epoch_num: entry["epoch_num"].as_u64().ok_or_else(|| bad("epoch_num"))?,
                        global_step: entry["global_step"].as_u64().ok_or_else(|| bad("global_step"))?,
                        scalars: scalars(&entry["scalars"], "scalars")?,
                    });
                }
                (rows, scalars(&state["row"], "row")?)
            }
            None => {
                let rows = epochs
                    .iter()
                    .map(|e| StatsRow {
                        epoch_num: e.epoch_num,
                        global_step: e.global_step,
                        scalars: e.scalars.clone(),
                    })
                    .collect();
                (rows, current.clone())
            }
        };
        let keyed = |map: BTreeMap<String, f64>| -> BTreeMap<Arc<str>, f64> {
            map.into_iter()
                .map(|(name, v)| {
                    let key = history
                        .get_key_value(name.as_str())
                        .map_or_else(|| Arc::from(name.as_str()), |(k, _)| Arc::clone(k));
                    (key, v)
                })
                .collect()
        };
        // The epoch of each value; a checkpoint written before they were kept gives the epoch
        // whose end was the first at or after the value's step.
        let mut history_epochs = BTreeMap::new();
        for (name, values) in &history {
            let saved = state.get("history_epochs").and_then(|h| h.get(&**name)).and_then(|e| e.as_array());
            let list: Vec<u64> = match saved {
                Some(list) => {
                    list.iter().map(|e| e.as_u64().ok_or_else(|| bad(name))).collect::<Result<_>>()?
                }
                None => values
                    .iter()
                    .map(|&(step, _)| {
                        epochs.iter().find(|e| e.global_step >= step).map_or(0, |e: &EpochStats| e.epoch_num)
                    })
                    .collect(),
            };
            if list.len() != values.len() {
                return Err(bad(name));
            }
            history_epochs.insert(name.clone(), list);
        }
        self.history_epochs = history_epochs;
        self.current = keyed(current);
        self.row = keyed(row);
        self.rows = rows;
        self.history = history;
        self.epochs = epochs;
        self.resumed = true;
        Ok(())
    }

    /// Start a writer on its own thread; every record put from now on reaches it, through a
    /// queue of [`MonitorSink::queue_capacity`] batches. Returns a view of that queue (how often
    /// training waited for the writer, whether it failed), readable from any thread.
    ///
    /// # Panics
    /// If the operating system cannot start a thread.
    pub fn add_sink(&mut self, sink: impl MonitorSink) -> WriterQueue {
        let name = sink.name().to_string();
        let (sender, receiver) = bounded(name.clone(), sink.queue_capacity());
        let queue = sender.queue().clone();
        let thread_queue = queue.clone();
        let handle = std::thread::Builder::new()
            .name(format!("stoker-{name}"))
            .spawn(move || run_sink(sink, &receiver, &thread_queue))
            .expect("spawning a monitor writer thread");
        self.sinks.push(SinkThread { sender, handle });
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
    /// whose queue is full).
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
                // A writer whose thread ended was recorded as failed, or is when joined.
                let _ = sink.sender.send_waiting(Message::Records(batch.clone(), row.clone()));
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
                let _ = sink.sender.send_waiting(Message::EndEpoch(stats.clone()));
            }
        }
    }

    /// Send what waits (the scalars put since the last row as a last [`StatsRow`], those put
    /// since the last epoch ended as a last [`EpochStats`]), stop every writer and wait for it
    /// to finish writing. A writer that failed, now or
    /// before, is in [`writer_failures`](Self::writer_failures); nothing here is an error.
    pub(crate) fn close(&mut self) {
        self.end_row();
        self.end_epoch();
        for sink in self.sinks.drain(..) {
            let queue = sink.sender.queue().clone();
            drop(sink.sender);
            if let Err(payload) = sink.handle.join() {
                let message = format!("the writer thread panicked: {}", panic_message(&*payload));
                queue.fail(Error::Monitor { message, source: None }, self.global_step, self.epoch_num);
            }
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

/// The writer thread: writes until the channel closes, then closes the writer; it flushes the
/// writer each time it has caught up (nothing more waits in the queue). At the first error the
/// writer is disabled (recorded and reported once by `queue`, then dropped); what still arrives
/// is drained without writing, so that the trainer never waits for it.
fn run_sink(sink: impl MonitorSink, receiver: &Receiver<Message>, queue: &WriterQueue) {
    let mut sink = Some(sink);
    // The global step and epoch of the last records seen, and of the first ones since the last
    // flush (what a failed flush failed to write).
    let mut at = (0, 0);
    let mut unflushed = None;
    let mut next = receiver.recv().ok();
    while let Some(message) = next {
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
    if let Some(mut writer) = sink
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

impl Histogram {
    /// A histogram of `values` with `buckets` equal buckets between their minimum and maximum.
    pub fn of(values: &[f32], buckets: usize) -> Histogram {
        let buckets = buckets.max(1);
        let finite = values.iter().map(|&v| f64::from(v)).filter(|v| v.is_finite());
        let (mut min, mut max, mut num, mut sum, mut sum_squares) =
            (f64::INFINITY, f64::NEG_INFINITY, 0.0, 0.0, 0.0);
        for v in finite.clone() {
            min = min.min(v);
            max = max.max(v);
            num += 1.0;
            sum += v;
            sum_squares += v * v;
        }
        if num == 0.0 {
            return Histogram {
                min: 0.0,
                max: 0.0,
                num: 0.0,
                sum: 0.0,
                sum_squares: 0.0,
                bucket_limits: vec![0.0],
                bucket_counts: vec![0.0],
            };
        }
        let width = (max - min) / buckets as f64;
        let bucket_limits: Vec<f64> = if width > 0.0 {
            (1..=buckets).map(|i| if i == buckets { max } else { min + width * i as f64 }).collect()
        } else {
            vec![max]
        };
        let mut bucket_counts = vec![0.0; bucket_limits.len()];
        for v in finite {
            let index = if width > 0.0 {
                (((v - min) / width).ceil() as usize).saturating_sub(1).min(bucket_limits.len() - 1)
            } else {
                0
            };
            bucket_counts[index] += 1.0;
        }
        Histogram { min, max, num, sum, sum_squares, bucket_limits, bucket_counts }
    }
}
