//! The callbacks a trainer starts with.

use crate::monitor::{JsonWriter, ScalarPrinter, TensorBoardWriter};
use crate::track::ProgressBar;

/// The callbacks a trainer starts with, like tensorpack's and neon's: a progress bar, TensorBoard
/// event files, `stats.json`, and a scalar printer. Each can be replaced or turned off.
#[derive(Debug, crate::Callbacks)]
pub struct DefaultCallbacks {
    /// The progress bar.
    pub progress: Option<ProgressBar>,
    /// The TensorBoard writer.
    pub tensorboard: Option<TensorBoardWriter>,
    /// The `stats.json` writer.
    pub json: Option<JsonWriter>,
    /// The scalar printer.
    pub printer: Option<ScalarPrinter>,
}

impl Default for DefaultCallbacks {
    fn default() -> Self {
        DefaultCallbacks {
            progress: Some(ProgressBar::new()),
            tensorboard: Some(TensorBoardWriter),
            json: Some(JsonWriter),
            printer: Some(ScalarPrinter::new()),
        }
    }
}

impl DefaultCallbacks {
    /// No default callback at all.
    pub fn none() -> Self {
        DefaultCallbacks { progress: None, tensorboard: None, json: None, printer: None }
    }
}
