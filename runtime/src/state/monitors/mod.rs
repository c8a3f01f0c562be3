//! The monitor store: what callbacks put (scalars, images, histograms, texts), the history every
//! callback can query ([`Monitors`], here), the threads of the writers that take it to disk
//! ([`sink`]: the [`MonitorSink`] trait and a writer's thread; [`publish`]: sending what was
//! put to them), and the monitors' state in a checkpoint ([`saved`]), whose long histories are
//! kept beside it ([`journaled`]).

mod journaled;
mod publish;
mod saved;
mod sink;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

pub(crate) use journaled::{ReadJournal, journal_name};
pub use sink::MonitorSink;
use sink::SinkThread;

use super::journal::Journal;
use super::queue::WriterQueue;
use super::record::{EpochStats, Histogram, Image, Record, StatsRow, Value};

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
    /// The run's counters when the monitors were last reached ([`at`](Self::at)): what is put
    /// is stamped with them.
    global_step: u64,
    epoch_num: u64,
    /// The journal the histories go into at each checkpoint (unnamed: a checkpoint holds them
    /// whole), how many values of each scalar and how many rows it holds.
    journal: Journal,
    journaled: BTreeMap<Arc<str>, usize>,
    journaled_rows: usize,
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
            journal: Journal::default(),
            journaled: BTreeMap::new(),
            journaled_rows: 0,
        }
    }

    /// The monitors at the run's current counters (the trainer's state reads them in at each
    /// access, `TrainState::monitors`).
    #[inline]
    pub(crate) fn at(&mut self, global_step: u64, epoch_num: u64) -> &mut Self {
        (self.global_step, self.epoch_num) = (global_step, epoch_num);
        self
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
