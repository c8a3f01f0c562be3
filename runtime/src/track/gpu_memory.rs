//! The GPUs' memory, every epoch.

use super::gpu::{GpuSelection, GpuSource, gpu_selection_builders};
use crate::callback::{Callback, Context};
use crate::error::Result;

/// MB as tensorpack's `GPUMemoryTracker` counts them.
const MB: f64 = 1e6;

/// Puts each GPU's memory each time it is triggered (every epoch by default):
/// `GPUMemory/<device>/used (MB)` and `GPUMemory/<device>/total (MB)`, in millions of bytes as
/// tensorpack's `GPUMemoryTracker`.
///
/// tensorpack reads TensorFlow's peak allocation of its own process; burn exposes no such
/// counter, so this tracker reads the device's memory in use (by every process on it) and its
/// size from NVIDIA's NVML, loaded at run time (`libnvidia-ml.so.1`). Without it, or without a
/// GPU, it writes one line on stderr at setup, `stoker: GPUMemoryTracker: no NVIDIA GPU (...):
/// GPU tracking off`, puts nothing and never fails training; a reading that fails later turns
/// it off the same way. The readings cost a few microseconds per trigger on the training
/// thread, nothing per step. Devices are chosen as for
/// [`GpuUtilizationTracker`](crate::track::GpuUtilizationTracker): every visible GPU unless
/// [`devices`](Self::devices) names some (tensorpack's default is GPU 0 alone; its scalars are
/// named `PeakMemory(MB)/gpu:<device>`). It runs on every worker in
/// data-parallel training (not `chief_only`), as in tensorpack.
///
/// Exists with the `sys-metrics` feature only (`burn-stoker = { features = ["sys-metrics"] }`),
/// which compiles nvml-wrapper and sysinfo.
///
/// ```
/// use burn_stoker::track::GpuMemoryTracker;
///
/// let all_visible = GpuMemoryTracker::new();
/// let first = GpuMemoryTracker::new().devices([0]);
/// # let _ = (all_visible, first);
/// ```
#[doc(alias = "GPUMemoryTracker")]
pub struct GpuMemoryTracker {
    selection: GpuSelection,
    source: Option<Box<dyn GpuSource>>,
    /// For each device tracked: its index and its two scalars' names.
    tracked: Vec<(u32, String, String)>,
}
crate::kind::kind!(GpuMemoryTracker);

impl std::fmt::Debug for GpuMemoryTracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuMemoryTracker")
            .field("devices", &self.selection.devices)
            .field("source", &self.selection.choice)
            .field("tracking", &self.tracked.iter().map(|t| t.0).collect::<Vec<_>>())
            .finish()
    }
}

impl Default for GpuMemoryTracker {
    fn default() -> Self {
        GpuMemoryTracker::new()
    }
}

impl GpuMemoryTracker {
    /// Track the visible GPUs through NVML.
    pub fn new() -> Self {
        GpuMemoryTracker { selection: GpuSelection::new(), source: None, tracked: Vec::new() }
    }
    gpu_selection_builders!();
    /// Whether it tracks some GPU (after setup).
    pub fn is_tracking(&self) -> bool {
        self.source.is_some()
    }
    /// The error that turned tracking off, if one did: NVML could not be loaded or could not
    /// count the GPUs (at setup), or a reading failed. Its [`source`](std::error::Error::source)
    /// is the cause (NVML's error, or the [`GpuSource`](super::GpuSource)'s own). `None` while
    /// tracking, and when there was simply no GPU to track.
    pub fn failure(&self) -> Option<&crate::error::Error> {
        self.selection.failure.as_ref()
    }
}

impl<M> Callback<M> for GpuMemoryTracker {
    /// Every rank (as in tensorpack): each rank reports its own devices' memory.
    fn chief_only(&self) -> bool {
        false
    }
    fn setup(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        if let Some((source, devices)) = self.selection.open("GPUMemoryTracker")? {
            self.tracked = devices
                .iter()
                .map(|d| (*d, format!("GPUMemory/{d}/used (MB)"), format!("GPUMemory/{d}/total (MB)")))
                .collect();
            self.source = Some(source);
        }
        Ok(())
    }
    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let Some(source) = self.source.as_mut() else { return Ok(()) };
        let mut readings = Vec::with_capacity(self.tracked.len());
        for (device, _, _) in &self.tracked {
            match source.memory(*device) {
                Ok(memory) => readings.push(memory),
                Err(e) => {
                    self.source = None;
                    self.selection.turned_off_by("GPUMemoryTracker", e);
                    return Ok(());
                }
            }
        }
        for ((_, used, total), memory) in self.tracked.iter().zip(readings) {
            ctx.monitors().put_scalar(used, memory.used as f64 / MB);
            ctx.monitors().put_scalar(total, memory.total as f64 / MB);
        }
        Ok(())
    }
}
