//! What the dashboard's callback, its writer and its screen thread share: a few atomics the
//! callback writes at boundaries, and the curves its writer fills from the monitors.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::state::{MonitorSink, Record, Value};

/// Points kept per curve: past this, every other point is dropped (the curve keeps its shape).
const MAX_POINTS: usize = 1024;

/// The run's status as the dashboard shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum Status {
    Running = 0,
    Validating = 1,
    /// `q`, Ctrl-C or a signal asked to stop: the run stops at its next step boundary.
    Stopping = 2,
    Interrupted = 3,
    Stopped = 4,
    Finished = 5,
    Failed = 6,
}

impl Status {
    fn from_u8(v: u8) -> Status {
        [
            Status::Running,
            Status::Validating,
            Status::Stopping,
            Status::Interrupted,
            Status::Stopped,
            Status::Finished,
            Status::Failed,
        ][usize::from(v).min(6)]
    }

    /// The words on the screen.
    pub(super) fn text(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Validating => "validating",
            Status::Stopping => "stopping at the next step boundary",
            Status::Interrupted => "interrupted (checkpoint written)",
            Status::Stopped => "stopped",
            Status::Finished => "finished",
            Status::Failed => "failed",
        }
    }

    /// Whether the run is over.
    pub(super) fn is_final(self) -> bool {
        self as u8 >= Status::Interrupted as u8
    }
}

/// Which split a curve belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Split {
    /// A scalar put during training (its name does not start with a validation prefix).
    Train,
    /// A scalar whose name starts with `validation`, `valid` or `val` (then `_`, `-` or `/`).
    Valid,
    /// A step output fetched by the dashboard itself, every few hundred milliseconds.
    Step,
}

/// One curve: its full name, its split, its points (global step, value).
#[derive(Debug, Clone)]
pub(super) struct Series {
    pub(super) name: String,
    pub(super) split: Split,
    pub(super) points: Vec<(f64, f64)>,
}

/// One chart: the curves whose names share a key (`train_cost`, `validation_cost` and the
/// fetched `cost` are the chart `cost`).
#[derive(Debug, Clone)]
pub(super) struct Chart {
    pub(super) key: String,
    pub(super) series: Vec<Series>,
}

/// The name a scalar's chart goes under, and its split.
pub(super) fn key_of(name: &str) -> (&str, Split) {
    for (prefix, split) in [
        ("validation", Split::Valid),
        ("valid", Split::Valid),
        ("val", Split::Valid),
        ("train", Split::Train),
    ] {
        if let Some(rest) = name.strip_prefix(prefix)
            && let Some(key) = rest.strip_prefix(['_', '-', '/'])
            && !key.is_empty()
        {
            return (key, split);
        }
    }
    (name, Split::Train)
}

/// Every chart, in the order their first points came.
#[derive(Debug, Default)]
pub(super) struct Curves {
    /// The names or keys to show (all, when `None`).
    selection: Option<Vec<String>>,
    pub(super) charts: Vec<Chart>,
}

impl Curves {
    pub(super) fn new(selection: Option<Vec<String>>) -> Curves {
        Curves { selection, charts: Vec::new() }
    }

    /// Add a point to the curve `name` (of `split`, else the split its name says).
    pub(super) fn push(&mut self, name: &str, split: Option<Split>, step: u64, value: f64) {
        let (key, named_split) = key_of(name);
        if let Some(selection) = &self.selection
            && !selection.iter().any(|s| s == name || s == key)
        {
            return;
        }
        let split = split.unwrap_or(named_split);
        let chart = match self.charts.iter().position(|c| c.key == key) {
            Some(i) => &mut self.charts[i],
            None => {
                self.charts.push(Chart { key: key.to_string(), series: Vec::new() });
                self.charts.last_mut().expect("just pushed")
            }
        };
        let series = match chart.series.iter().position(|s| s.name == name && s.split == split) {
            Some(i) => &mut chart.series[i],
            None => {
                chart.series.push(Series { name: name.to_string(), split, points: Vec::new() });
                chart.series.last_mut().expect("just pushed")
            }
        };
        if series.points.len() >= MAX_POINTS {
            let mut i = 0;
            series.points.retain(|_| {
                i += 1;
                i % 2 == 1
            });
        }
        series.points.push((step as f64, value));
    }
}

/// What the callback, the writer and the screen thread share.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) global_step: AtomicU64,
    pub(super) epoch: AtomicU64,
    pub(super) max_epoch: AtomicU64,
    pub(super) steps_per_epoch: AtomicU64,
    /// The global step before the current epoch's first step.
    pub(super) epoch_first_step: AtomicU64,
    /// The global step training started at (after a checkpoint, for a resumed run).
    pub(super) run_first_step: AtomicU64,
    /// When the current epoch started, in milliseconds after `started`.
    pub(super) epoch_started_ms: AtomicU64,
    /// The learning rate's bits (`f64::to_bits`).
    pub(super) learning_rate: AtomicU64,
    status: AtomicU8,
    /// Set by the screen thread every few hundred milliseconds, cleared when the callback asks
    /// for its fetches: the step reads one flag, never a clock.
    pub(super) want_fetch: AtomicBool,
    /// The run is over (`after_train`, or the dashboard dropped): the screen thread draws the
    /// last frame and ends once `written` is set too.
    pub(super) closing: AtomicBool,
    /// The writer has written every value the run put (the monitors closed it after every
    /// `after_train`), or is gone.
    pub(super) written: AtomicBool,
    /// The screen thread runs: the writer's end waits for it to have put the terminal back.
    pub(super) drawing: AtomicBool,
    pub(super) started: Instant,
    /// Why the run stopped or failed, shown beside its final status.
    pub(super) detail: Mutex<String>,
    pub(super) curves: Mutex<Curves>,
}

impl Shared {
    pub(super) fn new(selection: Option<Vec<String>>) -> Shared {
        Shared {
            global_step: AtomicU64::new(0),
            epoch: AtomicU64::new(0),
            max_epoch: AtomicU64::new(0),
            steps_per_epoch: AtomicU64::new(0),
            epoch_first_step: AtomicU64::new(0),
            run_first_step: AtomicU64::new(0),
            epoch_started_ms: AtomicU64::new(0),
            learning_rate: AtomicU64::new(0),
            status: AtomicU8::new(Status::Running as u8),
            want_fetch: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            written: AtomicBool::new(false),
            drawing: AtomicBool::new(false),
            started: Instant::now(),
            detail: Mutex::new(String::new()),
            curves: Mutex::new(Curves::new(selection)),
        }
    }

    pub(super) fn status(&self) -> Status {
        Status::from_u8(self.status.load(Ordering::Relaxed))
    }

    pub(super) fn set_status(&self, status: Status) {
        self.status.store(status as u8, Ordering::Relaxed);
    }

    /// Move from `from` to `to` only if the status is still `from` (a final status stays).
    pub(super) fn change_status(&self, from: Status, to: Status) {
        let _ = self.status.compare_exchange(from as u8, to as u8, Ordering::Relaxed, Ordering::Relaxed);
    }

    pub(super) fn curves(&self) -> MutexGuard<'_, Curves> {
        self.curves.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn detail(&self) -> MutexGuard<'_, String> {
        self.detail.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// How long the writer's end waits for the screen thread to draw the last frame and put the
/// terminal back.
const LAST_FRAME_WAIT: Duration = Duration::from_secs(5);

/// The dashboard's writer: every scalar put reaches the curves on the writers' thread, off the
/// step's path. Its end (the monitors close it after every callback's `after_train`, and wait
/// for it) is when the last frame is drawn: it waits for the screen thread to have drawn it and
/// put the terminal back, so that what the program prints next (the end-of-training summary) is
/// on the normal screen, below it.
pub(super) struct DashboardSink(pub(super) std::sync::Arc<Shared>);

impl Drop for DashboardSink {
    fn drop(&mut self) {
        let shared = &self.0;
        shared.written.store(true, Ordering::Release);
        if !shared.closing.load(Ordering::Acquire) {
            return;
        }
        let deadline = Instant::now() + LAST_FRAME_WAIT;
        while shared.drawing.load(Ordering::Acquire) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl MonitorSink for DashboardSink {
    fn name(&self) -> &str {
        "Dashboard"
    }

    fn write(&mut self, records: &[Record]) -> std::io::Result<()> {
        let mut curves = self.0.curves();
        for record in records {
            if let Value::Scalar(v) = record.value {
                curves.push(&record.name, None, record.global_step, v);
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_pair_training_and_validation_scalars() {
        assert_eq!(key_of("train_cost"), ("cost", Split::Train));
        assert_eq!(key_of("validation_cost"), ("cost", Split::Valid));
        assert_eq!(key_of("val-error-top1"), ("error-top1", Split::Valid));
        assert_eq!(key_of("valid/loss"), ("loss", Split::Valid));
        assert_eq!(key_of("learning_rate"), ("learning_rate", Split::Train));
        assert_eq!(key_of("validation"), ("validation", Split::Train));
        assert_eq!(key_of("value"), ("value", Split::Train));
    }

    #[test]
    fn curves_group_by_key_keep_the_selection_and_thin_long_curves() {
        let mut curves = Curves::new(Some(vec!["cost".into(), "validation_error".into()]));
        curves.push("train_cost", None, 1, 2.0);
        curves.push("validation_cost", None, 1, 3.0);
        curves.push("cost", Some(Split::Step), 1, 2.5);
        curves.push("validation_error", None, 1, 0.5);
        curves.push("train_accuracy", None, 1, 0.9);
        let keys: Vec<&str> = curves.charts.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(keys, ["cost", "error"]);
        let splits: Vec<Split> = curves.charts[0].series.iter().map(|s| s.split).collect();
        assert_eq!(splits, [Split::Train, Split::Valid, Split::Step]);
        for step in 0..(MAX_POINTS as u64 + 1) {
            curves.push("validation_error", None, step + 2, 0.1);
        }
        let points = &curves.charts[1].series[0].points;
        assert!(points.len() <= MAX_POINTS && points.len() > MAX_POINTS / 2, "{}", points.len());
        assert_eq!(points.last().map(|p| p.0), Some(MAX_POINTS as f64 + 2.0));
    }

    #[test]
    fn a_final_status_stays() {
        let shared = Shared::new(None);
        shared.change_status(Status::Running, Status::Stopping);
        assert_eq!(shared.status(), Status::Stopping);
        shared.set_status(Status::Interrupted);
        shared.change_status(Status::Running, Status::Validating);
        assert_eq!(shared.status(), Status::Interrupted);
        assert!(shared.status().is_final() && !Status::Stopping.is_final());
    }
}
