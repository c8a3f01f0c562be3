//! The writer's encoding, checked against TensorFlow's and protobuf's.

use super::*;

/// With or without `sys-metrics`, the name is the kernel's (what `/proc` says on Linux).
#[cfg(target_os = "linux")]
#[test]
fn writer_host_name_is_the_kernels() {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let kernel: String = kernel
        .trim()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '_' })
        .collect();
    assert_eq!(crate::state::host_name(), kernel);
}

#[test]
fn masked_crc_matches_tensorflow() {
    // CRC-32C of "123456789" is 0xE3069283; TensorFlow masks it as rotr(crc, 15) + 0xa282ead8.
    assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
    assert_eq!(masked_crc(b"123456789"), 0xE306_9283u32.rotate_right(15).wrapping_add(0xa282_ead8));
}

#[test]
fn varints_encode_like_protobuf() {
    let mut proto = Proto::default();
    proto.varint(2, 300);
    assert_eq!(proto.0, vec![0x10, 0xac, 0x02]);
}
