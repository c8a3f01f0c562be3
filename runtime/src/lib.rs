//! # stoker
//!
//! Declared training callbacks and a training loop on [burn] that costs nothing per step beyond
//! burn's own work.
//!
//! Everything other than the training iterations happens in callbacks ([`Callback`]): validation
//! ([`InferenceRunner`]), checkpoints ([`ModelSaver`]), schedules
//! ([`ScheduledHyperParamSetter`]), monitors (TensorBoard, `stats.json`, the terminal), progress.
//! Callbacks are declared with attributes ([`callback`](macro@callback),
//! [`fetch`](macro@fetch), [`order`](macro@order), [`derive(Callbacks)`](derive@Callbacks)) or
//! written as [`Callback`] implementations. The [`Trainer`] runs them in tensorpack's lifecycle; values computed by a step reach the
//! callbacks that asked for them in one device-to-host transfer ([`fetch`](mod@fetch)).
#![warn(missing_docs)]

// The macros generate `::burn_stoker::...` paths; this lets the runtime use its own macros.
extern crate self as burn_stoker;

pub mod callback;
#[cfg(feature = "cli")]
pub mod cli;
pub mod debug;
pub mod device;
pub mod error;
pub mod fetch;
pub mod inference;
pub mod kind;
pub mod modify;
pub mod monitor;
pub mod param;
pub mod saver;
pub mod stop;
pub mod track;
pub mod trainer;
pub mod trigger;

pub use callback::{
    Callback, CallbackInfo, CallbackReturn, Callbacks, Context, Counters, Event, Flow, Order, Single,
    StateOp, StepGradients, StepHooks, StepLoss,
};
pub use debug::{
    CallbackFactory, DumpTensorAsImage, DumpTensors, InjectShell, ProcessTensors, StartProcOrThread,
    StepTimeout, TensorPrinter,
};
pub use error::{Error, Result};
pub use fetch::{Fetch, FetchKind, FetchValue, Fetched, OutputTensor, Outputs};
pub use inference::{ClassificationError, InferenceRunner, Inferencer, ScalarStats};
pub use kind::{CallbackKind, CallbackSet};
pub use monitor::{
    CsvWriter, Hist, JsonWriter, MonitorSink, Monitors, MovingAverageSummary, ScalarPrinter, SendMonitorData,
    SendStat, SimpleMovingAverage, TensorBoardWriter,
};
pub use param::{
    HumanHyperParamSetter, HyperParamSetterWithFunc, HyperParams, LrSchedulerSetter, PlateauMode,
    ReduceLROnPlateau, ScheduledHyperParamSetter, SharedParam, StatMonitorParamSetter,
};
pub use saver::{Checkpoint, KeepPolicy, MaxSaver, MinSaver, ModelSaver, SaveBestState};
pub use stop::{EarlyStop, EarlyStopping};
pub use track::{
    EstimatedTimeLeft, GPUMemoryTracker, GPUUtilizationTracker, HostMemoryTracker, ProgressBar, RunTimer,
    ThroughputTracker, Timed,
};
pub use trainer::{BatchIter, DefaultCallbacks, Outcome, Step, TrainData, TrainReport, Trainer};
pub use trigger::{EnableCallbackIf, PeriodicCallback, PeriodicTrigger};

pub use burn_stoker_macros::{Callbacks, callback, fetch, order};

/// What a training program usually needs.
pub mod prelude {
    pub use crate::{
        Callback, CallbackKind, Callbacks, ClassificationError, Context, Counters, DefaultCallbacks,
        EarlyStopping, EnableCallbackIf, Fetch, Fetched, Flow, HumanHyperParamSetter,
        HyperParamSetterWithFunc, InferenceRunner, LrSchedulerSetter, MaxSaver, MinSaver, ModelSaver, Order,
        Outcome, Outputs, PeriodicCallback, PeriodicTrigger, ProgressBar, ReduceLROnPlateau, ScalarStats,
        ScheduledHyperParamSetter, SharedParam, StatMonitorParamSetter, Step, TrainReport, Trainer, callback,
        fetch, order,
    };
}

/// What the macros' generated code refers to. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::callback::{
        Callback, CallbackInfo, CallbackReturn, Callbacks, Context, Counters, Event, Order, StateOp, deliver,
    };
    pub use crate::error::{Error, Result};
    pub use crate::fetch::{Fetch, FetchValue, Fetched};
    pub use crate::kind::{CallbackKind, CallbackSet};
    pub use crate::trainer::time_event_delivery;
    pub use crate::trigger::{epoch_due, field_gate, field_wants, step_due};
    pub use serde_json::Value as StateValue;

    /// The counters as they were before the step that just ran (for predicates evaluated in
    /// `after_step` and `trigger_step`, which `EnableCallbackIf` evaluates before the step).
    pub fn counters_before_step(counters: &Counters) -> Counters {
        counters.before_step()
    }

    /// `#[callback(state)]` needs a serializable callback. Generated code calls these methods
    /// through the trait (`<Self as StateCallback>::save`), all at the `state` token, so that a
    /// type that is not serializable gets one error per missing derive, not one per call.
    #[diagnostic::on_unimplemented(
        message = "`#[callback(state)]` needs `{Self}` to be serializable",
        label = "`{Self}` does not implement serde's `Serialize` and `Deserialize`",
        note = "add `#[derive(serde::Serialize, serde::Deserialize)]` to `{Self}`, or remove `state`"
    )]
    pub trait StateCallback {
        /// The value as JSON.
        fn save(&self) -> Result<StateValue>;
        /// Replace the value with the state read from JSON.
        fn load(&mut self, state: StateValue) -> Result<()>;
    }

    impl<T: serde::Serialize + serde::de::DeserializeOwned> StateCallback for T {
        fn save(&self) -> Result<StateValue> {
            serde_json::to_value(self).map_err(|e| Error::msg(format!("saving a callback's state: {e}")))
        }
        fn load(&mut self, state: StateValue) -> Result<()> {
            *self = serde_json::from_value(state)
                .map_err(|e| Error::msg(format!("loading a callback's state: {e}")))?;
            Ok(())
        }
    }

    pub use std::borrow::Cow;
    pub use std::option::Option::{self, None, Some};
    pub use std::result::Result::{Err, Ok};
}
