//! Unit tests of the CSV file: the separator, RFC 4180 fields, rows read back.

use super::CsvSink;
use super::table::{Row, parse, split_records};

/// The `csv` crate separates fields with one byte: a separator outside ASCII is refused at
/// setup, naming it, before any file is written.
#[test]
fn writer_csv_separator_outside_ascii_is_refused() {
    let dir = std::env::temp_dir().join(format!("stoker-csv-sep-{}", std::process::id()));
    let path = dir.join("stats.csv");
    let error = CsvSink::open(&path, '→', 1, None).unwrap_err().to_string();
    assert!(error.contains("'→' cannot separate fields"), "{error}");
    assert!(!path.exists());
    let sink = CsvSink::open(&path, ';', 1, None).unwrap();
    assert_eq!(std::fs::read_to_string(sink.path()).unwrap(), "epoch;global_step\n");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn quoted_fields_split_as_rfc_4180_says() {
    let records = split_records("epoch,\"a,b\",\"say \"\"hi\"\"\"\r\n1,2,\n", ',').unwrap();
    assert_eq!(records, vec![vec!["epoch", "a,b", "say \"hi\""], vec!["1", "2", ""]]);
    assert!(split_records("epoch,a\n1,2", ',').is_err(), "an incomplete last line");
    assert!(split_records("epoch,\"a\n", ',').is_err(), "an unclosed quote");
}

#[test]
fn rows_read_back_equal_to_what_was_written_nan_included() {
    let table = parse("epoch,global_step,a,b\n1,5,NaN,\n2,10,1e-7,inf\n", ',').unwrap();
    assert_eq!(table.columns, vec!["a", "b"]);
    let row = |epoch, values: &[(&str, f64)]| Row {
        epoch,
        global_step: epoch * 5,
        values: values.iter().map(|&(k, v)| (k.to_string(), v)).collect(),
    };
    assert_eq!(table.rows, vec![row(1, &[("a", f64::NAN)]), row(2, &[("a", 1e-7), ("b", f64::INFINITY)])]);
    assert!(parse("step,a\n", ',').is_err());
    assert!(parse("epoch,a\n1,1\n", ',').is_err(), "no global_step column");
    assert!(parse("epoch,global_step,a\n2,4,1\n1,2,1\n", ',').is_err());
}

/// Two backups within one second keep both files: the second never overwrites the first.
#[test]
fn backups_made_within_one_second_keep_every_file() {
    let dir = std::env::temp_dir().join(format!("stoker-csv-bak-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("stats.csv");
    for text in ["first", "second", "third"] {
        std::fs::write(&path, text).unwrap();
        super::back_up(&path, "is a test").unwrap();
    }
    let mut kept: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    kept.sort();
    assert_eq!(kept, ["first", "second", "third"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A full disk in the middle of a row: the file is cut back to its last whole row, which
/// Python's `csv` module reads without a problem, and the row is written with the next one once
/// there is room again.
#[test]
fn writer_csv_a_full_disk_never_leaves_a_torn_row() {
    use super::super::tests::{Tmpfs, read_with_python, scratch_dir};
    use crate::state::{EpochStats, MonitorSink};

    let tmpfs = Tmpfs::mount(&scratch_dir("csv-full").join("mnt"), 64);
    let path = tmpfs.dir.join("stats.csv");
    let mut sink = CsvSink::open(&path, ',', 1, None).unwrap();
    // 300 columns: a row (about 5 KiB) is longer than what is left in any page.
    let stats = |epoch: u64| EpochStats {
        epoch_num: epoch,
        global_step: epoch * 10,
        scalars: (0..300).map(|i| (format!("s{i:03}"), epoch as f64 + f64::from(i) / 7.0)).collect(),
    };
    sink.end_epoch(&stats(1)).unwrap();
    sink.end_epoch(&stats(2)).unwrap();
    let filler = tmpfs.fill("filler");
    let error = sink.end_epoch(&stats(3)).expect_err("the disk is full");
    assert_eq!(error.kind(), std::io::ErrorKind::StorageFull, "{error}");
    let read = read_with_python("csv", &path);
    assert_eq!(read["problems"], serde_json::json!([]), "{read}");
    assert_eq!(read["epochs"], serde_json::json!([1, 2]), "{read}");

    // Room again: the row that failed is written with the next one.
    std::fs::remove_file(filler).unwrap();
    sink.end_epoch(&stats(4)).unwrap();
    let read = read_with_python("csv", &path);
    assert_eq!(read["problems"], serde_json::json!([]), "{read}");
    assert_eq!(read["epochs"], serde_json::json!([1, 2, 3, 4]), "{read}");
}
