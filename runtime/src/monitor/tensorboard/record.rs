//! A record as TensorBoard's `Summary.Value` (a scalar, an image, a histogram, a text), and
//! TFRecord's masked CRC-32C around each event.

use super::proto::Proto;
use crate::monitor::png::encode_png;
use crate::state::{Histogram, Record, Value};

/// TFRecord's masked CRC-32C.
pub(super) fn masked_crc(data: &[u8]) -> u32 {
    let crc = crc32c::crc32c(data);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// `tensorflow.Summary.Value` for one record.
pub(super) fn summary_value(record: &Record) -> Result<Proto, String> {
    let mut value = Proto::default();
    value.bytes(1, record.name.as_bytes());
    match &record.value {
        Value::Scalar(v) => value.float(2, *v as f32),
        Value::Image(image) => {
            let png = encode_png(image)?;
            let mut proto = Proto::default();
            proto.varint(1, u64::from(image.height));
            proto.varint(2, u64::from(image.width));
            proto.varint(3, u64::from(image.channels));
            proto.bytes(4, &png);
            value.message(4, &proto);
        }
        Value::Histogram(histogram) => value.message(5, &histogram_proto(histogram)),
        Value::Text(text) => {
            // The text plugin's layout: metadata naming the plugin, a DT_STRING tensor of shape [1].
            let mut plugin = Proto::default();
            plugin.bytes(1, b"text");
            let mut metadata = Proto::default();
            metadata.message(1, &plugin);
            let mut dim = Proto::default();
            dim.varint(1, 1);
            let mut shape = Proto::default();
            shape.message(2, &dim);
            let mut tensor = Proto::default();
            tensor.varint(1, 7);
            tensor.message(2, &shape);
            tensor.bytes(8, text.as_bytes());
            value.message(8, &tensor);
            value.message(9, &metadata);
        }
    }
    Ok(value)
}

fn histogram_proto(h: &Histogram) -> Proto {
    let mut proto = Proto::default();
    proto.double(1, h.min);
    proto.double(2, h.max);
    proto.double(3, h.num);
    proto.double(4, h.sum);
    proto.double(5, h.sum_squares);
    proto.packed_doubles(6, &h.bucket_limits);
    proto.packed_doubles(7, &h.bucket_counts);
    proto
}
