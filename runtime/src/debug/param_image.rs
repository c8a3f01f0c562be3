//! [`DumpParamAsImage`]: a parameter of the model (conv filters, a weight matrix) written as PNG
//! images and put to TensorBoard.

use std::borrow::Cow;
use std::path::PathBuf;

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::Tensor;

use super::dump::FileWriter;
use super::image::put_and_write;
use crate::callback::{Callback, Context, PeriodSetting};
use crate::error::{Error, Result};
use crate::state::Image;

/// Writes a parameter of the model as images at its trigger, and puts them to the monitors: conv
/// filters to look at as training goes (tensorpack dumps a weight with `DumpTensorAsImage` on the
/// variable's name; here parameters are found by name in the model).
///
/// - **Which**: the parameter whose path is `name` (burn's field names joined with `.`, as
///   [`Hist`](crate::monitor::Hist) and `InjectShell`'s `params` name them: `conv1.weight`). A
///   name that is not there is an error at setup, naming those that are.
/// - **Images**, by the parameter's shape: `[O, I, H, W]` (a 2-D convolution's weight) gives one
///   image per filter, RGB when `I` is 3 and grey when `I` is 1, and one grey image per filter
///   and input channel otherwise (`O x I` images, filter by filter); `[O, I, K]` one grey `I x K`
///   image per output channel; `[R, C]` one grey image; `[N]` one grey row.
/// - **Pixels**: each image is stretched from its own minimum (black) to its maximum (white), as
///   filters are usually shown (a constant image is black; NaN is black).
/// - **Files and tags**: `<prefix>-<global_step>-<index>.png` in the log directory (the prefix
///   is the name by default), written by a thread of its own; the monitors receive
///   `<prefix>/<index>` (`<prefix>` alone for one image), which
///   [`TensorBoardWriter`](crate::monitor::TensorBoardWriter) shows in its *Images* tab.
/// - **When**: at the end of every epoch by default ([`every_k_epochs`](Self::every_k_epochs)),
///   and at every `trigger` (under [`PeriodicTrigger`](crate::trigger::PeriodicTrigger), every
///   `k` steps). One device-to-host transfer of the parameter then; nothing at other steps.
///
/// ```
/// use burn_stoker::debug::DumpParamAsImage;
/// // The first convolution's filters, every 5 epochs, 8 times larger.
/// let filters = DumpParamAsImage::new("conv1.weight").every_k_epochs(5).resize(24, 24);
/// # let _ = filters;
/// ```
#[derive(Debug)]
pub struct DumpParamAsImage {
    name: String,
    prefix: Option<String>,
    period: PeriodSetting,
    resize: Option<(u32, u32)>,
    dir: PathBuf,
    writer: Option<FileWriter>,
}
crate::kind::kind!(DumpParamAsImage);

impl DumpParamAsImage {
    /// Dump the parameter `name` at the end of every epoch.
    pub fn new(name: impl Into<String>) -> Self {
        DumpParamAsImage {
            name: name.into(),
            prefix: None,
            period: PeriodSetting::new().every_k_epochs(1),
            resize: None,
            dir: PathBuf::new(),
            writer: None,
        }
    }
    /// Every `k` epochs (1 by default).
    pub fn every_k_epochs(mut self, k: u64) -> Self {
        self.period = self.period.every_k_epochs(k);
        self
    }
    /// The file names' and tags' prefix (default: the parameter's name).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = Some(prefix.into());
        self
    }
    /// Resize every image to `height` x `width` pixels (nearest neighbour).
    pub fn resize(mut self, height: u32, width: u32) -> Self {
        self.resize = Some((height, width));
        self
    }

    fn find<M: Module>(&self, model: &M) -> std::result::Result<(Vec<usize>, Tensor<1>), Vec<String>> {
        let mut finder = Find { path: Vec::new(), wanted: &self.name, found: None, names: Vec::new() };
        model.visit(&mut finder);
        finder.found.ok_or(finder.names)
    }

    fn dump<M: Module>(&self, ctx: &mut Context<'_, M>) -> Result<()> {
        let (shape, tensor) = self.find(ctx.model()).map_err(|names| self.missing(&names))?;
        let values: Vec<f32> = tensor.into_data().iter::<f32>().collect();
        let images = param_images(&values, &shape)?;
        let prefix = self.prefix.clone().unwrap_or_else(|| self.name.replace(['/', '\\'], "_"));
        let step = ctx.global_step();
        put_and_write(ctx, self.writer.as_ref(), &self.dir, (&prefix, step), images, true, self.resize);
        Ok(())
    }

    fn missing(&self, names: &[String]) -> Error {
        Error::invalid(format!(
            "DumpParamAsImage: the model has no float parameter `{}`; it has: {}",
            self.name,
            names.join(", ")
        ))
    }
}

/// Finds one float parameter by path, and lists the paths it passes.
struct Find<'a> {
    path: Vec<String>,
    wanted: &'a str,
    found: Option<(Vec<usize>, Tensor<1>)>,
    names: Vec<String>,
}

impl ModuleVisitor for Find<'_> {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_string());
    }
    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let path = self.path.join(".");
        if path == self.wanted && self.found.is_none() {
            let tensor = param.val().detach();
            let shape = tensor.dims().to_vec();
            let n: usize = shape.iter().product();
            self.found = Some((shape, tensor.reshape([n])));
        }
        self.names.push(path);
    }
}

/// The images of a parameter of `shape` (see [`DumpParamAsImage`]), each stretched from its
/// minimum to its maximum.
pub(crate) fn param_images(values: &[f32], shape: &[usize]) -> Result<Vec<Image>> {
    // (images, height, width, channels), the values of each image contiguous, channels last.
    let (count, height, width, channels, transpose) = match *shape {
        [n] => (1, 1, n, 1, false),
        [r, c] => (1, r, c, 1, false),
        [o, i, k] => (o, i, k, 1, false),
        [o, 3, h, w] => (o, h, w, 3, true),
        [o, i, h, w] => (o * i, h, w, 1, false),
        _ => {
            return Err(Error::invalid(format!(
                "DumpParamAsImage: a parameter of shape {shape:?} has no image layout"
            )));
        }
    };
    let size = height * width * channels;
    if size == 0 || values.len() != count * size {
        return Err(Error::invalid(format!("DumpParamAsImage: a parameter of shape {shape:?} is empty")));
    }
    let dim = |n: usize| {
        u32::try_from(n).map_err(|_| Error::invalid(format!("an image dimension of {n} is too large")))
    };
    let (h, w) = (dim(height)?, dim(width)?);
    let images = values
        .chunks(size)
        .map(|filter| {
            // [3, H, W] -> [H, W, 3].
            let pixels: Vec<f32> = if transpose {
                (0..height * width)
                    .flat_map(|p| (0..3).map(move |c| filter[c * height * width + p]))
                    .collect()
            } else {
                filter.to_vec()
            };
            Image { height: h, width: w, channels: channels as u8, pixels: stretch(&pixels) }
        })
        .collect();
    Ok(images)
}

/// `values` stretched linearly from their minimum (0) to their maximum (255); NaN is 0.
fn stretch(values: &[f32]) -> Vec<u8> {
    let finite = values.iter().copied().filter(|v| v.is_finite());
    let (lo, hi) = finite.fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let range = hi - lo;
    values
        .iter()
        .map(|&v| if range > 0.0 && v.is_finite() { ((v - lo) / range * 255.0).round() as u8 } else { 0 })
        .collect()
}

impl<M: Module> Callback<M> for DumpParamAsImage {
    fn name(&self) -> Cow<'static, str> {
        crate::kind::detailed::<Self>(&self.name)
    }
    fn setup(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.period.check("DumpParamAsImage")?;
        if let Some((h, w)) = self.resize
            && (h == 0 || w == 0)
        {
            return Err(Error::invalid(format!("DumpParamAsImage cannot resize images to {h}x{w}")));
        }
        let (shape, _) = self.find(ctx.model()).map_err(|names| self.missing(&names))?;
        param_images(&vec![0.0; shape.iter().product()], &shape)?;
        self.dir = ctx.log_dir().to_path_buf();
        Ok(())
    }
    fn before_train(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        self.writer = Some(FileWriter::start("DumpParamAsImage")?);
        Ok(())
    }
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if self.period.period().epochs_divide(ctx.epoch_num()) {
            self.dump(ctx)?;
        }
        Ok(())
    }
    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.dump(ctx)
    }
    fn after_train(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        self.writer.take().map_or(Ok(()), FileWriter::finish)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_become_stretched_images() {
        // Two RGB filters of 1x2: [O=2, I=3, H=1, W=2].
        let values: Vec<f32> = (0..12).map(|v| v as f32).collect();
        let images = param_images(&values, &[2, 3, 1, 2]).unwrap();
        assert_eq!(images.len(), 2);
        assert_eq!((images[0].height, images[0].width, images[0].channels), (1, 2, 3));
        // Filter 0: R = [0, 1], G = [2, 3], B = [4, 5], interleaved, stretched from 0..5.
        assert_eq!(images[0].pixels, vec![0, 102, 204, 51, 153, 255]);
        // Grey: [O=1, I=2, H=1, W=2] gives two images; a constant one is black.
        let images = param_images(&[1.0, 3.0, 7.0, 7.0], &[1, 2, 1, 2]).unwrap();
        assert_eq!(images.iter().map(|i| i.pixels.clone()).collect::<Vec<_>>(), [vec![0, 255], vec![0, 0]]);
        // A matrix is one image; NaN is black.
        let images = param_images(&[0.0, f32::NAN, 2.0, 1.0], &[2, 2]).unwrap();
        assert_eq!(images[0].pixels, vec![0, 0, 255, 128]);
        assert!(param_images(&[0.0; 32], &[2, 2, 2, 2, 2]).is_err());
    }
}
