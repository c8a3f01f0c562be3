//! neon's `DeconvCallback` ("Guided Bprop"): for each convolution layer, the images that most
//! activate its first filters, and each activation projected back to the input space by neon's
//! guided backpropagation, written into the callback data file under `deconv/`.

mod search;
mod write;

use std::borrow::Cow;
use std::path::PathBuf;

use burn::module::Module;
use burn::nn::conv::Conv2d;
use burn::tensor::Tensor;

use crate::callback::{Callback, Context};
use crate::error::{Error, Result, check_setting};

/// A model whose convolution layers [`Deconv`] can see: its forward pass, telling each
/// convolution layer with the tensor it received.
///
/// burn's modules keep no activations and have no hooks: a [`ModuleVisitor`](burn::module::ModuleVisitor)
/// finds a model's `Conv2d` weights, but not what flows into them, which only the model's own
/// `forward` knows. So the model says it: `conv_layers(images)` runs the layers from the input to
/// the last convolution (in inference: no dropout) and returns, in forward order, each
/// convolution with its input. The layers between two convolutions must be elementwise
/// (activations, a bias): neon's guided backpropagation goes from one convolution to the one
/// before through those alone, as neon's `DeconvCallback` does (it skips every other layer);
/// [`Deconv`] fails naming the two layers when a convolution's input is not the shape of the
/// previous one's output (a pooling between them).
///
/// ```
/// use burn::module::Module;
/// use burn::nn::conv::{Conv2d, Conv2dConfig};
/// use burn::tensor::Tensor;
/// use burn::tensor::activation::relu;
/// use burn_stoker::monitor::ConvLayers;
///
/// #[derive(Module, Debug)]
/// struct Net {
///     conv1: Conv2d,
///     conv2: Conv2d,
/// }
///
/// impl ConvLayers for Net {
///     fn conv_layers(&self, images: Tensor<4>) -> Vec<(&Conv2d, Tensor<4>)> {
///         let hidden = relu(self.conv1.forward(images.clone()));
///         vec![(&self.conv1, images), (&self.conv2, hidden)]
///     }
/// }
/// let device = burn_stoker::device::cpu();
/// let net = Net {
///     conv1: Conv2dConfig::new([1, 2], [3, 3]).init(&device),
///     conv2: Conv2dConfig::new([2, 3], [3, 3]).init(&device),
/// };
/// let layers = net.conv_layers(Tensor::zeros([1, 1, 8, 8], &device));
/// assert_eq!(layers[1].1.dims(), [1, 2, 6, 6]);
/// ```
pub trait ConvLayers {
    /// Each convolution layer of the model, in forward order, with the tensor it receives when
    /// the model runs on `images` (`[batch, channels, height, width]`).
    fn conv_layers(&self, images: Tensor<4>) -> Vec<(&Conv2d, Tensor<4>)>;
}

/// neon's `DeconvCallback`: at the end of training, for each convolution layer (of a model that
/// implements [`ConvLayers`]) and each of its first `max_fm` filters (feature maps), the image of
/// the validation batches that activates it most, and that activation projected back to the
/// image by neon's guided backpropagation, written in neon's `deconv` layout into the HDF5 file
/// at `path` (feature `hdf5`); nvis read it.
///
/// - **Search** (neon's `get_layer_acts`): the batches `0..=n`, `n` being `dataset_pct` percent of
///   the batches rounded (neon's `int(pct / 100 * nbatches + 0.5)`, and its `>` that takes one
///   more). For each convolution, each filter's largest output (the convolution alone, before
///   its bias: neon's `Convolution` layer, whose bias is a layer of its own) over the batch's
///   images and positions, the first in neon's order (position-major, image-minor) on ties; a
///   strictly larger one than the batches before replaces the filter's record, and its image is
///   stored (`deconv/img/batch_<b>`).
/// - **Projection** (neon's `visualize_layer`, guided backpropagation after Springenberg et al.
///   2014): the image alone through the model; a signal of zeros holding the recorded activation
///   at the filter's position; then for that convolution and each one before it: the signal's
///   negative values zeroed (ReLU on the gradient), passed back through the convolution (its
///   input gradient, neon's `bprop_conv`; burn's autodiff computes it for the convolution alone),
///   and multiplied by the mask of its input's positive values (ReLU's forward mask). The result,
///   scaled to `0..=255` over its own minimum and maximum and truncated, is `vis`.
/// - **What differs from neon**: the layer groups are numbered by the convolution's place among
///   the model's convolutions (`0000`, `0001`), where neon numbers them by the place among all its
///   layers (its convolution, bias and activation are three); a filter that no image activated
///   above minus infinity keeps neon's initial `-inf` and a zero `vis`.
/// - **Why by hand**: guided backpropagation changes ReLU's backward pass (a negative gradient
///   stops). burn 0.22's autodiff runs the backward pass of `relu` that its backends define; a
///   different one is a custom operation (burn-autodiff's `Backward` trait, on each concrete
///   `Autodiff<B>` backend, reached with the `extension` feature's `Tensor::try_into_primitive`)
///   that the model itself would have to call in place of `relu`: a callback cannot change a
///   user's model that way. neon's own `DeconvCallback` does not use its autodiff either: it runs
///   the backward pass by hand, convolution by convolution, as this does. Through layers that are
///   not elementwise (pooling) neither goes.
/// - **File**: `path` is the callback data file, relative to the log directory: the
///   [`CallbackDataWriter`](crate::monitor::CallbackDataWriter)'s (order `Deconv` after it, as
///   later in the tuple, to add `deconv/` to it once it is complete), or a file of its own. A
///   `deconv` group already there (a resumed run's) is replaced. Chief only.
///
/// ```
/// use burn::tensor::Tensor;
/// use burn_stoker::monitor::Deconv;
///
/// let device = burn_stoker::device::cpu();
/// let images: Vec<Tensor<4>> = vec![Tensor::zeros([4, 1, 8, 8], &device); 4];
/// // neon's defaults: 16 filters per layer, 25% of the batches.
/// let deconv = Deconv::new("data.h5", images).max_fm(8).dataset_pct(50.0);
/// # let _ = deconv;
/// ```
#[derive(Debug, Clone)]
pub struct Deconv {
    path: PathBuf,
    batches: Vec<Tensor<4>>,
    max_fm: usize,
    dataset_pct: f64,
}
crate::kind::kind!(Deconv);

impl Deconv {
    /// Write `deconv/` into the HDF5 file at `path`, from the validation images `batches`
    /// (`[batch, channels, height, width]` each).
    pub fn new(path: impl Into<PathBuf>, batches: Vec<Tensor<4>>) -> Self {
        Deconv { path: path.into(), batches, max_fm: 16, dataset_pct: 25.0 }
    }
    /// The filters (feature maps) shown per layer: the first `max_fm` (16 by default, neon's).
    pub fn max_fm(mut self, max_fm: usize) -> Self {
        self.max_fm = max_fm;
        self
    }
    /// The share of the batches searched, in percent (25 by default, neon's).
    pub fn dataset_pct(mut self, percent: f64) -> Self {
        self.dataset_pct = percent;
        self
    }
    /// The file, as given.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }
    /// The batches searched: `0..=n` with neon's `n`, within the batches given.
    fn searched(&self) -> usize {
        let n = (self.dataset_pct / 100.0 * self.batches.len() as f64 + 0.5).floor() as usize;
        (n + 1).min(self.batches.len())
    }
}

impl<M: Module + ConvLayers> Callback<M> for Deconv {
    fn name(&self) -> Cow<'static, str> {
        crate::kind::name_of::<Self>()
    }
    fn setup(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        check_setting(self.max_fm != 0, "Deconv", "max_fm", "at least 1", 0)?;
        if !(self.dataset_pct > 0.0 && self.dataset_pct <= 100.0) {
            return Err(Error::invalid(format!(
                "Deconv: dataset_pct must be in (0, 100], got {}",
                self.dataset_pct
            )));
        }
        if self.path.as_os_str().is_empty() {
            return Err(Error::invalid("Deconv: the path is empty"));
        }
        Ok(())
    }
    /// neon's `on_train_end`: the search, then the projections, then the file.
    fn after_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if !ctx.is_chief() {
            return Ok(());
        }
        let target = if self.path.is_absolute() { self.path.clone() } else { ctx.log_dir().join(&self.path) };
        let batches = &self.batches[..self.searched()];
        crate::logging::info!(
            "Deconv: guided backpropagation of {} feature maps per layer, searching {} batches",
            self.max_fm,
            batches.len()
        );
        let found = search::max_activations(ctx.model(), batches, self.max_fm)?;
        let projections = search::project(ctx.model(), &found)?;
        write::write(&target, &found, &projections)
    }
}
