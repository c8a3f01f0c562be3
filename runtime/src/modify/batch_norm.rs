//! neon's `BatchNormTuneCallback`: re-estimate every batch norm's running statistics over a
//! tuning set.

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::tensor::Tensor;

use crate::callback::{Callback, Context};
use crate::error::{Error, Result};

/// The field names and the container type under which burn's `BatchNorm` keeps its statistics.
const MEAN: &str = "running_mean";
const VAR: &str = "running_var";
const BATCH_NORM: &str = "Struct:BatchNorm";

/// Below this, a layer's momentum is taken for 0 (its statistics never move).
const MIN_MOMENTUM: f64 = 1e-6;

/// neon's `BatchNormTuneCallback`: at its trigger (every epoch's end by default, neon's
/// `epoch_freq = 1`; wrap it in [`PeriodicTrigger`](crate::trigger::PeriodicTrigger) for another
/// period) it forgets the running mean and variance of every `burn::nn::BatchNorm` in the model
/// and estimates them again over the tuning batches: `forward` runs the model on each batch in
/// training mode (on the trainer's autodiff device, so burn's layers compute batch statistics),
/// and each layer ends with the **mean and the (population) variance of its inputs over all the
/// tuning batches**, as if the whole set were one batch (exact when the batches have the same
/// size; each batch counts as one). The weights do not change; nothing runs at a step.
///
/// How: neon sets each layer's momentum to `k / (k + 1)` at the k-th batch so that the layer
/// itself keeps the cumulative average. burn's `BatchNorm` keeps its momentum in a plain field
/// that no module visitor reaches, so this callback reads it off the layer instead: it zeroes the
/// statistics before each batch, reads what the forward pass wrote (`momentum x` the batch's
/// mean and variance) and divides by the momentum, which it measured once by running the first
/// batch twice (from statistics 0 and from statistics 1: the difference is `1 - momentum`). So
/// the tuning costs `batches + 1` forward passes, a few device-to-host reads (one per statistic,
/// for the momenta), and ends by writing the averages into the layers.
///
/// Differs from neon in the variance: neon averages the per-batch variances and multiplies by
/// `n / (n - 1)` over the `n` batches; here the variance adds the spread of the batch means
/// (`mean(var_k + mean_k²) - mean²`), the variance of the whole set. Errors: no tuning batch, a
/// model with no batch norm, a layer whose statistics do not move in `forward` (momentum 0, a
/// layer not in training mode, or a `forward` that does not run it).
///
/// In data-parallel training it runs on every rank, on the same tuning set, so that every
/// replica ends with the same statistics.
///
/// ```no_run
/// use burn::nn::{BatchNorm, BatchNormConfig};
/// use burn::tensor::Tensor;
/// use burn_stoker::modify::BatchNormTune;
///
/// # let device = burn_stoker::device::cpu();
/// let tune_set: Vec<Tensor<2>> = vec![Tensor::zeros([8, 4], &device)];
/// let tune = BatchNormTune::new(tune_set, |model: &BatchNorm, x: Tensor<2>| {
///     model.forward(x);
/// });
/// # let _ = tune;
/// ```
#[derive(Debug, Clone)]
pub struct BatchNormTune<B, F> {
    batches: Vec<B>,
    forward: F,
}
crate::kind::kind!(BatchNormTune<B, F>);

impl<B, F> BatchNormTune<B, F> {
    /// Tune over `batches` (usually a part of the training set), running `forward(model, batch)`
    /// on each.
    pub fn new(batches: Vec<B>, forward: F) -> Self {
        BatchNormTune { batches, forward }
    }
}

impl<B: Clone, F> BatchNormTune<B, F> {
    /// Re-estimate `model`'s batch-norm statistics now (what the callback does at its trigger).
    pub fn tune<M: Module>(&mut self, mut model: M) -> Result<M>
    where
        F: FnMut(&M, B),
    {
        let Some(first) = self.batches.first().cloned() else {
            return Err(Error::invalid("BatchNormTune: no tuning batch; give it at least one"));
        };
        let n = self.batches.len();
        // The first batch from statistics 0, then from statistics 1: r0 = m b, r1 = (1 - m) + m b.
        model = set_stats(model, SetStats::Fill(0.0));
        (self.forward)(&model, first.clone());
        let zero_start = read_stats(&model);
        if zero_start.is_empty() {
            return Err(Error::invalid(
                "BatchNormTune: the model has no burn::nn::BatchNorm (no `running_mean` / `running_var` of a `BatchNorm` found)",
            ));
        }
        model = set_stats(model, SetStats::Fill(1.0));
        (self.forward)(&model, first);
        let one_start = read_stats(&model);
        let mut momenta = Vec::with_capacity(zero_start.len());
        for (i, (r0, r1)) in zero_start.iter().zip(&one_start).enumerate() {
            let momentum = 1.0 - f64::from((r1.stat.clone() - r0.stat.clone()).mean().into_scalar::<f32>());
            if momentum.is_nan() || momentum <= MIN_MOMENTUM {
                return Err(Error::msg(format!(
                    "BatchNormTune: the statistics of batch norm #{} (in visiting order) did not move in `forward` (momentum {momentum:.3e}): is its momentum 0, is it out of training mode (`BatchNorm::training`), or does `forward` not run it?",
                    i / 2 + 1
                )));
            }
            momenta.push(momentum);
        }
        // Sums over the batches: of the means for a mean, of `var + mean²` for a variance.
        let mut means: Vec<Tensor<1>> = Vec::with_capacity(momenta.len());
        let mut sums = accumulate(None, &zero_start, &momenta, &mut means)?;
        for batch in self.batches[1..].iter().cloned() {
            model = set_stats(model, SetStats::Fill(0.0));
            (self.forward)(&model, batch);
            let stats = read_stats(&model);
            sums = accumulate(Some(sums), &stats, &momenta, &mut means)?;
        }
        let n = n as f64;
        let mut finals = Vec::with_capacity(sums.len());
        for (i, sum) in sums.into_iter().enumerate() {
            let value = match zero_start[i].kind {
                Kind::Mean => sum / n,
                Kind::Var => {
                    let mean = finals_mean(&finals, i)?;
                    (sum / n - mean.clone() * mean).clamp_min(0.0)
                }
            };
            finals.push(value);
        }
        Ok(set_stats(model, SetStats::Values(finals.into_iter())))
    }
}

impl<M, B, F> Callback<M> for BatchNormTune<B, F>
where
    M: Module,
    B: Clone,
    F: FnMut(&M, B),
{
    /// Every rank: each replica's statistics are re-estimated on the same tuning set.
    fn chief_only(&self) -> bool {
        false
    }

    fn setup(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        if self.batches.is_empty() {
            return Err(Error::invalid("BatchNormTune: no tuning batch; give it at least one"));
        }
        Ok(())
    }

    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let model = ctx.model_mut();
        let tuned = self.tune(model.clone())?;
        *model = tuned;
        Ok(())
    }
}

/// The mean already computed for the variance at `i` (its layer's `running_mean`, just before).
fn finals_mean(finals: &[Tensor<1>], i: usize) -> Result<Tensor<1>> {
    i.checked_sub(1).and_then(|j| finals.get(j)).cloned().ok_or_else(|| {
        Error::msg(
            "BatchNormTune: a batch norm's `running_var` came before its `running_mean` in visiting order",
        )
    })
}

/// Adds one batch's statistics (read after a forward from statistics 0: `momentum x` the batch's
/// own) to the sums. `means` is scratch space for the batch's means.
fn accumulate(
    sums: Option<Vec<Tensor<1>>>,
    stats: &[Stat],
    momenta: &[f64],
    means: &mut Vec<Tensor<1>>,
) -> Result<Vec<Tensor<1>>> {
    if stats.len() != momenta.len() {
        return Err(Error::msg(format!(
            "BatchNormTune: the model's batch norms changed during the tuning ({} statistics, then {})",
            momenta.len(),
            stats.len()
        )));
    }
    means.clear();
    let mut terms = Vec::with_capacity(stats.len());
    for (i, stat) in stats.iter().enumerate() {
        let own = stat.stat.clone() / momenta[i];
        let term = match stat.kind {
            Kind::Mean => {
                means.push(own.clone());
                own
            }
            Kind::Var => {
                let mean = means.last().cloned().ok_or_else(|| {
                    Error::msg("BatchNormTune: a batch norm's `running_var` came before its `running_mean` in visiting order")
                })?;
                own + mean.clone() * mean
            }
        };
        terms.push(term);
    }
    Ok(match sums {
        None => terms,
        Some(sums) => sums.into_iter().zip(terms).map(|(s, t)| s + t).collect(),
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Mean,
    Var,
}

/// One statistic of one batch norm, flattened.
struct Stat {
    kind: Kind,
    stat: Tensor<1>,
}

/// Which batch-norm statistic a parameter is, from the innermost module entered.
fn kind_of(path: &[(String, String)]) -> Option<Kind> {
    match path.last() {
        Some((name, container)) if container == BATCH_NORM && name == MEAN => Some(Kind::Mean),
        Some((name, container)) if container == BATCH_NORM && name == VAR => Some(Kind::Var),
        _ => None,
    }
}

/// Applies the pending updates of `model`'s running states: burn's `RunningState` keeps a
/// forward's update aside until its next read, and `valid` reads them all (its copy is dropped).
fn sync<M: Module>(model: &M) {
    drop(model.valid());
}

/// Every batch norm's statistics, in visiting order, after their pending updates are applied.
fn read_stats<M: Module>(model: &M) -> Vec<Stat> {
    struct Read {
        path: Vec<(String, String)>,
        stats: Vec<Stat>,
    }
    impl ModuleVisitor for Read {
        fn enter_module(&mut self, name: &str, container_type: &str) {
            self.path.push((name.to_string(), container_type.to_string()));
        }
        fn exit_module(&mut self, _name: &str, _container_type: &str) {
            self.path.pop();
        }
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            if let Some(kind) = kind_of(&self.path) {
                let value = param.val();
                let n = value.shape().num_elements();
                self.stats.push(Stat { kind, stat: value.reshape([n]) });
            }
        }
    }
    sync(model);
    let mut read = Read { path: Vec::new(), stats: Vec::new() };
    model.visit(&mut read);
    read.stats
}

/// What [`set_stats`] writes into the batch norms' statistics.
enum SetStats {
    /// This value everywhere.
    Fill(f32),
    /// These tensors, in visiting order.
    Values(std::vec::IntoIter<Tensor<1>>),
}

/// Writes every batch norm's statistics, after applying their pending updates (which would
/// otherwise overwrite what is written here at the next forward).
fn set_stats<M: Module>(model: M, set: SetStats) -> M {
    struct Set {
        set: SetStats,
        path: Vec<(String, String)>,
    }
    impl ModuleMapper for Set {
        fn enter_module(&mut self, name: &str, container_type: &str) {
            self.path.push((name.to_string(), container_type.to_string()));
        }
        fn exit_module(&mut self, _name: &str, _container_type: &str) {
            self.path.pop();
        }
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
            if kind_of(&self.path).is_none() {
                return param;
            }
            let value = match &mut self.set {
                SetStats::Fill(v) => Some(param.val().zeros_like().add_scalar(*v)),
                SetStats::Values(values) => values.next().map(|v| v.reshape(param.val().shape())),
            };
            match value {
                Some(value) => param.map(|_| value),
                None => param,
            }
        }
    }
    sync(&model);
    model.map(&mut Set { set, path: Vec::new() })
}
