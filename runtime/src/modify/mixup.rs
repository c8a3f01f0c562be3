//! fastai's `MixUp(alpha)` (fastai/callback/mixup.py, `MixHandler` and `MixUp`): each training
//! batch mixed with a shuffled copy of itself, and the loss the same mix of the losses against
//! both targets.

mod draws;

use std::fmt;
use std::marker::PhantomData;

use burn::tensor::kind::Basic;
use burn::tensor::{Int, Tensor, TensorData};

use crate::callback::{Callback, Context, StepBatch, StepEvents, StepLoss, StepPred};
use crate::error::{Result, check_setting};

/// One batch's mixing, drawn by [`MixUp`]: each sample's weight λ (already `max(λ, 1 - λ)`, so
/// in [1/2, 1]) and the sample it is mixed with (its partner, from a shuffle of the batch).
/// Sample `i` of the mixed batch is `λᵢ · xᵢ + (1 - λᵢ) · x[partnerᵢ]` (fastai's
/// `torch.lerp(xb1, xb, lam)`).
#[derive(Debug, Clone, PartialEq)]
pub struct Mix {
    lam: Vec<f32>,
    partners: Vec<i64>,
}

impl Mix {
    /// A mixing given by hand: each sample's λ and its partner's index (both of the batch's
    /// length). [`MixUp`] draws its own; this one is for tests and for mixing outside a run.
    pub fn new(lam: Vec<f32>, partners: Vec<i64>) -> Self {
        assert_eq!(lam.len(), partners.len(), "one λ and one partner per sample");
        Mix { lam, partners }
    }
    /// Each sample's λ.
    pub fn lam(&self) -> &[f32] {
        &self.lam
    }
    /// Each sample's partner: the index of the sample it is mixed with.
    pub fn partners(&self) -> &[i64] {
        &self.partners
    }
    /// The number of samples.
    pub fn len(&self) -> usize {
        self.lam.len()
    }
    /// Whether the batch has no sample.
    pub fn is_empty(&self) -> bool {
        self.lam.is_empty()
    }
    /// Each sample's λ as a tensor of shape `[n, 1, ..., 1]` (rank `D`) on `device`, which
    /// broadcasts over a sample's other axes.
    fn weights<const D: usize>(&self, device: &burn::tensor::Device) -> Tensor<D> {
        let mut shape = [1usize; D];
        shape[0] = self.len();
        Tensor::from_data(TensorData::new(self.lam.clone(), shape), device)
    }
    /// `x`'s samples (along its first axis) mixed with their partners': `x[partners] + λ · (x -
    /// x[partners])`, fastai's `torch.lerp(xb1, xb, lam)`. The inputs a [`MixUpBatch`] mixes.
    pub fn inputs<const D: usize>(&self, x: Tensor<D>) -> Tensor<D> {
        let weights = self.weights::<D>(&x.device());
        let partner = self.partners_of(x.clone());
        partner.clone() + (x - partner) * weights
    }
    /// The rows of `y` (along its first axis) of each sample's partner, `y[partners]`: the
    /// partners' targets.
    pub fn partners_of<const D: usize, K: Basic>(&self, y: Tensor<D, K>) -> Tensor<D, K> {
        let index =
            Tensor::<1, Int>::from_data(TensorData::new(self.partners.clone(), [self.len()]), &y.device());
        y.select(0, index)
    }
    /// The mix of two per-sample losses, `partner + λ · (own - partner)` (fastai's
    /// `torch.lerp(lf(pred, *yb1), lf(pred, *yb), lam)`), each of shape `[n]`.
    pub fn losses(&self, own: Tensor<1>, partner: Tensor<1>) -> Tensor<1> {
        let weights = self.weights::<1>(&own.device());
        partner.clone() + (own - partner) * weights
    }
}

/// A batch type that [`MixUp`] can mix: its inputs are mixed, its targets kept, and the loss
/// is computed against both the targets and the partners' targets. The user's batch type opts in
/// by implementing it; `(inputs, class indices)` pairs already do.
///
/// ```
/// use burn::tensor::{Int, Tensor};
/// use burn_stoker::modify::{Mix, MixUpBatch};
///
/// struct Images {
///     pixels: Tensor<4>,
///     labels: Tensor<1, Int>,
/// }
///
/// impl MixUpBatch for Images {
///     type Targets = Tensor<1, Int>;
///     fn batch_size(&self) -> usize {
///         self.labels.dims()[0]
///     }
///     fn mix_inputs(self, mix: &Mix) -> Self {
///         Images { pixels: mix.inputs(self.pixels), labels: self.labels }
///     }
///     fn targets(&self, mix: &Mix) -> (Self::Targets, Self::Targets) {
///         (self.labels.clone(), mix.partners_of(self.labels.clone()))
///     }
/// }
/// ```
pub trait MixUpBatch: Sized + 'static {
    /// What the loss compares the prediction with (class indices...).
    type Targets: 'static;
    /// The number of samples in the batch.
    fn batch_size(&self) -> usize;
    /// The batch with its inputs mixed ([`Mix::inputs`] on each input tensor) and its targets
    /// as they were.
    fn mix_inputs(self, mix: &Mix) -> Self;
    /// The batch's targets and its samples' partners' targets ([`Mix::partners_of`]).
    fn targets(&self, mix: &Mix) -> (Self::Targets, Self::Targets);
}

impl<const D: usize> MixUpBatch for (Tensor<D>, Tensor<1, Int>) {
    type Targets = Tensor<1, Int>;
    fn batch_size(&self) -> usize {
        self.1.dims()[0]
    }
    fn mix_inputs(self, mix: &Mix) -> Self {
        (mix.inputs(self.0), self.1)
    }
    fn targets(&self, mix: &Mix) -> (Self::Targets, Self::Targets) {
        (self.1.clone(), mix.partners_of(self.1.clone()))
    }
}

/// What MixUp keeps from `before_batch` to the loss.
struct Pending<T, P> {
    mix: Mix,
    targets: T,
    partners: T,
    pred: Option<P>,
}

/// fastai's `MixUp(alpha)`: each training batch is mixed with a shuffled copy of itself, sample
/// by sample, λ drawn from Beta(α, α) and kept at `max(λ, 1 - λ)`; the loss becomes the same mix
/// of the per-sample losses against the targets and the partners' targets, reduced by the mean
/// (fastai's `MixHandler.lf` under `NoneReduce`). Validation batches are not mixed (`run_valid =
/// False`).
///
/// - The batch type `B` opts in through [`MixUpBatch`] (inputs mixed, targets kept).
/// - `loss` is the per-sample loss (fastai's loss function without its reduction): the
///   prediction `P` and targets in, one loss per sample out.
/// - The step function hands its prediction over with
///   [`Step::pred`](crate::trainer::Step::pred) and returns a loss; MixUp replaces that loss
///   before backward (and in the `"loss"` output).
/// - The draws come from the run's seed ([`Trainer::seed`](crate::trainer::Trainer::seed)), or
///   [`seed`](Self::seed), with the rank and the global step: a resumed run draws at step `n`
///   what the uninterrupted run drew. Without either, a seed is taken from the clock at
///   `before_train` and saved in the checkpoints, so a resumed run goes on with it.
/// - It runs on every rank of a data-parallel world (it changes what each replica computes),
///   each rank drawing its own λs.
///
/// Not ported: fastai's branch for a loss without `y_int` (float targets), where the targets
/// are mixed rather than the losses; a [`MixUpBatch`] may mix its targets itself in
/// [`mix_inputs`](MixUpBatch::mix_inputs) and give a loss that ignores the partners.
///
/// ```
/// use burn::tensor::activation::log_softmax;
/// use burn::tensor::{Int, Tensor};
/// use burn_stoker::modify::MixUp;
///
/// fn cross_entropy(logits: Tensor<2>, labels: Tensor<1, Int>) -> Tensor<1> {
///     let n = labels.dims()[0];
///     -log_softmax(logits, 1).gather(1, labels.reshape([n, 1])).reshape([n])
/// }
/// let mixup = MixUp::<(Tensor<2>, Tensor<1, Int>), _, _>::new(0.4, cross_entropy);
/// # let _ = mixup;
/// ```
pub struct MixUp<B: MixUpBatch, P, L> {
    alpha: f64,
    loss: L,
    seed: Option<u64>,
    pending: Option<Pending<B::Targets, P>>,
    _batch: PhantomData<fn(B) -> P>,
}
impl<B: MixUpBatch, P, L> crate::kind::CallbackKind for MixUp<B, P, L> {
    const NAME: &'static str = "MixUp";
}

impl<B: MixUpBatch, P, L> fmt::Debug for MixUp<B, P, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MixUp").field("alpha", &self.alpha).field("seed", &self.seed).finish_non_exhaustive()
    }
}

impl<B, P, L> MixUp<B, P, L>
where
    B: MixUpBatch,
    P: Clone + 'static,
    L: FnMut(P, B::Targets) -> Tensor<1>,
{
    /// MixUp with Beta(`alpha`, `alpha`) (fastai's default α is 0.4; it must be positive) and the
    /// per-sample `loss`.
    pub fn new(alpha: f64, loss: L) -> Self {
        MixUp { alpha, loss, seed: None, pending: None, _batch: PhantomData }
    }
    /// Draw from `seed` rather than the run's seed.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }
    /// The mixing of a batch of `n` samples at global step `step` (counted from 0) on `rank`,
    /// from `seed`: what the callback draws there.
    pub fn draw(&self, seed: u64, rank: usize, step: u64, n: usize) -> Mix {
        draws::draw(self.alpha, seed, rank, step, n)
    }
}

impl<M, B, P, L> Callback<M> for MixUp<B, P, L>
where
    B: MixUpBatch,
    P: Clone + 'static,
    L: FnMut(P, B::Targets) -> Tensor<1>,
{
    /// It changes what every replica computes: it runs on every rank.
    fn chief_only(&self) -> bool {
        false
    }
    fn step_events(&self) -> StepEvents {
        StepEvents::BATCH.and(StepEvents::PRED).and(StepEvents::LOSS)
    }
    /// None: fastai's `run_valid = False`, validation batches are not mixed.
    fn takes_validation_batches(&self) -> bool {
        false
    }
    fn save_state(&self) -> Result<Option<serde_json::Value>> {
        Ok(self.seed.map(|seed| serde_json::json!({ "seed": seed })))
    }
    fn load_state(&mut self, state: serde_json::Value) -> Result<()> {
        if let Some(seed) = state.get("seed").and_then(serde_json::Value::as_u64) {
            self.seed = Some(seed);
        }
        Ok(())
    }
    fn setup(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        check_setting(self.alpha.is_finite() && self.alpha > 0.0, "MixUp", "alpha", "positive", self.alpha)
    }
    fn before_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if self.seed.is_none() {
            self.seed = Some(ctx.seed().unwrap_or_else(clock_seed));
        }
        Ok(())
    }
    fn before_batch(&mut self, ctx: &mut Context<'_, M>, batch: &StepBatch<'_>) -> Result<()> {
        self.pending = None;
        let seed = self.seed.unwrap_or_default();
        let (rank, step) = (ctx.rank(), ctx.global_step());
        batch.update(|b: B| {
            let mix = draws::draw(self.alpha, seed, rank, step, b.batch_size());
            let (targets, partners) = b.targets(&mix);
            let mixed = b.mix_inputs(&mix);
            self.pending = Some(Pending { mix, targets, partners, pred: None });
            mixed
        })
    }
    fn after_pred(&mut self, _ctx: &mut Context<'_, M>, pred: &StepPred<'_>) -> Result<()> {
        if let Some(pending) = &mut self.pending {
            pending.pred = Some(pred.get::<P>()?);
        }
        Ok(())
    }
    /// fastai's `MixHandler.lf`: the loss becomes the mix of the per-sample losses against both
    /// targets, reduced by the mean.
    fn before_backward(&mut self, _ctx: &mut Context<'_, M>, loss: &StepLoss<'_>) -> Result<()> {
        let Some(Pending { mix, targets, partners, pred: Some(pred) }) = self.pending.take() else {
            return Ok(());
        };
        let partner = (self.loss)(pred.clone(), partners);
        let own = (self.loss)(pred, targets);
        loss.set(mix.losses(own, partner).mean().reshape([1]));
        Ok(())
    }
}

/// A seed from the clock, for a run given none.
fn clock_seed() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    now.as_secs() ^ u64::from(now.subsec_nanos()).rotate_left(32)
}
