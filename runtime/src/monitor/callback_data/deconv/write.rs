//! neon's `deconv` group in the callback data file, as its `DeconvCallback` lays it out.

use std::path::Path;

use hdf5::{Group, H5Type};

use super::search::{Found, scale_to_rgb};
use crate::error::{Error, Result};

fn failed(path: &Path, error: hdf5::Error) -> Error {
    Error::context(format!("Deconv: writing `deconv` into {}", path.display()), error)
}

/// A dataset `name` of `shape` in `group`, holding `values` (row-major).
fn dataset<T: H5Type>(group: &Group, name: &str, shape: &[usize], values: &[T]) -> hdf5::Result<()> {
    group.new_dataset::<T>().shape(shape.to_vec()).create(name)?.write_raw(values)
}

/// `deconv/max_act/<layer>` and `deconv/img/batch_<b>` into the file at `path` (this run's
/// callback data file, or a new one); a `deconv` group already there is replaced.
pub(super) fn write(path: &Path, found: &Found, vis: &[Vec<Option<Vec<u8>>>]) -> Result<()> {
    let file = super::super::open::open_or_create(path)?;
    write_groups(&file, found, vis).map_err(|e| failed(path, e))?;
    file.flush().map_err(|e| failed(path, e))
}

fn write_groups(file: &hdf5::File, found: &Found, vis: &[Vec<Option<Vec<u8>>>]) -> hdf5::Result<()> {
    if file.link_exists("deconv") {
        file.unlink("deconv")?;
    }
    let deconv = file.create_group("deconv")?;
    let max_act = deconv.create_group("max_act")?;
    let [c, h, w] = found.image_shape;
    for (l, (records, shown)) in found.layers.iter().zip(vis).enumerate() {
        // neon's `create_group("deconv/max_act/{0:04}".format(l))` and its four datasets.
        let group = max_act.create_group(&format!("{l:04}"))?;
        let n = records.len();
        let batch_img: Vec<u16> = records.iter().flat_map(|r| [r.batch, r.image]).collect();
        dataset(&group, "batch_img", &[n, 2], &batch_img)?;
        let fm_loc: Vec<i16> = records.iter().map(|r| r.loc).collect();
        dataset(&group, "fm_loc", &[n, 1], &fm_loc)?;
        let mut pixels = vec![0u8; n * h * w * c];
        for (fm, image) in shown.iter().enumerate() {
            if let Some(image) = image {
                pixels[fm * h * w * c..(fm + 1) * h * w * c].copy_from_slice(image);
            }
        }
        dataset(&group, "vis", &[n, h, w, c], &pixels)?;
        let activation: Vec<f32> = records.iter().map(|r| r.activation).collect();
        dataset(&group, "activation", &[n, 1], &activation)?;
    }
    let img = deconv.create_group("img")?;
    for stored in &found.stored {
        // neon's `store_images`: the images, (height, width, channels, image), scaled together
        // to 0..=255 and truncated, gzip-compressed (h5py's `compression=True`); an attribute per
        // image, its index in the batch naming its place in the dataset.
        let group = img.create_group(&format!("batch_{}", stored.batch))?;
        let count = stored.images.len();
        let mut chw = Vec::with_capacity(count);
        for image in &stored.images {
            chw.push(image.clone().into_data().iter::<f32>().collect::<Vec<f32>>());
        }
        let hwcn: Vec<f32> = (0..h * w * c * count)
            .map(|k| {
                let (i, rest) = (k % count, k / count);
                let (channel, pixel) = (rest % c, rest / c);
                chw[i][channel * h * w + pixel]
            })
            .collect();
        let bytes: Vec<u8> = scale_to_rgb(&hwcn).into_iter().map(|v| v as u8).collect();
        let mut builder = group.new_dataset::<u8>().shape([h, w, c, count]).chunk([h, w, c, count]);
        if hdf5::filters::deflate_available() {
            builder = builder.deflate(4);
        }
        builder.create("HWC_uint8")?.write_raw(&bytes)?;
        for (place, index) in stored.indices.iter().enumerate() {
            group.new_attr::<i64>().create(index.to_string().as_str())?.write_scalar(&(place as i64))?;
        }
    }
    Ok(())
}
