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
#[cfg(test)]
mod tests;
mod train_cost;

use crate::state::{EpochStats, MonitorSink, Record, Value};
pub(crate) use crate::state::{json_f64, parse_f64};
pub use average::{MovingAverageSummary, SimpleMovingAverage};
#[cfg(feature = "hdf5")]
pub use callback_data::{CallbackDataWriter, ConvLayers, Deconv};
#[cfg(feature = "comet")]
pub use comet::{COMET_DEFAULT_URL, COMET_SINK_NAME, CometMlMonitor};
pub use csv::{CSV_FILE, CsvWriter};
#[cfg(feature = "dashboard")]
pub use dashboard::Dashboard;
pub use hist::Hist;
pub use history::{HISTORY_FILE, HistoryWriter};
pub use json::JsonWriter;
pub(crate) use json::STATS_FILE;
#[cfg(feature = "mlflow")]
pub use mlflow::{CheckpointArtifacts, MLFLOW_MAX_METRICS_PER_BATCH, MLFLOW_SINK_NAME, MlflowLogger};
pub use printer::ScalarPrinter;
pub use send::{COMMAND_QUEUE_CAPACITY, SendMonitorData, SendStat};
pub use tensorboard::{HParamValue, TensorBoardWriter};
pub use train_cost::{TRAIN_COST, TrainCost, TrainLogger};
