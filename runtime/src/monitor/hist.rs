//! Histograms of the model's parameters (neon's `HistCallback`), written to TensorBoard.

use std::borrow::Cow;

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::Tensor;

use crate::callback::{Callback, Context, PeriodSetting};
use crate::error::{Error, Result, check_setting};

/// Puts a histogram of each of the model's weight tensors to the monitors every `k` epochs
/// (neon's `HistCallback`); [`TensorBoardWriter`](crate::monitor::TensorBoardWriter) writes them as
/// TensorBoard histograms (the *Histograms* and *Distributions* tabs).
///
/// - **Which parameters**: those whose path (burn's field names joined with `.`, e.g.
///   `fc1.weight`) contains one of the [`filter`](Self::filter) keys; by default
///   `["weight", "bias"]`, as neon's default `filter_key=['W']` keeps both: neon's `Bias` layer
///   holds its values in `W` too (a layer's own, as `Linear`'s weights), so the biases are in
///   neon's histograms; the normalizations' `gamma` and `beta` are not (nor are they in neon's).
///   [`all_parameters`](Self::all_parameters) takes every float parameter.
/// - **Names**: `<prefix><path>`, prefix `"param/"` by default ([`prefix`](Self::prefix)), so
///   TensorBoard groups them: `param/fc1.weight`.
/// - **Buckets**: 64 equal buckets between each tensor's minimum and maximum (neon bins into 64
///   too, on a log scale for its own viewer; TensorBoard shows any bucket layout).
///   [`buckets`](Self::buckets) changes the count. Non-finite values are left out of the
///   histogram.
/// - **When**: at the end of every epoch whose number is a multiple of `k`
///   ([`every_k_epochs`](Self::every_k_epochs), 1 by default, neon's `epoch_freq`), and whenever
///   its `trigger` runs (under [`PeriodicTrigger`](crate::trigger::PeriodicTrigger), e.g. every `n` steps,
///   neon's `plot_per_mini`). Nothing runs on the other steps; when it runs, every selected
///   parameter reaches the host in **one** transfer, and the histograms are computed on the
///   training thread (a pass over the values).
/// - Deliberate differences: neon writes HDF5 for its `nvis` tool; this writes TensorBoard.
///
/// ```
/// use burn_stoker::monitor::Hist;
/// // The weights and the biases, 32 buckets each, every 5 epochs.
/// let hist = Hist::new().every_k_epochs(5).all_parameters().buckets(32);
/// # let _ = hist;
/// ```
#[derive(Debug, Clone)]
pub struct Hist {
    period: PeriodSetting,
    filter: Option<Vec<String>>,
    prefix: String,
    buckets: usize,
}
crate::kind::kind!(Hist);

impl Default for Hist {
    fn default() -> Self {
        Hist::new()
    }
}

impl Hist {
    /// The weights and biases (parameters whose path contains `weight` or `bias`), 64 buckets,
    /// every epoch.
    pub fn new() -> Self {
        Hist {
            period: PeriodSetting::new().every_k_epochs(1),
            filter: Some(default_filter()),
            prefix: "param/".into(),
            buckets: 64,
        }
    }
    /// Every `k` epochs (1 by default).
    pub fn every_k_epochs(mut self, k: u64) -> Self {
        self.period = self.period.every_k_epochs(k);
        self
    }
    /// Only the parameters whose path contains one of `keys` (`["weight", "bias"]` by default).
    pub fn filter<S: Into<String>>(mut self, keys: impl IntoIterator<Item = S>) -> Self {
        self.filter = Some(keys.into_iter().map(Into::into).collect());
        self
    }
    /// Every float parameter.
    pub fn all_parameters(mut self) -> Self {
        self.filter = None;
        self
    }
    /// Name the histograms `<prefix><path>` (`"param/"` by default).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }
    /// The number of buckets (64 by default).
    pub fn buckets(mut self, buckets: usize) -> Self {
        self.buckets = buckets;
        self
    }

    fn put<M: Module>(&self, ctx: &mut Context<'_, M>) -> Result<()> {
        let parameters = selected_parameters(ctx.model(), self.filter.as_deref());
        let monitors = ctx.monitors();
        for (name, values) in &parameters {
            monitors.put_histogram(&format!("{}{name}", self.prefix), values, self.buckets);
        }
        Ok(())
    }
}

/// neon's default `filter_key=['W']` in burn's names: the weights and the biases (neon's `Bias`
/// layer keeps its values in `W`).
pub(crate) fn default_filter() -> Vec<String> {
    vec!["weight".into(), "bias".into()]
}

/// The float parameters of `model` whose path contains one of `filter`'s keys (every one
/// without a filter), with their values read to the host in **one** transfer, in visiting order.
pub(crate) fn selected_parameters<M: Module>(
    model: &M,
    filter: Option<&[String]>,
) -> Vec<(String, Vec<f32>)> {
    let mut collect = Collect { path: Vec::new(), filter, found: Vec::new() };
    model.visit(&mut collect);
    if collect.found.is_empty() {
        return Vec::new();
    }
    let lengths: Vec<usize> = collect.found.iter().map(|(_, t)| t.dims()[0]).collect();
    let (names, tensors): (Vec<String>, Vec<Tensor<1>>) = collect.found.into_iter().unzip();
    let values: Vec<f32> = Tensor::cat(tensors, 0).into_data().iter::<f32>().collect();
    let mut start = 0;
    names
        .into_iter()
        .zip(lengths)
        .map(|(name, len)| {
            start += len;
            (name, values[start - len..start].to_vec())
        })
        .collect()
}

/// Collects the selected float parameters, flattened and detached, with their paths.
struct Collect<'a> {
    path: Vec<String>,
    filter: Option<&'a [String]>,
    found: Vec<(String, Tensor<1>)>,
}

impl ModuleVisitor for Collect<'_> {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_string());
    }
    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let path = self.path.join(".");
        if self.filter.is_some_and(|keys| !keys.iter().any(|k| path.contains(k.as_str()))) {
            return;
        }
        let tensor = param.val().detach();
        let n: usize = tensor.dims().iter().product();
        if n > 0 {
            self.found.push((path, tensor.reshape([n])));
        }
    }
}

impl<M: Module> Callback<M> for Hist {
    fn name(&self) -> Cow<'static, str> {
        crate::kind::name_of::<Self>()
    }
    fn setup(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        self.period.check("Hist")?;
        check_setting(self.buckets != 0, "Hist", "buckets", "at least 1", 0)?;
        if self.filter.as_ref().is_some_and(|keys| keys.is_empty()) {
            return Err(Error::invalid("Hist: an empty filter selects no parameter (use all_parameters())"));
        }
        Ok(())
    }
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if self.period.period().epochs_divide(ctx.epoch_num()) {
            self.put(ctx)?;
        }
        Ok(())
    }
    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.put(ctx)
    }
}
