//! Trackers: the estimated time left, throughput, host memory, the GPU trackers (with a fake
//! source, and without NVML), the run timer and the per-callback timer. Time comes from a
//! `ManualClock` that test callbacks advance, so every time-based result is exact; what is
//! written on stderr is read from a child process running one test.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use burn::nn::Linear;
use burn_stoker::prelude::*;
use burn_stoker::state::ManualClock;
use burn_stoker::track::{GpuMemory, GpuSource, NvmlSource};
use burn_stoker::{
    callback::{StepEvents, StepLoss},
    track::{
        EstimatedTimeLeft, GpuMemoryTracker, GpuUtilizationTracker, HostMemoryTracker, RunTimer,
        StepProfiler, ThroughputTracker, Timed,
    },
    trigger::PeriodicTrigger,
};
use stoker_tests::{mse, scratch_dir, tiny_data, tiny_model};

/// Steps per epoch in every run here.
const STEPS: usize = 4;

fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

/// Train the tiny model for `epochs` epochs of [`STEPS`] steps with `callbacks`, no default callback.
fn train<K, C: Callbacks<Linear, K>>(
    name: &str,
    epochs: u64,
    callbacks: C,
) -> burn_stoker::Result<TrainReport<Linear>> {
    let device = burn_stoker::device::cpu();
    Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(STEPS, &device))
        .max_epoch(epochs)
        .log_dir(scratch_dir(name))
        .default_callbacks(DefaultCallbacks::none())
        .callbacks(callbacks)
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .map_err(burn_stoker::Error::from)
}

/// Stands for the training's own work: advances the clock by `step_time[epoch - 1]` before each
/// step, and by `epoch_work` in `trigger_epoch` (the callbacks' work after an epoch).
struct Work {
    clock: ManualClock,
    step_time: Vec<Duration>,
    epoch_work: Duration,
}

impl Work {
    fn new(clock: &ManualClock, step_time: &[Duration]) -> Self {
        Work { clock: clock.clone(), step_time: step_time.to_vec(), epoch_work: Duration::ZERO }
    }
}

impl Callback<Linear> for Work {
    fn before_step(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let epoch = ctx.epoch_num() as usize;
        self.clock.advance(self.step_time[(epoch - 1).min(self.step_time.len() - 1)]);
        Ok(())
    }
    fn trigger_epoch(&mut self, _ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.clock.advance(self.epoch_work);
        Ok(())
    }
}

type Histories = Arc<Mutex<BTreeMap<String, Vec<(u64, f64)>>>>;

/// Copies the history of every scalar whose name starts with one of `prefixes` at `after_train`.
struct Probe {
    prefixes: Vec<&'static str>,
    seen: Histories,
}

impl Probe {
    fn new(prefixes: &[&'static str]) -> (Self, Histories) {
        let seen = Histories::default();
        (Probe { prefixes: prefixes.to_vec(), seen: seen.clone() }, seen)
    }
}

impl Callback<Linear> for Probe {
    fn after_train(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let monitors = ctx.monitors_ref();
        let mut seen = self.seen.lock().unwrap();
        for name in monitors.scalar_names() {
            if self.prefixes.iter().any(|p| name.starts_with(p)) {
                seen.insert(name.to_string(), monitors.history(name).to_vec());
            }
        }
        Ok(())
    }
}

fn history(seen: &Histories, name: &str) -> Vec<(u64, f64)> {
    seen.lock().unwrap().get(name).cloned().unwrap_or_default()
}

// ---------- stderr of a child process ----------

const CHILD: &str = "STOKER_TRACK_TEST_CHILD";

/// Whether this process is the child that runs one test for its stderr.
fn in_child() -> bool {
    std::env::var_os(CHILD).is_some()
}

/// Run test `name` alone in a child process and return the lines it wrote on stderr that start
/// with `stoker:`.
fn stoker_lines_of(name: &str) -> Vec<String> {
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &stoker_tests::test_path(module_path!(), name), "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .expect("running the test binary");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "child test {name} failed:\n{}\n{stderr}",
        String::from_utf8_lossy(&output.stdout)
    );
    stderr.lines().filter(|l| l.starts_with("stoker:")).map(str::to_string).collect()
}

// ---------- EstimatedTimeLeft ----------

/// Hands the trainer's events to the estimator it borrows and records each estimate.
struct EtaWatch<'a> {
    eta: &'a mut EstimatedTimeLeft<ManualClock>,
    seen: Vec<Duration>,
}

impl Callback<Linear> for EtaWatch<'_> {
    fn setup(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        Callback::<Linear>::setup(self.eta, ctx)
    }
    fn before_train(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        Callback::<Linear>::before_train(self.eta, ctx)
    }
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        Callback::<Linear>::trigger_epoch(self.eta, ctx)?;
        self.seen.push(self.eta.estimate().expect("an estimate after each epoch"));
        Ok(())
    }
}

/// Step times giving epochs of 4, 1, 10, 2, 3 and 1 s with 0.5 s of work after each epoch.
fn eta_step_times() -> Vec<Duration> {
    [875, 125, 2375, 375, 625, 125].map(ms).to_vec()
}

fn run_eta(eta: EstimatedTimeLeft) -> Vec<Duration> {
    let clock = ManualClock::new();
    let mut eta = eta.clock(clock.clone());
    let mut work = Work::new(&clock, &eta_step_times());
    work.epoch_work = ms(500);
    let mut watch = EtaWatch { eta: &mut eta, seen: Vec::new() };
    train("eta", 6, (work, &mut watch)).unwrap();
    let seen = watch.seen;
    assert_eq!(eta.estimate(), Some(Duration::ZERO), "nothing left after the last epoch");
    seen
}

#[test]
fn eta_is_the_median_of_the_last_k_epochs_times_the_epochs_left() {
    // Epochs of 4, 1, 10, 2, 3, 1 s (the work after each epoch included); last 3.
    // After epoch 1: median(4) * 5 = 20; 2: median(4, 1) = 2.5 * 4 = 10; 3: median(4, 1, 10) * 3
    // = 12; 4: median(1, 10, 2) * 2 = 4; 5: median(10, 2, 3) * 1 = 3; 6: 0.
    let seen = run_eta(EstimatedTimeLeft::new().last_k_epochs(3));
    assert_eq!(seen, [20_000, 10_000, 12_000, 4_000, 3_000, 0].map(ms));
}

#[test]
fn eta_default_is_the_median_of_the_last_5_epochs() {
    // 1: 4 * 5; 2: 2.5 * 4; 3: 4 * 3; 4: median(4, 1, 10, 2) = 3 * 2; 5: median(4, 1, 10, 2, 3)
    // = 3 * 1; 6: 0.
    let seen = run_eta(EstimatedTimeLeft::new());
    assert_eq!(seen, [20_000, 10_000, 12_000, 6_000, 3_000, 0].map(ms));
}

#[test]
fn eta_mean_of_the_last_k_epochs() {
    // 1: 4 * 5; 2: 2.5 * 4; 3: 5 * 3; 4: mean(1, 10, 2) = 13/3 s (4_333_333_333 ns) * 2;
    // 5: mean(10, 2, 3) = 5 * 1; 6: 0.
    let seen = run_eta(EstimatedTimeLeft::new().last_k_epochs(3).median(false));
    let expected = [
        ms(20_000),
        ms(10_000),
        ms(15_000),
        Duration::from_nanos(4_333_333_333 * 2),
        ms(5_000),
        Duration::ZERO,
    ];
    assert_eq!(seen, expected);
}

#[test]
fn eta_prints_one_line_per_epoch_while_epochs_remain() {
    if in_child() {
        run_eta(EstimatedTimeLeft::new().last_k_epochs(3));
        return;
    }
    let lines = stoker_lines_of("eta_prints_one_line_per_epoch_while_epochs_remain");
    assert_eq!(
        lines,
        [
            "stoker: estimated time left: 20 seconds",
            "stoker: estimated time left: 10 seconds",
            "stoker: estimated time left: 12 seconds",
            "stoker: estimated time left: 4 seconds",
            "stoker: estimated time left: 3 seconds",
        ]
    );
}

#[test]
fn eta_with_k_zero_is_an_error_at_setup() {
    let error = train("eta-zero", 1, EstimatedTimeLeft::new().last_k_epochs(0)).unwrap_err();
    assert!(error.to_string().contains("last_k_epochs must be at least 1"), "{error}");
}

// ---------- ThroughputTracker ----------

#[test]
fn throughput_is_steps_per_second_without_the_callbacks_time_after_each_epoch() {
    let clock = ManualClock::new();
    // Steps of 0.25, 0.5 and 0.125 s: 4, 2 and 8 steps per second; the 10 s of work after each
    // epoch are not counted.
    let mut work = Work::new(&clock, &[ms(250), ms(500), ms(125)]);
    work.epoch_work = ms(10_000);
    let tracker = ThroughputTracker::new().clock(clock.clone());
    assert_eq!(tracker.scalar_name(), "Throughput (steps/sec)");
    let (probe, seen) = Probe::new(&["Throughput"]);
    train("throughput", 3, (work, tracker, probe)).unwrap();
    assert_eq!(history(&seen, "Throughput (steps/sec)"), [(4, 4.0), (8, 2.0), (12, 8.0)]);
    assert!(history(&seen, "Throughput (samples/sec)").is_empty());
}

#[test]
fn throughput_in_samples_per_second_with_a_batch_size() {
    let clock = ManualClock::new();
    let work = Work::new(&clock, &[ms(250), ms(500)]);
    let tracker = ThroughputTracker::new().samples_per_step(4).clock(clock.clone());
    let (probe, seen) = Probe::new(&["Throughput"]);
    train("throughput-samples", 2, (work, tracker, probe)).unwrap();
    assert_eq!(history(&seen, "Throughput (samples/sec)"), [(4, 16.0), (8, 8.0)]);
    assert!(history(&seen, "Throughput (steps/sec)").is_empty());
}

#[test]
fn throughput_every_k_steps_measures_each_stretch_and_skips_the_epoch_boundary() {
    let clock = ManualClock::new();
    // Triggers at steps 2, 4 (epoch 1, steps of 0.25 s) and 6, 8 (epoch 2, steps of 0.5 s); the
    // 10 s after epoch 1 fall between the triggers at steps 4 and 6 and are not counted.
    let mut work = Work::new(&clock, &[ms(250), ms(500)]);
    work.epoch_work = ms(10_000);
    let tracker = PeriodicTrigger::new(ThroughputTracker::new().clock(clock.clone())).every_k_steps(2);
    let (probe, seen) = Probe::new(&["Throughput"]);
    train("throughput-steps", 2, (work, tracker, probe)).unwrap();
    assert_eq!(history(&seen, "Throughput (steps/sec)"), [(2, 4.0), (4, 4.0), (6, 2.0), (8, 2.0)]);
}

#[test]
fn throughput_with_zero_samples_per_step_is_an_error_at_setup() {
    let error = train("throughput-zero", 1, ThroughputTracker::new().samples_per_step(0)).unwrap_err();
    assert!(error.to_string().contains("samples_per_step must be at least 1"), "{error}");
}

// ---------- HostMemoryTracker ----------

/// A field of a `/proc` file in kB (`VmRSS:   1234 kB`), in GB (2^30 bytes).
fn proc_gb(file: &str, field: &str) -> f64 {
    let text = std::fs::read_to_string(file).unwrap();
    let line = text.lines().find(|l| l.starts_with(field)).unwrap_or_else(|| panic!("{field} in {file}"));
    let kb: f64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb / (1024.0 * 1024.0)
}

#[cfg(target_os = "linux")]
#[test]
fn host_memory_puts_free_memory_and_the_process_rss_at_each_epoch() {
    let (probe, seen) = Probe::new(&["Host"]);
    train("host-memory", 3, (HostMemoryTracker::new(), probe)).unwrap();
    let free = history(&seen, HostMemoryTracker::FREE);
    let rss = history(&seen, HostMemoryTracker::PROCESS_RSS);
    assert_eq!(free.iter().map(|p| p.0).collect::<Vec<_>>(), [4, 8, 12]);
    assert_eq!(rss.iter().map(|p| p.0).collect::<Vec<_>>(), [4, 8, 12]);
    // Compared with the kernel's own figures read now: the process and the machine change a
    // little in between, not by a factor of 2.
    let total = proc_gb("/proc/meminfo", "MemTotal:");
    let rss_now = proc_gb("/proc/self/status", "VmRSS:");
    for &(_, value) in &free {
        assert!(value > 0.0 && value <= total, "free {value} GB of {total} GB");
    }
    for &(_, value) in &rss {
        assert!(value > rss_now / 2.0 && value < rss_now * 2.0, "RSS {value} GB, /proc says {rss_now} GB");
    }
}

// ---------- GPU trackers ----------

/// A fake GPU library: `utilization[d]` and `memory[d]` for each device `d`; with `fail_after`,
/// every reading after that many fails.
#[derive(Clone)]
struct FakeGpus {
    utilization: Vec<f64>,
    memory: Vec<GpuMemory>,
    readings: Arc<AtomicU32>,
    fail_after: Option<u32>,
}

impl FakeGpus {
    fn new() -> Self {
        FakeGpus {
            utilization: vec![37.5, 80.0, 5.0],
            memory: vec![
                GpuMemory { used: 1_500_000_000, total: 16_000_000_000 },
                GpuMemory { used: 250_000_000, total: 8_000_000_000 },
                GpuMemory { used: 0, total: 1_000_000 },
            ],
            readings: Arc::default(),
            fail_after: None,
        }
    }
    fn reading(&self) -> burn_stoker::Result<()> {
        let n = self.readings.fetch_add(1, Ordering::SeqCst);
        match self.fail_after {
            Some(limit) if n >= limit => Err(burn_stoker::Error::msg("the fake GPU fell off the bus")),
            _ => Ok(()),
        }
    }
}

impl GpuSource for FakeGpus {
    fn device_count(&mut self) -> burn_stoker::Result<u32> {
        Ok(self.utilization.len() as u32)
    }
    fn utilization(&mut self, device: u32) -> burn_stoker::Result<f64> {
        self.reading()?;
        Ok(self.utilization[device as usize])
    }
    fn memory(&mut self, device: u32) -> burn_stoker::Result<GpuMemory> {
        self.reading()?;
        Ok(self.memory[device as usize])
    }
}

#[test]
fn gpu_utilization_puts_each_devices_average_at_each_epoch() {
    let mut tracker = GpuUtilizationTracker::new()
        .source(FakeGpus::new())
        .devices([0, 2])
        .interval(Duration::from_millis(1));
    let (probe, seen) = Probe::new(&["GPUUtil"]);
    train("gpu-util", 3, (&mut tracker, probe)).unwrap();
    assert_eq!(history(&seen, "GPUUtil/0"), [(4, 37.5), (8, 37.5), (12, 37.5)]);
    assert_eq!(history(&seen, "GPUUtil/2"), [(4, 5.0), (8, 5.0), (12, 5.0)]);
    assert!(history(&seen, "GPUUtil/1").is_empty(), "device 1 was not asked for");
    assert!(!tracker.is_tracking(), "the thread is stopped after training");
}

#[test]
fn gpu_utilization_under_periodic_trigger_puts_the_epoch_that_just_ended() {
    let tracker = GpuUtilizationTracker::new().source(FakeGpus::new()).devices([1]);
    let (probe, seen) = Probe::new(&["GPUUtil"]);
    train("gpu-util-periodic", 4, (PeriodicTrigger::new(tracker).every_k_epochs(2), probe)).unwrap();
    assert_eq!(history(&seen, "GPUUtil/1"), [(8, 80.0), (16, 80.0)]);
}

#[test]
fn gpu_memory_puts_used_and_total_in_mb_at_each_epoch() {
    let mut tracker = GpuMemoryTracker::new().source(FakeGpus::new()).devices([0, 1]);
    let (probe, seen) = Probe::new(&["GPUMemory"]);
    train("gpu-memory", 2, (&mut tracker, probe)).unwrap();
    assert!(tracker.is_tracking());
    assert_eq!(history(&seen, "GPUMemory/0/used (MB)"), [(4, 1500.0), (8, 1500.0)]);
    assert_eq!(history(&seen, "GPUMemory/0/total (MB)"), [(4, 16000.0), (8, 16000.0)]);
    assert_eq!(history(&seen, "GPUMemory/1/used (MB)"), [(4, 250.0), (8, 250.0)]);
    assert_eq!(history(&seen, "GPUMemory/1/total (MB)"), [(4, 8000.0), (8, 8000.0)]);
    assert_eq!(seen.lock().unwrap().len(), 4, "device 2 was not asked for");
}

#[test]
fn gpu_trackers_reject_a_device_that_does_not_exist() {
    let error =
        train("gpu-bad-device", 1, GpuMemoryTracker::new().source(FakeGpus::new()).devices([3])).unwrap_err();
    assert!(error.to_string().contains("GPU 3 does not exist; this machine has 3"), "{error}");
    let error =
        train("gpu-bad-device-util", 1, GpuUtilizationTracker::new().source(FakeGpus::new()).devices([0, 7]))
            .unwrap_err();
    assert!(error.to_string().contains("GPU 7 does not exist"), "{error}");
}

#[test]
fn gpu_memory_turns_off_when_a_reading_fails_and_training_goes_on() {
    if in_child() {
        // One reading per device per epoch: epoch 1 reads 0 and 1; in epoch 2, device 1's
        // reading (the fourth) fails, and nothing of that epoch is put.
        let fake = FakeGpus { fail_after: Some(3), ..FakeGpus::new() };
        let mut tracker = GpuMemoryTracker::new().source(fake).devices([0, 1]);
        let (probe, seen) = Probe::new(&["GPUMemory"]);
        let report = train("gpu-memory-fails", 3, (&mut tracker, probe)).unwrap();
        assert_eq!(report.outcome, Outcome::Finished);
        assert!(!tracker.is_tracking());
        assert_eq!(history(&seen, "GPUMemory/0/used (MB)"), [(4, 1500.0)]);
        assert_eq!(history(&seen, "GPUMemory/1/used (MB)"), [(4, 250.0)]);
        return;
    }
    let lines = stoker_lines_of("gpu_memory_turns_off_when_a_reading_fails_and_training_goes_on");
    assert_eq!(lines, ["stoker: GPUMemoryTracker: the fake GPU fell off the bus: GPU tracking off"]);
}

/// Train 3 epochs with both GPU trackers built by `make`, asserting it finishes; returns whether
/// each tracked.
fn train_with_gpu_trackers(utilization: GpuUtilizationTracker, memory: GpuMemoryTracker) -> (bool, bool) {
    let (mut utilization, mut memory) = (utilization, memory);
    let (probe, seen) = Probe::new(&["GPU"]);
    let report = train("gpu-none", 3, (&mut utilization, &mut memory, probe)).unwrap();
    assert_eq!(report.outcome, Outcome::Finished);
    assert_eq!(report.counters.global_step(), 12);
    let tracking = (utilization.is_tracking(), memory.is_tracking());
    if !tracking.0 && !tracking.1 {
        assert!(seen.lock().unwrap().is_empty(), "no GPU scalar without a GPU");
    }
    tracking
}

#[test]
fn gpu_trackers_without_nvml_train_fine_and_note_it_once() {
    const MISSING: &str = "/nonexistent/libnvidia-ml.so.1";
    if in_child() {
        let tracking = train_with_gpu_trackers(
            GpuUtilizationTracker::new().nvml_library(MISSING),
            GpuMemoryTracker::new().nvml_library(MISSING),
        );
        assert_eq!(tracking, (false, false));
        return;
    }
    let lines = stoker_lines_of("gpu_trackers_without_nvml_train_fine_and_note_it_once");
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert!(
        lines[0].starts_with("stoker: GPUUtilizationTracker: no NVIDIA GPU (NVML could not be loaded"),
        "{lines:#?}"
    );
    assert!(lines[0].ends_with("): GPU tracking off"), "{lines:#?}");
    assert!(
        lines[1].starts_with("stoker: GPUMemoryTracker: no NVIDIA GPU (NVML could not be loaded"),
        "{lines:#?}"
    );
}

#[test]
fn gpu_trackers_on_this_machine_train_fine_with_or_without_a_gpu() {
    let nvml = NvmlSource::open().and_then(|mut source| source.device_count()).unwrap_or(0) > 0;
    if in_child() {
        let tracking = train_with_gpu_trackers(GpuUtilizationTracker::new(), GpuMemoryTracker::new());
        assert_eq!(tracking, (nvml, nvml));
        return;
    }
    let lines = stoker_lines_of("gpu_trackers_on_this_machine_train_fine_with_or_without_a_gpu");
    if nvml {
        assert!(lines.is_empty(), "{lines:#?}");
    } else {
        // One note per tracker, at setup, not one per epoch.
        assert_eq!(lines.len(), 2, "{lines:#?}");
        assert!(lines[0].starts_with("stoker: GPUUtilizationTracker: no NVIDIA GPU"), "{lines:#?}");
        assert!(lines[1].starts_with("stoker: GPUMemoryTracker: no NVIDIA GPU"), "{lines:#?}");
    }
}

// ---------- RunTimer ----------

/// Fails in `trigger_epoch` of epoch `at`.
struct FailAt(u64);

impl Callback<Linear> for FailAt {
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        if ctx.epoch_num() == self.0 {
            return Err(burn_stoker::Error::msg("failed on purpose"));
        }
        Ok(())
    }
}

#[test]
fn run_timer_reports_the_training_time_at_the_end() {
    let clock = ManualClock::new();
    // 2 epochs of 4 steps of 1 s, 0.5 s of work after each epoch: 9 s.
    let mut work = Work::new(&clock, &[ms(1000)]);
    work.epoch_work = ms(500);
    let mut timer = RunTimer::new().clock(clock.clone());
    let (probe, seen) = Probe::new(&["time/"]);
    train("run-timer", 2, (work, &mut timer, probe)).unwrap();
    assert_eq!(timer.elapsed(), Some(ms(9000)));
    assert_eq!(history(&seen, RunTimer::SCALAR), [(8, 9.0)]);
    if in_child() {
        return;
    }
    let lines = stoker_lines_of("run_timer_reports_the_training_time_at_the_end");
    assert_eq!(lines, ["stoker: training took 9 seconds"]);
}

#[test]
fn run_timer_reports_after_an_error_too() {
    let clock = ManualClock::new();
    let work = Work::new(&clock, &[ms(1000), ms(2000), ms(4000)]);
    let mut timer = RunTimer::new().clock(clock.clone());
    // Epoch 1: 4 s, epoch 2: 8 s, then the error.
    let error = train("run-timer-error", 3, (work, &mut timer, FailAt(2))).unwrap_err();
    assert!(error.to_string().contains("failed on purpose"), "{error}");
    assert_eq!(timer.elapsed(), Some(ms(12_000)));
}

// ---------- Timed ----------

/// Advances the clock by `time` at `before_epoch`.
struct Fast {
    clock: ManualClock,
    time: Duration,
}

impl Callback<Linear> for Fast {
    fn before_epoch(&mut self, _ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.clock.advance(self.time);
        Ok(())
    }
}

/// Advances the clock by 0.5 s at each step and 1.5 s at `trigger_epoch`: 3.5 s per epoch.
struct Slow {
    clock: ManualClock,
}

impl Callback<Linear> for Slow {
    fn after_step(
        &mut self,
        _ctx: &mut Context<'_, Linear>,
        _values: &Fetched<'_>,
    ) -> burn_stoker::Result<()> {
        self.clock.advance(ms(500));
        Ok(())
    }
    fn trigger_epoch(&mut self, _ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.clock.advance(ms(1500));
        Ok(())
    }
}

/// The run of the report: (1 s steps outside the set, Timed(Fast 0.1 s, Slow 3.5 s)), 3 epochs.
/// Per epoch: callbacks 3.6 s, the epoch 7.6 s; the run: callbacks 10.8 s, 22.8 s in all.
fn run_timed(put_scalars: bool) -> Histories {
    let clock = ManualClock::new();
    let steps = Work::new(&clock, &[ms(1000)]);
    let set = Timed::new((Fast { clock: clock.clone(), time: ms(100) }, Slow { clock: clock.clone() }))
        .clock(clock.clone())
        .put_scalars(put_scalars);
    let (probe, seen) = Probe::new(&["callback_time/"]);
    train("timed", 3, (steps, set, probe)).unwrap();
    seen
}

#[test]
fn timed_puts_each_callbacks_time_in_each_epoch() {
    let seen = run_timed(true);
    assert_eq!(history(&seen, "callback_time/Fast"), [(4, 0.1), (8, 0.1), (12, 0.1)]);
    assert_eq!(history(&seen, "callback_time/Slow"), [(4, 3.5), (8, 3.5), (12, 3.5)]);
    assert_eq!(seen.lock().unwrap().len(), 2);
    assert!(run_timed(false).lock().unwrap().is_empty(), "no scalar unless asked");
}

#[test]
fn timed_reports_the_slow_callbacks_of_each_epoch_and_of_the_run() {
    if in_child() {
        run_timed(false);
        // Below tensorpack's 3 s in all: no report.
        let clock = ManualClock::new();
        let steps = Work::new(&clock, &[ms(1000)]);
        train(
            "timed-quiet",
            2,
            (steps, Timed::new(Fast { clock: clock.clone(), time: ms(100) }).clock(clock.clone())),
        )
        .unwrap();
        // Lower thresholds: the 0.1 s callback is named.
        let clock = ManualClock::new();
        let steps = Work::new(&clock, &[ms(1000)]);
        let set = Timed::new(Fast { clock: clock.clone(), time: ms(100) })
            .clock(clock.clone())
            .min_total(ms(100))
            .min_callback(ms(50));
        train("timed-low", 1, (steps, set)).unwrap();
        return;
    }
    let lines = stoker_lines_of("timed_reports_the_slow_callbacks_of_each_epoch_and_of_the_run");
    let epoch =
        |n: u64| format!("stoker: callbacks took 3.600 s in epoch {n} (of 7.600 s); Slow: 3.5 seconds (97%)");
    assert_eq!(
        lines,
        [
            epoch(1),
            epoch(2),
            epoch(3),
            "stoker: callbacks took 10.800 s in the whole run (of 22.8 seconds); Slow: 10.5 seconds (97%)"
                .into(),
            "stoker: callbacks took 0.100 s in epoch 1 (of 4.100 s); Fast: 0.1 seconds (100%)".into(),
            "stoker: callbacks took 0.100 s in the whole run (of 4.1 seconds); Fast: 0.1 seconds (100%)"
                .into(),
        ]
    );
}

#[test]
fn timed_names_a_callback_only_above_both_thresholds() {
    if in_child() {
        // Fast takes 2 s per epoch (over 1 s, but 2/5.5 = 36 %), Slow 3.5 s (64 %): both named.
        // With min_share 0.5, only Slow.
        for share in [0.3, 0.5] {
            let clock = ManualClock::new();
            let set =
                Timed::new((Fast { clock: clock.clone(), time: ms(2000) }, Slow { clock: clock.clone() }))
                    .clock(clock.clone())
                    .min_share(share);
            train("timed-share", 1, set).unwrap();
        }
        return;
    }
    let lines = stoker_lines_of("timed_names_a_callback_only_above_both_thresholds");
    let both = "5.500 s in epoch 1 (of 5.500 s); Fast: 2 seconds (36%); Slow: 3.5 seconds (64%)";
    let slow = "5.500 s in epoch 1 (of 5.500 s); Slow: 3.5 seconds (64%)";
    assert_eq!(
        lines,
        [
            format!("stoker: callbacks took {both}"),
            format!(
                "stoker: callbacks took {}",
                both.replace("in epoch 1 (of 5.500 s)", "in the whole run (of 5.5 seconds)")
            ),
            format!("stoker: callbacks took {slow}"),
            format!(
                "stoker: callbacks took {}",
                slow.replace("in epoch 1 (of 5.500 s)", "in the whole run (of 5.5 seconds)")
            ),
        ]
    );
}

#[test]
fn timed_with_a_share_above_1_is_an_error_at_setup() {
    let clock = ManualClock::new();
    let error = train("timed-bad", 1, Timed::new(Fast { clock: clock.clone(), time: ms(1) }).min_share(1.5))
        .unwrap_err();
    assert!(error.to_string().contains("min_share must be between 0 and 1, not 1.5"), "{error}");
}

/// Takes the loss before backward (a step hook) and counts the calls; 0.25 s each.
struct LossHook {
    clock: ManualClock,
    calls: Arc<AtomicU32>,
}

impl Callback<Linear> for LossHook {
    fn step_events(&self) -> StepEvents {
        StepEvents::LOSS
    }
    fn before_backward(
        &mut self,
        _ctx: &mut Context<'_, Linear>,
        loss: &StepLoss<'_>,
    ) -> burn_stoker::Result<()> {
        loss.update(|loss| loss * 1.0);
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.clock.advance(ms(250));
        Ok(())
    }
}

#[test]
fn timed_forwards_and_times_the_events_inside_a_step() {
    let clock = ManualClock::new();
    let calls = Arc::new(AtomicU32::new(0));
    let set = Timed::new(LossHook { clock: clock.clone(), calls: calls.clone() })
        .clock(clock.clone())
        .put_scalars(true);
    let (probe, seen) = Probe::new(&["callback_time/"]);
    train("timed-hooks", 2, (set, probe)).unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 8);
    assert_eq!(history(&seen, "callback_time/LossHook"), [(4, 1.0), (8, 1.0)]);
}

// ---------- ProgressBar off a terminal ----------

#[test]
fn progress_bar_off_a_terminal_writes_no_control_codes_and_bounded_lines() {
    if in_child() {
        // The default callbacks (the progress bar, showing the loss at every step, the writers,
        // the scalar printer), 3 epochs of 4 steps, with stdout and stderr piped by the parent.
        let device = burn_stoker::device::cpu();
        let defaults = DefaultCallbacks {
            progress: Some(burn_stoker::track::ProgressBar::new().show(["loss"]).refresh_every(1)),
            ..DefaultCallbacks::default()
        };
        let report = Trainer::new(
            tiny_model(&device),
            burn::optim::SgdConfig::new().init(),
            tiny_data(STEPS, &device),
        )
        .max_epoch(3)
        .log_dir(scratch_dir("progress-off-terminal"))
        .handle_signals(false)
        .default_callbacks(defaults)
        // A statistic per epoch, for the scalar printer to print.
        .callbacks(burn_stoker::debug::CallbackFactory::<Linear>::new().trigger(|ctx| {
            let epoch = ctx.epoch_num() as f64;
            ctx.monitors().put_scalar("statistic", epoch / 8.0);
        }))
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .unwrap();
        assert_eq!(report.outcome, Outcome::Finished);
        return;
    }
    let name = "progress_bar_off_a_terminal_writes_no_control_codes_and_bounded_lines";
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &stoker_tests::test_path(module_path!(), name), "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .expect("running the test binary");
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "child failed:\n{stdout}\n{stderr}");
    for (stream, text) in [("stdout", &stdout), ("stderr", &stderr)] {
        // No escape sequence (cursor movement, colour, line clearing) and no carriage return
        // redrawing a line: what a log file or a CI console receives is plain lines.
        assert!(!text.contains('\u{1b}'), "{stream} holds an escape sequence: {text:?}");
        assert!(!text.contains('\r'), "{stream} holds a carriage return: {text:?}");
        for line in text.lines() {
            assert!(line.chars().count() <= 200, "{stream}: a line of {} characters: {line:?}", line.len());
        }
        // The bar itself stays quiet: no frame of it is printed.
        assert!(!text.contains("epoch 1/3 ["), "{stream} holds the progress bar: {text}");
    }
    // What was printed is there: the scalar printer's line of each epoch.
    let all = format!("{stdout}{stderr}");
    for value in ["0.125", "0.25", "0.375"] {
        assert!(
            all.lines().any(|l| l.contains("statistic") && l.contains(value)),
            "no statistic {value}:\n{all}"
        );
    }
    // Bounded: a few lines per epoch (the scalar printer's), not one per step or per redraw.
    let lines = stdout.lines().count() + stderr.lines().count();
    assert!(lines <= 40, "{lines} lines for 3 epochs of 4 steps:\n{stdout}\n{stderr}");
}

/// The default build of burn-stoker compiles neither nvml-wrapper (and its darling 0.20, thiserror 1)
/// nor sysinfo: the trackers that need them are behind the `sys-metrics` feature.
#[test]
fn deps_default_build_compiles_neither_nvml_nor_sysinfo() {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml");
    let tree = |features: &[&str]| -> String {
        let out = std::process::Command::new(env!("CARGO"))
            .args(["tree", "--offline", "-p", "burn-stoker", "-e", "normal", "--prefix", "none"])
            .args(features)
            .args(["--manifest-path", manifest])
            .output()
            .expect("cargo runs");
        assert!(out.status.success(), "cargo tree failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let default = tree(&[]);
    for name in ["nvml-wrapper ", "sysinfo ", "darling v0.20", "thiserror v1."] {
        assert!(
            !default.lines().any(|l| l.starts_with(name)),
            "the default build compiles {name}:\n{default}"
        );
    }
    let with = tree(&["--features", "burn-stoker/sys-metrics"]);
    for name in ["nvml-wrapper ", "sysinfo "] {
        assert!(with.lines().any(|l| l.starts_with(name)), "sys-metrics does not compile {name}");
    }
}

// ---------------------------------------------------------------- StepProfiler

/// Stands for the work inside a step, ordered after the profiler: the loss hook takes 5 ms (in
/// `backward`), the gradient hook 7 ms (in `optimizer`), `after_step` 2 ms (in `callbacks`), and
/// `trigger_step` 50 ms (after the profiler's `trigger_step`: between two steps).
struct StepWork {
    clock: ManualClock,
    profile: Histories,
}

impl Callback<Linear> for StepWork {
    fn step_events(&self) -> StepEvents {
        StepEvents::LOSS.and(StepEvents::GRADIENTS)
    }
    fn before_backward(
        &mut self,
        _ctx: &mut Context<'_, Linear>,
        _loss: &StepLoss<'_>,
    ) -> burn_stoker::Result<()> {
        self.clock.advance(ms(5));
        Ok(())
    }
    fn after_backward(
        &mut self,
        _ctx: &mut Context<'_, Linear>,
        _grads: &burn_stoker::callback::StepGradients,
    ) -> burn_stoker::Result<()> {
        self.clock.advance(ms(7));
        Ok(())
    }
    fn after_step(
        &mut self,
        _ctx: &mut Context<'_, Linear>,
        _values: &Fetched<'_>,
    ) -> burn_stoker::Result<()> {
        self.clock.advance(ms(2));
        Ok(())
    }
    fn trigger_step(&mut self, _ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.clock.advance(ms(50));
        Ok(())
    }
    fn after_train(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let mut seen = self.profile.lock().unwrap();
        for phase in ["forward", "backward", "optimizer", "callbacks"] {
            let name = format!("profile/{phase}_ms");
            seen.insert(name.clone(), ctx.monitors_ref().history(&name).to_vec());
        }
        Ok(())
    }
}

/// Runs 2 epochs of [`STEPS`] steps with `profiler` first, the step function taking 3 ms of
/// `clock` (its forward); returns the trace the profiler wrote.
fn profile_run<K, C: Callbacks<Linear, K>>(
    name: &str,
    clock: &ManualClock,
    callbacks: C,
) -> serde_json::Value {
    let device = burn_stoker::device::cpu();
    let dir = scratch_dir(name);
    let step_clock = clock.clone();
    Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(STEPS, &device))
        .max_epoch(2)
        .log_dir(&dir)
        .handle_signals(false)
        .default_callbacks(DefaultCallbacks::none())
        .callbacks(callbacks)
        .train(move |model: &Linear, batch, _step: &mut Step<'_>| {
            step_clock.advance(ms(3));
            mse(model, batch)
        })
        .unwrap();
    let text = std::fs::read_to_string(dir.join("step_profile.json")).expect("the profiler wrote its trace");
    serde_json::from_str(&text).expect("the trace is JSON")
}

/// The trace's slices of one step: `step` first, then the phases, checked to be complete slices
/// ("ph": "X") nested in the step, back to back in the order they run, none negative. Returns
/// the step's global step, duration and the phases' durations (microseconds).
fn step_slices(events: &[serde_json::Value]) -> (u64, f64, Vec<f64>) {
    let names: Vec<&str> = events.iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["step", "forward", "backward", "optimizer", "callbacks"]);
    let global_step = events[0]["args"]["global_step"].as_u64().unwrap();
    let (ts, dur) = (events[0]["ts"].as_f64().unwrap(), events[0]["dur"].as_f64().unwrap());
    let mut at = ts;
    let mut phases = Vec::new();
    for event in &events[1..] {
        assert_eq!(event["ph"], "X");
        assert_eq!(event["args"]["global_step"].as_u64(), Some(global_step));
        let (pts, pdur) = (event["ts"].as_f64().unwrap(), event["dur"].as_f64().unwrap());
        assert!(pdur >= 0.0, "{event}");
        assert!(
            (pts - at).abs() < 1e-6,
            "{} starts where the phase before it ends: {pts} vs {at}",
            event["name"]
        );
        at = pts + pdur;
        phases.push(pdur);
    }
    assert!(at <= ts + dur + 1e-6, "the phases end inside the step: {at} vs {}", ts + dur);
    (global_step, dur, phases)
}

#[test]
fn profile_trace_has_each_phase_of_each_step_in_the_window_with_the_time_it_took() {
    let clock = ManualClock::new();
    let profile = Arc::new(Mutex::new(BTreeMap::new()));
    let work = StepWork { clock: clock.clone(), profile: profile.clone() };
    let profiler = StepProfiler::with_clock(clock.clone()).skip(2).steps(3);
    let trace = profile_run("profile-manual", &clock, (profiler, work));
    let events = trace["traceEvents"].as_array().unwrap();
    assert_eq!(events.len(), 3 * 5, "steps 3, 4 and 5, five slices each");
    for (k, step) in events.chunks(5).enumerate() {
        let (global_step, dur, phases) = step_slices(step);
        assert_eq!(global_step, k as u64 + 3);
        // forward 3 ms (the step function), backward 5, optimizer 7, callbacks 2; the 50 ms of
        // trigger_step after the profiler's fall between steps.
        assert_eq!(phases, [3000.0, 5000.0, 7000.0, 2000.0]);
        assert_eq!(dur, 17000.0);
    }
    let profile = profile.lock().unwrap();
    // Put once, at the end of the window (global step 5), in milliseconds.
    assert_eq!(profile["profile/forward_ms"], [(5, 3.0)]);
    assert_eq!(profile["profile/backward_ms"], [(5, 5.0)]);
    assert_eq!(profile["profile/optimizer_ms"], [(5, 7.0)]);
    assert_eq!(profile["profile/callbacks_ms"], [(5, 2.0)]);
}

#[test]
fn profile_with_the_real_clock_writes_a_trace_of_nested_non_negative_phases() {
    // The real clock: no duration is known, only the trace's shape.
    let trace = profile_run("profile-real", &ManualClock::new(), StepProfiler::new().skip(0).steps(3));
    let events = trace["traceEvents"].as_array().unwrap();
    assert_eq!(events.len(), 3 * 5);
    for (k, step) in events.chunks(5).enumerate() {
        let (global_step, dur, phases) = step_slices(step);
        assert_eq!(global_step, k as u64 + 1);
        assert!(phases.iter().sum::<f64>() <= dur + 1e-6);
    }
    assert_eq!(trace["displayTimeUnit"], "ms");
}

#[test]
fn profile_of_zero_steps_is_refused_at_setup() {
    let err = train("profile-zero", 1, StepProfiler::new().steps(0)).map(|_| ()).unwrap_err().to_string();
    assert!(err.contains("StepProfiler: steps must be at least 1, not 0"), "{err}");
}

/// Puts the validation loss `valid` (5 at epoch 1, 1 at epoch 2) and the metric `acc` (epoch 1
/// only) at each epoch's end.
struct Validation;

impl Callback<Linear> for Validation {
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let epoch = ctx.epoch_num();
        ctx.monitors().put_scalar("valid", if epoch == 1 { 5.0 } else { 1.0 });
        if epoch == 1 {
            ctx.monitors().put_scalar("acc", 0.5);
        }
        Ok(())
    }
}

/// Decode a PNG file: (width, height, RGB pixels).
fn decode_rgb(path: &std::path::Path) -> (u32, u32, Vec<u8>) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut reader = png::Decoder::new(std::io::Cursor::new(bytes)).read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut pixels).unwrap();
    assert_eq!((info.color_type, info.bit_depth), (png::ColorType::Rgb, png::BitDepth::Eight));
    pixels.truncate(info.buffer_size());
    (info.width, info.height, pixels)
}

/// The pixels of `color` inside the plot's frame (its area and the frame's 2 pixels around it),
/// as (x, y): the curves. Outside the frame, that colour is only the legend's swatch, in the
/// legend's rows (40 to 64) above the area.
fn pixels_of(width: u32, pixels: &[u8], color: [u8; 3]) -> Vec<(u32, u32)> {
    use burn_stoker::track::{PLOT_MARGIN, PLOT_SIZE};
    let (m, height) = (PLOT_MARGIN, PLOT_SIZE.1);
    let all = pixels
        .chunks(3)
        .enumerate()
        .filter(|(_, p)| *p == color)
        .map(|(i, _)| (i as u32 % width, i as u32 / width));
    let (inside, outside): (Vec<_>, Vec<_>) = all
        .partition(|&(x, y)| (m - 2..=width - m + 1).contains(&x) && (m - 2..=height - m + 1).contains(&y));
    assert!(!outside.is_empty(), "the legend shows {color:?}");
    assert!(outside.iter().all(|&(_, y)| (40..=64).contains(&y)), "{color:?} outside the frame: {outside:?}");
    inside
}

/// Two epochs of 5 steps at learning rate 0.1 with `recorder` and a validation that puts `valid`.
fn recorder_run<F>(dir: &std::path::Path, recorder: &mut burn_stoker::track::Recorder, step: F)
where
    F: FnMut(
        &Linear,
        (burn::tensor::Tensor<2>, burn::tensor::Tensor<2>),
        &mut Step<'_>,
    ) -> burn::tensor::Tensor<1>,
{
    let device = burn_stoker::device::cpu();
    Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(5, &device))
        .max_epoch(2)
        .learning_rate(0.1)
        .log_dir(dir)
        .default_callbacks(DefaultCallbacks::none())
        .callbacks((Validation, recorder))
        .train(step)
        .unwrap();
}

/// The training loss's and the learning rate's colour, as `Recorder`'s documentation gives it:
/// blue, `#1f77b4`.
const TRAIN_COLOR: [u8; 3] = [0x1f, 0x77, 0xb4];
/// The validation loss's colour, as `Recorder`'s documentation gives it: orange, `#ff7f0e`.
const VALID_COLOR: [u8; 3] = [0xff, 0x7f, 0x0e];

#[test]
fn recorder_records_losses_lrs_and_epoch_values_and_plots_them_as_png() {
    use burn_stoker::track::{LOSS_PLOT, LR_PLOT, PLOT_MARGIN, PLOT_SIZE, Recorder};
    let dir = scratch_dir("recorder");
    let mut recorder = Recorder::new().valid_loss("valid").metrics(["acc"]);
    // The loss of step n is 10 - n: 9, 8, ... 0 over 2 epochs of 5 steps.
    let mut n = 0;
    recorder_run(&dir, &mut recorder, |model: &Linear, batch, _step: &mut Step<'_>| {
        n += 1;
        mse(model, batch).mul_scalar(0.0).add_scalar(10.0 - n as f32)
    });
    let losses: Vec<(u64, f64)> = (1..=10).map(|s| (s, 10.0 - s as f64)).collect();
    assert_eq!(recorder.losses(), losses);
    assert_eq!(recorder.lrs(), (1..=10).map(|s| (s, 0.1)).collect::<Vec<_>>());
    let values: Vec<_> = recorder
        .values()
        .iter()
        .map(|v| (v.epoch_num, v.global_step, v.train_loss, v.valid_loss, v.metrics.clone()))
        .collect();
    let acc: BTreeMap<String, f64> = [("acc".to_string(), 0.5)].into();
    // fastai learner.py, Recorder: an epoch's training loss is the smoothed loss at its end
    // (`AvgSmoothLoss(beta=0.98)`: `val = lerp(loss, val, 0.98)` from 0, over 1 - 0.98^n), from
    // the first step: after steps 5 and 10.
    let smooth = |n: i32| {
        let val = (1..=n).fold(0.0, |val, s| (10.0 - s as f64) + 0.98 * (val - (10.0 - s as f64)));
        val / (1.0 - 0.98f64.powi(n))
    };
    // About the mean, 7, a little below: the later, lower losses weigh more.
    assert!((smooth(5) - 7.0).abs() < 0.05 && smooth(5) < 7.0, "{}", smooth(5));
    let train: Vec<f64> = values.iter().map(|v| v.2).collect();
    for (got, want) in train.iter().zip([smooth(5), smooth(10)]) {
        assert!((got - want).abs() < 1e-9, "{train:?}");
    }
    let rest: Vec<_> = values.iter().map(|v| (v.0, v.1, v.3, v.4.clone())).collect();
    assert_eq!(rest, [(1, 5, Some(5.0), acc), (2, 10, Some(1.0), BTreeMap::new())]);

    // loss.png: the area is [72, 568) x [72, 408); each axis runs 5% of its values' span past
    // them at either end (no point on the frame): x from step 0.55 to 10.45.
    let (width, height) = PLOT_SIZE;
    let (w, h, pixels) = decode_rgb(&dir.join(LOSS_PLOT));
    assert_eq!((w, h), (width, height));
    let (left, top) = (PLOT_MARGIN as f64, PLOT_MARGIN as f64);
    let (area_w, area_h) = ((width - 2 * PLOT_MARGIN) as f64, (height - 2 * PLOT_MARGIN) as f64);
    let padded = |lo: f64, hi: f64| (lo - (hi - lo) * 0.05, hi + (hi - lo) * 0.05);
    let (x0, x1) = padded(1.0, 10.0);
    let x_of = |step: f64| left + (step - x0) / (x1 - x0) * area_w;
    let y_of = |(lo, hi): (f64, f64), value: f64| top + (hi - value) / (hi - lo) * area_h;
    // How far the pixel `(x, y)` is from the segment `a`–`b` (in pixels).
    let off = |(x, y): (u32, u32), a: (f64, f64), b: (f64, f64)| {
        let (dx, dy) = (b.0 - a.0, b.1 - a.1);
        let t = (((x as f64 - a.0) * dx + (y as f64 - a.1) * dy) / (dx * dx + dy * dy)).clamp(0.0, 1.0);
        (x as f64 - a.0 - t * dx).hypot(y as f64 - a.1 - t * dy)
    };
    // The training loss, 9 at step 1 down to 0 at step 10 (10 - step): every blue pixel lies on
    // that line, within the stroke's width and the rounding of the mapping.
    let train = pixels_of(width, &pixels, TRAIN_COLOR);
    assert!(train.len() > 600, "the training loss is drawn: {} pixels", train.len());
    let (from, to) = ((x_of(1.0), y_of(padded(0.0, 9.0), 9.0)), (x_of(10.0), y_of(padded(0.0, 9.0), 0.0)));
    for &p in &train {
        let d = off(p, from, to);
        assert!(d <= 3.0, "blue pixel {p:?} is {d:.1} pixels off the line {from:.1?}–{to:.1?}");
    }
    let xs = |p: &[(u32, u32)]| (p.iter().map(|q| q.0).min().unwrap(), p.iter().map(|q| q.0).max().unwrap());
    let (x_min, x_max) = xs(&train);
    // From step 1 to step 10, inside the frame (plotters may stop a few pixels short).
    assert!(
        (x_min as f64 - x_of(1.0)).abs() <= 3.0 && (x_max as f64 - x_of(10.0)).abs() <= 8.0,
        "{x_min}..{x_max}"
    );
    let (y_min, y_max) = (train.iter().map(|p| p.1).min().unwrap(), train.iter().map(|p| p.1).max().unwrap());
    assert!(
        y_min > PLOT_MARGIN + 8 && y_max + 8 < height - PLOT_MARGIN,
        "inside the frame: {y_min}..{y_max}"
    );
    // The validation loss: from 5 at step 5 to 1 at step 10 (9 - 0.8 step), in orange.
    let valid = pixels_of(width, &pixels, VALID_COLOR);
    assert!(valid.len() > 300, "the validation loss is drawn: {} pixels", valid.len());
    let (v_min, _) = xs(&valid);
    assert!((v_min as f64 - x_of(5.0)).abs() <= 3.0, "the validation line starts at step 5: x {v_min}");
    let (from, to) = ((x_of(5.0), y_of(padded(1.0, 5.0), 5.0)), (x_of(10.0), y_of(padded(1.0, 5.0), 1.0)));
    for &p in &valid {
        let d = off(p, from, to);
        assert!(d <= 3.0, "orange pixel {p:?} is {d:.1} pixels off the line {from:.1?}–{to:.1?}");
    }

    // lr.png: a constant learning rate is a flat line across the middle.
    let (w, h, pixels) = decode_rgb(&dir.join(LR_PLOT));
    assert_eq!((w, h), (width, height));
    let lr = pixels_of(width, &pixels, TRAIN_COLOR);
    assert!(lr.len() > 500);
    assert!(lr.iter().all(|&(_, y)| (y as f64 - (top + area_h / 2.0)).abs() <= 3.0), "the lr line is flat");

    // Callable at any time, anywhere.
    recorder.plot_loss(dir.join("again/loss.png")).unwrap();
    assert_eq!(
        std::fs::read(dir.join("again/loss.png")).unwrap(),
        std::fs::read(dir.join(LOSS_PLOT)).unwrap()
    );
}

/// The pixels inside `[x0, x1) × [y0, y1)` that are not the white background.
fn ink(width: u32, pixels: &[u8], (x0, x1): (u32, u32), (y0, y1): (u32, u32)) -> usize {
    (y0..y1)
        .flat_map(|y| (x0..x1).map(move |x| (x, y)))
        .filter(|&(x, y)| {
            let i = (y * width + x) as usize * 3;
            pixels[i..i + 3] != [255, 255, 255]
        })
        .count()
}

#[test]
fn recorder_plots_carry_text_in_their_label_regions() {
    use burn_stoker::track::{LOSS_PLOT, LR_PLOT, PLOT_MARGIN, PLOT_SIZE, Recorder};
    let dir = scratch_dir("recorder-text");
    let mut recorder = Recorder::new().valid_loss("valid");
    recorder_run(&dir, &mut recorder, |model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch));
    let ((w, h), m) = (PLOT_SIZE, PLOT_MARGIN);
    // Each region below holds only text (the layout in the docs of `track/plot/mod.rs`): nothing
    // else is drawn there (the grid stays in the area, the tick marks end 6 pixels from it, the
    // legend's swatches and box are left out), so without text every count is 0 (a build that
    // draws no text fails every check here). A region holds at least one tick number, and a digit
    // at 13 pixels covers 29 ("7") to 46 ("8") pixels; 20 is less than the least of them.
    const TEXT: usize = 20;
    let mut missing = Vec::new();
    for (file, right_axis) in [(LOSS_PLOT, true), (LR_PLOT, false)] {
        let (_, _, pixels) = decode_rgb(&dir.join(file));
        // The legend's first name, right of its swatch (the blue outside the frame).
        let swatch_end = pixels
            .chunks(3)
            .enumerate()
            .filter(|&(i, p)| p == TRAIN_COLOR && (i as u32 / w) < m - 2)
            .map(|(i, _)| i as u32 % w)
            .max()
            .expect("a legend swatch");
        let mut regions = vec![
            ("title", (m, w - m), (0, 36)),
            ("legend", (swatch_end + 2, swatch_end + 52), (42, 63)),
            ("x tick numbers", (m - 20, w - m + 20), (h - m + 7, h - m + 28)),
            ("x label", (0, w), (h - m + 30, h)),
            ("left tick numbers", (24, m - 7), (m, h - m)),
            ("left label", (0, 22), (m, h - m)),
        ];
        let right = [
            ("right tick numbers", (w - m + 7, w - 24), (m, h - m)),
            ("right label", (w - 22, w), (m, h - m)),
        ];
        if right_axis {
            regions.extend(right);
        } else {
            // No line on the right: no text there either.
            for (name, xs, ys) in right {
                assert_eq!(ink(w, &pixels, xs, ys), 0, "{file}: {name}");
            }
        }
        for (name, xs, ys) in regions {
            let count = ink(w, &pixels, xs, ys);
            println!("{file}: {name}: {count} pixels of text");
            if count < TEXT {
                missing.push(format!("{file}: the {name} region {xs:?} × {ys:?} has {count} pixels of text"));
            }
        }
    }
    assert!(missing.is_empty(), "text missing:\n{}", missing.join("\n"));
}
