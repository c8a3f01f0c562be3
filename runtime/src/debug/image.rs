//! [`DumpTensorAsImage`]: a step output written as PNG images.

use std::path::PathBuf;

use burn::tensor::TensorData;

use super::dump::FileWriter;
use super::tensors::{HostTensor, TensorFetches, tensor_period_builders};
use crate::callback::{Callback, Context, Counters};
use crate::error::{Error, Result, check_setting};
use crate::fetch::{Fetch, Fetched};
use crate::monitor::png::encode_png;
use crate::state::Image;

/// The function applied to the tensor before it becomes images.
type MapFn = Box<dyn FnMut(HostTensor<'_>) -> TensorData + Send>;

/// Writes a step output as PNG images in the log directory (tensorpack's
/// `DumpTensorAsImage(tensor_name, prefix=None, map_func=None, scale=255)`).
///
/// The tensor, after the optional [`map`](Self::map) function, is read as:
/// - `[H, W]`: one grey image;
/// - `[H, W, C]` with `C` = 1, 3 or 4: one image, grey, RGB or RGBA;
/// - `[N, H, W, C]`, or `[N, H, W]` when the last dimension is not 1, 3 or 4: `N` images.
///
/// Each value is multiplied by `scale` (255 by default, for values in [0, 1]), clipped to
/// [0, 255] and truncated to an 8-bit pixel, as tensorpack does (NaN becomes 0). One image is
/// written as `<prefix>-<global_step>.png`, a batch as `<prefix>-<global_step>-<index>.png`
/// (index from 0). The prefix defaults to the tensor's name with `/` replaced by `_`.
///
/// The images also go to the monitors, as tensorpack's `trainer.monitors.put_image(prefix,
/// val)`: one image under the prefix, the images of a batch as `<prefix>/<index>`;
/// [`TensorBoardWriter`](crate::monitor::TensorBoardWriter) shows them in its *Images* tab.
///
/// It writes the value of the last step of every epoch by default, of every `k`-th global step
/// with [`every_k_steps`](Self::every_k_steps); the tensor is fetched only at those steps, and
/// the images are encoded and written by a thread of its own, atomically. Every file is written
/// when `after_train` returns.
///
/// Differences from tensorpack: the file names carry the global step (tensorpack's carry the
/// epoch, `-ep001`, and leave out the index of the first image of a batch); the channels are
/// written in their order (tensorpack's OpenCV takes 3 channels as BGR); a `[N, H, W]` batch of
/// grey images is understood; [`resize`](Self::resize) scales the images (nearest neighbour).
///
/// ```
/// use burn::tensor::TensorData;
/// use burn_stoker::debug::DumpTensorAsImage;
/// // The step puts "reconstruction", a [batch, 28, 28] tensor with values in [0, 1]: write the
/// // first 4 as train_log/reconstruction-<step>-<i>.png, 4 times larger, every epoch.
/// let dump = DumpTensorAsImage::new("reconstruction")
///     .map(|t| {
///         let n = t.shape[0].min(4);
///         TensorData::new(t.values[..n * 28 * 28].to_vec(), [n, 28, 28])
///     })
///     .resize(112, 112);
/// # let _ = dump;
/// ```
pub struct DumpTensorAsImage {
    tensors: TensorFetches,
    prefix: Option<String>,
    map: Option<MapFn>,
    scale: f32,
    resize: Option<(u32, u32)>,
    dir: PathBuf,
    writer: Option<FileWriter>,
}
crate::kind::kind!(DumpTensorAsImage);

impl std::fmt::Debug for DumpTensorAsImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DumpTensorAsImage")
            .field("name", &self.tensors.first_name())
            .field("prefix", &self.prefix)
            .field("scale", &self.scale)
            .field("resize", &self.resize)
            .field("tensors", &self.tensors)
            .finish()
    }
}

impl DumpTensorAsImage {
    /// Write the output `name` as images at the last step of every epoch.
    pub fn new(name: impl Into<std::borrow::Cow<'static, str>>) -> Self {
        DumpTensorAsImage {
            tensors: TensorFetches::every_step("DumpTensorAsImage", [name]).every_k_epochs(1),
            prefix: None,
            map: None,
            scale: 255.0,
            resize: None,
            dir: PathBuf::new(),
            writer: None,
        }
    }
    /// The file names' prefix (default: the tensor's name, `/` replaced by `_`).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = Some(prefix.into());
        self
    }
    /// Map the tensor to an image or a batch of images (tensorpack's `map_func`) before scaling.
    /// It runs on the training thread at the steps that are dumped.
    pub fn map(mut self, map: impl FnMut(HostTensor<'_>) -> TensorData + Send + 'static) -> Self {
        self.map = Some(Box::new(map));
        self
    }
    /// The multiplier applied to the values (after `map`) before clipping to [0, 255]; 255 by
    /// default.
    pub fn scale(mut self, scale: f32) -> Self {
        self.scale = scale;
        self
    }
    /// Resize every image to `height` x `width` pixels (nearest neighbour) before writing.
    pub fn resize(mut self, height: u32, width: u32) -> Self {
        self.resize = Some((height, width));
        self
    }
    tensor_period_builders!("Write");

    fn file_prefix(&self) -> String {
        self.prefix.clone().unwrap_or_else(|| self.tensors.first_name().replace(['/', '\\'], "_"))
    }
}

/// The images a tensor holds: `[H, W]`, `[H, W, C]`, `[N, H, W]` or `[N, H, W, C]` (see
/// [`DumpTensorAsImage`]), scaled, clipped and truncated to 8 bits. The second value tells a
/// batch from a single image.
pub(crate) fn tensor_images(values: &[f32], shape: &[usize], scale: f32) -> Result<(Vec<Image>, bool)> {
    let (count, height, width, channels, batch) = match *shape {
        [h, w] => (1, h, w, 1, false),
        [h, w, c] if matches!(c, 1 | 3 | 4) => (1, h, w, c, false),
        [n, h, w] => (n, h, w, 1, true),
        [n, h, w, c] => (n, h, w, c, true),
        _ => {
            return Err(Error::fetch(format!(
                "a tensor of shape {shape:?} is not an image: give [H, W], [H, W, C], [N, H, W] or [N, H, W, C]"
            )));
        }
    };
    if !matches!(channels, 1 | 3 | 4) {
        return Err(Error::fetch(format!(
            "a tensor of shape {shape:?} has {channels} channels: an image has 1, 3 or 4"
        )));
    }
    if height == 0 || width == 0 || values.len() != shape.iter().product::<usize>() {
        return Err(Error::fetch(format!(
            "a tensor of shape {shape:?} with {} values is not an image",
            values.len()
        )));
    }
    let size = height * width * channels;
    let (height, width) = (dimension(height)?, dimension(width)?);
    let images = (0..count)
        .map(|i| Image {
            height,
            width,
            channels: channels as u8,
            pixels: values[i * size..(i + 1) * size].iter().map(|&v| pixel(v, scale)).collect(),
        })
        .collect();
    Ok((images, batch))
}

fn dimension(n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::fetch(format!("an image dimension of {n} pixels is too large")))
}

/// `value * scale`, clipped to [0, 255] and truncated (NaN is 0), as numpy's
/// `np.clip(v * scale, 0, 255).astype('uint8')`.
fn pixel(value: f32, scale: f32) -> u8 {
    // `as` saturates and maps NaN to 0.
    (value * scale).clamp(0.0, 255.0) as u8
}

/// `image` resized to `height` x `width` by nearest neighbour.
pub(crate) fn resize_nearest(image: &Image, height: u32, width: u32) -> Image {
    let channels = usize::from(image.channels);
    let mut pixels = Vec::with_capacity(height as usize * width as usize * channels);
    for y in 0..u64::from(height) {
        let sy = (y * u64::from(image.height) / u64::from(height)) as usize;
        for x in 0..u64::from(width) {
            let sx = (x * u64::from(image.width) / u64::from(width)) as usize;
            let at = (sy * image.width as usize + sx) * channels;
            pixels.extend_from_slice(&image.pixels[at..at + channels]);
        }
    }
    Image { height, width, channels: image.channels, pixels }
}

impl DumpTensorAsImage {
    /// Write `images` as `<prefix>-<step>[-<index>].png` and put them to the monitors.
    fn write_images<M>(&self, ctx: &mut Context<'_, M>, prefix: &str, images: Vec<Image>, batch: bool) {
        let step = ctx.global_step();
        put_and_write(ctx, self.writer.as_ref(), &self.dir, (prefix, step), images, batch, self.resize);
    }
}

/// Put `images` to the monitors as tensorpack's `put_image(prefix, images)` names them (`prefix`
/// for one image, `prefix/<index>` for each of several), resized when asked, and hand each to
/// `writer` as `<dir>/<prefix>-<step>.png` (one image) or `<prefix>-<step>-<index>.png` (a batch).
pub(crate) fn put_and_write<M>(
    ctx: &mut Context<'_, M>,
    writer: Option<&FileWriter>,
    dir: &std::path::Path,
    (prefix, step): (&str, u64),
    images: Vec<Image>,
    batch: bool,
    resize: Option<(u32, u32)>,
) {
    let several = images.len() > 1;
    for (index, image) in images.into_iter().enumerate() {
        let image = match resize {
            Some((h, w)) => resize_nearest(&image, h, w),
            None => image,
        };
        let tag = if several { format!("{prefix}/{index}") } else { prefix.to_string() };
        ctx.monitors().put_image(&tag, image.clone());
        let name =
            if batch { format!("{prefix}-{step}-{index}.png") } else { format!("{prefix}-{step}.png") };
        if let Some(writer) = writer {
            writer.write(dir.join(name), Box::new(move || encode_png(&image)));
        }
    }
}

impl<M> Callback<M> for DumpTensorAsImage {
    fn fetches(&self) -> &[Fetch] {
        self.tensors.fetches()
    }
    fn wants_fetch(&self, counters: &Counters) -> bool {
        self.tensors.wants(counters)
    }
    fn setup(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.tensors.check()?;
        if let Some((h, w)) = self.resize
            && (h == 0 || w == 0)
        {
            return Err(Error::invalid(format!("DumpTensorAsImage cannot resize images to {h}x{w}")));
        }
        check_setting(self.scale.is_finite(), "DumpTensorAsImage", "scale", "finite", self.scale)?;
        self.dir = ctx.log_dir().to_path_buf();
        Ok(())
    }
    fn before_train(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        self.writer = Some(FileWriter::start("DumpTensorAsImage")?);
        Ok(())
    }
    fn after_step(&mut self, ctx: &mut Context<'_, M>, values: &Fetched<'_>) -> Result<()> {
        let Some(values) = self.tensors.due_values(ctx.counters(), values)? else {
            return Ok(());
        };
        let tensor = values.get(0);
        let (images, batch) = match &mut self.map {
            None => tensor_images(tensor.values, tensor.shape, self.scale)?,
            Some(map) => {
                let data = map(tensor);
                let shape = data.shape().to_vec();
                let values: Vec<f32> = data.iter::<f32>().collect();
                tensor_images(&values, &shape, self.scale)?
            }
        };
        let prefix = self.file_prefix();
        self.write_images(ctx, &prefix, images, batch);
        Ok(())
    }
    fn after_train(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        self.writer.take().map_or(Ok(()), FileWriter::finish)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pixels_are_scaled_clipped_and_truncated() {
        assert_eq!(pixel(0.5, 255.0), 127);
        assert_eq!(pixel(1.5, 255.0), 255);
        assert_eq!(pixel(-0.1, 255.0), 0);
        assert_eq!(pixel(f32::NAN, 255.0), 0);
        assert_eq!(pixel(3.0, 1.0), 3);
    }

    #[test]
    fn shapes_are_read_as_images_or_batches() {
        let (images, batch) = tensor_images(&[0.0; 6], &[2, 3], 1.0).unwrap();
        assert_eq!((images.len(), batch, images[0].channels), (1, false, 1));
        let (images, batch) = tensor_images(&[0.0; 18], &[2, 3, 3], 1.0).unwrap();
        assert_eq!((images.len(), batch, images[0].channels), (1, false, 3));
        let (images, batch) = tensor_images(&[0.0; 24], &[2, 3, 4], 1.0).unwrap();
        assert_eq!((images.len(), batch, images[0].channels), (1, false, 4));
        let (images, batch) = tensor_images(&[0.0; 30], &[2, 3, 5], 1.0).unwrap();
        assert_eq!((images.len(), batch, images[0].height, images[0].width), (2, true, 3, 5));
        let (images, batch) = tensor_images(&[0.0; 36], &[2, 2, 3, 3], 1.0).unwrap();
        assert_eq!((images.len(), batch, images[0].channels), (2, true, 3));
        assert!(tensor_images(&[0.0; 4], &[4], 1.0).is_err());
        assert!(tensor_images(&[0.0; 8], &[1, 2, 2, 2], 1.0).unwrap_err().to_string().contains("2 channels"));
    }

    #[test]
    fn nearest_neighbour_repeats_pixels() {
        let image = Image { height: 2, width: 2, channels: 1, pixels: vec![1, 2, 3, 4] };
        let big = resize_nearest(&image, 4, 4);
        assert_eq!(big.pixels, vec![1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4]);
        let small = resize_nearest(&big, 2, 2);
        assert_eq!(small.pixels, image.pixels);
    }
}
