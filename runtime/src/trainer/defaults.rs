//! The callbacks a trainer starts with.

use super::TrainSummaryPrinter;
use crate::monitor::{JsonWriter, ScalarPrinter, TensorBoardWriter, TrainCost, TrainLogger};
use crate::track::{ModelSummary, ProgressBar};

/// The callbacks a trainer starts with, like tensorpack's and neon's: a summary of the model's
/// parameters at the start, a progress bar, TensorBoard event files, `stats.json`, a scalar
/// printer, and a summary of the run at the end. neon's two other defaults, [`TrainCost`] and
/// [`TrainLogger`], are fields that start `None`: the cost is an addition on the device at every
/// step, work that the other defaults do not add. Each can be replaced or turned off (`None`);
/// none of them adds any work to a step that no callback asked for.
///
/// ```
/// use burn_stoker::trainer::DefaultCallbacks;
///
/// // Everything but the two summaries.
/// let quiet = DefaultCallbacks { model_summary: None, train_summary: None, ..DefaultCallbacks::default() };
/// # let _ = quiet;
/// // And neon's mean training cost per epoch.
/// use burn_stoker::monitor::TrainCost;
/// let with_cost = DefaultCallbacks { train_cost: Some(TrainCost::new()), ..DefaultCallbacks::default() };
/// # let _ = with_cost;
/// ```
#[derive(Debug, crate::Callbacks)]
pub struct DefaultCallbacks {
    /// The model's parameters per tensor and module, their total and bytes, at `before_train`:
    /// on stdout, in `model_summary.txt` and as TensorBoard text ([`ModelSummary`]).
    pub model_summary: Option<ModelSummary>,
    /// neon's `TrainCostCallback`: the epoch's mean `"loss"`, put as the scalar `train_cost`
    /// ([`TrainCost`]). One device-to-host read per epoch, none per step, but an addition on the
    /// device at every step: `None` by default, `Some(TrainCost::new())` turns it on.
    pub train_cost: Option<TrainCost>,
    /// neon's `TrainLoggerCallback`: a line `Epoch N complete. Train cost C.` per epoch
    /// ([`TrainLogger`]), reading `train_cost`. `None` by default: the scalar printer already
    /// prints `train_cost`.
    pub train_logger: Option<TrainLogger>,
    /// The progress bar.
    pub progress: Option<ProgressBar>,
    /// The TensorBoard writer.
    pub tensorboard: Option<TensorBoardWriter>,
    /// The `stats.json` writer.
    pub json: Option<JsonWriter>,
    /// The scalar printer.
    pub printer: Option<ScalarPrinter>,
    /// The end-of-training summary on stdout ([`TrainSummaryPrinter`]): the outcome, the time,
    /// steps per second, each scalar's last and best value, where the logs and the latest
    /// checkpoint are. `None` prints nothing; the summary is in the `TrainReport` either way.
    pub train_summary: Option<TrainSummaryPrinter>,
}

impl Default for DefaultCallbacks {
    fn default() -> Self {
        DefaultCallbacks {
            model_summary: Some(ModelSummary::new()),
            train_cost: None,
            train_logger: None,
            progress: Some(ProgressBar::new()),
            tensorboard: Some(TensorBoardWriter::new()),
            json: Some(JsonWriter),
            printer: Some(ScalarPrinter::new()),
            train_summary: Some(TrainSummaryPrinter::new()),
        }
    }
}

impl DefaultCallbacks {
    /// No default callback at all.
    pub fn none() -> Self {
        DefaultCallbacks {
            model_summary: None,
            train_cost: None,
            train_logger: None,
            progress: None,
            tensorboard: None,
            json: None,
            printer: None,
            train_summary: None,
        }
    }
}
