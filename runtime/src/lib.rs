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

#[doc(hidden)]
pub mod bench_support;
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
pub mod state;
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
    ReduceLrOnPlateau, ScheduledHyperParamSetter, SharedParam, StatMonitorParamSetter,
};
pub use saver::{Checkpoint, KeepPolicy, MaxSaver, MinSaver, ModelSaver, SaveBestState};
pub use stop::{EarlyStop, EarlyStopping};
pub use track::{
    EstimatedTimeLeft, GpuMemoryTracker, GpuUtilizationTracker, HostMemoryTracker, ProgressBar, RunTimer,
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
        Outcome, Outputs, PeriodicCallback, PeriodicTrigger, ProgressBar, ReduceLrOnPlateau, ScalarStats,
        ScheduledHyperParamSetter, SharedParam, StatMonitorParamSetter, Step, TrainReport, Trainer, callback,
        fetch, order,
    };
}

/// What the macros' generated code refers to. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::callback::state::StateCallback;
    pub use crate::callback::{
        Callback, CallbackInfo, CallbackReturn, Callbacks, Context, Counters, Event, Order, Period, StateOp,
        counters_before_step, deliver,
    };
    pub use crate::error::{Error, Result};
    pub use crate::fetch::{Fetch, FetchValue, Fetched};
    pub use crate::kind::{CallbackKind, CallbackSet};
    pub use crate::trigger::{epoch_due, field_gate, field_wants, step_due};
    pub use serde_json::Value as StateValue;

    pub use std::borrow::Cow;
    pub use std::option::Option::{self, None, Some};
    pub use std::result::Result::{Err, Ok};
}
