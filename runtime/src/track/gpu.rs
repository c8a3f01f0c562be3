//! Where the GPU trackers read from: NVIDIA's management library (NVML), loaded at run time.

use std::ffi::OsString;

use nvml_wrapper::Nvml;

use crate::error::{Error, Result};

/// The memory of one GPU, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuMemory {
    /// Allocated.
    pub used: u64,
    /// Installed.
    pub total: u64,
}

/// What the GPU trackers read: [`NvmlSource`] by default; another implementation for another
/// vendor's library, or a fake in tests. Devices are numbered from 0, in the source's order.
///
/// ```
/// use burn_stoker::track::{GpuMemory, GpuSource};
///
/// /// Two GPUs, always half busy.
/// struct Fake;
///
/// impl GpuSource for Fake {
///     fn device_count(&mut self) -> burn_stoker::Result<u32> {
///         Ok(2)
///     }
///     fn utilization(&mut self, _device: u32) -> burn_stoker::Result<f64> {
///         Ok(50.0)
///     }
///     fn memory(&mut self, _device: u32) -> burn_stoker::Result<GpuMemory> {
///         Ok(GpuMemory { used: 1 << 30, total: 16 << 30 })
///     }
/// }
///
/// let tracker = burn_stoker::track::GpuUtilizationTracker::new().source(Fake);
/// # let _ = tracker;
/// ```
pub trait GpuSource: Send + 'static {
    /// How many devices there are.
    fn device_count(&mut self) -> Result<u32>;
    /// The percentage of time (0 to 100) during which a kernel ran on `device` over the driver's
    /// last sample period.
    fn utilization(&mut self, device: u32) -> Result<f64>;
    /// The memory of `device`.
    fn memory(&mut self, device: u32) -> Result<GpuMemory>;
}

/// NVIDIA's management library, `libnvidia-ml.so.1` (`nvml.dll` on Windows), loaded when
/// opened: nothing of it is needed to build or to run without a GPU.
pub struct NvmlSource {
    nvml: Nvml,
}

impl std::fmt::Debug for NvmlSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvmlSource").finish_non_exhaustive()
    }
}

impl NvmlSource {
    /// Load the library from the system's search path and initialize it.
    pub fn open() -> Result<Self> {
        Self::open_library(None)
    }
    /// Load the library from `path`, or from the system's search path when `None`.
    pub fn open_library(path: Option<&std::path::Path>) -> Result<Self> {
        let path: Option<OsString> = path.map(|p| p.as_os_str().to_owned());
        let mut builder = Nvml::builder();
        if let Some(path) = &path {
            builder.lib_path(path);
        }
        let nvml = builder.init().map_err(|e| Error::context("NVML could not be loaded", e))?;
        Ok(NvmlSource { nvml })
    }
}

fn nvml_error(what: &str, device: u32, error: nvml_wrapper::error::NvmlError) -> Error {
    Error::context(format!("NVML could not read the {what} of GPU {device}"), error)
}

impl GpuSource for NvmlSource {
    fn device_count(&mut self) -> Result<u32> {
        self.nvml.device_count().map_err(|e| Error::context("NVML could not count the GPUs", e))
    }
    fn utilization(&mut self, device: u32) -> Result<f64> {
        let handle = self.nvml.device_by_index(device).map_err(|e| nvml_error("handle", device, e))?;
        let rates = handle.utilization_rates().map_err(|e| nvml_error("utilization", device, e))?;
        Ok(f64::from(rates.gpu))
    }
    fn memory(&mut self, device: u32) -> Result<GpuMemory> {
        let handle = self.nvml.device_by_index(device).map_err(|e| nvml_error("handle", device, e))?;
        let info = handle.memory_info().map_err(|e| nvml_error("memory", device, e))?;
        Ok(GpuMemory { used: info.used, total: info.total })
    }
}

/// Where a GPU tracker reads from, until setup opens it.
pub(crate) enum SourceChoice {
    /// NVML, from this library path or the system's search path.
    Nvml(Option<std::path::PathBuf>),
    /// A source given by the user.
    Given(Box<dyn GpuSource>),
    /// Opened (or given up on) at setup.
    Taken,
}

impl std::fmt::Debug for SourceChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SourceChoice::Nvml(path) => f.debug_tuple("Nvml").field(path).finish(),
            SourceChoice::Given(_) => f.write_str("Given(..)"),
            SourceChoice::Taken => f.write_str("Taken"),
        }
    }
}

/// An opened source and the devices to track in it.
pub(crate) type Tracked = (Box<dyn GpuSource>, Vec<u32>);

/// Which GPUs a tracker reads and where it reads them from: what the GPU trackers' builders set
/// ([`gpu_selection_builders!`]), opened once at setup.
#[derive(Debug)]
pub(crate) struct GpuSelection {
    /// The devices given to `.devices(...)`; `None`: the visible ones.
    pub(crate) devices: Option<Vec<u32>>,
    /// The source, until setup opens it.
    pub(crate) choice: SourceChoice,
    /// The error that turned tracking off (opening the source at setup, or a reading later),
    /// kept with its cause for the tracker's `failure()`.
    pub(crate) failure: Option<Error>,
}

impl GpuSelection {
    /// The visible GPUs, through NVML from the system's search path.
    pub(crate) fn new() -> Self {
        GpuSelection { devices: None, choice: SourceChoice::Nvml(None), failure: None }
    }

    /// Open the source at `tracker`'s setup (see [`open`]): the source and the devices to track,
    /// or `None` after writing the note that tracking is off (and keeping the error, if one
    /// turned it off, in [`failure`](Self::failure)).
    pub(crate) fn open(&mut self, tracker: &str) -> Result<Option<Tracked>> {
        let choice = std::mem::replace(&mut self.choice, SourceChoice::Taken);
        Ok(match open(tracker, choice, self.devices.as_deref())? {
            Opened::Tracking(source, devices) => Some((source, devices)),
            Opened::Off(reason) => {
                note_off(tracker, &reason);
                None
            }
            Opened::Failed(error) => {
                note_off(tracker, &format!("no NVIDIA GPU ({error})"));
                self.failure = Some(error);
                None
            }
        })
    }

    /// Tracking of `tracker` is turned off by `error` (a reading failed): note it and keep it.
    pub(crate) fn turned_off_by(&mut self, tracker: &str, error: Error) {
        note_off(tracker, &error.to_string());
        self.failure = Some(error);
    }
}

/// The builder methods every GPU tracker has (`devices`, `nvml_library`, `source`), setting its
/// `selection: GpuSelection` field.
macro_rules! gpu_selection_builders {
    () => {
        /// Track these GPUs (NVML's indices). An index beyond the machine's GPUs is an error at setup.
        pub fn devices(mut self, devices: impl IntoIterator<Item = u32>) -> Self {
            self.selection.devices = Some(devices.into_iter().collect());
            self
        }
        /// Load NVML from this file instead of the system's search path.
        pub fn nvml_library(mut self, path: impl Into<std::path::PathBuf>) -> Self {
            self.selection.choice = $crate::track::gpu::SourceChoice::Nvml(Some(path.into()));
            self
        }
        /// Read from `source` instead of NVML (another vendor's library, a fake in tests).
        pub fn source(mut self, source: impl $crate::track::GpuSource) -> Self {
            self.selection.choice = $crate::track::gpu::SourceChoice::Given(Box::new(source));
            self
        }
    };
}
pub(crate) use gpu_selection_builders;

/// What opening a source at setup gave.
enum Opened {
    /// The source and the devices to track.
    Tracking(Box<dyn GpuSource>, Vec<u32>),
    /// No GPU to track, and why (written on stderr as a note).
    Off(String),
    /// The source could not be opened or could not count its devices: no GPU to track, because
    /// of this error (written on stderr as a note, and kept).
    Failed(Error),
}

/// Open the source and choose the devices: `devices` when given (an index beyond the source's
/// devices is an error), else those `CUDA_VISIBLE_DEVICES` names, else every device. No library,
/// no device or an empty `CUDA_VISIBLE_DEVICES` turns tracking off, with the reason.
fn open(tracker: &str, choice: SourceChoice, devices: Option<&[u32]>) -> Result<Opened> {
    let mut source: Box<dyn GpuSource> = match choice {
        SourceChoice::Nvml(path) => match NvmlSource::open_library(path.as_deref()) {
            Ok(source) => Box::new(source),
            Err(e) => return Ok(Opened::Failed(e)),
        },
        SourceChoice::Given(source) => source,
        SourceChoice::Taken => return Err(Error::msg(format!("{tracker}: set up twice"))),
    };
    let count = match source.device_count() {
        Ok(count) => count,
        Err(e) => return Ok(Opened::Failed(e)),
    };
    if count == 0 {
        return Ok(Opened::Off("no NVIDIA GPU (the driver reports none)".into()));
    }
    let chosen = match devices {
        Some(devices) => {
            if let Some(&bad) = devices.iter().find(|&&d| d >= count) {
                return Err(Error::invalid(format!(
                    "{tracker}: GPU {bad} does not exist; this machine has {count} (0 to {})",
                    count - 1
                )));
            }
            devices.to_vec()
        }
        None => match std::env::var("CUDA_VISIBLE_DEVICES") {
            Ok(env) => match visible_devices(&env) {
                Some(list) if list.is_empty() => {
                    return Ok(Opened::Off("no GPU visible (CUDA_VISIBLE_DEVICES is empty)".into()));
                }
                Some(list) if list.iter().all(|&d| d < count) => list,
                _ => {
                    crate::logging::warn!(bare:
                        "{tracker}: CUDA_VISIBLE_DEVICES={env} does not name GPUs by index: tracking all {count}; choose them with `.devices(...)`"
                    );
                    (0..count).collect()
                }
            },
            Err(_) => (0..count).collect(),
        },
    };
    if chosen.is_empty() {
        return Ok(Opened::Off("no GPU device given".into()));
    }
    Ok(Opened::Tracking(source, chosen))
}

/// The device indices of `CUDA_VISIBLE_DEVICES`; `None` when some entry is not an index (a UUID).
fn visible_devices(env: &str) -> Option<Vec<u32>> {
    let env = env.trim();
    if env.is_empty() {
        return Some(Vec::new());
    }
    env.split(',').map(|d| d.trim().parse().ok()).collect()
}

/// Write the note that tracking is off.
pub(crate) fn note_off(tracker: &str, reason: &str) {
    crate::logging::warn!(bare: "{tracker}: {reason}: GPU tracking off");
}
