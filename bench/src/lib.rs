//! Shared pieces of stoker's benchmarks: the models, the training step they share, the data,
//! the generated callbacks (see `tools/generate.py`) and small statistics helpers.

pub mod generated;

use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{Linear, LinearConfig, PaddingConfig2d, Relu};
use burn::optim::{GradientsParams, ModuleOptimizer};
use burn::tensor::{Device, Tensor};
use burn_stoker::callback::{Callback, Context};
use burn_stoker::fetch::{Fetch, Fetched, Outputs};
use stoker_examples::{DigitBatch, DigitBatcher, Mlp, load_digits};

/// A model that classifies the 8x8 digits.
pub trait Classifier:
    Module + burn::module::ModuleDisplay + Clone + Send + std::fmt::Debug + 'static
{
    /// A freshly initialized model on `device`.
    fn init(device: &Device) -> Self;
    /// Logits `[batch, 10]` of images `[batch, 64]`.
    fn logits(&self, images: Tensor<2>) -> Tensor<2>;
    /// The model's name in the results.
    const NAME: &'static str;
}

impl Classifier for Mlp {
    fn init(device: &Device) -> Self {
        Mlp::new(128, device)
    }
    fn logits(&self, images: Tensor<2>) -> Tensor<2> {
        self.forward(images)
    }
    const NAME: &'static str = "MLP 64-128-10";
}

/// A small convolutional net: two 3x3 convolutions (16 and 32 channels, padding same, ReLU)
/// over the 8x8 image, then a linear layer to 10 classes.
#[derive(Module, Debug)]
pub struct ConvNet {
    conv1: Conv2d,
    conv2: Conv2d,
    output: Linear,
    activation: Relu,
}

impl Classifier for ConvNet {
    fn init(device: &Device) -> Self {
        ConvNet {
            conv1: Conv2dConfig::new([1, 16], [3, 3]).with_padding(PaddingConfig2d::Same).init(device),
            conv2: Conv2dConfig::new([16, 32], [3, 3]).with_padding(PaddingConfig2d::Same).init(device),
            output: LinearConfig::new(32 * 64, 10).init(device),
            activation: Relu::new(),
        }
    }
    fn logits(&self, images: Tensor<2>) -> Tensor<2> {
        let [batch, _] = images.dims();
        let x = images.reshape([batch, 1, 8, 8]);
        let x = self.activation.forward(self.conv1.forward(x));
        let x = self.activation.forward(self.conv2.forward(x));
        self.output.forward(x.reshape([batch, 32 * 64]))
    }
    const NAME: &'static str = "ConvNet (conv 16, conv 32, linear)";
}

/// The seed of every model the benchmarks initialize: all cases train the same model.
pub const SEED: u64 = 7;

/// A freshly initialized model, the same in every case and every round (the device's generator
/// is seeded with [`SEED`] first), so that every case does the same arithmetic.
///
/// burn draws a parameter's initial values when the parameter is first used, not in `init`: one
/// forward pass here draws them all at once, right after the seed.
pub fn fresh<M: Classifier>(device: &Device) -> M {
    device.seed(SEED);
    let model = M::init(device);
    let _ = model.logits(Tensor::zeros([1, 64], device));
    model
}

/// Make this thread treat subnormal floats as zero (x86-64: MXCSR's FTZ and DAZ bits;
/// AArch64: FPCR's FZ bit; elsewhere nothing). Returns whether it could.
///
/// Why the benchmarks do it: as the digits models fit their training batches, some gradients and
/// Adam moments become subnormal, and a CPU takes tens to hundreds of cycles per subnormal operand.
/// Measured with the hand loop on the digits MLP (`compare --chunks 4 2000 200 --denormals`):
/// about 8,200 steps/s for the first ~700 steps, then 6,500 to 6,800 steps/s for the rest of the
/// run (without a common seed, anywhere from 5,300 to 6,800, a different rate in every run);
/// flushed, 8,000 to 8,400 steps/s throughout. That slowdown is the model's numerics, not a
/// loop's cost, and its run-to-run spread buries the 1 % the benchmarks compare.
pub fn flush_denormals() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let mut csr: u32 = 0;
        // SAFETY: stmxcsr and ldmxcsr read and write this thread's SSE control register only;
        // setting FTZ (bit 15) and DAZ (bit 6) changes results only where subnormals occur.
        unsafe {
            std::arch::asm!("stmxcsr [{}]", in(reg) &mut csr, options(nostack, preserves_flags));
            csr |= (1 << 15) | (1 << 6);
            std::arch::asm!("ldmxcsr [{}]", in(reg) &csr, options(nostack, preserves_flags));
        }
        true
    }
    #[cfg(target_arch = "aarch64")]
    {
        // SAFETY: reads and writes this thread's floating-point control register only (FZ, bit 24).
        unsafe {
            let fpcr: u64;
            std::arch::asm!("mrs {}, fpcr", out(reg) fpcr, options(nomem, nostack, preserves_flags));
            std::arch::asm!("msr fpcr, {}", in(reg) fpcr | (1 << 24), options(nomem, nostack, preserves_flags));
        }
        true
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        false
    }
}

/// Flush subnormals on this thread and, with the feature `rayon` (burn's CPU kernels on rayon's
/// global pool; `learner` turns it on, as burn-train does), on every thread of that pool: starts
/// the pool, so call it before any tensor work.
pub fn flush_denormals_everywhere() -> Result<(), String> {
    if !flush_denormals() {
        return Err("flushing subnormals is not implemented on this architecture".into());
    }
    #[cfg(feature = "rayon")]
    rayon::ThreadPoolBuilder::new()
        .start_handler(|_| {
            flush_denormals();
        })
        .build_global()
        .map_err(|e| format!("rayon's global pool was already started: {e}"))?;
    Ok(())
}

/// One step of the hand-written loop, case (a): forward and loss, backward, the optimizer's step
/// at learning rate 1e-3 (the trainer's default), nothing else.
pub fn hand_step<M: Classifier>(
    model: M,
    optimizer: &mut ModuleOptimizer,
    batch: DigitBatch,
    outputs: &mut Outputs,
) -> M {
    outputs.clear();
    let loss = step(&model, batch, outputs);
    let grads = GradientsParams::from_grads(loss.backward(), &model);
    optimizer.step(1e-3, model, grads)
}

/// The training step every loop runs: cross-entropy loss, plus the batch's cost and accuracy as
/// named outputs (left on the device unless a callback fetches them).
pub fn step<M: Classifier>(model: &M, batch: DigitBatch, out: &mut Outputs) -> Tensor<1> {
    let logits = model.logits(batch.images);
    let loss =
        CrossEntropyLossConfig::new().init(&logits.device()).forward(logits.clone(), batch.labels.clone());
    let wrong = logits.argmax(1).squeeze_dim::<1>(1).not_equal(batch.labels).float();
    out.put("accuracy", Tensor::<1>::ones([1], &wrong.device()) - wrong.mean());
    out.put("cost", loss.clone());
    loss
}

static TWO: [Fetch; 2] = [Fetch::host("cost"), Fetch::host("accuracy")];
static TWO_DEFERRED: [Fetch; 2] = [Fetch::deferred("cost"), Fetch::deferred("accuracy")];

/// Fetches the cost and the accuracy at every step, synchronously or deferred, and adds them up.
#[derive(Debug, Default)]
pub struct EveryStep {
    /// Whether the fetch is deferred (the values arrive in `fetched`, a step later).
    pub deferred: bool,
    /// The sum of every value received.
    pub sum: f64,
    /// How many steps' values were received.
    pub received: u64,
}

impl EveryStep {
    /// A fetch of both at every step, deferred or not.
    pub fn new(deferred: bool) -> Self {
        EveryStep { deferred, ..EveryStep::default() }
    }

    fn add(&mut self, values: &Fetched<'_>) -> burn_stoker::Result<()> {
        self.sum += f64::from(values.get::<f32>("cost")?) + f64::from(values.get::<f32>("accuracy")?);
        self.received += 1;
        Ok(())
    }
}

impl<M> Callback<M> for EveryStep {
    fn fetches(&self) -> &[Fetch] {
        if self.deferred { &TWO_DEFERRED } else { &TWO }
    }
    fn after_step(&mut self, _ctx: &mut Context<'_, M>, values: &Fetched<'_>) -> burn_stoker::Result<()> {
        if self.deferred { Ok(()) } else { self.add(values) }
    }
    fn fetched(&mut self, _ctx: &mut Context<'_, M>, values: &Fetched<'_>) -> burn_stoker::Result<()> {
        self.add(values)
    }
}

/// The training digits in batches of 64 (the last partial batch dropped).
pub fn batches(device: &Device) -> Vec<DigitBatch> {
    batches_of(64, device)
}

/// The training digits in batches of `size` (the last partial batch dropped).
pub fn batches_of(size: usize, device: &Device) -> Vec<DigitBatch> {
    use burn::data::dataloader::batcher::Batcher;
    let split = load_digits(1, 0.2);
    split
        .train
        .chunks(size)
        .filter(|c| c.len() == size)
        .map(|c| DigitBatcher.batch(c.to_vec(), device))
        .collect()
}

/// The median of `values` (the upper one of an even count).
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
