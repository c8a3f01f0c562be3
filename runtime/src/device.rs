//! Which device trains: the CPU backend by default (burn-flex), a GPU through wgpu with the
//! `wgpu` feature. Devices come with autodiff on, ready for training.

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

/// The device named `name`: `"cpu"`, or `"wgpu"` when built with the `wgpu` feature.
pub fn by_name(name: &str) -> Result<Device> {
    match name {
        #[cfg(any(feature = "flex", feature = "ndarray"))]
        "cpu" => Ok(cpu()),
        #[cfg(feature = "wgpu")]
        "wgpu" => Ok(wgpu()),
        _ => Err(Error::msg(format!("unknown device `{name}`; this build has: {}", available().join(", ")))),
    }
}

/// The device names this build supports.
pub fn available() -> Vec<&'static str> {
    let mut names = Vec::new();
    if cfg!(any(feature = "flex", feature = "ndarray")) {
        names.push("cpu");
    }
    if cfg!(feature = "wgpu") {
        names.push("wgpu");
    }
    names
}
