//! How state is written to disk: floats in JSON (NaN and the infinities included), files
//! replaced atomically through temporaries of unique names ([`super::leftovers`]), directories
//! created and synced.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;

use super::leftovers::temporary_name;

/// A finite value as a JSON number; NaN and the infinities as strings (JSON has no number for them).
pub fn json_f64(v: f64) -> serde_json::Value {
    if v.is_finite() {
        serde_json::Value::from(v)
    } else if v.is_nan() {
        "NaN".into()
    } else if v > 0.0 {
        "inf".into()
    } else {
        "-inf".into()
    }
}

/// The reverse of [`json_f64`].
pub fn parse_f64(v: &serde_json::Value) -> Option<f64> {
    match v {
        serde_json::Value::Number(n) => n.as_f64(),
        serde_json::Value::String(s) => match s.as_str() {
            "NaN" => Some(f64::NAN),
            "inf" => Some(f64::INFINITY),
            "-inf" => Some(f64::NEG_INFINITY),
            _ => None,
        },
        _ => None,
    }
}

/// Create the file `path`, which must not exist yet (an existing file or symlink there is an
/// error, never followed), with `bytes`, synced to disk. The directory entry is not synced.
pub(crate) fn write_new_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = OpenOptions::new().write(true).create_new(true).open(path)?;
    let written = file.write_all(bytes).and_then(|()| file.sync_all());
    if written.is_err() {
        // A full disk must not keep a half-written file; this one is ours.
        let _ = fs::remove_file(path);
    }
    written
}

/// Write `bytes` to `path` atomically: a temporary file beside it (`NAME.<pid>-<n>-<host>.tmp`, a
/// name no other write uses, created new so that nothing there is followed or overwritten),
/// synced, then renamed over `path` (a symlink at `path` is replaced, not followed), then the
/// directory synced. A crash at any moment leaves the old file or the new one, and at most a
/// temporary file, which the next run in that log directory (or the next checkpoint written in
/// that folder) removes once nobody can be writing it: once its process has ended, when it is
/// this host's; once it has not changed for a day, when it is another host's.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_file_name(temporary_name(path.file_name().unwrap_or_default(), "tmp"));
    write_new_file(&tmp, bytes)?;
    if let Err(e) = fs::rename(&tmp, path) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    sync_dir(path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")))
}

/// Sync a directory so that the entries created, renamed or removed in it survive a crash. An
/// error is returned (EIO included: the entries may not be on disk), except the one a file
/// system that cannot sync directories at all answers (`EINVAL`).
pub(crate) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    settle_dir_sync(File::open(dir)?.sync_all())
}

/// What a directory's sync answered, as [`sync_dir`] reports it.
fn settle_dir_sync(synced: std::io::Result<()>) -> std::io::Result<()> {
    match synced {
        // Some file systems (and operating systems) do not sync directories: nothing to report.
        Err(e)
            if e.kind() == std::io::ErrorKind::InvalidInput
                || e.kind() == std::io::ErrorKind::Unsupported =>
        {
            Ok(())
        }
        other => other,
    }
}

/// Create `dir` and its missing parents, as `std::fs::create_dir_all` does, syncing each new
/// folder into its parent so that it survives a crash. An existing folder (or a symlink to one)
/// is fine.
pub(crate) fn create_dir_all_synced(dir: &Path) -> std::io::Result<()> {
    if dir.as_os_str().is_empty() {
        return Ok(());
    }
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    match fs::create_dir(dir) {
        Ok(()) => return sync_dir(parent),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && dir.parent().is_some() => {}
        Err(_) if dir.is_dir() => return Ok(()),
        Err(e) => return Err(e),
    }
    create_dir_all_synced(parent)?;
    match fs::create_dir(dir) {
        Ok(()) => sync_dir(parent),
        Err(_) if dir.is_dir() => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("stoker-persist-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn write_atomic_leaves_an_entry_at_another_writer_s_temporary_name_alone() {
        let dir = scratch("tmp-names");
        let path = dir.join("stats.json");
        // What another writer (or the fixed name of an earlier version) holds beside the file.
        fs::write(dir.join("stats.json.tmp"), b"another writer's").unwrap();
        let victim = dir.join("victim");
        fs::write(&victim, b"precious").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(&victim, dir.join("index.json.tmp")).unwrap();
        write_atomic(&path, b"[1]").unwrap();
        write_atomic(&dir.join("index.json"), b"{}").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"[1]");
        assert_eq!(fs::read(dir.join("stats.json.tmp")).unwrap(), b"another writer's");
        assert_eq!(fs::read(&victim).unwrap(), b"precious");
        assert!(fs::symlink_metadata(dir.join("index.json")).unwrap().file_type().is_file());
        // Nothing else is left beside them.
        let mut names: Vec<String> =
            fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        names.sort();
        assert_eq!(names, ["index.json", "index.json.tmp", "stats.json", "stats.json.tmp", "victim"]);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_directory_sync_error_is_returned_unless_the_file_system_cannot_sync_directories() {
        let eio = std::io::Error::from_raw_os_error(5);
        assert_eq!(settle_dir_sync(Err(eio)).unwrap_err().raw_os_error(), Some(5), "EIO is returned");
        let enospc = std::io::Error::from_raw_os_error(28);
        assert!(settle_dir_sync(Err(enospc)).is_err(), "ENOSPC is returned");
        assert!(settle_dir_sync(Err(std::io::Error::from_raw_os_error(22))).is_ok(), "EINVAL: cannot sync");
        assert!(settle_dir_sync(Ok(())).is_ok());
        // A directory that cannot be opened is an error naming why.
        let missing = std::env::temp_dir().join(format!("stoker-persist-{}-missing/x", std::process::id()));
        assert_eq!(sync_dir(&missing).unwrap_err().kind(), std::io::ErrorKind::NotFound);
    }

    #[test]
    fn create_dir_all_synced_creates_the_missing_folders_and_reports_a_file_in_the_way() {
        let dir = scratch("create");
        let deep = dir.join("a/b/c");
        create_dir_all_synced(&deep).unwrap();
        assert!(deep.is_dir());
        create_dir_all_synced(&deep).unwrap();
        fs::write(dir.join("file"), b"").unwrap();
        let error = create_dir_all_synced(&dir.join("file/log")).unwrap_err();
        assert_eq!(error.raw_os_error(), Some(20), "ENOTDIR: {error}");
        let _ = fs::remove_dir_all(&dir);
    }
}
