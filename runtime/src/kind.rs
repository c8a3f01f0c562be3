//! Callback types known to the compiler: what `#[order(after = X)]` and the fields of a
//! `#[derive(Callbacks)]` struct are checked against.
//!
//! An order target is a callback *type*. [`CallbackKind`] gives each callback type the name by
//! which the trainer orders it at run time (the type's name; a wrapper such as
//! [`PeriodicTrigger`](crate::trigger::PeriodicTrigger) takes its inner callback's). `#[callback]` and
//! `#[derive(Callbacks)]` implement it; the built-in callbacks implement it here; a hand-written
//! callback implements it in one line:
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
//! [`CallbackSet`] is what a field of a `#[derive(Callbacks)]` struct may be: a callback, or a
//! set of callbacks (a tuple, an `Option`, a `Vec`, another derived struct, a
//! [`Timed`](crate::track::Timed) set). A field of any other type is a compile error on that field.

use crate::callback::Callback;

/// A callback type, which an `#[order(after = X)]` constraint can name.
///
/// `NAME` is the name the trainer orders it by: the [`Callback::name`] of its values, or the
/// part of it before `(` (`ScheduledHyperParamSetter` designates every
/// `ScheduledHyperParamSetter(learning_rate)`).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a callback type",
    label = "an order target names a callback type",
    note = "name a type made by `#[callback]` or a built-in callback; a hand-written callback implements `CallbackKind` in one line: `impl CallbackKind for {Self} {{ const NAME: &'static str = \"...\"; }}`"
)]
pub trait CallbackKind {
    /// The name the trainer orders this callback by.
    const NAME: &'static str;
}

/// What a field of a `#[derive(Callbacks)]` struct may be: a callback, or a set of callbacks.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a callback, nor a set of callbacks",
    label = "a field of a `#[derive(Callbacks)]` struct is a callback or a set of callbacks",
    note = "use a type made by `#[callback]`, a built-in callback, a tuple, `Option` or `Vec` of them, or another `#[derive(Callbacks)]` struct; a hand-written callback implements `CallbackKind` in one line: `impl CallbackKind for {Self} {{ const NAME: &'static str = \"...\"; }}`"
)]
pub trait CallbackSet {}

impl<C: CallbackKind + ?Sized> CallbackSet for C {}
impl CallbackSet for () {}
impl<C: CallbackSet> CallbackSet for Option<C> {}
impl<C: CallbackSet> CallbackSet for Vec<C> {}
impl<C: CallbackSet, T> CallbackSet for crate::track::Timed<C, T> {}

macro_rules! tuple_sets {
    ($($name:ident)+) => {
        impl<$($name: CallbackSet),+> CallbackSet for ($($name,)+) {}
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
// A boxed callback of any type: a field may hold one; an order target cannot name it.
impl<M> CallbackKind for dyn Callback<M> {
    const NAME: &'static str = "dyn Callback";
}
impl<M> CallbackKind for dyn Callback<M> + Send {
    const NAME: &'static str = "dyn Callback";
}
impl<M> CallbackKind for dyn Callback<M> + Send + Sync {
    const NAME: &'static str = "dyn Callback";
}

// The wrappers are ordered as the callback they wrap (their `name` is its name).
impl<C: CallbackKind> CallbackKind for crate::trigger::PeriodicTrigger<C> {
    const NAME: &'static str = C::NAME;
}
impl<C: CallbackKind> CallbackKind for crate::trigger::PeriodicCallback<C> {
    const NAME: &'static str = C::NAME;
}
impl<C: CallbackKind, P> CallbackKind for crate::trigger::EnableCallbackIf<C, P> {
    const NAME: &'static str = C::NAME;
}
// A named callback (`InferenceRunner(test)`) is designated by its type's name too.
impl<C: CallbackKind> CallbackKind for crate::callback::Named<C> {
    const NAME: &'static str = C::NAME;
}
impl<C: CallbackKind, D> CallbackKind for crate::trigger::ProxyCallback<C, D> {
    const NAME: &'static str = C::NAME;
}

// A user-written hyper-parameter setter is ordered by its own name.
impl<S: crate::param::HyperParamSetter> CallbackKind for crate::param::SetterCallback<S> {
    const NAME: &'static str = S::NAME;
}

// The savers: `MinSaver` and `MaxSaver` are one generic type.
impl<const MAX: bool> CallbackKind for crate::saver::BestSaver<MAX> {
    const NAME: &'static str = if MAX { "MaxSaver" } else { "MinSaver" };
}

/// `CallbackKind` for built-in callback types, named as their type.
macro_rules! kinds {
    ($($(<$($param:ident),+>)? $path:path => $name:ident;)+) => {$(
        impl$(<$($param),+>)? CallbackKind for $path {
            const NAME: &'static str = stringify!($name);
        }
    )+};
}

kinds! {
    crate::modify::RnnRegularizer => RnnRegularizer;
    crate::modify::GradientClip => GradientClip;
    crate::modify::GradientAccumulation => GradientAccumulation;
    <B, F> crate::modify::BatchNormTune<B, F> => BatchNormTune;
    <F> crate::modify::RunOp<F> => RunOp;
    crate::debug::InjectShell => InjectShell;
    crate::debug::DumpTensors => DumpTensors;
    <M, F> crate::debug::ProcessTensors<M, F> => ProcessTensors;
    crate::debug::TensorPrinter => TensorPrinter;
    crate::debug::DumpTensorAsImage => DumpTensorAsImage;
    <M> crate::debug::CallbackFactory<M> => CallbackFactory;
    crate::debug::TerminateOnNaN => TerminateOnNaN;
    crate::debug::CheckNumerics => CheckNumerics;
    crate::debug::StartProcOrThread => StartProcOrThread;
    <C> crate::debug::StepTimeout<C> => StepTimeout;
    <T> crate::saver::ModelSaver<T> => ModelSaver;
    crate::saver::SaveBestState => SaveBestState;
    crate::param::LrSchedulerSetter => LrSchedulerSetter;
    crate::param::HumanHyperParamSetter => HumanHyperParamSetter;
    crate::param::ScheduledHyperParamSetter => ScheduledHyperParamSetter;
    crate::param::ReduceLrOnPlateau => ReduceLROnPlateau;
    <F> crate::param::HyperParamSetterWithFunc<F> => HyperParamSetterWithFunc;
    <F> crate::param::StatMonitorParamSetter<F> => StatMonitorParamSetter;
    crate::stop::EarlyStopping => EarlyStopping;
    <S, F> crate::stop::EarlyStop<S, F> => EarlyStop;
    crate::monitor::CsvWriter => CsvWriter;
    crate::monitor::Hist => Hist;
    crate::monitor::MovingAverageSummary => MovingAverageSummary;
    crate::monitor::SimpleMovingAverage => SimpleMovingAverage;
    crate::monitor::TrainCost => TrainCost;
    crate::monitor::TrainLogger => TrainLogger;
    crate::monitor::SendMonitorData => SendMonitorData;
    crate::monitor::SendStat => SendStat;
    crate::track::ProgressBar => ProgressBar;
    crate::track::ModelSummary => ModelSummary;
    crate::track::Recorder => Recorder;
    crate::trainer::TrainSummaryPrinter => TrainSummaryPrinter;
    <T> crate::track::EstimatedTimeLeft<T> => EstimatedTimeLeft;
    <T> crate::track::ThroughputTracker<T> => ThroughputTracker;
    <T> crate::track::RunTimer<T> => RunTimer;
    <C> crate::track::StepProfiler<C> => StepProfiler;
    <D, F> crate::inference::InferenceRunner<D, F> => InferenceRunner;
}

#[cfg(feature = "dashboard")]
kinds! {
    crate::monitor::Dashboard => Dashboard;
}

#[cfg(feature = "sys-metrics")]
kinds! {
    crate::track::GpuMemoryTracker => GpuMemoryTracker;
    crate::track::GpuUtilizationTracker => GpuUtilizationTracker;
    crate::track::HostMemoryTracker => HostMemoryTracker;
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use burn::lr_scheduler::linear::LinearLrSchedulerConfig;
    use burn::nn::Linear;

    use crate::callback::{Callback, CallbackExt};
    use crate::debug::{
        CallbackFactory, CheckNumerics, DumpTensors, StartProcOrThread, StepTimeout, TensorPrinter,
        TerminateOnNaN,
    };
    use crate::modify::{GradientAccumulation, GradientClip, RnnRegularizer, RunOp};
    use crate::monitor::{CsvWriter, Hist, MovingAverageSummary};
    use crate::param::{
        HumanHyperParamSetter, HyperParamSetter, HyperParamSetterWithFunc, LrSchedulerSetter,
        ReduceLrOnPlateau, ScheduledHyperParamSetter, StatMonitorParamSetter,
    };
    use crate::saver::{MinSaver, ModelSaver};
    use crate::stop::EarlyStopping;
    use crate::track::{EstimatedTimeLeft, ProgressBar, Recorder, RunTimer, ThroughputTracker};
    #[cfg(feature = "sys-metrics")]
    use crate::track::{GpuMemoryTracker, GpuUtilizationTracker, HostMemoryTracker};
    use crate::trigger::{EnableCallbackIf, PeriodicCallback, PeriodicTrigger};

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
        let chief = [
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
            ("StartProcOrThread", chief_only(StartProcOrThread::new())),
            ("CallbackFactory", chief_only(CallbackFactory::<Linear>::new().trigger(|_| {}))),
            ("PeriodicTrigger(ModelSaver)", chief_only(PeriodicTrigger::new(ModelSaver::new(1)))),
            ("Named(ModelSaver)", chief_only(ModelSaver::new(1).named("archive"))),
            ("CheckNumerics", chief_only(CheckNumerics::new())),
        ];
        for (name, chief_only) in every_rank {
            assert!(!chief_only, "{name} must run on every rank");
        }
        for (name, chief_only) in chief {
            assert!(chief_only, "{name} must run on the chief only");
        }
    }
}
