//! Unit tests of the checkpoint format: the manifest's checksum, copy names, keep_every_n_hours.

use std::fs;
use std::path::Path;

use super::format::*;
use super::listing::{list, step_of};
use super::manifest::{FileSum, Manifest};
use super::write;
use super::write::read_index;
use crate::state::{KeepPolicy, check_copy_name};
fn manifest(format: u64) -> Manifest {
    let mut files = std::collections::BTreeMap::new();
    files.insert(MODEL_FILE.to_string(), FileSum { len: 3, crc32c: 7 });
    Manifest { format, epoch_num: 2, global_step: 10, time: 1.5, files, run: None, checksum: None }
}

#[test]
fn a_sealed_manifest_verifies_and_a_changed_byte_does_not() {
    let sealed = manifest(FORMAT_VERSION).seal().unwrap();
    let text = String::from_utf8(sealed.clone()).unwrap();
    assert!(text.ends_with("\n}\n") && text.contains("\n  \"checksum\": "), "{text}");
    let read: Manifest = serde_json::from_slice(&sealed).unwrap();
    assert!(read.verifies(&sealed));
    let altered = text.replacen("\"global_step\": 10", "\"global_step\": 11", 1);
    let read: Manifest = serde_json::from_str(&altered).unwrap();
    assert!(!read.verifies(altered.as_bytes()));
}

#[test]
fn a_format_1_manifest_still_verifies() {
    // As format 1 wrote it: the checksum of the compact JSON re-serialized without it.
    let mut old = manifest(1);
    old.checksum = Some(old.format_1_checksum());
    let bytes = serde_json::to_vec_pretty(&old).unwrap();
    let read: Manifest = serde_json::from_slice(&bytes).unwrap();
    assert!(read.verifies(&bytes));
    let mut wrong = manifest(1);
    wrong.checksum = Some(old.checksum.unwrap() ^ 1);
    assert!(!wrong.verifies(&serde_json::to_vec_pretty(&wrong).unwrap()));
}

#[test]
fn the_index_file_is_not_a_copy_name() {
    assert!(check_copy_name(INDEX_FILE).is_err());
    assert!(check_copy_name(CHECKPOINT_DIR).is_ok(), "inside checkpoints/, a folder of that name is fine");
}

/// Writes a checkpoint of `global_step` at `minutes` after `base` into `root`, for a run
/// started `start` minutes after `base`, keeping 1 and one per half hour.
fn write_at(root: &Path, base: f64, global_step: u64, minutes: f64, start: f64) {
    let content = Content {
        model: vec![1],
        optimizer: vec![2],
        trainer: serde_json::json!({}),
        monitors: serde_json::json!({}),
        epoch_num: 1,
        global_step,
        time: base + minutes * 60.0,
        run: "test".to_string(),
    };
    let policy = KeepPolicy { max_to_keep: 1, keep_every_n_hours: Some(0.5) };
    write(root, &content, &policy, base + start * 60.0).unwrap();
}

#[test]
fn checkpoint_keep_every_n_hours_counts_from_each_runs_own_start() {
    let root = std::env::temp_dir().join(format!("stoker-unit-keep-{}", std::process::id()));
    let _ = fs::remove_dir_all(&root);
    let base = 1.0e9;
    // Run A, started at 0: minutes 27, 47, ..., 167 (steps 5..40). Kept (thresholds 30, 60,
    // 90, 120, then 150): 47, 67, 107, 127.
    for (k, minutes) in [27.0, 47.0, 67.0, 87.0, 107.0, 127.0, 147.0, 167.0].into_iter().enumerate() {
        write_at(&root, base, 5 * (k as u64 + 1), minutes, 0.0);
    }
    let kept = |root: &Path| read_index(root).unwrap().kept_forever;
    assert_eq!(kept(&root), ["step-10", "step-15", "step-25", "step-30"]);
    // Run B, resumed at minute 200, counts from its own start (threshold 230), as a new
    // `tf.train.Saver` does: step-40 (167) and step-45 (227) are not kept, step-50 (247) is.
    // Had it gone on from run A's threshold (150), step-40 would have been kept.
    for (step, minutes) in [(45, 227.0), (50, 247.0), (55, 267.0)] {
        write_at(&root, base, step, minutes, 200.0);
    }
    assert_eq!(kept(&root), ["step-10", "step-15", "step-25", "step-30", "step-50"]);
    let mut on_disk: Vec<String> = list(&root).unwrap().into_iter().map(|(_, n)| n).collect();
    on_disk.sort_by_key(|n| step_of(n));
    assert_eq!(on_disk, ["step-10", "step-15", "step-25", "step-30", "step-50", "step-55"]);
    fs::remove_dir_all(&root).unwrap();
}

/// Set the modification time of the entry at `path` to `ago` before now.
fn age(path: &Path, ago: std::time::Duration) {
    let at = std::time::SystemTime::now() - ago;
    fs::File::open(path).unwrap().set_modified(at).unwrap();
}

/// A temporary another host may be writing (a shared folder) is never removed while it may be
/// live: this host cannot ask whether that host's process runs. This host's temporaries go as
/// soon as their process has ended; another host's, and those of an earlier version that did
/// not name its host, once they have not changed for a day.
#[test]
fn remove_leftovers_never_removes_another_host_s_live_temporary() {
    let root = std::env::temp_dir().join(format!("stoker-leftovers-{}", std::process::id()));
    let _ = fs::remove_dir_all(&root);
    fs::create_dir_all(&root).unwrap();
    // Above Linux's largest pid_max (2^22): no process here has it, but another host's may.
    let dead = (1u32 << 22) + 7;
    let host = crate::state::host_name().replace('.', "_");
    let other_old = format!("step-5.{dead}-0.tmp");
    let other_new = format!("step-6.{dead}-0-another-host.tmp");
    let mine_dead = format!("step-7.{dead}-0-{host}.tmp");
    let mine_live = format!("step-8.{}-0-{host}.tmp", std::process::id());
    for name in [&other_old, &other_new, &mine_dead, &mine_live] {
        fs::create_dir(root.join(name)).unwrap();
    }
    super::remove::remove_leftovers(&root);
    let present = |name: &str| root.join(name).exists();
    assert!(present(&other_old), "a temporary of unknown host, written just now, is kept");
    assert!(present(&other_new), "another host's temporary, written just now, is kept");
    assert!(!present(&mine_dead), "this host's temporary of an ended process goes");
    assert!(present(&mine_live), "this process's own temporary stays");
    let two_days = std::time::Duration::from_secs(2 * 24 * 3600);
    age(&root.join(&other_old), two_days);
    age(&root.join(&other_new), two_days);
    super::remove::remove_leftovers(&root);
    assert!(!present(&other_old) && !present(&other_new), "unchanged for a day: leftovers");
    assert!(present(&mine_live));
    fs::remove_dir_all(&root).unwrap();
}

/// A manifest crafted (or damaged) to give a file a huge length, sealed so that it passes its own
/// checksum: the checkpoint is refused as damaged, naming the file and both lengths, before any
/// memory is set aside for that length (it once reserved the manifest's length first: `u64::MAX`
/// panicked with a capacity overflow, a terabyte aborted the process where memory is not
/// overcommitted).
#[test]
fn a_manifest_length_past_the_file_s_size_is_refused_before_it_is_allocated() {
    let root = std::env::temp_dir().join(format!("stoker-unit-huge-len-{}", std::process::id()));
    let _ = fs::remove_dir_all(&root);
    write_at(&root, 1.0e9, 5, 1.0, 0.0);
    let dir = root.join(checkpoint_name(5));
    let manifest_path = dir.join(MANIFEST_FILE);
    let original: Manifest = serde_json::from_slice(&fs::read(&manifest_path).unwrap()).unwrap();
    for huge in [u64::MAX, 1 << 40] {
        let mut crafted: Manifest = serde_json::from_value(serde_json::to_value(&original).unwrap()).unwrap();
        crafted.checksum = None;
        crafted.files.get_mut(MODEL_FILE).unwrap().len = huge;
        fs::write(&manifest_path, crafted.seal().unwrap()).unwrap();
        let error = super::Checkpoint::read(&dir).unwrap_err().to_string();
        assert!(
            error.contains(&format!("{MODEL_FILE} is 1 bytes long, the manifest says {huge}")),
            "{huge}: {error}"
        );
    }
    fs::remove_dir_all(&root).unwrap();
}
