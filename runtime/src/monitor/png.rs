//! A minimal PNG encoder for TensorBoard's images: 8-bit grey, RGB or RGBA, every row with
//! filter 0, the pixels in deflate *stored* blocks. Larger than a compressed PNG, but exact,
//! dependency-free and fast; TensorBoard decodes it like any other.

use crate::state::Image;

/// Encode `image` as a PNG file. An image whose pixel count does not match its size, or with
/// other than 1, 3 or 4 channels, is an error saying so.
pub fn encode_png(image: &Image) -> Result<Vec<u8>, String> {
    let color_type = match image.channels {
        1 => 0u8,
        3 => 2,
        4 => 6,
        c => return Err(format!("an image has 1, 3 or 4 channels, not {c}")),
    };
    let row = image.width as usize * image.channels as usize;
    let expected = row * image.height as usize;
    if image.pixels.len() != expected || image.width == 0 || image.height == 0 {
        return Err(format!(
            "a {}x{}x{} image has {expected} values, not {}",
            image.height,
            image.width,
            image.channels,
            image.pixels.len()
        ));
    }
    // Scanlines: a filter byte (0, none) before each row.
    let mut raw = Vec::with_capacity(expected + image.height as usize);
    for line in image.pixels.chunks(row) {
        raw.push(0);
        raw.extend_from_slice(line);
    }
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut header = Vec::with_capacity(13);
    header.extend_from_slice(&image.width.to_be_bytes());
    header.extend_from_slice(&image.height.to_be_bytes());
    header.extend_from_slice(&[8, color_type, 0, 0, 0]);
    chunk(&mut png, b"IHDR", &header);
    chunk(&mut png, b"IDAT", &zlib_stored(&raw));
    chunk(&mut png, b"IEND", &[]);
    Ok(png)
}

fn chunk(png: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    png.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let start = png.len();
    png.extend_from_slice(kind);
    png.extend_from_slice(data);
    let crc = crc32(&png[start..]);
    png.extend_from_slice(&crc.to_be_bytes());
}

/// A zlib stream of stored (uncompressed) deflate blocks.
fn zlib_stored(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x78, 0x01];
    let mut blocks = data.chunks(65_535).peekable();
    if blocks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(block) = blocks.next() {
        out.push(u8::from(blocks.peek().is_none()));
        let len = block.len() as u16;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(block);
    }
    out.extend_from_slice(&adler32(data).to_be_bytes());
    out
}

fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in data.chunks(5552) {
        for &byte in chunk {
            a += u32::from(byte);
            b += a;
        }
        a %= 65_521;
        b %= 65_521;
    }
    (b << 16) | a
}

/// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320), as PNG chunks use.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksums_match_known_values() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
    }

    #[test]
    fn an_image_round_trips_through_its_stored_blocks() {
        let image = Image { height: 2, width: 3, channels: 3, pixels: (0..18).collect() };
        let png = encode_png(&image).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        // IHDR: width 3, height 2, depth 8, RGB.
        assert_eq!(&png[12..16], b"IHDR");
        assert_eq!(&png[16..20], &3u32.to_be_bytes());
        assert_eq!(&png[20..24], &2u32.to_be_bytes());
        assert_eq!(&png[24..26], &[8, 2]);
        // Walk the chunks, check each CRC, collect IDAT.
        let mut at = 8;
        let mut idat = Vec::new();
        while at < png.len() {
            let len = u32::from_be_bytes(png[at..at + 4].try_into().unwrap()) as usize;
            let body = &png[at + 4..at + 8 + len];
            let crc = u32::from_be_bytes(png[at + 8 + len..at + 12 + len].try_into().unwrap());
            assert_eq!(crc32(body), crc);
            if &body[..4] == b"IDAT" {
                idat.extend_from_slice(&body[4..]);
            }
            at += 12 + len;
        }
        // One final stored block: header, len, nlen, data, adler.
        assert_eq!(&idat[..2], &[0x78, 0x01]);
        assert_eq!(idat[2], 1);
        let len = u16::from_le_bytes([idat[3], idat[4]]) as usize;
        assert_eq!(u16::from_le_bytes([idat[5], idat[6]]), !(len as u16));
        let raw = &idat[7..7 + len];
        assert_eq!(
            raw,
            [&[0u8][..], &(0..9).collect::<Vec<u8>>(), &[0], &(9..18).collect::<Vec<u8>>()].concat()
        );
        assert_eq!(&idat[7 + len..], &adler32(raw).to_be_bytes());
    }

    #[test]
    fn a_mismatched_image_is_an_error() {
        let image = Image { height: 2, width: 2, channels: 3, pixels: vec![0; 5] };
        assert_eq!(encode_png(&image).unwrap_err(), "a 2x2x3 image has 12 values, not 5");
        let image = Image { height: 1, width: 1, channels: 2, pixels: vec![0; 2] };
        assert!(encode_png(&image).unwrap_err().contains("not 2"));
    }
}
