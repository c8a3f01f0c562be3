//! The writer's encoding, checked against TensorFlow's and protobuf's, and its sink's events read back record by record.

use std::sync::Arc;

use super::super::tests::{Tmpfs, read_hparams, read_with_python, scratch_dir};
use super::*;
use crate::state::{Histogram, Image};

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

// ---------------------------------------------------------------- The sink, record by record
//
// The event file read back by a decoder written here independently of the writer: TFRecord
// framing with masked CRC-32C (`crc32c` of `monitor/tests.rs`, bit by bit), then the Event /
// Summary protocol buffers field by field; and by TensorBoard's own reader (`read_records.py`,
// `read_hparams.py`).

fn masked(data: &[u8]) -> u32 {
    let crc = super::super::tests::crc32c(data);
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

/// Where the TFRecord framing of `bytes` breaks, if it does: a record cut short or a trailing
/// piece of one.
fn torn_tail(bytes: &[u8]) -> Option<String> {
    let mut at = 0;
    while at < bytes.len() {
        if bytes.len() - at < 12 {
            return Some(format!("{} bytes at {at}, less than a record's header", bytes.len() - at));
        }
        let len_bytes = &bytes[at..at + 8];
        let len = u64::from_le_bytes(len_bytes.try_into().unwrap()) as usize;
        if u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) != masked(len_bytes) {
            return Some(format!("the length at {at} fails its CRC"));
        }
        if bytes.len() - at - 12 < len + 4 {
            return Some(format!("the record at {at} of {len} bytes is cut short at {}", bytes.len()));
        }
        at += 16 + len;
    }
    None
}

#[test]
fn writer_tensorboard_a_full_disk_never_leaves_a_torn_record() {
    let tmpfs = Tmpfs::mount(&scratch_dir("tfevents-full").join("mnt"), 64);
    let mut sink = TensorBoardSink::create(&tmpfs.dir).unwrap();
    let scalars = |steps: std::ops::RangeInclusive<u64>| -> Vec<Record> {
        steps.map(|s| record("loss", Value::Scalar(1.0 / s as f64), s)).collect()
    };
    sink.write(&scalars(1..=3)).unwrap();
    sink.flush().unwrap();
    let filler = tmpfs.fill("filler");
    // A record far larger than what is left in the file's last page: the disk fills up in its
    // middle.
    let big = "x".repeat(20_000);
    let error = sink
        .write(&[record("note", Value::Text(Arc::from(big.as_str())), 4)])
        .and_then(|()| sink.flush())
        .expect_err("the disk is full");
    assert_eq!(error.kind(), std::io::ErrorKind::StorageFull, "{error}");
    let before: Vec<(u64, &str)> = vec![(0, ""), (1, "loss"), (2, "loss"), (3, "loss")];
    let read = |sink: &TensorBoardSink| {
        let bytes = std::fs::read(sink.path()).unwrap();
        assert_eq!(torn_tail(&bytes), None, "{} holds a torn record", sink.path().display());
        let events = read_with_python("events", sink.path());
        serde_json::from_value::<Vec<(u64, String)>>(events["events"].clone()).unwrap()
    };
    let owned = |events: &[(u64, &str)]| -> Vec<(u64, String)> {
        events.iter().map(|(s, t)| (*s, t.to_string())).collect()
    };
    assert_eq!(read(&sink), owned(&before));

    // Room again: what is written next reads back too, after every record written before.
    std::fs::remove_file(filler).unwrap();
    sink.write(&scalars(5..=6)).unwrap();
    sink.flush().unwrap();
    let mut after = before.clone();
    after.extend([(5, "loss"), (6, "loss")]);
    assert_eq!(read(&sink), owned(&after));
    drop(sink);
}

/// The host name in an event file's name is the kernel's (`gethostname`, through sysinfo), not
/// the text of `/etc/hostname` (absent on macOS, stale in some containers). The test runs itself
/// again in a private mount namespace (`unshare -m`, as root) where `/etc/hostname` says
/// something else, and checks the name there.
#[cfg(target_os = "linux")]
#[test]
fn writer_event_file_is_named_after_the_kernel_host_name() {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is writable for its length.
    assert_eq!(unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) }, 0);
    let host = String::from_utf8_lossy(&buf[..buf.iter().position(|&b| b == 0).unwrap()]).into_owned();
    if std::env::var_os("STOKER_TEST_STALE_ETC_HOSTNAME").is_some() {
        assert_eq!(std::fs::read_to_string("/etc/hostname").unwrap().trim(), "stale-etc-hostname");
        let dir = scratch_dir("tfevents-host");
        let sink = TensorBoardSink::create(&dir).unwrap();
        let name = sink.path().file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.ends_with(&format!(".{host}")), "{name} is not named after the host {host}");
        return;
    }
    let dir = scratch_dir("tfevents-host-parent");
    let stale = dir.join("hostname");
    std::fs::write(&stale, "stale-etc-hostname\n").unwrap();
    let script = format!(
        "mount --bind {} /etc/hostname && exec \"$0\" --exact {} --nocapture",
        stale.display(),
        "monitor::tensorboard::tests::writer_event_file_is_named_after_the_kernel_host_name"
    );
    let out = std::process::Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .arg(std::env::current_exe().unwrap())
        .env("STOKER_TEST_STALE_ETC_HOSTNAME", "1")
        .output()
        .expect("unshare (util-linux) runs the test in a private mount namespace; run the tests as root");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains("1 passed"), "the test in a namespace failed:\n{text}");
}

#[test]
fn writer_tensorboard_max_queue_holds_events_until_that_many_then_writes_them() {
    let dir = scratch_dir("tfevents-max-queue");
    // tensorpack's max_queue=3 with a flush_secs no test outlives: only the queue, an epoch's
    // end and the end of training write. The monitors call `flush` each time the writer's thread
    // has caught up; here it is called after every batch, as if the writer always caught up.
    let mut sink = TensorBoardSink::create(&dir).unwrap().max_queue(3).flush_secs(24 * 3600);
    let on_disk = |sink: &TensorBoardSink| records(&std::fs::read(sink.path()).unwrap()).len();
    assert_eq!(on_disk(&sink), 1, "the file-version event is written at once");
    for step in 1..=2 {
        MonitorSink::write(&mut sink, &[record("loss", Value::Scalar(1.0), step)]).unwrap();
        MonitorSink::flush(&mut sink).unwrap();
        assert_eq!((sink.held(), on_disk(&sink)), (step as usize, 1), "step {step}: held, not written");
        assert!(MonitorSink::flush_due(&sink).is_some(), "the writer asks to be flushed later");
    }
    // The third event fills the queue: the three are written together.
    MonitorSink::write(&mut sink, &[record("loss", Value::Scalar(1.0), 3)]).unwrap();
    assert_eq!((sink.held(), on_disk(&sink)), (0, 4));
    assert_eq!(MonitorSink::flush_due(&sink), None);
    // An epoch's end writes what is held, as tensorpack's TFEventWriter flushes at every epoch.
    MonitorSink::write(&mut sink, &[record("loss", Value::Scalar(1.0), 4)]).unwrap();
    MonitorSink::flush(&mut sink).unwrap();
    assert_eq!(on_disk(&sink), 4);
    MonitorSink::end_epoch(&mut sink, &EpochStats::default()).unwrap();
    assert_eq!((sink.held(), on_disk(&sink)), (0, 5));
    // The end of training writes everything.
    MonitorSink::write(&mut sink, &[record("loss", Value::Scalar(1.0), 5)]).unwrap();
    MonitorSink::close(&mut sink).unwrap();
    assert_eq!(on_disk(&sink), 6);

    // flush_secs(0), the default: written as soon as the writer has caught up.
    let mut sink = TensorBoardSink::create(&dir).unwrap().max_queue(3);
    MonitorSink::write(&mut sink, &[record("loss", Value::Scalar(1.0), 1)]).unwrap();
    MonitorSink::flush(&mut sink).unwrap();
    assert_eq!((sink.held(), on_disk(&sink)), (0, 2));
}

/// tensorpack's `TFEventWriter()` defaults: `max_queue` 10 (here with a `flush_secs` no test
/// outlives, to see the queue alone) and one file, an epoch's end writing what is held but
/// starting no new file.
#[test]
fn writer_tensorboard_holds_ten_events_by_default_in_one_file() {
    let dir = scratch_dir("tfevents-defaults");
    let mut sink = TensorBoardSink::create(&dir).unwrap().flush_secs(24 * 3600);
    let on_disk = |sink: &TensorBoardSink| records(&std::fs::read(sink.path()).unwrap()).len();
    for step in 1..=9 {
        MonitorSink::write(&mut sink, &[record("loss", Value::Scalar(1.0), step)]).unwrap();
    }
    assert_eq!((sink.held(), on_disk(&sink)), (9, 1), "nine events held");
    MonitorSink::write(&mut sink, &[record("loss", Value::Scalar(1.0), 10)]).unwrap();
    assert_eq!((sink.held(), on_disk(&sink)), (0, 11), "the tenth fills the queue");
    MonitorSink::end_epoch(&mut sink, &EpochStats::default()).unwrap();
    MonitorSink::write(&mut sink, &[record("loss", Value::Scalar(1.0), 11)]).unwrap();
    MonitorSink::close(&mut sink).unwrap();
    assert_eq!(on_disk(&sink), 12);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "one event file");
}

// ---------------------------------------------------------------- HParams

/// The session's start, read field by field: a `Summary.Value` tagged
/// `_hparams_/session_start_info`, the empty `DT_FLOAT` tensor, and the plugin data naming
/// `hparams` with an `HParamsPluginData` whose `session_start_info` (3) holds the values.
#[test]
fn writer_tensorboard_hparams_session_start_reads_back_field_by_field() {
    let dir = scratch_dir("tfevents-hparams-fields");
    let mut sink = TensorBoardSink::create(&dir).unwrap();
    sink.start_session(vec![("learning_rate".into(), HParamValue::Number(0.01))]).unwrap();
    let events = records(&std::fs::read(sink.path()).unwrap());
    assert_eq!(events.len(), 2, "the version and the session's start");
    let summary = fields(bytes(get(&fields(&events[1]), 5)));
    let value = fields(bytes(&summary[0].1));
    assert_eq!(bytes(get(&value, 1)), b"_hparams_/session_start_info");
    assert_eq!(bytes(get(&value, 8)), [0x08, 0x01, 0x12, 0x02, 0x12, 0x00], "TensorBoard's NULL_TENSOR");
    let plugin = fields(bytes(get(&fields(bytes(get(&value, 9))), 1)));
    assert_eq!(bytes(get(&plugin, 1)), b"hparams");
    let data = fields(bytes(get(&plugin, 2)));
    assert!(data.iter().all(|(n, _)| *n == 3), "version 0 (left out) and session_start_info: {data:?}");
    let start = fields(bytes(get(&data, 3)));
    let entry = fields(bytes(get(&start, 1)));
    assert_eq!(bytes(get(&entry, 1)), b"learning_rate");
    assert_eq!(double(get(&fields(bytes(get(&entry, 2))), 2)), 0.01, "number_value");
}

/// A session written by the sink, read as the *HParams* tab reads it: the experiment lists the
/// hyper-parameters with their types and every scalar tag as a metric; the session has the
/// values, each metric's last value and its status.
#[test]
fn writer_tensorboard_hparams_session_is_listed_by_tensorboards_hparams_backend() {
    let dir = scratch_dir("hparams-sink");
    let mut sink = TensorBoardSink::create(&dir).unwrap();
    let hparams = vec![
        ("learning_rate".to_string(), HParamValue::Number(0.01)),
        ("optimizer".to_string(), HParamValue::from("adam")),
        ("augment".to_string(), HParamValue::from(true)),
    ];
    sink.start_session(hparams).unwrap();
    let scalars: Vec<Record> = (1..=3)
        .flat_map(|s| {
            [
                record("loss", Value::Scalar(1.0 / s as f64), s),
                record("accuracy", Value::Scalar(0.25 * s as f64), s),
            ]
        })
        .collect();
    sink.write(&scalars).unwrap();
    sink.write(&[record("note", Value::Text(Arc::from("not a metric")), 3)]).unwrap();
    sink.end_session(SessionStatus::Success).unwrap();
    drop(sink);
    let read = read_hparams(&dir);
    assert_eq!(
        read["experiment"],
        serde_json::json!({
            // The backend lists them sorted by name.
            "hparams": [["augment", "DATA_TYPE_BOOL"], ["learning_rate", "DATA_TYPE_FLOAT64"],
                        ["optimizer", "DATA_TYPE_STRING"]],
            "metrics": ["accuracy", "loss"],
        }),
        "{read}"
    );
    assert_eq!(
        read["sessions"],
        serde_json::json!([{
            "name": ".",
            "hparams": {"learning_rate": 0.01, "optimizer": "adam", "augment": true},
            "metrics": {"accuracy": 0.75, "loss": (1.0f32 / 3.0) as f64},
            "status": "STATUS_SUCCESS",
        }]),
        "{read}"
    );
}
