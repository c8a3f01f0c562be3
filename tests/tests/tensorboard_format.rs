//! The TensorBoard event file, read back by a decoder written here independently of the writer:
//! TFRecord framing with masked CRC-32C, then the Event / Summary protocol buffers field by field.
//! TensorBoard's own reader checks the same files in `monitors.rs`.

use std::sync::Arc;

use burn_stoker::monitor::TensorBoardSink;
use burn_stoker::state::{Histogram, Image, Record, Value};
use stoker_tests::scratch_dir;

/// CRC-32C, bit by bit (polynomial 0x82F63B78), independent of the writer's crate.
fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0x82F6_3B78 } else { crc >> 1 };
        }
    }
    !crc
}

fn masked(data: &[u8]) -> u32 {
    let crc = crc32c(data);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// Split a TFRecord file into its records, checking every CRC.
fn records(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let len_bytes = &bytes[at..at + 8];
        let len = u64::from_le_bytes(len_bytes.try_into().unwrap()) as usize;
        assert_eq!(
            u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()),
            masked(len_bytes),
            "length CRC"
        );
        let data = &bytes[at + 12..at + 12 + len];
        assert_eq!(
            u32::from_le_bytes(bytes[at + 12 + len..at + 16 + len].try_into().unwrap()),
            masked(data),
            "data CRC"
        );
        out.push(data.to_vec());
        at += 16 + len;
    }
    assert_eq!(at, bytes.len(), "no trailing bytes");
    out
}

/// A decoded protobuf field.
#[derive(Debug, Clone, PartialEq)]
enum Field {
    Varint(u64),
    Fixed64([u8; 8]),
    Fixed32([u8; 4]),
    Bytes(Vec<u8>),
}

fn varint(data: &[u8], at: &mut usize) -> u64 {
    let mut value = 0u64;
    let mut shift = 0;
    loop {
        let byte = data[*at];
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return value;
        }
        shift += 7;
    }
}

fn fields(data: &[u8]) -> Vec<(u64, Field)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < data.len() {
        let key = varint(data, &mut at);
        let field = match key & 7 {
            0 => Field::Varint(varint(data, &mut at)),
            1 => {
                at += 8;
                Field::Fixed64(data[at - 8..at].try_into().unwrap())
            }
            2 => {
                let len = varint(data, &mut at) as usize;
                at += len;
                Field::Bytes(data[at - len..at].to_vec())
            }
            5 => {
                at += 4;
                Field::Fixed32(data[at - 4..at].try_into().unwrap())
            }
            other => panic!("wire type {other}"),
        };
        out.push((key >> 3, field));
    }
    out
}

fn get(fields: &[(u64, Field)], number: u64) -> &Field {
    &fields.iter().find(|(n, _)| *n == number).unwrap_or_else(|| panic!("field {number} in {fields:?}")).1
}

fn bytes(field: &Field) -> &[u8] {
    match field {
        Field::Bytes(b) => b,
        other => panic!("not bytes: {other:?}"),
    }
}

fn double(field: &Field) -> f64 {
    match field {
        Field::Fixed64(b) => f64::from_le_bytes(*b),
        other => panic!("not a double: {other:?}"),
    }
}

fn record(name: &str, value: Value, step: u64) -> Record {
    Record {
        name: Arc::from(name),
        value,
        global_step: step,
        epoch_num: 1,
        wall_time: 1_700_000_000.5 + step as f64,
    }
}

#[test]
fn every_kind_of_record_reads_back_field_by_field() {
    let dir = scratch_dir("tfevents");
    let mut sink = TensorBoardSink::create(&dir).unwrap();
    let image = Image { height: 2, width: 3, channels: 1, pixels: vec![0, 50, 100, 150, 200, 250] };
    let histogram = Histogram::of(&[1.0, 2.0, 2.5, 4.0], 3);
    sink.write(&[
        record("loss", Value::Scalar(0.25), 1),
        record("loss", Value::Scalar(0.125), 2),
        record("digits", Value::Image(Arc::new(image)), 2),
        record("weights", Value::Histogram(Arc::new(histogram.clone())), 3),
        record("note", Value::Text(Arc::from("hello, tensorboard")), 3),
    ])
    .unwrap();
    sink.flush().unwrap();
    let name = sink.path().file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("events.out.tfevents."), "{name}");

    let events = records(&std::fs::read(sink.path()).unwrap());
    assert_eq!(events.len(), 6);
    let version = fields(&events[0]);
    assert_eq!(bytes(get(&version, 3)), b"brain.Event:2");

    let value_of = |event: &[u8], step: u64, wall: f64| -> Vec<(u64, Field)> {
        let event = fields(event);
        assert_eq!(get(&event, 2), &Field::Varint(step));
        assert_eq!(double(get(&event, 1)), wall);
        let summary = fields(bytes(get(&event, 5)));
        assert_eq!(summary.len(), 1, "one value per event");
        fields(bytes(&summary[0].1))
    };

    for (event, (step, expected)) in events[1..3].iter().zip([(1, 0.25f32), (2, 0.125)]) {
        let value = value_of(event, step, 1_700_000_000.5 + step as f64);
        assert_eq!(bytes(get(&value, 1)), b"loss");
        assert_eq!(get(&value, 2), &Field::Fixed32(expected.to_le_bytes()));
    }

    let value = value_of(&events[3], 2, 1_700_000_002.5);
    assert_eq!(bytes(get(&value, 1)), b"digits");
    let image = fields(bytes(get(&value, 4)));
    assert_eq!(get(&image, 1), &Field::Varint(2));
    assert_eq!(get(&image, 2), &Field::Varint(3));
    assert_eq!(get(&image, 3), &Field::Varint(1));
    let png = bytes(get(&image, 4));
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(&png[16..24], &[0, 0, 0, 3, 0, 0, 0, 2], "IHDR width 3, height 2");

    let value = value_of(&events[4], 3, 1_700_000_003.5);
    assert_eq!(bytes(get(&value, 1)), b"weights");
    let h = fields(bytes(get(&value, 5)));
    assert_eq!((double(get(&h, 1)), double(get(&h, 2)), double(get(&h, 3))), (1.0, 4.0, 4.0));
    assert_eq!((double(get(&h, 4)), double(get(&h, 5))), (9.5, 1.0 + 4.0 + 6.25 + 16.0));
    let packed = |f: &Field| -> Vec<f64> {
        bytes(f).chunks(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect()
    };
    assert_eq!(packed(get(&h, 6)), vec![2.0, 3.0, 4.0]);
    assert_eq!(packed(get(&h, 7)), vec![2.0, 1.0, 1.0], "(1,2] holds 1 and 2; (2,3] 2.5; (3,4] 4");
    assert_eq!(histogram.bucket_counts, vec![2.0, 1.0, 1.0]);

    let value = value_of(&events[5], 3, 1_700_000_003.5);
    assert_eq!(bytes(get(&value, 1)), b"note");
    let tensor = fields(bytes(get(&value, 8)));
    assert_eq!(get(&tensor, 1), &Field::Varint(7), "DT_STRING");
    assert_eq!(bytes(get(&tensor, 8)), b"hello, tensorboard");
    let shape = fields(bytes(get(&tensor, 2)));
    assert_eq!(fields(bytes(get(&shape, 2))), vec![(1, Field::Varint(1))]);
    let metadata = fields(bytes(get(&value, 9)));
    assert_eq!(bytes(get(&fields(bytes(get(&metadata, 1))), 1)), b"text");
}

#[test]
fn a_bad_image_is_reported_and_the_other_records_are_written() {
    let dir = scratch_dir("tfevents-bad");
    let mut sink = TensorBoardSink::create(&dir).unwrap();
    let bad = Image { height: 2, width: 2, channels: 3, pixels: vec![0; 5] };
    let error = sink
        .write(&[record("bad", Value::Image(Arc::new(bad)), 1), record("loss", Value::Scalar(1.0), 1)])
        .unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
    assert!(error.to_string().contains("bad: a 2x2x3 image has 12 values, not 5"), "{error}");
    sink.flush().unwrap();
    assert_eq!(records(&std::fs::read(sink.path()).unwrap()).len(), 2, "version and the scalar");
}

#[test]
fn two_sinks_in_one_second_write_two_files() {
    let dir = scratch_dir("tfevents-two");
    let a = TensorBoardSink::create(&dir).unwrap();
    let b = TensorBoardSink::create(&dir).unwrap();
    assert_ne!(a.path(), b.path());
}
