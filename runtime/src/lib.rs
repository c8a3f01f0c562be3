//! # stoker
//!
//! Declared training callbacks and a training loop on [burn] that costs nothing per step beyond
//! burn's own work.
//!
//! Everything other than the training iterations happens in callbacks ([`Callback`]): validation
//! ([`InferenceRunner`]), checkpoints ([`ModelSaver`]), schedules
//! ([`ScheduledHyperParamSetter`]), monitors (TensorBoard, `stats.json`, the terminal), progress.
//! The [`Trainer`] runs them in tensorpack's lifecycle; values computed by a step reach the
//! callbacks that asked for them in one device-to-host transfer ([`fetch`]).
#![warn(missing_docs)]

pub mod callback;
pub mod device;
pub mod error;
pub mod fetch;
pub mod inference;
pub mod monitor;
pub mod param;
pub mod saver;
pub mod track;
pub mod trainer;
pub mod trigger;

pub use callback::{Callback, CallbackInfo, CallbackReturn, Callbacks, Context, Counters, Event, Flow, Order, Single};
pub use error::{Error, Result};
pub use fetch::{Fetch, FetchKind, FetchValue, Fetched, OutputTensor, Outputs};
pub use inference::{ClassificationError, InferenceRunner, Inferencer, ScalarStats};
pub use monitor::{JsonWriter, MonitorSink, Monitors, ScalarPrinter, TensorBoardWriter};
pub use param::{HyperParams, ScheduledHyperParamSetter};
pub use saver::ModelSaver;
pub use track::ProgressBar;
pub use trainer::{BatchIter, DefaultCallbacks, Step, TrainData, TrainReport, Trainer};
pub use trigger::{EnableCallbackIf, PeriodicCallback, PeriodicTrigger};

/// What a training program usually needs.
pub mod prelude {
    pub use crate::{
        Callback, Callbacks, ClassificationError, Context, Counters, DefaultCallbacks, Flow, EnableCallbackIf,
        Fetch, Fetched, InferenceRunner, ModelSaver, Outputs, PeriodicCallback, PeriodicTrigger, ProgressBar,
        ScalarStats, ScheduledHyperParamSetter, Step, TrainReport, Trainer,
    };
}

/// What the macros' generated code refers to. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::callback::{
        Callback, CallbackInfo, CallbackReturn, Callbacks, Context, Counters, Event, Order, deliver,
    };
    pub use crate::error::{Error, Result};
    pub use crate::fetch::{Fetch, FetchValue, Fetched};
    pub use crate::trigger::{epoch_due, step_due};
    pub use std::borrow::Cow;
    pub use std::option::Option::{self, None, Some};
    pub use std::result::Result::{Err, Ok};
}
