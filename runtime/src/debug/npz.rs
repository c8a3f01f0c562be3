//! numpy's file formats, written by hand: `.npy` version 1.0 holding little-endian float32, and
//! `.npz`, an uncompressed zip archive of `.npy` files, one per array, that
//! `numpy.load(path)` reads as a dictionary of arrays.
//!
//! Kept hand-written on purpose: a stored zip of a few `.npy` files is some sixty lines, checked
//! by numpy itself in `tests/debug.rs`; the `zip` and `ndarray-npy` crates would bring a
//! compression stack and an array type for it. The CRC-32 comes from `crc32fast`.

/// One `.npy` file (format version 1.0) holding `values` as little-endian float32 of shape
/// `shape` (row-major, `fortran_order: False`); an empty shape is a 0-dimensional array.
///
/// # Panics
/// If `values` does not have the number of elements `shape` implies.
pub fn encode_npy(values: &[f32], shape: &[usize]) -> Vec<u8> {
    assert_eq!(
        values.len(),
        shape.iter().product::<usize>(),
        "a tensor of shape {shape:?} has {} values, not {}",
        shape.iter().product::<usize>(),
        values.len()
    );
    let dims = match shape {
        [n] => format!("({n},)"),
        _ => format!("({})", shape.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")),
    };
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {dims}, }}");
    // Magic (6) + version (2) + header length (2) + header, padded with spaces and ended by a
    // newline to a multiple of 64 bytes, so that the data is aligned.
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + 4 * values.len());
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for value in values {
        out.extend_from_slice(&value.to_le_bytes());
    }
    out
}

/// A zip archive of `files` (name, contents), every one stored uncompressed with its CRC-32.
/// An error if the archive would need zip64 (more than 65535 files, or 4 GiB).
pub fn encode_zip(files: &[(String, Vec<u8>)]) -> Result<Vec<u8>, String> {
    if files.len() > usize::from(u16::MAX) {
        return Err(format!("{} files do not fit in a zip archive without zip64", files.len()));
    }
    let total: usize =
        files.iter().map(|(name, data)| 30 + 46 + 2 * name.len() + data.len()).sum::<usize>() + 22;
    if total > u32::MAX as usize {
        return Err(format!("{total} bytes do not fit in a zip archive without zip64"));
    }
    // 1980-01-01 00:00:00, the earliest DOS date: the archive's bytes do not depend on the clock.
    let (time, date) = (0u16, (1 << 5) | 1u16);
    let mut out = Vec::with_capacity(total);
    let mut central = Vec::new();
    for (name, data) in files {
        let offset = out.len() as u32;
        let crc = crc32(data);
        // Bit 11: the name is UTF-8.
        let flags: u16 = if name.is_ascii() { 0 } else { 1 << 11 };
        let common = |buf: &mut Vec<u8>| {
            buf.extend_from_slice(&20u16.to_le_bytes()); // version needed: 2.0
            buf.extend_from_slice(&flags.to_le_bytes());
            buf.extend_from_slice(&0u16.to_le_bytes()); // stored
            buf.extend_from_slice(&time.to_le_bytes());
            buf.extend_from_slice(&date.to_le_bytes());
            buf.extend_from_slice(&crc.to_le_bytes());
            buf.extend_from_slice(&(data.len() as u32).to_le_bytes()); // compressed size
            buf.extend_from_slice(&(data.len() as u32).to_le_bytes()); // uncompressed size
            buf.extend_from_slice(&(name.len() as u16).to_le_bytes());
            buf.extend_from_slice(&0u16.to_le_bytes()); // extra field length
        };
        out.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        common(&mut out);
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(data);

        central.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        central.extend_from_slice(&20u16.to_le_bytes()); // version made by: 2.0, MS-DOS
        common(&mut central);
        central.extend_from_slice(&0u16.to_le_bytes()); // comment length
        central.extend_from_slice(&0u16.to_le_bytes()); // disk number
        central.extend_from_slice(&0u16.to_le_bytes()); // internal attributes
        central.extend_from_slice(&0u32.to_le_bytes()); // external attributes
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(name.as_bytes());
    }
    let central_offset = out.len() as u32;
    out.extend_from_slice(&central);
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes()); // this disk
    out.extend_from_slice(&0u16.to_le_bytes()); // the disk of the central directory
    out.extend_from_slice(&(files.len() as u16).to_le_bytes());
    out.extend_from_slice(&(files.len() as u16).to_le_bytes());
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&central_offset.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes()); // comment length
    Ok(out)
}

/// An `.npz` archive: one `<name>.npy` per array (values, shape), in the order given.
pub fn encode_npz<'a>(
    arrays: impl IntoIterator<Item = (&'a str, &'a [f32], &'a [usize])>,
) -> Result<Vec<u8>, String> {
    let files: Vec<(String, Vec<u8>)> = arrays
        .into_iter()
        .map(|(name, values, shape)| (format!("{name}.npy"), encode_npy(values, shape)))
        .collect();
    encode_zip(&files)
}

/// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320), as zip uses: `crc32fast`'s, the crate the
/// PNG encoder uses too.
pub fn crc32(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_matches_the_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn npy_header_is_aligned_and_describes_the_array() {
        let npy = encode_npy(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
        assert_eq!(&npy[..8], b"\x93NUMPY\x01\x00");
        let header_len = u16::from_le_bytes([npy[8], npy[9]]) as usize;
        assert_eq!((10 + header_len) % 64, 0);
        let header = std::str::from_utf8(&npy[10..10 + header_len]).unwrap();
        assert!(
            header.starts_with("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"),
            "{header}"
        );
        assert!(header.ends_with('\n'));
        assert_eq!(npy.len(), 10 + header_len + 24);
        assert_eq!(&npy[10 + header_len..10 + header_len + 4], &1.0f32.to_le_bytes());
        let header_of = |npy: &[u8]| {
            let len = u16::from_le_bytes([npy[8], npy[9]]) as usize;
            std::str::from_utf8(&npy[10..10 + len]).unwrap().to_string()
        };
        assert!(header_of(&encode_npy(&[7.0], &[1])).contains("'shape': (1,), }"));
        assert!(header_of(&encode_npy(&[7.0], &[])).contains("'shape': (), }"));
    }

    #[test]
    fn zip_entries_are_stored_with_their_crc_and_found_from_the_end() {
        let zip = encode_zip(&[("a.npy".into(), b"hello".to_vec()), ("b.npy".into(), vec![])]).unwrap();
        // End of central directory: 2 entries, the directory's offset.
        let end = zip.len() - 22;
        assert_eq!(&zip[end..end + 4], &0x0605_4b50u32.to_le_bytes());
        assert_eq!(u16::from_le_bytes([zip[end + 10], zip[end + 11]]), 2);
        let offset = u32::from_le_bytes(zip[end + 16..end + 20].try_into().unwrap()) as usize;
        assert_eq!(&zip[offset..offset + 4], &0x0201_4b50u32.to_le_bytes());
        // The first local header: stored, its CRC, sizes and name, then the data.
        assert_eq!(&zip[..4], &0x0403_4b50u32.to_le_bytes());
        assert_eq!(u16::from_le_bytes([zip[8], zip[9]]), 0);
        assert_eq!(u32::from_le_bytes(zip[14..18].try_into().unwrap()), crc32(b"hello"));
        assert_eq!(u32::from_le_bytes(zip[18..22].try_into().unwrap()), 5);
        assert_eq!(&zip[30..35], b"a.npy");
        assert_eq!(&zip[35..40], b"hello");
    }
}
