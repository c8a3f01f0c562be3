//! What a run returns: the model, why the run ended, the counters, the writers that failed and
//! the work dropped ([`TrainReport`]); and, when it ends with an error, that report with the error
//! ([`TrainError`]).

use super::TrainSummary;
#[cfg(doc)]
use super::Trainer;
use crate::callback::{Counters, Outcome};
use crate::error::Error;
use crate::state::{DroppedWork, WriterFailure};

/// How a run ended, and the trained model.
#[derive(Debug)]
#[doc(alias = "LearningResult")]
pub struct TrainReport<M> {
    /// The model after the last step.
    pub model: M,
    /// Why training ended.
    pub outcome: Outcome,
    /// The counters at the end.
    pub counters: Counters,
    /// Device-to-host transfers made for fetches during the run (the blocking ones: deferred
    /// reads are counted apart).
    pub fetch_transfers: u64,
    /// Deferred reads started: one per step at which some callback asked for a deferred fetch on
    /// a CPU backend; on a GPU, one for all the steps that asked while the last read was in
    /// flight or within [`Trainer::deferred_read_interval`](crate::trainer::Trainer::deferred_read_interval)
    /// of its start.
    pub deferred_reads: u64,
    /// Of those, the reads the training thread had to wait for: the device had not finished them
    /// at an epoch's end, before a checkpoint, at the end, or when
    /// 1024 steps waited behind them. 0 on the CPU backends, where a read is done when it starts.
    pub deferred_waits: u64,
    /// The monitor writers that failed during the run, in the order they were added: each was
    /// disabled at its first error (reported once on stderr) while training went on. Empty when
    /// every writer wrote everything.
    pub writer_failures: Vec<WriterFailure>,
    /// Work that background queues dropped because they were full: commands of
    /// [`SendMonitorData`](crate::monitor::SendMonitorData) and
    /// [`SendStat`](crate::monitor::SendStat), batches of records for a remote writer (the
    /// MLflow writer, whose server was too slow for the run; see [`crate::state::WriterQueue`]).
    /// Empty when nothing was dropped.
    pub dropped: Vec<DroppedWork>,
    /// A SIGINT or SIGTERM (`"SIGINT"`, `"SIGTERM"`) received after the loop's last step
    /// boundary, during `after_train` or the monitors' final flush: too late to stop anything
    /// ([`outcome`](Self::outcome) says how the run ended), reported here and on stderr rather
    /// than dropped. In a world a signal is acted on at the next exchange: one that some rank
    /// received after the last exchange of training (the last epoch's end) is late on every
    /// rank. `None` when the signal stopped the run ([`Outcome::Interrupted`]).
    pub late_signal: Option<String>,
    /// What the run did, in a few lines: the outcome, the wall time, steps and steps per second,
    /// each scalar's last and best value, the log directory and the latest checkpoint. Printed
    /// at the end of training by the default [`TrainSummaryPrinter`](super::TrainSummaryPrinter);
    /// here in every case, to print (`println!("{}", report.summary)`) or inspect.
    pub summary: TrainSummary,
    /// The test set's results ([`Trainer::test`]), as its runner put them to the monitors
    /// (`test_accuracy`, ...), in the order of their names; empty when no test set was evaluated.
    pub test: Vec<(String, f64)>,
}

/// A run that ended with an error, with what it had trained: the error, and the report (the
/// model, the counters, the outcome of the training loop) whenever the model is still there.
///
/// `report` is `None` when the run failed before training started (the log directory's lock,
/// the checkpoint to resume from, the callbacks' names and order, the signal handlers: the
/// model may be half loaded and was never trained), or when a panic inside the optimizer's step
/// lost the model. Otherwise it holds the model as it was when the error came; its
/// [`outcome`](TrainReport::outcome) is [`Outcome::Failed`] when the error ended training early,
/// and how training ended ([`Outcome::Finished`], [`Outcome::Stopped`]...) when the error came
/// afterwards, in `after_train`.
///
/// It displays as its error and converts into [`Error`] (dropping the report), so `?` works in a
/// function returning [`crate::Result`]:
///
/// ```no_run
/// # use burn_stoker::prelude::*;
/// # use burn::module::Module;
/// # use burn::nn::{Linear, LinearConfig};
/// # use burn::optim::SgdConfig;
/// # use burn::tensor::{Device, Tensor};
/// fn train(batches: Vec<(Tensor<2>, Tensor<2>)>, device: &Device) -> burn_stoker::Result<Linear> {
///     let model: Linear = LinearConfig::new(4, 1).init(device);
///     let result = Trainer::new(model, SgdConfig::new().init(), batches).max_epoch(10).train(
///         |model: &Linear, (x, y): (Tensor<2>, Tensor<2>), _step: &mut Step<'_>| {
///             (model.forward(x) - y).powi_scalar(2).mean()
///         },
///     );
///     match result {
///         Ok(report) => Ok(report.model),
///         Err(failed) => {
///             // An error in after_train, say, after 10 epochs: the trained model is still there.
///             if let Some(report) = &failed.report {
///                 let _ = report.model.clone().save_file("rescued.bpk");
///             }
///             Err(failed.into())
///         }
///     }
/// }
/// ```
pub struct TrainError<M> {
    /// What went wrong.
    pub error: Error,
    /// What the run had trained when it went wrong (see above for when it is `None`). Boxed to
    /// keep the `Result` small.
    pub report: Option<Box<TrainReport<M>>>,
}

impl<M> TrainError<M> {
    /// The report, if the model is still there.
    pub fn into_report(self) -> Option<TrainReport<M>> {
        self.report.map(|report| *report)
    }
}

impl<M> TrainReport<M> {
    /// The last value put for the scalar `name` during the run (by a callback, validation or the
    /// trainer), as the monitors hold it; `None` when nothing put one. Read from memory, not from
    /// `stats.json`.
    ///
    /// ```no_run
    /// # fn show<M>(report: &burn_stoker::trainer::TrainReport<M>) {
    /// if let Some(error) = report.latest("validation_error") {
    ///     println!("validation error at the end: {error}");
    /// }
    /// # }
    /// ```
    pub fn latest(&self, name: &str) -> Option<f64> {
        self.scalar(name).map(|s| s.last)
    }

    /// The best value of the scalar `name` during the run, with the step and epoch it was put
    /// at: the lowest for a loss, cost or error, the highest for an accuracy (see
    /// [`TrainSummary`] for how the direction is told). `None` when nothing put one, or when
    /// the direction is unknown (a learning rate, a time).
    pub fn best(&self, name: &str) -> Option<&super::BestValue> {
        self.scalar(name).and_then(|s| s.best.as_ref())
    }

    fn scalar(&self, name: &str) -> Option<&super::ScalarSummary> {
        self.summary.scalars.iter().find(|s| s.name == name)
    }
}

impl<M> std::fmt::Debug for TrainError<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The model itself is left out: a model's `Debug` prints every weight.
        let report = self.report.as_ref().map(|r| {
            format!(
                "TrainReport {{ outcome: {:?}, counters: {:?}, writer_failures: {:?}, dropped: {:?}, .. }}",
                r.outcome, r.counters, r.writer_failures, r.dropped
            )
        });
        f.debug_struct("TrainError").field("error", &self.error).field("report", &report).finish()
    }
}

impl<M> std::fmt::Display for TrainError<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.error, f)
    }
}

/// Transparent: the source is the error's own (its message is already this one's).
impl<M> std::error::Error for TrainError<M> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.error)
    }
}

impl<M> From<TrainError<M>> for Error {
    fn from(failed: TrainError<M>) -> Error {
        failed.error
    }
}

/// An error with no report (the run failed before training started).
impl<M> From<Error> for TrainError<M> {
    fn from(error: Error) -> TrainError<M> {
        TrainError { error, report: None }
    }
}
