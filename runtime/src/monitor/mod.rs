//! Monitors: what callbacks put (scalars, images, histograms, texts), a history every callback
//! can query, and the writers that take it to disk or the terminal off the step's path.
//!
//! A writer is a [`MonitorSink`] running on a thread of its own; its callback
//! ([`TensorBoardWriter`], [`JsonWriter`], [`ScalarPrinter`], [`CsvWriter`],
//! [`SendMonitorData`]) registers it at setup. Records put
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
//! bounded and nothing is lost. A writer that fails is reported once on stderr and disabled;
//! training goes on, and the run's
//! [`TrainReport::writer_failures`](crate::trainer::TrainReport::writer_failures) names it and
//! the step it failed at (see [`crate::state::WriterQueue`]).

mod average;
mod csv;
mod hist;
mod json;
mod png;
pub(crate) mod printer;
mod send;
mod tensorboard;

use crate::state::{EpochStats, MonitorSink, Record, Value};
pub(crate) use crate::state::{json_f64, parse_f64};
pub use average::{MovingAverageSummary, SimpleMovingAverage};
pub use csv::{CSV_FILE, CsvSink, CsvWriter};
pub use hist::Hist;
pub(crate) use json::STATS_FILE;
pub use json::{JsonSink, JsonWriter};
pub use png::encode_png;
pub use printer::{PrinterSink, ScalarPrinter};
pub use send::{COMMAND_QUEUE_CAPACITY, SendMonitorData, SendStat};
pub use tensorboard::TensorBoardSink;

use crate::callback::Context;
use crate::error::{Error, Result, io_error_at};

/// Writes every monitored record to a TensorBoard event file in the log directory, which
/// TensorBoard itself reads (`tensorboard --logdir <log dir>`). On by default.
///
/// A resumed run writes a new event file that starts with a restart mark at the step after its
/// checkpoint, so that TensorBoard drops what a crashed run logged after that checkpoint: the
/// curves continue without duplicates.
#[derive(Debug, Default)]
pub struct TensorBoardWriter;

#[crate::callback]
impl TensorBoardWriter {
    #[on(setup)]
    fn open<M>(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let dir = ctx.log_dir().to_path_buf();
        let mut sink = TensorBoardSink::create(&dir).map_err(|e| Error::io(&dir, e))?;
        if ctx.monitors_ref().is_resumed() {
            // What a crashed run logged after the checkpoint this run resumes from is stale.
            let step = ctx.global_step() + 1;
            sink.restart_at(step).map_err(|e| Error::io(sink.path(), e))?;
        }
        ctx.monitors().add_sink(sink);
        Ok(())
    }
}

impl MonitorSink for TensorBoardSink {
    fn name(&self) -> &str {
        "TensorBoard"
    }
    // The errors name the event file (a writer's failure is reported with its error alone).
    fn write(&mut self, records: &[Record]) -> std::io::Result<()> {
        TensorBoardSink::write(self, records).map_err(|e| io_error_at(self.path(), e))
    }
    fn flush(&mut self) -> std::io::Result<()> {
        TensorBoardSink::flush(self).map_err(|e| io_error_at(self.path(), e))
    }
}
