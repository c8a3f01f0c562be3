//! Which device trains: the CPU backend by default (burn-flex), a GPU with one of the GPU
//! features (`wgpu`, `vulkan`, `metal`, `cuda`, `rocm`). Devices come with autodiff on, ready
//! for training; [`by_name`] turns a command-line word (`cpu`, `wgpu`, `cuda:1`) into one.

use burn::tensor::Device;

use crate::error::{Error, Result};

/// The CPU device of this build's CPU backend (burn-flex; burn-ndarray with only the `ndarray`
/// feature), with autodiff.
#[cfg(any(feature = "flex", feature = "ndarray"))]
pub fn cpu() -> Device {
    #[cfg(feature = "flex")]
    let device = Device::flex();
    #[cfg(all(feature = "ndarray", not(feature = "flex")))]
    #[allow(deprecated)]
    let device = Device::ndarray();
    device.autodiff()
}

/// The best GPU wgpu finds (Vulkan, Metal or DX12; Mesa's llvmpipe where there is no GPU), with
/// autodiff.
#[cfg(feature = "wgpu")]
pub fn wgpu() -> Device {
    Device::wgpu(burn::tensor::DeviceKind::DefaultDevice).autodiff()
}

/// The best GPU wgpu finds through Vulkan only (SPIR-V kernels where the driver allows), with
/// autodiff.
#[cfg(feature = "vulkan")]
pub fn vulkan() -> Device {
    Device::vulkan(burn::tensor::DeviceKind::DefaultDevice).autodiff()
}

/// The best GPU wgpu finds through Metal only (native MSL kernels), with autodiff.
#[cfg(feature = "metal")]
pub fn metal() -> Device {
    Device::metal(burn::tensor::DeviceKind::DefaultDevice).autodiff()
}

/// CUDA device `index`, with autodiff.
#[cfg(feature = "cuda")]
pub fn cuda(index: usize) -> Device {
    Device::cuda(index).autodiff()
}

/// ROCm (HIP) device `index`, with autodiff.
#[cfg(feature = "rocm")]
pub fn rocm(index: usize) -> Device {
    Device::rocm(index).autodiff()
}

/// Whether `device` is a CUDA device (with or without autodiff).
#[cfg(feature = "cuda")]
pub(crate) fn is_cuda(device: &Device) -> bool {
    use burn_dispatch::{DispatchDevice, devices::CubeDevice};
    matches!(device.clone().without_autodiff().as_dispatch(), DispatchDevice::Cube(CubeDevice::Cuda(_)))
}

/// Whether `device` is a ROCm (HIP) device (with or without autodiff).
#[cfg(feature = "rocm")]
fn is_rocm(device: &Device) -> bool {
    use burn_dispatch::{DispatchDevice, devices::CubeDevice};
    matches!(device.clone().without_autodiff().as_dispatch(), DispatchDevice::Cube(CubeDevice::Hip(_)))
}

/// Whether `device` computes on the calling thread, each operation done when it returns: this
/// build's CPU backend (burn-flex, burn-ndarray). A GPU's operations are queued on a stream and
/// run later.
pub(crate) fn is_synchronous(device: &Device) -> bool {
    #[cfg(any(feature = "flex", feature = "ndarray"))]
    let host = *device == cpu();
    #[cfg(not(any(feature = "flex", feature = "ndarray")))]
    let host = {
        let _ = device;
        false
    };
    host
}

/// Whether reading a tensor of `device` back waits for the device inside the read future's
/// first poll: cubecl's CUDA and HIP runtimes wait on the copy's fence there, so a deferred
/// read on them that is done at its first poll was not free (the trainer spaces such reads
/// out; see [`Trainer::deferred_read_interval`](crate::trainer::Trainer::deferred_read_interval)).
pub(crate) fn reads_wait_in_poll(device: &Device) -> bool {
    #[cfg(feature = "cuda")]
    if is_cuda(device) {
        return true;
    }
    #[cfg(feature = "rocm")]
    if is_rocm(device) {
        return true;
    }
    let _ = device;
    false
}

/// Every device name [`by_name`] understands (`x:N` standing for every device number), the
/// feature that builds it, and whether this build has it.
const NAMES: [(&str, &str, bool); 8] = [
    ("cpu", "flex", cfg!(any(feature = "flex", feature = "ndarray"))),
    ("wgpu", "wgpu", cfg!(feature = "wgpu")),
    ("vulkan", "vulkan", cfg!(feature = "vulkan")),
    ("metal", "metal", cfg!(feature = "metal")),
    ("cuda", "cuda", cfg!(feature = "cuda")),
    ("cuda:N", "cuda", cfg!(feature = "cuda")),
    ("rocm", "rocm", cfg!(feature = "rocm")),
    ("rocm:N", "rocm", cfg!(feature = "rocm")),
];

/// The device named `name`: `"cpu"`; `"wgpu"`, `"vulkan"`, `"metal"`; `"cuda"` or `"cuda:N"`
/// (device N, 0 by default); `"rocm"` or `"rocm:N"`. Each GPU name needs the feature of the same
/// name; a name this build lacks is an error that says which feature builds it and what this
/// build has.
pub fn by_name(name: &str) -> Result<Device> {
    let (backend, index) = match name.split_once(':') {
        Some((backend, index)) => {
            let index = index.parse::<usize>().map_err(|_| {
                Error::invalid(format!(
                    "device `{name}`: `{index}` is not a device number; write `{backend}:0`, `{backend}:1`, ..."
                ))
            })?;
            if !matches!(backend, "cuda" | "rocm") {
                return Err(Error::invalid(format!(
                    "device `{name}`: only `cuda` and `rocm` take a device number; write `{backend}`"
                )));
            }
            (backend, Some(index))
        }
        None => (name, None),
    };
    let _ = index;
    match backend {
        #[cfg(any(feature = "flex", feature = "ndarray"))]
        "cpu" => Ok(cpu()),
        #[cfg(feature = "wgpu")]
        "wgpu" => Ok(wgpu()),
        #[cfg(feature = "vulkan")]
        "vulkan" => Ok(vulkan()),
        #[cfg(feature = "metal")]
        "metal" => Ok(metal()),
        #[cfg(feature = "cuda")]
        "cuda" => Ok(cuda(index.unwrap_or(0))),
        #[cfg(feature = "rocm")]
        "rocm" => Ok(rocm(index.unwrap_or(0))),
        _ => {
            let has = available().join(", ");
            match NAMES.iter().find(|(known, _, _)| known.split(':').next() == Some(backend)) {
                Some((_, feature, _)) => Err(Error::invalid(format!(
                    "device `{name}` needs burn-stoker's `{feature}` feature, which this build lacks; this build has: {has}"
                ))),
                None => Err(Error::invalid(format!(
                    "unknown device `{name}`; the names are {}; this build has: {has}",
                    every_name()
                ))),
            }
        }
    }
}

/// The device names this build supports (`cuda:N` standing for every CUDA device).
pub fn available() -> Vec<&'static str> {
    NAMES.iter().filter(|(_, _, built)| *built).map(|(name, _, _)| *name).collect()
}

/// Every name, a numbered one folded into its backend's: `cpu, wgpu, ..., cuda[:N], rocm[:N]`.
fn every_name() -> String {
    let numbered = |backend: &str| NAMES.iter().any(|(name, _, _)| name.strip_suffix(":N") == Some(backend));
    let names = NAMES.iter().filter(|(name, _, _)| !name.ends_with(":N"));
    let names =
        names.map(|(name, _, _)| if numbered(name) { format!("{name}[:N]") } else { name.to_string() });
    names.collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_this_build_lacks_says_which_feature_builds_it() {
        #[cfg(not(feature = "cuda"))]
        {
            let error = by_name("cuda:1").unwrap_err().to_string();
            assert!(error.contains("`cuda` feature"), "{error}");
        }
        #[cfg(not(feature = "metal"))]
        {
            let error = by_name("metal").unwrap_err().to_string();
            assert!(error.contains("`metal` feature"), "{error}");
        }
        let error = by_name("tpu").unwrap_err().to_string();
        assert!(error.contains("unknown device `tpu`") && error.contains("cpu"), "{error}");
        assert!(error.contains("the names are cpu, wgpu, vulkan, metal, cuda[:N], rocm[:N];"), "{error}");
    }

    #[test]
    fn a_device_number_is_checked() {
        let error = by_name("cuda:x").unwrap_err().to_string();
        assert!(error.contains("`x` is not a device number"), "{error}");
        let error = by_name("wgpu:1").unwrap_err().to_string();
        assert!(error.contains("only `cuda` and `rocm` take a device number"), "{error}");
    }

    #[test]
    fn the_cpu_is_always_there() {
        assert!(available().contains(&"cpu"));
        assert!(by_name("cpu").is_ok());
    }
}
