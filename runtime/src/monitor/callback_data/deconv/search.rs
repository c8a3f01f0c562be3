//! neon's `get_layer_acts` (the images that most activate each filter) and `visualize_layer`
//! (their guided backpropagation to the input).

use std::collections::BTreeSet;

use burn::nn::conv::Conv2d;
use burn::tensor::activation::relu;
use burn::tensor::{Tensor, TensorData};

use super::ConvLayers;
use crate::error::{Error, Result};

/// One filter's largest activation so far: neon's `activation`, `batch_img`, `fm_loc`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Record {
    pub(super) activation: f32,
    pub(super) batch: u16,
    pub(super) image: u16,
    /// The position in the filter's output, `row * width + column`.
    pub(super) loc: i16,
}

/// The images stored from one batch: neon's `deconv/img/batch_<b>`.
#[derive(Debug)]
pub(super) struct StoredBatch {
    pub(super) batch: usize,
    /// The images' indices in the batch, ascending.
    pub(super) indices: Vec<usize>,
    /// Each image, `[1, channels, height, width]`, on the device.
    pub(super) images: Vec<Tensor<4>>,
}

/// What the search found.
#[derive(Debug)]
pub(super) struct Found {
    /// Per convolution, per filter shown.
    pub(super) layers: Vec<Vec<Record>>,
    pub(super) stored: Vec<StoredBatch>,
    /// `[channels, height, width]` of the images.
    pub(super) image_shape: [usize; 3],
}

impl Found {
    fn image(&self, batch: u16, image: u16) -> Option<&Tensor<4>> {
        let stored = self.stored.iter().find(|s| s.batch == usize::from(batch))?;
        let at = stored.indices.iter().position(|&i| i == usize::from(image))?;
        stored.images.get(at)
    }
}

/// The convolution's output before its bias (neon's `Convolution` layer; its bias is a layer of
/// its own), detached.
fn conv_output(conv: &Conv2d, input: Tensor<4>) -> Tensor<4> {
    let output = conv.forward(input.detach()).detach();
    match &conv.bias {
        Some(bias) => {
            let channels = bias.dims()[0];
            output - bias.val().detach().reshape([1, channels, 1, 1])
        }
        None => output,
    }
}

fn limit<T: TryFrom<usize>>(value: usize, what: &str) -> Result<T> {
    T::try_from(value).map_err(|_| Error::msg(format!("Deconv: {what} {value} is past neon's type for it")))
}

/// neon's `get_layer_acts` over `batches`: each convolution's first `max_fm` filters' largest
/// activations, and the images that set a record, kept.
pub(super) fn max_activations<M: ConvLayers>(
    model: &M,
    batches: &[Tensor<4>],
    max_fm: usize,
) -> Result<Found> {
    let mut found = Found { layers: Vec::new(), stored: Vec::new(), image_shape: [0; 3] };
    for (b, batch) in batches.iter().enumerate() {
        let [n, c, h, w] = batch.dims();
        if b == 0 {
            found.image_shape = [c, h, w];
        } else if found.image_shape != [c, h, w] {
            return Err(Error::msg(format!(
                "Deconv: batch {b}'s images are {:?}, batch 0's {:?}",
                [c, h, w],
                found.image_shape
            )));
        }
        let taps = model.conv_layers(batch.clone().detach());
        if b == 0 {
            found.layers = taps
                .iter()
                .map(|(conv, _)| {
                    let fms = conv.weight.dims()[0].min(max_fm);
                    vec![Record { activation: f32::NEG_INFINITY, batch: 0, image: 0, loc: 0 }; fms]
                })
                .collect();
        } else if taps.len() != found.layers.len() {
            return Err(Error::msg(format!(
                "Deconv: conv_layers gave {} layers for batch {b}, {} for batch 0",
                taps.len(),
                found.layers.len()
            )));
        }
        let mut store = BTreeSet::new();
        for ((conv, input), records) in taps.into_iter().zip(&mut found.layers) {
            let output = conv_output(conv, input);
            let [_, fms, oh, ow] = output.dims();
            // neon's layout: (filters, height, width, images), the images innermost.
            let flat = output.permute([1, 2, 3, 0]).reshape([fms, oh * ow * n]);
            let maxes: Vec<f32> = flat.clone().max_dim(1).into_data().iter::<f32>().collect();
            let places: Vec<i64> = flat.argmax(1).into_data().iter::<i64>().collect();
            for (fm, record) in records.iter_mut().enumerate() {
                if maxes[fm] > record.activation {
                    let place = places[fm] as usize;
                    let image = place % n;
                    *record = Record {
                        activation: maxes[fm],
                        batch: limit(b, "the batch index")?,
                        image: limit(image, "the image index")?,
                        loc: limit(place / n, "the position")?,
                    };
                    store.insert(image);
                }
            }
        }
        if !store.is_empty() {
            let indices: Vec<usize> = store.into_iter().collect();
            let images = indices.iter().map(|&i| batch.clone().detach().narrow(0, i, 1)).collect();
            found.stored.push(StoredBatch { batch: b, indices, images });
        }
    }
    Ok(found)
}

/// The convolution's input gradient for the output gradient `signal` (neon's `bprop_conv`):
/// burn's autodiff through this convolution alone.
fn input_gradient(conv: &Conv2d, input: Tensor<4>, signal: Tensor<4>) -> Result<Tensor<4>> {
    let x = input.detach().autodiff().require_grad();
    let grads = (conv.forward(x.clone()) * signal.detach()).sum().backward();
    x.grad(&grads).ok_or_else(|| Error::msg("Deconv: autodiff gave no gradient for a convolution's input"))
}

/// neon's `visualize_layer` for every layer and filter shown: `vis` (height, width, channels,
/// scaled to `0..=255` and truncated), or `None` for a filter without a record.
pub(super) fn project<M: ConvLayers>(model: &M, found: &Found) -> Result<Vec<Vec<Option<Vec<u8>>>>> {
    let mut layers = Vec::new();
    for (l, records) in found.layers.iter().enumerate() {
        let mut shown = Vec::new();
        for (fm, record) in records.iter().enumerate() {
            let Some(image) =
                found.image(record.batch, record.image).filter(|_| record.activation.is_finite())
            else {
                shown.push(None);
                continue;
            };
            shown.push(Some(guided_backprop(model, image.clone(), l, fm, record)?));
        }
        layers.push(shown);
    }
    Ok(layers)
}

/// One filter's projection: the signal holding `record`'s activation at its place in layer
/// `layer`'s output, taken back to the image through that convolution and every one before it.
fn guided_backprop<M: ConvLayers>(
    model: &M,
    image: Tensor<4>,
    layer: usize,
    fm: usize,
    record: &Record,
) -> Result<Vec<u8>> {
    let device = image.device();
    let taps = model.conv_layers(image.detach());
    let mut signal: Option<Tensor<4>> = None;
    for (i, (conv, input)) in taps.into_iter().take(layer + 1).enumerate().rev() {
        let output = conv_output(conv, input.clone()).dims();
        let incoming = match signal.take() {
            None => {
                let mut values = vec![0f32; output.iter().product()];
                values[fm * output[2] * output[3] + record.loc as usize] = record.activation;
                Tensor::from_data(TensorData::new(values, output), &device)
            }
            Some(signal) if signal.dims() == output => signal,
            Some(signal) => {
                return Err(Error::invalid(format!(
                    "Deconv: convolution {}'s input is {:?}, convolution {i}'s output {output:?}: neon's guided \
                     backpropagation goes from one convolution to the one before through elementwise layers \
                     alone (no pooling between them), as neon's DeconvCallback does",
                    i + 1,
                    signal.dims(),
                )));
            }
        };
        let gradient = input_gradient(conv, input.clone(), relu(incoming))?;
        signal = Some(gradient * input.detach().greater_elem(0.0).float());
    }
    let signal = signal.ok_or_else(|| Error::invalid("Deconv: the model has no convolution"))?;
    let [c, h, w] = found_shape(&signal);
    let values: Vec<f32> = signal.into_data().iter::<f32>().collect();
    // (channels, height, width) to (height, width, channels).
    let hwc: Vec<f32> = (0..h * w * c).map(|k| values[(k % c) * h * w + k / c]).collect();
    Ok(scale_to_rgb(&hwc).into_iter().map(|v| v as u8).collect())
}

fn found_shape(signal: &Tensor<4>) -> [usize; 3] {
    let [_, c, h, w] = signal.dims();
    [c, h, w]
}

/// neon's `scale_to_rgb`: `values - min`, times `255 / (max - min)` when that range is not 0.
pub(super) fn scale_to_rgb(values: &[f32]) -> Vec<f32> {
    let min = values.iter().copied().fold(f32::INFINITY, f32::min);
    let max = values.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let range = max - min;
    values
        .iter()
        .map(|&v| {
            let shifted = v - min;
            if range > 0.0 { shifted / range * 255.0 } else { shifted }
        })
        .collect()
}
