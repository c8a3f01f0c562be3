//! The GPUs' average utilization in each epoch, sampled by a thread.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use super::gpu::{GpuSelection, GpuSource, gpu_selection_builders};
use crate::callback::{Callback, Context};
use crate::error::{Error, Result};

/// How long `trigger_epoch` waits for the sampling thread's average before giving up.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// Puts the average utilization of each GPU during each epoch, `GPUUtil/<device>` (percent),
/// as tensorpack's `GPUUtilizationTracker` does: a thread reads each device's utilization
/// every second (see [`interval`](Self::interval)) from `before_epoch` to `after_epoch`, so the
/// callbacks' time after the epoch is not counted, and the average is put when the tracker is
/// triggered (`trigger_epoch` by default; under
/// [`PeriodicTrigger::every_k_epochs`](crate::trigger::PeriodicTrigger::every_k_epochs), the average of the
/// epoch that just ended, every `k` epochs; a trigger inside an epoch puts nothing). The training
/// loop pays nothing per step; the thread is stopped and joined in `after_train`.
///
/// The readings come from NVIDIA's NVML, loaded at run time (`libnvidia-ml.so.1`). Without it,
/// or without a GPU, the tracker writes one line on stderr at setup, `stoker:
/// GPUUtilizationTracker: no NVIDIA GPU (...): GPU tracking off`, puts nothing and never fails
/// training; so does a device whose utilization cannot be read (some virtualized GPUs), when it
/// happens (tensorpack stops training then).
///
/// Devices: those given to [`devices`](Self::devices); else those `CUDA_VISIBLE_DEVICES` lists
/// (indices in NVML's order, which is CUDA's with `CUDA_DEVICE_ORDER=PCI_BUS_ID`); else every
/// GPU. Another difference from tensorpack, whose thread sleeps a whole second before noticing
/// the end of an epoch and drops that last reading: this thread wakes at the end of the epoch,
/// and reads once then only if the epoch was shorter than the interval, so every epoch has a
/// value. It runs on every worker in data-parallel training (not `chief_only`), as in
/// tensorpack.
///
/// Exists with the `sys-metrics` feature only (`burn-stoker = { features = ["sys-metrics"] }`),
/// which compiles nvml-wrapper and sysinfo.
///
/// ```
/// use burn_stoker::track::GpuUtilizationTracker;
///
/// // Every visible GPU, read every second.
/// let all = GpuUtilizationTracker::new();
/// // GPUs 0 and 2, read every 200 ms.
/// let some = GpuUtilizationTracker::new().devices([0, 2]).interval(std::time::Duration::from_millis(200));
/// # let _ = (all, some);
/// ```
#[doc(alias = "GPUUtilizationTracker")]
#[derive(Debug)]
pub struct GpuUtilizationTracker {
    selection: GpuSelection,
    interval: Duration,
    sampler: Option<Sampler>,
    /// `GPUUtil/<device>` for each device tracked.
    names: Vec<String>,
    /// The average of an epoch was asked for and not received yet.
    pending: bool,
}
crate::kind::kind!(GpuUtilizationTracker);

impl Default for GpuUtilizationTracker {
    fn default() -> Self {
        GpuUtilizationTracker::new()
    }
}

impl GpuUtilizationTracker {
    /// Track the visible GPUs through NVML, every second.
    pub fn new() -> Self {
        GpuUtilizationTracker {
            selection: GpuSelection::new(),
            interval: Duration::from_secs(1),
            sampler: None,
            names: Vec::new(),
            pending: false,
        }
    }
    gpu_selection_builders!();
    /// Read the utilization every `interval` (1 s by default, as tensorpack; at least 1 ms).
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval.max(Duration::from_millis(1));
        self
    }
    /// Whether the sampling thread runs (after setup, when a GPU was found).
    pub fn is_tracking(&self) -> bool {
        self.sampler.is_some()
    }
    /// The error that turned tracking off, if one did: NVML could not be loaded or could not
    /// count the GPUs (at setup), a reading failed, or the sampling thread stopped answering. Its
    /// [`source`](std::error::Error::source) is the cause (NVML's error, or the
    /// [`GpuSource`]'s own). `None` while tracking, and when there was simply no GPU to track.
    pub fn failure(&self) -> Option<&Error> {
        self.selection.failure.as_ref()
    }

    /// Stop tracking for good: tell the thread to end and wait for it.
    fn shut_down(&mut self) {
        if let Some(sampler) = self.sampler.take() {
            let _ = sampler.commands.send(Command::Exit);
            drop(sampler.commands);
            let _ = sampler.handle.join();
        }
        self.pending = false;
    }

    fn turn_off(&mut self, error: Error) {
        self.shut_down();
        self.selection.turned_off_by("GPUUtilizationTracker", error);
    }

    /// Receive the average of the epoch that ended.
    fn receive(&mut self) -> Option<Vec<f64>> {
        if !self.pending {
            return None;
        }
        self.pending = false;
        let sampler = self.sampler.as_ref()?;
        match sampler.averages.recv_timeout(ANSWER_TIMEOUT) {
            Ok(Ok(averages)) => Some(averages),
            Ok(Err(error)) => {
                self.turn_off(error);
                None
            }
            Err(RecvTimeoutError::Timeout) => {
                self.turn_off(Error::msg("the sampling thread did not answer within 60 s"));
                None
            }
            Err(RecvTimeoutError::Disconnected) => {
                self.turn_off(Error::msg("the sampling thread stopped"));
                None
            }
        }
    }
}

impl Drop for GpuUtilizationTracker {
    fn drop(&mut self) {
        self.shut_down();
    }
}

impl<M> Callback<M> for GpuUtilizationTracker {
    /// Every rank (as in tensorpack): each rank reports its own devices' utilization.
    fn chief_only(&self) -> bool {
        false
    }
    fn setup(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        if let Some((source, devices)) = self.selection.open("GPUUtilizationTracker")? {
            self.names = devices.iter().map(|d| format!("GPUUtil/{d}")).collect();
            self.sampler = Some(Sampler::start(source, devices, self.interval)?);
        }
        Ok(())
    }
    fn before_epoch(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        // An epoch whose trigger_epoch did not run (an error elsewhere) left its average behind.
        if self.pending {
            let _ = self.receive();
        }
        if let Some(sampler) = &self.sampler
            && sampler.commands.send(Command::Start).is_err()
        {
            self.turn_off(Error::msg("the sampling thread stopped"));
        }
        Ok(())
    }
    fn after_epoch(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        if let Some(sampler) = &self.sampler {
            if sampler.commands.send(Command::Stop).is_err() {
                self.turn_off(Error::msg("the sampling thread stopped"));
            } else {
                self.pending = true;
            }
        }
        Ok(())
    }
    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if let Some(averages) = self.receive() {
            for (name, value) in self.names.iter().zip(averages) {
                ctx.monitors().put_scalar(name, value);
            }
        }
        Ok(())
    }
    fn after_train(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        self.shut_down();
        Ok(())
    }
}

enum Command {
    /// An epoch starts: read every interval.
    Start,
    /// The epoch ended: send its average.
    Stop,
    /// Training ended.
    Exit,
}

/// The sampling thread and its two channels.
struct Sampler {
    commands: Sender<Command>,
    averages: Receiver<Result<Vec<f64>>>,
    handle: JoinHandle<()>,
}

impl std::fmt::Debug for Sampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sampler").finish_non_exhaustive()
    }
}

impl Sampler {
    fn start(source: Box<dyn GpuSource>, devices: Vec<u32>, interval: Duration) -> Result<Sampler> {
        let (commands, command_receiver) = mpsc::channel();
        let (average_sender, averages) = mpsc::channel();
        let handle = std::thread::Builder::new()
            .name("stoker-gpu-utilization".into())
            .spawn(move || sample(source, &devices, interval, &command_receiver, &average_sender))
            .map_err(|e| Error::context("GPUUtilizationTracker: starting its thread", e))?;
        Ok(Sampler { commands, averages, handle })
    }
}

/// The thread: wait for an epoch, read every `interval` until it ends, send the average.
fn sample(
    mut source: Box<dyn GpuSource>,
    devices: &[u32],
    interval: Duration,
    commands: &Receiver<Command>,
    averages: &Sender<Result<Vec<f64>>>,
) {
    let read = |source: &mut Box<dyn GpuSource>, sums: &mut [f64]| -> Result<()> {
        for (sum, &device) in sums.iter_mut().zip(devices) {
            *sum += source.utilization(device)?;
        }
        Ok(())
    };
    loop {
        // Between epochs.
        match commands.recv() {
            Ok(Command::Start) => {}
            // A stop without a start: answer, so that the tracker does not wait.
            Ok(Command::Stop) => {
                if averages.send(Err(Error::msg("an epoch ended that had not started"))).is_err() {
                    return;
                }
                continue;
            }
            Ok(Command::Exit) | Err(_) => return,
        }
        // In an epoch.
        let mut sums = vec![0.0; devices.len()];
        let mut count = 0u32;
        let mut failure = None;
        loop {
            match commands.recv_timeout(interval) {
                Err(RecvTimeoutError::Timeout) => {
                    if failure.is_none() {
                        match read(&mut source, &mut sums) {
                            Ok(()) => count += 1,
                            Err(e) => failure = Some(e),
                        }
                    }
                }
                Ok(Command::Start) => {}
                Ok(Command::Stop) => break,
                Ok(Command::Exit) | Err(RecvTimeoutError::Disconnected) => return,
            }
        }
        // An epoch shorter than the interval: one reading now, at its end.
        if count == 0 && failure.is_none() {
            match read(&mut source, &mut sums) {
                Ok(()) => count = 1,
                Err(e) => failure = Some(e),
            }
        }
        let answer = match failure {
            Some(e) => Err(e),
            None => Ok(sums.iter().map(|s| s / f64::from(count)).collect()),
        };
        if averages.send(answer).is_err() {
            return;
        }
    }
}
