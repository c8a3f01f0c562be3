//! Monitors: what callbacks put (scalars, images, histograms, texts), a history every callback
//! can query, and the writers that take it to disk or the terminal off the step's path.
//!
//! A writer is a [`MonitorSink`] running on a thread of its own; its callback
//! ([`TensorBoardWriter`], [`JsonWriter`], [`ScalarPrinter`], [`CsvWriter`], [`HistoryWriter`],
//! [`SendMonitorData`]; with the feature `mlflow`, `MlflowLogger` for an MLflow tracking server; with the feature
//! `comet`, `CometMlMonitor` for Comet (tensorpack's `CometMLMonitor`);
//! with the feature `dashboard`, `Dashboard`, the terminal dashboard)
//! registers it at setup. Records put
//! during an event reach the writers in one batch when the event ends; the end of every epoch
//! (after every callback's `trigger_epoch`) reaches them as [`MonitorSink::end_epoch`] with the
//! epoch's [`EpochStats`]; each row of `stats.json` (tensorpack's layout: a row at every step
//! where scalars were put and at each epoch's end) reaches them as [`MonitorSink::stats_row`]
//! with the records it follows; the trainer closes and joins them after `after_train`, also after an
//! error or a panic. The history, the per-epoch statistics and the rows of `stats.json` are part
//! of every checkpoint.
//!
//! A writer's queue is bounded ([`MonitorSink::queue_capacity`], 256 batches by default): a writer
//! that falls that far behind makes training wait for it, with one warning, so that memory stays
//! bounded and nothing is lost; a remote writer (MLflow's) drops and counts instead
//! ([`MonitorSink::drops_when_full`]), so that a server never sets the steps' pace. A writer that
//! fails is reported once on stderr and disabled; training goes on, and the run's
//! [`TrainReport::writer_failures`](crate::trainer::TrainReport::writer_failures) names it and
//! the step it failed at (see [`crate::state::WriterQueue`]).

mod average;
#[cfg(feature = "hdf5")]
mod callback_data;
#[cfg(feature = "comet")]
mod comet;
mod csv;
#[cfg(feature = "dashboard")]
mod dashboard;
mod hist;
mod history;
mod json;
#[cfg(feature = "mlflow")]
mod mlflow;
pub(crate) mod png;
pub(crate) mod printer;
mod send;
mod tensorboard;
mod train_cost;

use crate::state::{EpochStats, MonitorSink, Record, Value};
pub(crate) use crate::state::{json_f64, parse_f64};
pub use average::{MovingAverageSummary, SimpleMovingAverage};
#[cfg(feature = "hdf5")]
pub use callback_data::{CallbackDataWriter, ConvLayers, Deconv};
#[cfg(feature = "comet")]
pub use comet::{COMET_DEFAULT_URL, COMET_SINK_NAME, CometMlMonitor};
pub use csv::{CSV_FILE, CsvSink, CsvWriter};
#[cfg(feature = "dashboard")]
pub use dashboard::Dashboard;
pub use hist::Hist;
pub use history::{HISTORY_FILE, HistorySink, HistoryWriter};
pub(crate) use json::STATS_FILE;
pub use json::{JsonSink, JsonWriter};
#[cfg(feature = "mlflow")]
pub use mlflow::{CheckpointArtifacts, MLFLOW_MAX_METRICS_PER_BATCH, MLFLOW_SINK_NAME, MlflowLogger};
pub use printer::{PrinterSink, ScalarPrinter};
pub use send::{COMMAND_QUEUE_CAPACITY, SendMonitorData, SendStat};
pub use tensorboard::{HParamValue, SessionStatus, TensorBoardSink};
pub use train_cost::{TRAIN_COST, TrainCost, TrainLogger, TrainLoggerSink};

use crate::callback::Context;
use crate::error::{Error, Result};

/// Writes every monitored record to a TensorBoard event file in the log directory, which
/// TensorBoard itself reads (`tensorboard --logdir <log dir>`). On by default. tensorpack's
/// `TFEventWriter`.
///
/// A resumed run writes a new event file that starts with a restart mark at the step after its
/// checkpoint, so that TensorBoard drops what a crashed run logged after that checkpoint: the
/// curves continue without duplicates.
///
/// tensorpack's options, with what they do here (the writing happens on the writer's own thread,
/// never on the step's path):
///
/// - [`max_queue(n)`](Self::max_queue) (10, as tensorpack): at most `n` events are held in
///   memory; the `n`-th is written out with those before it.
/// - [`flush_secs(s)`](Self::flush_secs): held events are written once they are `s` seconds
///   old. stoker's default is 0, which writes them as soon as the writer has caught up with
///   training; tensorpack's is 120. The default differs so that what was logged before a
///   checkpoint is on disk when a crash comes after it (a resumed run does not log it again).
/// - [`split_files(true)`](Self::split_files) (off by default, as tensorpack): a new event file
///   after each epoch's end, started by the first event after it (tensorpack opens it at once,
///   which leaves a file holding only its header after the last epoch). For file systems where
///   appending is expensive.
///
/// Every epoch's end (after every callback's `trigger_epoch`, when some scalar was put in the
/// epoch) writes what is held, as tensorpack's flush at every epoch; the end of training writes
/// everything.
///
/// TensorBoard's *HParams* tab lists the run: at setup the writer starts an HParams session with
/// the learning rate, every hyper-parameter registered by then (the trainer's
/// [`hyper_param`](crate::trainer::Trainer::hyper_param) and its kin, those a callback's `setup`
/// registered before this writer's) at their values then, and those given with
/// [`hparams`](Self::hparams); at the end of training it writes the experiment summary (those
/// hyper-parameters, and every scalar tag written as a metric, shown with its last value) and
/// the session's end: `Success` when training finished or a callback stopped it, `Failure`
/// after an error or a non-finite loss. A run a signal interrupted gets no end (it goes on when
/// resumed); a resumed run ends the session.
///
/// ```
/// use burn_stoker::monitor::TensorBoardWriter;
/// use burn_stoker::trainer::DefaultCallbacks;
///
/// // tensorpack's TFEventWriter(max_queue=10, flush_secs=120, split_files=True).
/// let tensorboard = TensorBoardWriter::new()
///     .max_queue(10)
///     .flush_secs(120)
///     .split_files(true)
///     .hparams([("optimizer", "adam".into()), ("batch_size", 32u32.into())]);
/// let defaults = DefaultCallbacks { tensorboard: Some(tensorboard), ..DefaultCallbacks::default() };
/// # let _ = defaults;
/// ```
#[derive(Debug, Clone)]
#[doc(alias = "TensorBoard")]
#[doc(alias = "TensorBoardLogger")]
pub struct TensorBoardWriter {
    max_queue: usize,
    flush_secs: u64,
    split_files: bool,
    hparams: Vec<(String, HParamValue)>,
    /// How the HParams session ends, shared with the sink (see [`TensorBoardSink::end_status`]).
    end_status: Option<std::sync::Arc<std::sync::atomic::AtomicU8>>,
}

impl Default for TensorBoardWriter {
    fn default() -> Self {
        TensorBoardWriter::new()
    }
}

impl TensorBoardWriter {
    /// The writer with its defaults: 10 events held at most, written as soon as the writer has
    /// caught up, one file.
    pub fn new() -> Self {
        TensorBoardWriter {
            max_queue: 10,
            flush_secs: 0,
            split_files: false,
            hparams: Vec::new(),
            end_status: None,
        }
    }

    /// Hold at most `max_queue` events before writing them (at least 1; tensorpack's
    /// `max_queue`).
    pub fn max_queue(mut self, max_queue: usize) -> Self {
        self.max_queue = max_queue;
        self
    }

    /// Write held events once they are `seconds` old (tensorpack's `flush_secs`; 0, the default,
    /// as soon as the writer has caught up).
    pub fn flush_secs(mut self, seconds: u64) -> Self {
        self.flush_secs = seconds;
        self
    }

    /// A new event file after each epoch's end (tensorpack's `split_files`).
    pub fn split_files(mut self, split: bool) -> Self {
        self.split_files = split;
        self
    }

    /// More hyper-parameters for TensorBoard's *HParams* tab, after the learning rate and the
    /// registered ones (a name given twice: the last value); numbers, texts or flags
    /// ([`HParamValue`]). They are only shown, never read by training.
    pub fn hparams<N: Into<String>>(mut self, hparams: impl IntoIterator<Item = (N, HParamValue)>) -> Self {
        self.hparams.extend(hparams.into_iter().map(|(name, value)| (name.into(), value)));
        self
    }

    /// The HParams session's hyper-parameters: the learning rate, the registered ones, then
    /// [`hparams`](Self::hparams)' (a later value of a name replaces an earlier one).
    fn session_hparams(&self, hyper: &crate::state::HyperParams) -> Vec<(String, HParamValue)> {
        let mut all: Vec<(String, HParamValue)> = Vec::new();
        let registered = hyper.names().filter_map(|name| Some((name.to_owned(), hyper.get(name)?.into())));
        for (name, value) in registered.chain(self.hparams.iter().cloned()) {
            match all.iter_mut().find(|(n, _)| *n == name) {
                Some(entry) => entry.1 = value,
                None => all.push((name, value)),
            }
        }
        all
    }
}

#[crate::callback]
impl TensorBoardWriter {
    #[on(setup)]
    fn open<M>(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let dir = ctx.log_dir().to_path_buf();
        let mut sink = TensorBoardSink::create(&dir)
            .map_err(|e| Error::io(&dir, e))?
            .max_queue(self.max_queue)
            .flush_secs(self.flush_secs)
            .split_files(self.split_files);
        if ctx.monitors_ref().is_resumed() {
            // What a crashed run logged after the checkpoint this run resumes from is stale.
            let step = ctx.global_step() + 1;
            sink.restart_at(step).map_err(|e| Error::io(sink.path(), e))?;
        }
        let hparams = self.session_hparams(ctx.hyper());
        sink.start_session(hparams).map_err(|e| Error::io(sink.path(), e))?;
        self.end_status = Some(sink.end_status());
        ctx.monitors().add_sink(sink);
        Ok(())
    }

    /// The HParams session's status, from how training ended; the sink writes it when closed.
    #[on(after_train)]
    fn end<M>(&mut self, ctx: &mut Context<'_, M>) {
        use crate::callback::Outcome;
        let status = match ctx.outcome() {
            Some(Outcome::Finished | Outcome::Stopped(_)) => SessionStatus::Success as u8,
            Some(Outcome::Failed | Outcome::NonFinite { .. }) => SessionStatus::Failure as u8,
            Some(Outcome::Interrupted { .. }) => u8::MAX,
            None => SessionStatus::Unknown as u8,
        };
        if let Some(end_status) = &self.end_status {
            end_status.store(status, std::sync::atomic::Ordering::Relaxed);
        }
    }
}
