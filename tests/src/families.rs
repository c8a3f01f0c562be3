//! Models of the families users bring, small enough to train in a test: a ConvNet with
//! BatchNorm and dropout, an LSTM, a transformer encoder over embedded tokens (attention,
//! LayerNorm, dropout); with deterministic weights (whatever the device's generator holds) and
//! deterministic data.

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{BatchNorm, BatchNormConfig, Dropout, DropoutConfig, Linear, LinearConfig, PaddingConfig2d};
use burn::tensor::{Device, Int, Tensor, TensorData};
use burn_stoker::trainer::Step;

/// Every trained parameter of `model` set from its position: the same model every time, on any
/// device, without drawing from a generator. Buffers (BatchNorm's statistics) keep their
/// initial values.
pub fn fixed<M: Module>(model: M) -> M {
    /// Sets each trained parameter's values from a running index.
    struct Fix(usize);
    impl ModuleMapper for Fix {
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
            let (id, old, mapper) = param.consume();
            if !old.is_require_grad() {
                return Param::from_mapped_value(id, old, mapper);
            }
            let shape = old.shape();
            let n = shape.num_elements();
            let values: Vec<f32> = (self.0..self.0 + n).map(|i| (i as f32 * 0.618).sin() * 0.3).collect();
            self.0 += n;
            let new = Tensor::<D>::from_data(TensorData::new(values, shape), &old.device()).require_grad();
            Param::from_mapped_value(id, new, mapper)
        }
    }
    model.map(&mut Fix(0))
}

/// Every float tensor of `model` (parameters and buffers), as bit patterns, in visit order.
pub fn all_bits<M: Module>(model: &M) -> Vec<Vec<u32>> {
    /// Collects each tensor's bits.
    struct Bits(Vec<Vec<u32>>);
    impl ModuleVisitor for Bits {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            self.0.push(param.val().into_data().iter::<f32>().map(f32::to_bits).collect());
        }
    }
    // BatchNorm's last update waits aside until a forward or `valid` folds it in.
    drop(model.valid());
    let mut bits = Bits(Vec::new());
    model.visit(&mut bits);
    bits.0
}

/// A small ConvNet: a 3×3 convolution (1 → 3 channels), BatchNorm, ReLU, dropout, a linear
/// head; 6×6 inputs, 2 outputs.
#[derive(Module, Debug)]
pub struct ConvBn {
    conv: Conv2d,
    norm: BatchNorm,
    dropout: Dropout,
    head: Linear,
}

impl ConvBn {
    /// The model with fixed weights and dropout probability `dropout`.
    pub fn new(dropout: f64, device: &Device) -> ConvBn {
        fixed(ConvBn {
            conv: Conv2dConfig::new([1, 3], [3, 3]).with_padding(PaddingConfig2d::Same).init(device),
            norm: BatchNormConfig::new(3).init(device),
            dropout: DropoutConfig::new(dropout).init(),
            head: LinearConfig::new(3 * 6 * 6, 2).init(device),
        })
    }

    /// The output for a batch of `[n, 1, 6, 6]` images.
    pub fn forward(&self, x: Tensor<4>) -> Tensor<2> {
        let x = burn::tensor::activation::relu(self.norm.forward(self.conv.forward(x)));
        let x = self.dropout.forward(x).flatten::<2>(1, 3);
        self.head.forward(x)
    }

    /// The mean squared error on a batch, as a training step.
    pub fn step(&self, (x, y): (Tensor<4>, Tensor<2>), _step: &mut Step<'_>) -> Tensor<1> {
        (self.forward(x) - y).powi_scalar(2).mean()
    }
}

/// `n` batches of `rows` deterministic `[1, 6, 6]` images and their 2 targets (batch `b` and the
/// next differ: BatchNorm's statistics move).
pub fn image_batches(n: usize, rows: usize, device: &Device) -> Vec<(Tensor<4>, Tensor<2>)> {
    (0..n)
        .map(|b| {
            let xs: Vec<f32> = (0..rows * 36)
                .map(|i| (((b * rows * 36 + i) as f32) * 0.377).sin() + b as f32 * 0.1)
                .collect();
            let ys: Vec<f32> = xs.chunks(36).flat_map(|x| [x[0] - x[7] + x[35], x[14] * x[21]]).collect();
            (
                Tensor::from_data(TensorData::new(xs, [rows, 1, 6, 6]), device),
                Tensor::from_data(TensorData::new(ys, [rows, 2]), device),
            )
        })
        .collect()
}

/// An LSTM (burn's `Lstm`, 3 features → 6) over sequences of 5 steps, its last hidden state
/// read by a linear head to 2 outputs.
#[derive(Module, Debug)]
pub struct LstmNet {
    lstm: burn::nn::Lstm,
    head: Linear,
}

impl LstmNet {
    /// The model with fixed weights.
    pub fn new(device: &Device) -> LstmNet {
        fixed(LstmNet {
            lstm: burn::nn::LstmConfig::new(3, 6, true).init(device),
            head: LinearConfig::new(6, 2).init(device),
        })
    }

    /// The mean squared error on a batch of `[n, 5, 3]` sequences, as a training step.
    pub fn step(&self, (x, y): (Tensor<3>, Tensor<2>), _step: &mut Step<'_>) -> Tensor<1> {
        let (_, state) = self.lstm.forward(x, None);
        (self.head.forward(state.hidden) - y).powi_scalar(2).mean()
    }
}

/// `n` batches of `rows` deterministic sequences of 5 steps of 3 features, and 2 targets each.
pub fn sequence_batches(n: usize, rows: usize, device: &Device) -> Vec<(Tensor<3>, Tensor<2>)> {
    (0..n)
        .map(|b| {
            let xs: Vec<f32> = (0..rows * 15).map(|i| (((b * rows * 15 + i) as f32) * 0.291).cos()).collect();
            let ys: Vec<f32> = xs.chunks(15).flat_map(|s| [s[0] + s[14], s[7] - s[3]]).collect();
            (
                Tensor::from_data(TensorData::new(xs, [rows, 5, 3]), device),
                Tensor::from_data(TensorData::new(ys, [rows, 2]), device),
            )
        })
        .collect()
}

/// A transformer encoder (burn's `TransformerEncoder`: attention, LayerNorm, dropout) over
/// embedded tokens (10 tokens, d_model 8, 2 heads, 1 layer), its mean over the sequence read by
/// a linear head to 2 outputs.
#[derive(Module, Debug)]
pub struct TinyTransformer {
    embed: burn::nn::Embedding,
    encoder: burn::nn::transformer::TransformerEncoder,
    head: Linear,
}

impl TinyTransformer {
    /// The model with fixed weights and dropout probability `dropout`.
    pub fn new(dropout: f64, device: &Device) -> TinyTransformer {
        use burn::nn::transformer::TransformerEncoderConfig;
        fixed(TinyTransformer {
            embed: burn::nn::EmbeddingConfig::new(10, 8).init(device),
            encoder: TransformerEncoderConfig::new(8, 16, 2, 1).with_dropout(dropout).init(device),
            head: LinearConfig::new(8, 2).init(device),
        })
    }

    /// The mean squared error on a batch of `[n, 6]` tokens, as a training step.
    pub fn step(&self, (tokens, y): (Tensor<2, Int>, Tensor<2>), _step: &mut Step<'_>) -> Tensor<1> {
        use burn::nn::transformer::TransformerEncoderInput;
        let encoded = self.encoder.forward(TransformerEncoderInput::new(self.embed.forward(tokens)));
        let [n, _, d] = encoded.dims();
        let pooled = encoded.mean_dim(1).reshape([n, d]);
        (self.head.forward(pooled) - y).powi_scalar(2).mean()
    }
}

/// `n` batches of `rows` deterministic sequences of 6 tokens (of 10), and 2 targets each.
pub fn token_batches(n: usize, rows: usize, device: &Device) -> Vec<(Tensor<2, Int>, Tensor<2>)> {
    (0..n)
        .map(|b| {
            let tokens: Vec<i64> = (0..rows * 6).map(|i| ((b * rows * 6 + i) * 7 % 10) as i64).collect();
            let ys: Vec<f32> = tokens
                .chunks(6)
                .flat_map(|t| [t[0] as f32 * 0.1 - 0.4, (t[2] + t[5]) as f32 * 0.05])
                .collect();
            (
                Tensor::from_data(TensorData::new(tokens, [rows, 6]), device),
                Tensor::from_data(TensorData::new(ys, [rows, 2]), device),
            )
        })
        .collect()
}
