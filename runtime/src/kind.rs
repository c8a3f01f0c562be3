//! Callback types known to the compiler: what `#[order(after = X)]` and the fields of a
//! `#[derive(Callbacks)]` struct are checked against.
//!
//! An order target is a callback *type*. [`CallbackKind`] gives each callback type the name by
//! which the trainer orders it at run time (the type's name; a wrapper such as
//! [`PeriodicTrigger`](crate::trigger::PeriodicTrigger) takes its inner callback's). `#[callback]` and
//! `#[derive(Callbacks)]` implement it; each built-in callback implements it next to its type (the
//! crate-private `kind!(Type)`); a hand-written callback implements it in one line:
//!
//! ```
//! use burn_stoker::prelude::*;
//!
//! struct CountEpochs(u64);
//!
//! impl<M> Callback<M> for CountEpochs {}
//! impl CallbackKind for CountEpochs { const NAME: &'static str = "CountEpochs"; }
//!
//! #[callback(on = trigger)]
//! #[order(after = CountEpochs)]
//! fn report<M>(ctx: &mut Context<'_, M>) {
//!     let _ = ctx;
//! }
//! ```
//!
//! [`CallbackField`] is what a field of a `#[derive(Callbacks)]` struct may be: a callback, or a
//! set of callbacks (a tuple, an `Option`, a `Vec`, another derived struct, a
//! [`Timed`](crate::track::Timed) set). A field of any other type is a compile error on that field.

/// A callback type, which an `#[order(after = X)]` constraint can name.
///
/// `NAME` is the name the trainer orders it by: the
/// [`Callback::name`](crate::callback::Callback::name) of its values, or the part of it before `(`
/// (`ScheduledHyperParamSetter` designates every `ScheduledHyperParamSetter(learning_rate)`).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a callback type",
    label = "an order target names a callback type",
    note = "name a type made by `#[callback]` or a built-in callback; a hand-written callback implements `CallbackKind` in one line: `impl CallbackKind for {Self} {{ const NAME: &'static str = \"...\"; }}`"
)]
pub trait CallbackKind {
    /// The name the trainer orders this callback by.
    const NAME: &'static str;
}

/// What a field of a `#[derive(Callbacks)]` struct may be: a callback, or a set of callbacks. A
/// compile-time check only, spanned on the field; the trainer runs a set through
/// [`Callbacks`](crate::callback::Callbacks), the one trait of a set of callbacks.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a callback, nor a set of callbacks",
    label = "a field of a `#[derive(Callbacks)]` struct is a callback or a set of callbacks",
    note = "use a type made by `#[callback]`, a built-in callback, a tuple, `Option` or `Vec` of them, or another `#[derive(Callbacks)]` struct; a hand-written callback implements `CallbackKind` in one line: `impl CallbackKind for {Self} {{ const NAME: &'static str = \"...\"; }}`"
)]
pub trait CallbackField {}

impl<C: CallbackKind + ?Sized> CallbackField for C {}
impl CallbackField for () {}
impl<C: CallbackField> CallbackField for Option<C> {}
impl<C: CallbackField> CallbackField for Vec<C> {}

macro_rules! tuple_sets {
    ($($name:ident)+) => {
        impl<$($name: CallbackField),+> CallbackField for ($($name,)+) {}
    };
}

tuple_sets!(A);
tuple_sets!(A B);
tuple_sets!(A B C);
tuple_sets!(A B C D);
tuple_sets!(A B C D E);
tuple_sets!(A B C D E F);
tuple_sets!(A B C D E F G);
tuple_sets!(A B C D E F G H);
tuple_sets!(A B C D E F G H I);
tuple_sets!(A B C D E F G H I J);
tuple_sets!(A B C D E F G H I J K);
tuple_sets!(A B C D E F G H I J K L);
tuple_sets!(A B C D E F G H I J K L N);
tuple_sets!(A B C D E F G H I J K L N O);
tuple_sets!(A B C D E F G H I J K L N O P);
tuple_sets!(A B C D E F G H I J K L N O P Q);

// Pointers forward to what they point at, as their `Callback` impls do.
impl<C: CallbackKind + ?Sized> CallbackKind for Box<C> {
    const NAME: &'static str = C::NAME;
}
impl<C: CallbackKind + ?Sized> CallbackKind for &mut C {
    const NAME: &'static str = C::NAME;
}

/// `CallbackKind` for a built-in callback type, written next to the type:
/// `crate::kind::kind!(CsvWriter);` or `crate::kind::kind!(ModelSaver<T>);` (named as the type),
/// `crate::kind::kind!(ReduceLrOnPlateau => "ReduceLROnPlateau")` where its
/// [`Callback::name`](crate::callback::Callback::name) starts with another word. A wrapper, whose
/// kind is its inner callback's, implements the trait by hand. The tests below find every
/// `kind!` of the crate and check each built-in's name against its kind.
macro_rules! kind {
    ($ty:ident $(<$($param:ident),+>)?) => {
        $crate::kind::kind!($ty $(<$($param),+>)? => stringify!($ty));
    };
    ($ty:ident $(<$($param:ident),+>)? => $name:expr) => {
        impl $(<$($param),+>)? $crate::kind::CallbackKind for $ty $(<$($param),+>)? {
            const NAME: &'static str = $name;
        }
    };
}
pub(crate) use kind;

/// The name of a built-in callback of kind `C`: its [`CallbackKind::NAME`], the one place the
/// name is written.
pub(crate) fn name_of<C: CallbackKind + ?Sized>() -> std::borrow::Cow<'static, str> {
    std::borrow::Cow::Borrowed(C::NAME)
}

/// `NAME(detail)`: the name of a built-in callback of kind `C` that its `detail` tells apart from
/// the others of its kind (`MinSaver(validation_error)`); order targets naming `C` designate it.
pub(crate) fn detailed<C: CallbackKind + ?Sized>(
    detail: impl std::fmt::Display,
) -> std::borrow::Cow<'static, str> {
    std::borrow::Cow::Owned(format!("{}({detail})", C::NAME))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use burn::lr_scheduler::linear::LinearLrSchedulerConfig;
    use burn::nn::Linear;
    use burn::tensor::Tensor;

    use super::CallbackKind;
    use crate::callback::{Callback, CallbackExt, Context};
    use crate::debug::{
        CallbackFactory, CheckNumerics, DumpParamAsImage, DumpTensorAsImage, DumpTensors, InjectShell,
        ProcessTensors, StartProcOrThread, StepTimeout, TensorPrinter, TerminateOnNaN,
    };
    use crate::fetch::Outputs;
    use crate::inference::InferenceRunner;
    use crate::modify::{BatchNormTune, GradientAccumulation, GradientClip, RnnRegularizer, RunOp};
    use crate::monitor::{
        CsvWriter, Hist, MovingAverageSummary, SendMonitorData, SendStat, SimpleMovingAverage, TrainCost,
        TrainLogger,
    };
    use crate::param::{
        HumanHyperParamSetter, HyperParamSetter, HyperParamSetterWithFunc, LrSchedulerSetter,
        ReduceLrOnPlateau, ScheduledHyperParamSetter, StatMonitorParamSetter,
    };
    use crate::saver::{LoadModel, MaxSaver, MinSaver, ModelSaver, SaveBestState};
    use crate::stop::EarlyStopping;
    use crate::track::{
        EstimatedTimeLeft, ModelSummary, ProgressBar, Recorder, RunTimer, StepProfiler, ThroughputTracker,
    };
    #[cfg(feature = "sys-metrics")]
    use crate::track::{GpuMemoryTracker, GpuUtilizationTracker, HostMemoryTracker};
    use crate::trainer::TrainSummaryPrinter;
    use crate::trigger::{EnableCallbackIf, PeriodicCallback, PeriodicTrigger, ProxyCallback};

    fn chief_only<C: Callback<Linear>>(callback: C) -> bool {
        callback.chief_only()
    }

    /// Where each built-in runs in data-parallel training (the README's table): a change to a
    /// default shows up here.
    #[test]
    fn built_in_callbacks_run_where_tensorpack_runs_them() {
        let lr = LinearLrSchedulerConfig::new(0.5, 0.1, 4).init().unwrap();
        let every_rank = [
            ("RnnRegularizer", chief_only(RnnRegularizer::new(2.0, 1.0))),
            ("GradientClip", chief_only(GradientClip::new(1.0))),
            ("GradientAccumulation", chief_only(GradientAccumulation::new(4))),
            ("TerminateOnNaN", chief_only(TerminateOnNaN::new())),
            ("StepTimeout", chief_only(StepTimeout::new(Duration::from_secs(60)))),
            (
                "ScheduledHyperParamSetter",
                chief_only(ScheduledHyperParamSetter::new("learning_rate", [(0, 0.1)])),
            ),
            (
                "HyperParamSetterWithFunc",
                chief_only(HyperParamSetterWithFunc::new("learning_rate", |_, v| v)),
            ),
            ("LrSchedulerSetter", chief_only(LrSchedulerSetter::new(lr))),
            ("RunOp", chief_only(RunOp::new(|_: &mut Linear| {}))),
            (
                "SetterCallback",
                chief_only(ScheduledHyperParamSetter::new("learning_rate", [(0, 0.1)]).into_callback()),
            ),
            #[cfg(feature = "sys-metrics")]
            ("GpuMemoryTracker", chief_only(GpuMemoryTracker::new())),
            #[cfg(feature = "sys-metrics")]
            ("GpuUtilizationTracker", chief_only(GpuUtilizationTracker::new())),
            #[cfg(feature = "sys-metrics")]
            ("HostMemoryTracker", chief_only(HostMemoryTracker::new())),
            ("ThroughputTracker", chief_only(ThroughputTracker::new())),
            ("StartProcOrThread", chief_only(StartProcOrThread::new())),
            ("LoadModel", chief_only(LoadModel::new("model.bpk"))),
            (
                "CallbackFactory(after_backward)",
                chief_only(CallbackFactory::<Linear>::new().after_backward(|_, _| {})),
            ),
            (
                "CallbackFactory.chief_only(false)",
                chief_only(CallbackFactory::<Linear>::new().chief_only(false)),
            ),
            ("PeriodicTrigger(GradientClip)", chief_only(PeriodicTrigger::new(GradientClip::new(1.0)))),
            ("PeriodicCallback(TerminateOnNaN)", chief_only(PeriodicCallback::new(TerminateOnNaN::new()))),
            (
                "EnableCallbackIf(GradientAccumulation)",
                chief_only(EnableCallbackIf::new(GradientAccumulation::new(2), |_| true)),
            ),
            ("Named(GradientClip)", chief_only(GradientClip::new(1.0).named("first"))),
            (
                "Box<dyn Callback>(GradientClip)",
                chief_only(Box::new(GradientClip::new(1.0)) as Box<dyn Callback<Linear>>),
            ),
        ];
        let chief = on_the_chief();
        for (name, chief_only) in every_rank {
            assert!(!chief_only, "{name} must run on every rank");
        }
        for (name, chief_only) in chief {
            assert!(chief_only, "{name} must run on the chief only");
        }
    }

    /// The built-ins that run on the chief only, each with what `chief_only()` says.
    fn on_the_chief() -> [(&'static str, bool); 20] {
        [
            ("ModelSaver", chief_only(ModelSaver::new(3))),
            ("MinSaver", chief_only(MinSaver::new("validation_loss"))),
            ("EarlyStopping", chief_only(EarlyStopping::new("validation_loss"))),
            ("HumanHyperParamSetter", chief_only(HumanHyperParamSetter::new("learning_rate"))),
            ("ReduceLrOnPlateau", chief_only(ReduceLrOnPlateau::new("validation_loss"))),
            (
                "StatMonitorParamSetter",
                chief_only(StatMonitorParamSetter::new(
                    "learning_rate",
                    "validation_loss",
                    |v| v / 2.0,
                    0.0,
                    3,
                )),
            ),
            ("CsvWriter", chief_only(CsvWriter::new())),
            ("Hist", chief_only(Hist::new())),
            ("MovingAverageSummary", chief_only(MovingAverageSummary::new(["loss"]))),
            ("ProgressBar", chief_only(ProgressBar::new())),
            ("EstimatedTimeLeft", chief_only(EstimatedTimeLeft::new())),
            ("RunTimer", chief_only(RunTimer::new())),
            ("Recorder", chief_only(Recorder::new())),
            ("DumpTensors", chief_only(DumpTensors::new(["loss"]))),
            ("TensorPrinter", chief_only(TensorPrinter::new(["loss"]))),
            ("StartProcOrThread.chief_only(true)", chief_only(StartProcOrThread::new().chief_only(true))),
            ("CallbackFactory", chief_only(CallbackFactory::<Linear>::new().trigger(|_| {}))),
            ("PeriodicTrigger(ModelSaver)", chief_only(PeriodicTrigger::new(ModelSaver::new(1)))),
            ("Named(ModelSaver)", chief_only(ModelSaver::new(1).named("archive"))),
            ("CheckNumerics", chief_only(CheckNumerics::new())),
        ]
    }

    /// One built-in callback, as a value: its type's name, its kind's `NAME`, its `name()`.
    struct Sample {
        ty: &'static str,
        kind: &'static str,
        name: String,
    }

    fn sample<C: Callback<Linear> + CallbackKind>(callback: C) -> Sample {
        let path = std::any::type_name::<C>();
        let ty = path.split('<').next().and_then(|p| p.rsplit("::").next()).unwrap_or(path);
        Sample { ty, kind: C::NAME, name: callback.name().into_owned() }
    }

    /// A value of every built-in callback type with a kind (and of each wrapper around one).
    fn samples() -> Vec<Sample> {
        let lr = LinearLrSchedulerConfig::new(0.5, 0.1, 4).init().unwrap();
        let batches: Vec<(Tensor<2>, Tensor<2>)> = Vec::new();
        let forward = |_: &Linear, _: (Tensor<2>, Tensor<2>), _: &mut Outputs| {};
        let all = vec![
            sample(RnnRegularizer::new(2.0, 1.0)),
            sample(GradientClip::new(1.0)),
            sample(GradientAccumulation::new(4)),
            sample(crate::modify::MixUp::<(Tensor<2>, Tensor<1, burn::tensor::Int>), Tensor<2>, _>::new(
                0.4,
                |p: Tensor<2>, _| p.sum_dim(1).squeeze_dim(1),
            )),
            sample(BatchNormTune::new(vec![0u8], |_: &Linear, _: u8| {})),
            sample(RunOp::new(|_: &mut Linear| {})),
            sample(InjectShell::new()),
            sample(DumpTensors::new(["loss"])),
            sample(ProcessTensors::new(["loss"], |_, _: &mut Context<'_, Linear>| {})),
            sample(TensorPrinter::new(["loss"])),
            sample(DumpTensorAsImage::new("image")),
            sample(DumpParamAsImage::new("weight")),
            sample(CallbackFactory::<Linear>::new().trigger(|_| {})),
            sample(TerminateOnNaN::new()),
            sample(CheckNumerics::new()),
            sample(StartProcOrThread::new()),
            sample(StepTimeout::new(Duration::from_secs(60))),
            sample(ModelSaver::new(3)),
            sample(MinSaver::new("validation_loss")),
            sample(MaxSaver::new("validation_accuracy")),
            sample(SaveBestState::new("best.bpk", "validation_loss")),
            sample(LoadModel::new("model.bpk")),
            sample(LrSchedulerSetter::new(lr)),
            sample(HumanHyperParamSetter::new("learning_rate")),
            sample(ScheduledHyperParamSetter::new("learning_rate", [(0, 0.1)])),
            sample(ReduceLrOnPlateau::new("validation_loss")),
            sample(HyperParamSetterWithFunc::new("learning_rate", |_, v| v)),
            sample(StatMonitorParamSetter::new("learning_rate", "validation_loss", |v| v / 2.0, 0.0, 3)),
            sample(ScheduledHyperParamSetter::new("learning_rate", [(0, 0.1)]).into_callback()),
            sample(EarlyStopping::new("validation_loss")),
            sample(crate::stop::ShortEpochCallback::new()),
            sample(CsvWriter::new()),
            sample(Hist::new()),
            sample(MovingAverageSummary::new(["loss"])),
            sample(SimpleMovingAverage::new(["loss"], 5)),
            sample(TrainCost::new()),
            sample(TrainLogger::new()),
            sample(SendMonitorData::new("true {v}", ["v"]).unwrap()),
            sample(SendStat::new("true {v}", ["v"]).unwrap()),
            sample(ProgressBar::new()),
            sample(ModelSummary::new()),
            sample(Recorder::new()),
            sample(crate::track::LrFinder::<Linear>::new()),
            sample(TrainSummaryPrinter::new()),
            sample(EstimatedTimeLeft::new()),
            sample(ThroughputTracker::new()),
            sample(RunTimer::new()),
            sample(StepProfiler::new()),
            sample(InferenceRunner::new(batches, forward)),
            sample(PeriodicTrigger::new(GradientClip::new(1.0))),
            sample(PeriodicCallback::new(ModelSaver::new(1))),
            sample(EnableCallbackIf::new(TerminateOnNaN::new(), |_| true)),
            sample(ProxyCallback::new(MinSaver::new("validation_loss"))),
            sample(ModelSaver::new(1).named("archive")),
            sample(ModelSaver::new(1).set_chief_only(false)),
            sample(Box::new(GradientClip::new(1.0))),
        ];
        #[cfg(feature = "sys-metrics")]
        let all = {
            let mut all = all;
            all.extend([
                sample(GpuMemoryTracker::new()),
                sample(GpuUtilizationTracker::new()),
                sample(HostMemoryTracker::new()),
            ]);
            all
        };
        all.into_iter().chain(feature_samples()).collect()
    }

    /// The built-ins of the features `dashboard`, `hdf5`, `mlflow` and `comet`, with them.
    fn feature_samples() -> Vec<Sample> {
        Vec::from([
            #[cfg(feature = "dashboard")]
            sample(crate::monitor::Dashboard::new()),
            #[cfg(feature = "mlflow")]
            sample(crate::monitor::MlflowLogger::new("http://127.0.0.1:1").unwrap()),
            #[cfg(feature = "comet")]
            sample(
                crate::monitor::CometMlMonitor::new("http://127.0.0.1:1", "key", "ws", "project").unwrap(),
            ),
            #[cfg(feature = "hdf5")]
            sample(crate::monitor::CallbackDataWriter::new("data.h5")),
            // A callback of the models with convolutions (`ConvLayers`), which `Linear` is not.
            #[cfg(feature = "hdf5")]
            Sample {
                ty: "Deconv",
                kind: <crate::monitor::Deconv as CallbackKind>::NAME,
                name: "Deconv".to_string(),
            },
        ])
    }

    /// Every built-in's name is its kind's `NAME`, or `NAME(...)`: what `kind::name_of` and
    /// `kind::detailed` build, checked on a value of each. That every public callback type has a
    /// kind is `bench/tools/public_api.py`'s check, on the public surface's list.
    #[test]
    fn every_built_in_is_named_as_its_kind() {
        for sample in samples() {
            let prefix = format!("{}(", sample.kind);
            assert!(
                sample.name == sample.kind || sample.name.starts_with(&prefix),
                "{}: its kind is `{}` but it is named `{}`",
                sample.ty,
                sample.kind,
                sample.name
            );
        }
    }
}
