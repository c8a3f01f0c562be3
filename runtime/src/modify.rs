//! Callbacks that change the training step itself (fastai's state-changing callbacks): the loss
//! before backward ([`RnnRegularizer`]), the gradients before the optimizer ([`GradientClip`],
//! [`GradientAccumulation`]), the model between steps ([`RunOp`], tensorpack's `RunOp` and
//! `RunUpdateOps`).
//!
//! They use the events inside a step ([`Callback::before_backward`],
//! [`Callback::after_backward`]), which the trainer delivers only to callbacks that ask for them
//! ([`Callback::step_events`]); a run without such a callback pays nothing for them. Everything they
//! compute stays on the device: none of them syncs with the host.
//!
//! [`MixUp`] (fastai's `MixUp`) changes the batch before the step (`before_batch`) and the loss
//! before backward: a batch type opts in through [`MixUpBatch`].
//!
//! [`BatchNormTune`] (neon's `BatchNormTuneCallback`) changes the model between steps instead:
//! at its trigger it re-estimates the batch norms' running statistics over a tuning set.

mod batch_norm;

pub use batch_norm::BatchNormTune;

mod mixup;

pub use mixup::{Mix, MixUp, MixUpBatch};

mod run_op;

pub use run_op::{RunOp, RunUpdateOps};

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::Tensor;

use crate::callback::{Callback, Context, StepEvents, StepGradients, StepLoss};
use crate::error::{Error, Result, check_setting};
use crate::fetch::OutputTensor;

/// fastai's `RNNRegularizer`: adds activation regularization (AR) and temporal activation
/// regularization (TAR) to the loss before backward (fastai's `after_loss`).
///
/// - AR: `alpha * mean(dropped²)`, on the dropped-out output of the last RNN layer (fastai's
///   `out`);
/// - TAR: `beta * mean((raw[:, 1:] - raw[:, :-1])²)`, on the same layer's output before dropout
///   (fastai's `raw_out`), `[batch, seq, hidden]` with time on the second axis. It is skipped
///   for a sequence of length 1 and computed for a batch of one sample. fastai's test,
///   `len(h) > 1`, is on the batch's size instead: it skips TAR for a batch of one sample, and a
///   sequence of length 1 in a larger batch gives it the mean of an empty tensor, NaN.
///
/// Both are computed in the activations' float type (fastai casts them to float32 first).
///
/// The step puts both tensors as outputs (with the autodiff graph, so that the penalty trains) under
/// the names given to [`outputs`](Self::outputs) (`"dropped_out"` and `"raw_out"` by default);
/// fastai's `RNNCallback` takes them from the model's output tuple instead. A weight that is not 0
/// whose output is missing is an error naming it. The penalty is part of the loss that backward
/// differentiates and of the `"loss"` output (fastai adds it to `loss_grad` only, and records
/// `loss` without it; here `"loss"` is always what was minimized).
///
/// Validation: none, as fastai's (`run_valid=False`): it answers `false` to
/// [`takes_validation_batches`](Callback::takes_validation_batches), so the loss a validation
/// pass delivers (`after_loss`, during an `InferenceRunner`'s pass whose outputs hold one named
/// `loss`) never reaches it, and the pass need not put the activations.
///
/// In data-parallel training it runs on every rank: it changes the loss each replica differentiates.
///
/// ```
/// use burn_stoker::modify::RnnRegularizer;
/// let regularizer = RnnRegularizer::new(2.0, 1.0).outputs("dropped", "hidden");
/// # let _ = regularizer;
/// ```
#[derive(Debug, Clone)]
pub struct RnnRegularizer {
    alpha: f64,
    beta: f64,
    dropped: &'static str,
    raw: &'static str,
}
crate::kind::kind!(RnnRegularizer);

impl RnnRegularizer {
    /// AR with weight `alpha` and TAR with weight `beta`; a weight of 0 turns that term off.
    /// fastai's `RNNRegularizer` defaults to 0 and 0 (no penalty); its `TextLearner` passes 2 and 1.
    pub fn new(alpha: f64, beta: f64) -> Self {
        RnnRegularizer { alpha, beta, dropped: "dropped_out", raw: "raw_out" }
    }
    /// The names of the step outputs holding the dropped-out and the raw activations.
    pub fn outputs(mut self, dropped: &'static str, raw: &'static str) -> Self {
        self.dropped = dropped;
        self.raw = raw;
        self
    }

    fn activations(&self, loss: &StepLoss<'_>, name: &str) -> Result<Tensor<3>> {
        match loss.output(name) {
            Some(OutputTensor::Rank3(tensor)) => Ok(tensor.clone()),
            Some(other) => Err(Error::fetch(format!(
                "RnnRegularizer: the output `{name}` has rank {}, expected [batch, seq, hidden] (rank 3)",
                other.rank()
            ))),
            None => Err(Error::fetch(format!(
                "RnnRegularizer: the step put no output `{name}`; put the RNN's activations with `step.output(\"{name}\", tensor)`"
            ))),
        }
    }
}

impl<M> Callback<M> for RnnRegularizer {
    /// Every rank: it changes the loss each replica differentiates.
    fn chief_only(&self) -> bool {
        false
    }
    fn step_events(&self) -> StepEvents {
        StepEvents::LOSS
    }
    /// None: fastai's `run_valid = False`, the validation loss has no penalty.
    fn takes_validation_batches(&self) -> bool {
        false
    }
    fn before_backward(&mut self, _ctx: &mut Context<'_, M>, loss: &StepLoss<'_>) -> Result<()> {
        let mut penalty: Option<Tensor<1>> = None;
        if self.alpha != 0.0 {
            let dropped = self.activations(loss, self.dropped)?;
            penalty = Some(dropped.powi_scalar(2).mean().mul_scalar(self.alpha));
        }
        if self.beta != 0.0 {
            let raw = self.activations(loss, self.raw)?;
            let [batch, seq, hidden] = raw.dims();
            if seq > 1 {
                let later = raw.clone().slice([0..batch, 1..seq, 0..hidden]);
                let earlier = raw.slice([0..batch, 0..seq - 1, 0..hidden]);
                let tar = (later - earlier).powi_scalar(2).mean().mul_scalar(self.beta);
                penalty = Some(match penalty {
                    Some(ar) => ar + tar,
                    None => tar,
                });
            }
        }
        if let Some(penalty) = penalty {
            loss.update(|l| l + penalty);
        }
        Ok(())
    }
}

/// Clips the gradients before the optimizer (fastai's `GradientClip`, PyTorch's
/// `clip_grad_norm_`): by default by their **global** L2 norm over every parameter, scaled by
/// `min(1, max_norm / (norm + 1e-6))`; or each component to `[-v, v]` with
/// [`by_value`](Self::by_value).
///
/// The norm is computed on the device (no sync). burn's optimizers also clip, per parameter
/// tensor (`with_grad_clipping`); this one clips the whole gradient as one vector, which keeps its
/// direction.
///
/// In data-parallel training it runs on every rank: it changes the gradients each replica applies.
///
/// ```
/// use burn_stoker::modify::GradientClip;
/// let clip = GradientClip::new(1.0);
/// let by_value = GradientClip::by_value(0.5);
/// # let _ = (clip, by_value);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[doc(alias = "gradient_clip_val")]
#[doc(alias = "global_clipnorm")]
pub struct GradientClip {
    limit: f32,
    by_value: bool,
}
crate::kind::kind!(GradientClip);

impl GradientClip {
    /// Clip the global norm to `max_norm` (fastai's default is 1.0).
    pub fn new(max_norm: f32) -> Self {
        GradientClip { limit: max_norm, by_value: false }
    }
    /// Clip every component to `[-value, value]`.
    pub fn by_value(value: f32) -> Self {
        GradientClip { limit: value, by_value: true }
    }
}

/// The squared L2 norm of every gradient of a module's float parameters, summed on the device.
struct SquaredNorm<'a> {
    grads: &'a GradientsParams,
    sum: Option<Tensor<1>>,
}

impl ModuleVisitor for SquaredNorm<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if let Some(grad) = self.grads.get::<D>(param.id) {
            let squares = grad.powi_scalar(2).sum();
            self.sum = Some(match self.sum.take() {
                Some(sum) => sum + squares,
                None => squares,
            });
        }
    }
}

/// Applies a function to every gradient of a module's float parameters.
struct MapGrads<'a, F> {
    grads: &'a mut GradientsParams,
    f: F,
}

/// A function of one gradient tensor of any rank.
trait GradFn {
    fn apply<const D: usize>(&self, grad: Tensor<D>) -> Tensor<D>;
}

impl<F: GradFn> ModuleVisitor for MapGrads<'_, F> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if let Some(grad) = self.grads.remove::<D>(param.id) {
            self.grads.register::<D>(param.id, self.f.apply(grad));
        }
    }
}

struct Scale(Tensor<1>);

impl GradFn for Scale {
    fn apply<const D: usize>(&self, grad: Tensor<D>) -> Tensor<D> {
        grad * self.0.clone().unsqueeze::<D>()
    }
}

struct MulScalar(f32);

impl GradFn for MulScalar {
    fn apply<const D: usize>(&self, grad: Tensor<D>) -> Tensor<D> {
        grad.mul_scalar(self.0)
    }
}

struct Clamp(f32);

impl GradFn for Clamp {
    fn apply<const D: usize>(&self, grad: Tensor<D>) -> Tensor<D> {
        grad.clamp(-self.0, self.0)
    }
}

/// A zero gradient for every parameter that takes gradients (what fastai's `.grad` holds after
/// its `zero_grad`), on the device burn keeps gradients on.
pub(crate) struct ZeroGrads<'a> {
    pub(crate) grads: &'a mut GradientsParams,
}

impl ModuleVisitor for ZeroGrads<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let value = param.val();
        if value.is_require_grad() {
            self.grads.register::<D>(param.id, value.inner().zeros_like());
        }
    }
}

/// Adds a second set of gradients into the first, parameter by parameter.
pub(crate) struct AddGrads<'a> {
    pub(crate) sum: &'a mut GradientsParams,
    pub(crate) new: GradientsParams,
}

impl ModuleVisitor for AddGrads<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let Some(new) = self.new.remove::<D>(param.id) else { return };
        let sum = match self.sum.remove::<D>(param.id) {
            Some(sum) => sum + new,
            None => new,
        };
        self.sum.register::<D>(param.id, sum);
    }
}

impl<M: Module> Callback<M> for GradientClip {
    /// Every rank: it changes the gradients each replica applies.
    fn chief_only(&self) -> bool {
        false
    }
    fn name(&self) -> std::borrow::Cow<'static, str> {
        crate::kind::detailed::<Self>(if self.by_value { "value" } else { "norm" })
    }
    fn setup(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        let valid = self.limit.is_finite() && self.limit > 0.0;
        check_setting(valid, "GradientClip", "the limit", "positive and finite", self.limit)?;
        Ok(())
    }
    fn step_events(&self) -> StepEvents {
        StepEvents::GRADIENTS
    }
    fn after_backward(&mut self, ctx: &mut Context<'_, M>, grads: &StepGradients) -> Result<()> {
        let model = ctx.model();
        let limit = self.limit;
        let by_value = self.by_value;
        grads.update(|mut grads| {
            if by_value {
                model.visit(&mut MapGrads { grads: &mut grads, f: Clamp(limit) });
                return grads;
            }
            let mut norm = SquaredNorm { grads: &grads, sum: None };
            model.visit(&mut norm);
            let Some(squared) = norm.sum else { return grads };
            let scale = squared.sqrt().add_scalar(1e-6).recip().mul_scalar(limit).clamp_max(1.0);
            model.visit(&mut MapGrads { grads: &mut grads, f: Scale(scale) });
            grads
        });
        Ok(())
    }
}

/// Accumulates the gradients of `k` consecutive steps and runs the optimizer once with them
/// (fastai's `GradientAccumulation`, Lightning's `accumulate_grad_batches`): a batch `k` times
/// larger than memory allows.
///
/// Every batch is a step for the counters and the other callbacks; the optimizer runs at the
/// steps where `local_step` (1-based) is a multiple of `k`, and at the last step of each epoch
/// with what has accumulated (Lightning's behaviour). By default the optimizer gets the **mean** of
/// the accumulated gradients, which for a mean loss equals one step on the `k` batches together;
/// [`sum`](Self::sum) gives the sum instead (fastai's behaviour).
///
/// A checkpoint written in the middle of a window (an interrupt) does not hold the partial sum:
/// the resumed run starts that window again from the resumed step. Checkpoints at epoch ends
/// lose nothing.
///
/// In data-parallel training it runs on every rank: it decides when each replica's optimizer runs.
///
/// ```
/// use burn_stoker::modify::GradientAccumulation;
/// let accumulate = GradientAccumulation::new(4);
/// # let _ = accumulate;
/// ```
#[derive(Debug)]
#[doc(alias = "accumulate_grad_batches")]
#[doc(alias = "grads_accumulation")]
pub struct GradientAccumulation {
    k: u64,
    mean: bool,
    sum: Option<GradientsParams>,
    count: u64,
}
crate::kind::kind!(GradientAccumulation);

impl GradientAccumulation {
    /// Run the optimizer every `k` steps (at least 1).
    pub fn new(k: u64) -> Self {
        GradientAccumulation { k: k.max(1), mean: true, sum: None, count: 0 }
    }
    /// Give the optimizer the sum of the gradients instead of their mean.
    pub fn sum(mut self) -> Self {
        self.mean = false;
        self
    }
}

impl<M: Module> Callback<M> for GradientAccumulation {
    /// Every rank: it decides when each replica's optimizer runs.
    fn chief_only(&self) -> bool {
        false
    }
    fn name(&self) -> std::borrow::Cow<'static, str> {
        crate::kind::detailed::<Self>(self.k)
    }
    fn step_events(&self) -> StepEvents {
        StepEvents::GRADIENTS
    }
    fn after_backward(&mut self, ctx: &mut Context<'_, M>, grads: &StepGradients) -> Result<()> {
        let Some(new) = grads.take() else { return Ok(()) };
        let model = ctx.model();
        self.sum = Some(match self.sum.take() {
            Some(mut sum) => {
                model.visit(&mut AddGrads { sum: &mut sum, new });
                sum
            }
            None => new,
        });
        self.count += 1;
        let counters = ctx.counters();
        // `local_step` does not count this step yet.
        let step = counters.local_step() + 1;
        if step.is_multiple_of(self.k) || step >= counters.steps_per_epoch() {
            let mut sum = self.sum.take().expect("accumulated just now");
            if self.mean && self.count > 1 {
                let factor = MulScalar(1.0 / self.count as f32);
                ctx.model().visit(&mut MapGrads { grads: &mut sum, f: factor });
            }
            self.count = 0;
            grads.set(sum);
        }
        Ok(())
    }
    fn before_epoch(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        // A window never spans epochs (the last step of an epoch flushes); a resumed run starts clean.
        self.sum = None;
        self.count = 0;
        Ok(())
    }
}
