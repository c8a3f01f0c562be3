//! Which outputs an average samples, how often, and the samples still on the device.

use std::borrow::Cow;

use burn::tensor::Tensor;

use crate::callback::PeriodSetting;
use crate::error::{Error, Result};
use crate::fetch::{Fetch, FetchKind, Fetched};

/// Sampled steps kept on the device before they are copied to the host without a report.
const MAX_PENDING_STEPS: usize = 1024;

/// The sampling shared by both averages: which outputs, how often, and the samples not yet on the
/// host.
#[derive(Debug)]
pub(super) struct Sampler {
    pub(super) owner: &'static str,
    pub(super) fetches: Vec<Fetch>,
    pub(super) period: PeriodSetting,
    /// One rank-1 tensor of one element per name per sampled step, step after step.
    pub(super) pending: Vec<Tensor<1>>,
}

impl Sampler {
    pub(super) fn new<S: Into<String>>(owner: &'static str, names: impl IntoIterator<Item = S>) -> Sampler {
        let fetches = names
            .into_iter()
            .map(|n| Fetch { name: Cow::Owned(n.into()), kind: FetchKind::Device })
            .collect();
        Sampler { owner, fetches, period: PeriodSetting::new().every_k_steps(1), pending: Vec::new() }
    }

    pub(super) fn names(&self) -> impl Iterator<Item = &str> {
        self.fetches.iter().map(|f| &*f.name)
    }

    pub(super) fn check(&self) -> Result<()> {
        let owner = self.owner;
        if self.fetches.is_empty() {
            return Err(Error::invalid(format!("{owner}: no output names given")));
        }
        for (i, fetch) in self.fetches.iter().enumerate() {
            if fetch.name.is_empty() {
                return Err(Error::invalid(format!("{owner}: an empty output name")));
            }
            if self.fetches[..i].iter().any(|f| f.name == fetch.name) {
                return Err(Error::invalid(format!("{owner}: output `{}` is named twice", fetch.name)));
            }
        }
        self.period.check(owner).map(|_| ())
    }

    #[inline]
    pub(super) fn due(&self, step: u64) -> bool {
        self.period.period().steps_divide(step)
    }

    /// Keep this step's values (device tensors, no transfer) if the step is sampled. Returns
    /// whether enough samples wait to be folded.
    pub(super) fn sample(&mut self, values: &Fetched<'_>, global_step: u64) -> Result<bool> {
        if !self.due(global_step) {
            return Ok(false);
        }
        for fetch in &self.fetches {
            let tensor = values.device(&fetch.name)?;
            if tensor.num_elements() != 1 {
                return Err(Error::fetch(format!(
                    "{}: `{}` has shape {:?}, not a scalar",
                    self.owner,
                    fetch.name,
                    tensor.dims()
                )));
            }
            self.pending.push(tensor.flat());
        }
        Ok(self.pending.len() >= MAX_PENDING_STEPS * self.fetches.len())
    }

    /// The values waiting on the device, step after step (one value per name per step), in one
    /// transfer; `take` empties the waiting list.
    pub(super) fn host_values(&mut self, take: bool) -> Vec<f64> {
        let pending = if take { std::mem::take(&mut self.pending) } else { self.pending.clone() };
        values_of(pending)
    }
}

pub(super) fn values_of(mut pending: Vec<Tensor<1>>) -> Vec<f64> {
    let tensor = match pending.len() {
        0 => return Vec::new(),
        1 => pending.pop().expect("one tensor"),
        _ => Tensor::cat(pending, 0),
    };
    tensor.into_data().iter::<f32>().map(f64::from).collect()
}
