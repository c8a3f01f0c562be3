//! Trackers: what a run costs and how far it is. The model's size, the progress bar, the
//! estimated time left, throughput, host memory, GPU utilization and memory, the total training
//! time, the time each callback takes and the time of each phase of a step.
//!
//! | tracker | reference | what it reports |
//! |---|---|---|
//! | [`ProgressBar`] | tensorpack's `ProgressBar` | a bar per epoch on a terminal |
//! | [`EstimatedTimeLeft`] | tensorpack's `EstimatedTimeLeft` | a line per epoch on stderr |
//! | [`ThroughputTracker`] | tensorpack's `ThroughputTracker` | `Throughput (steps/sec)` or `Throughput (samples/sec)` |
//! | [`HostMemoryTracker`] | tensorpack's `HostMemoryTracker` | `HostFreeMemory (GB)`, `HostProcessRSS (GB)` |
//! | [`GpuUtilizationTracker`] | tensorpack's `GPUUtilizationTracker` | `GPUUtil/<device>` |
//! | [`GpuMemoryTracker`] | tensorpack's `GPUMemoryTracker` | `GPUMemory/<device>/used (MB)`, `GPUMemory/<device>/total (MB)` |
//! | [`RunTimer`] | neon's `RunTimerCallback` | `time/train`, and a line on stderr |
//! | [`ModelSummary`] | Keras's `model.summary()`, Lightning's `ModelSummary` | the parameters per tensor and module and their bytes ([`ModelParams`]), once at the start: stdout, `model_summary.txt`, TensorBoard text |
//! | [`Timed`] | tensorpack's `CallbackTimeLogger` | slow callbacks, on stderr |
//! | [`StepProfiler`] | tensorpack's `GraphProfiler` | the time of each phase of a window of steps: `step_profile.json` (Chrome trace), `profile/<phase>_ms` |
//! | [`Recorder`] | fastai's `Recorder` | the loss and learning rate of every step, the metrics of every epoch; `loss.png`, `lr.png` |
//! | [`LrFinder`] | fastai's `LRFinder`, `lr_find` | a learning-rate sweep, stopped on divergence, the weights restored: the loss against the learning rate, `lr_find.png`, fastai's suggestions |
//!
//! `HostMemoryTracker`, `GpuUtilizationTracker` and `GpuMemoryTracker` (with [`GpuSource`],
//! [`GpuMemory`] and [`NvmlSource`]) exist with the `sys-metrics` feature only (off by default):
//! they need sysinfo and nvml-wrapper, which the other trackers do not.
//!
//! The trackers that measure time read a [`Clock`](crate::state::Clock): [`MonotonicClock`](crate::state::MonotonicClock) (the default) in
//! training, a [`ManualClock`](crate::state::ManualClock) in tests, which makes their results exact.

mod eta;
#[cfg(feature = "sys-metrics")]
mod gpu;
#[cfg(feature = "sys-metrics")]
mod gpu_memory;
#[cfg(feature = "sys-metrics")]
mod gpu_utilization;
#[cfg(feature = "sys-metrics")]
mod host_memory;
mod lr_finder;
mod lr_suggest;
mod model_summary;
mod plot;
mod profile;
mod progress;
mod recorder;
mod run_timer;
mod throughput;
mod timed;

pub use eta::EstimatedTimeLeft;
#[cfg(feature = "sys-metrics")]
pub use gpu::{GpuMemory, GpuSource, NvmlSource};
#[cfg(feature = "sys-metrics")]
pub use gpu_memory::GpuMemoryTracker;
#[cfg(feature = "sys-metrics")]
pub use gpu_utilization::GpuUtilizationTracker;
#[cfg(feature = "sys-metrics")]
pub use host_memory::HostMemoryTracker;
pub use lr_finder::{LR_FIND_PLOT, LrFinder};
pub use lr_suggest::{SuggestedLr, Suggestion};
pub use model_summary::{ModelParams, ModelSummary, ModuleParams, ParamTensor};
pub use plot::{PLOT_MARGIN, PLOT_SIZE};
pub use profile::{PROFILE_FILE, StepProfiler};
pub use progress::ProgressBar;
pub use recorder::{EpochValues, LOSS_PLOT, LR_FIND_SKIP_END, LR_PLOT, Recorder};
pub use run_timer::RunTimer;
pub use throughput::ThroughputTracker;
pub use timed::{Timed, TimedSet};

use std::time::Duration;

/// A duration as a person reads it, the way tensorpack writes it: `1 day 9 hours 2 minutes
/// 3 seconds`, `1 minute 27 seconds`; under a minute with three significant digits: `27.6
/// seconds`, `0.01 seconds`; `0 seconds`.
pub(crate) fn humanize_duration(duration: Duration) -> String {
    let seconds = duration.as_secs_f64();
    if seconds < 60.0 {
        if duration.is_zero() {
            return "0 seconds".into();
        }
        let value = three_significant_digits(seconds);
        let unit = if value == "1" { "second" } else { "seconds" };
        return format!("{value} {unit}");
    }
    let whole = duration.as_secs();
    let parts = [
        (whole / 86_400, "day"),
        (whole / 3_600 % 24, "hour"),
        (whole / 60 % 60, "minute"),
        (whole % 60, "second"),
    ];
    let mut out = String::new();
    for (value, unit) in parts {
        if value > 0 {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(&format!("{value} {unit}{}", if value == 1 { "" } else { "s" }));
        }
    }
    out
}

/// `value` (positive, under 60) with three significant digits and no trailing zeros, as C's `%.3g`.
fn three_significant_digits(value: f64) -> String {
    let magnitude = value.log10().floor() as i32;
    let decimals = (2 - magnitude).max(0) as usize;
    let mut text = format!("{value:.decimals$}");
    // Rounding may add a digit (9.995 -> "10.00"): two decimals too many is still right once trimmed.
    if text.contains('.') {
        let trimmed = text.trim_end_matches('0').trim_end_matches('.').len();
        text.truncate(trimmed);
    }
    text
}

/// `duration` in seconds with three decimals (`4.210 s`), as tensorpack's callback timer writes it.
pub(crate) fn seconds(duration: Duration) -> String {
    format!("{:.3} s", duration.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::humanize_duration;

    /// tensorpack's `humanize_time_delta`, as its callbacks write a duration.
    #[test]
    fn durations_read_as_tensorpack_writes_them() {
        let ms = Duration::from_millis;
        let cases = [
            (Duration::ZERO, "0 seconds"),
            (ms(10), "0.01 seconds"),
            (ms(1000), "1 second"),
            (ms(27_600), "27.6 seconds"),
            (ms(59_999), "60 seconds"),
            (ms(60_000), "1 minute"),
            (ms(87_000), "1 minute 27 seconds"),
            (Duration::from_secs(3_600 + 120), "1 hour 2 minutes"),
            (Duration::from_secs(86_400 + 9 * 3_600 + 2 * 60 + 3), "1 day 9 hours 2 minutes 3 seconds"),
        ];
        for (duration, text) in cases {
            assert_eq!(humanize_duration(duration), text, "{duration:?}");
        }
    }
}
