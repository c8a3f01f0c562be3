//! PNG encoding for TensorBoard's images and `DumpTensorAsImage`, through the `png` crate:
//! 8-bit grey, RGB or RGBA, deflate-compressed with adaptive row filters (`Compression::Balanced`),
//! so that images in event files take what a PNG from any other tool takes.

use crate::state::Image;

/// Encode `image` as a PNG file. An image whose pixel count does not match its size, or with
/// other than 1, 3 or 4 channels, is an error saying so.
pub(crate) fn encode_png(image: &Image) -> Result<Vec<u8>, String> {
    let color = match image.channels {
        1 => png::ColorType::Grayscale,
        3 => png::ColorType::Rgb,
        4 => png::ColorType::Rgba,
        c => return Err(format!("an image has 1, 3 or 4 channels, not {c}")),
    };
    let expected = image.width as usize * image.channels as usize * image.height as usize;
    if image.pixels.len() != expected || image.width == 0 || image.height == 0 {
        return Err(format!(
            "a {}x{}x{} image has {expected} values, not {}",
            image.height,
            image.width,
            image.channels,
            image.pixels.len()
        ));
    }
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, image.width, image.height);
    encoder.set_color(color);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(png::Compression::Balanced);
    let failed = |e: png::EncodingError| {
        format!("encoding a {}x{}x{} image as PNG failed: {e}", image.height, image.width, image.channels)
    };
    let mut writer = encoder.write_header().map_err(failed)?;
    writer.write_image_data(&image.pixels).map_err(failed)?;
    writer.finish().map_err(failed)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grey_image_decodes_to_its_pixels() {
        let image = Image { height: 2, width: 3, channels: 1, pixels: vec![0, 50, 100, 150, 200, 250] };
        let bytes = encode_png(&image).unwrap();
        let mut reader = png::Decoder::new(std::io::Cursor::new(bytes)).read_info().unwrap();
        let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut pixels).unwrap();
        assert_eq!((info.width, info.height, info.color_type), (3, 2, png::ColorType::Grayscale));
        assert_eq!(&pixels[..info.buffer_size()], &image.pixels[..]);
    }

    /// An image summary's PNG is deflate-compressed (a smooth 64x64 RGB gradient comes out far
    /// smaller than its raw pixels) and the `png` crate's decoder gives back the same pixels.
    #[test]
    fn a_smooth_rgb_image_is_compressed_and_decodes_to_the_same_pixels() {
        let (height, width) = (64u32, 64u32);
        let mut pixels = Vec::with_capacity((height * width * 3) as usize);
        for y in 0..height {
            for x in 0..width {
                pixels.extend_from_slice(&[(x * 4) as u8, (y * 4) as u8, ((x + y) * 2) as u8]);
            }
        }
        let image = Image { height, width, channels: 3, pixels: pixels.clone() };
        let png = encode_png(&image).unwrap();
        assert!(
            png.len() < pixels.len() / 2,
            "a smooth {height}x{width} RGB image is {} bytes as PNG, its raw pixels {}: not compressed",
            png.len(),
            pixels.len()
        );
        let mut reader = png::Decoder::new(std::io::Cursor::new(png)).read_info().unwrap();
        let mut decoded = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut decoded).unwrap();
        decoded.truncate(info.buffer_size());
        assert_eq!((info.width, info.height, info.color_type), (width, height, png::ColorType::Rgb));
        assert_eq!(info.bit_depth, png::BitDepth::Eight);
        assert_eq!(decoded, pixels);
    }

    #[test]
    fn wrong_sizes_and_channel_counts_are_errors() {
        let bad = Image { height: 2, width: 2, channels: 3, pixels: vec![0; 5] };
        assert_eq!(encode_png(&bad).unwrap_err(), "a 2x2x3 image has 12 values, not 5");
        let two = Image { height: 1, width: 1, channels: 2, pixels: vec![0; 2] };
        assert_eq!(encode_png(&two).unwrap_err(), "an image has 1, 3 or 4 channels, not 2");
    }
}
