use std::fs;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use super::*;
use crate::state::{MonitorSink, StatsRow};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stoker-json-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn row(epoch_num: u64, global_step: u64, name: &str, value: f64) -> StatsRow {
    StatsRow { epoch_num, global_step, scalars: [(name.to_string(), value)].into_iter().collect() }
}

fn inode(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(path).unwrap().ino()
}

fn rows(path: &Path) -> Vec<Json> {
    serde_json::from_slice(&fs::read(path).unwrap()).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Python's own reader takes the file (what tensorpack's users read it with).
fn python_loads(path: &Path) -> usize {
    let program = "import json, sys; print(len(json.load(open(sys.argv[1]))))";
    let output = std::process::Command::new("python3").arg("-c").arg(program).arg(path).output().unwrap();
    assert!(output.status.success(), "json.load: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap().trim().parse().unwrap()
}

#[test]
fn each_catch_up_appends_its_rows_in_place_and_leaves_a_json_list() {
    let dir = scratch("append");
    let path = dir.join(STATS_FILE);
    let mut sink = JsonSink::open(&dir, 1, None).unwrap();
    let file = inode(&path);
    for step in 1..=300u64 {
        sink.stats_row(&row(1, step, "cost", step as f64 / 7.0)).unwrap();
        let before = sink.written();
        sink.flush().unwrap();
        // One row is about 60 bytes: a catch-up writes it, not the file so far.
        let wrote = sink.written() - before;
        assert!(wrote < 200, "catch-up {step} wrote {wrote} bytes for one row: the file was rewritten whole");
        assert_eq!(inode(&path), file, "catch-up {step} replaced the file");
        assert_eq!(rows(&path).len() as u64, step);
    }
    // A row of the same moment as the last (what `after_train` puts) joins it: the last row
    // alone is written again, longer, then shorter.
    for (name, value) in [("after", 1.5), ("cost", 1.0)] {
        sink.stats_row(&row(1, 300, name, value)).unwrap();
        let before = sink.written();
        sink.flush().unwrap();
        assert!(sink.written() - before < 200, "{} bytes to merge one row", sink.written() - before);
        let all = rows(&path);
        assert_eq!(all.len(), 300);
        assert_eq!(all[299][name], value);
        assert_eq!(all[298]["cost"], 299.0 / 7.0);
    }
    assert_eq!(
        rows(&path)[299],
        serde_json::json!({"after": 1.5, "cost": 1.0, "epoch_num": 1, "global_step": 300})
    );
    assert_eq!(python_loads(&path), 300);
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn a_resume_cuts_stats_json_back_to_the_checkpoint_s_rows_in_place_and_keeps_the_rest() {
    let dir = scratch("resume");
    let path = dir.join(STATS_FILE);
    let mut sink = JsonSink::open(&dir, 1, None).unwrap();
    for step in 1..=10 {
        sink.stats_row(&row(1, step, "cost", step as f64)).unwrap();
        sink.flush().unwrap();
    }
    drop(sink);
    let all = rows(&path);
    // A crash in the middle of the next append: the closing bracket overwritten, the row cut
    // short.
    let text = fs::read_to_string(&path).unwrap();
    let kept = text.trim_end().strip_suffix(']').unwrap().trim_end().len();
    let mut torn = fs::OpenOptions::new().write(true).open(&path).unwrap();
    torn.set_len(kept as u64).unwrap();
    torn.seek(SeekFrom::End(0)).unwrap();
    torn.write_all(b",\n{\"cost\":11.0,\"epoch_nu").unwrap();
    drop(torn);
    let file = inode(&path);
    // The checkpoint resumed holds the first 6 rows.
    let mut sink = JsonSink::open(&dir, 1, Some(all[..6].to_vec())).unwrap();
    assert_eq!(inode(&path), file, "the resume replaced the file instead of cutting it");
    assert!(sink.written() < 16, "the resume wrote {} bytes: the file was rewritten", sink.written());
    assert_eq!(rows(&path), all[..6]);
    // The rows it dropped are kept aside, a JSON list of them.
    let backups: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("stats.json.bak-"))
        .collect();
    assert_eq!(backups.len(), 1, "{backups:?}");
    assert_eq!(rows(&backups[0]), all[6..]);
    assert_eq!(python_loads(&backups[0]), 4);
    // The run goes on from there.
    sink.stats_row(&row(1, 7, "cost", 70.0)).unwrap();
    sink.flush().unwrap();
    let after = rows(&path);
    assert_eq!(after.len(), 7);
    assert_eq!(after[6]["cost"], 70.0);
    assert_eq!(python_loads(&path), 7);
    let _ = fs::remove_dir_all(&dir);
}
