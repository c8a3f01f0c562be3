//! Shared pieces of stoker's benchmarks: the models, the training step they share, the data,
//! the generated callbacks (see `tools/generate.py`) and small statistics helpers.

pub mod generated;

use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{Linear, LinearConfig, PaddingConfig2d, Relu};
use burn::tensor::{Device, Tensor};
use stoker::Outputs;
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

/// The training digits in batches of 64 (the last partial batch dropped).
pub fn batches(device: &Device) -> Vec<DigitBatch> {
    use burn::data::dataloader::batcher::Batcher;
    let split = load_digits(1, 0.2);
    split.train.chunks(64).filter(|c| c.len() == 64).map(|c| DigitBatcher.batch(c.to_vec(), device)).collect()
}

/// The median of `values` (the upper one of an even count).
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
