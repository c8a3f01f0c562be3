//! How state is written to disk: floats in JSON (NaN and the infinities included) and files
//! replaced atomically.

use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

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

/// Write `bytes` to `path` atomically: a temporary file beside it, synced, then renamed over
/// `path`, then the directory synced. A crash at any moment leaves the old file or the new one.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(".tmp");
    let tmp = path.with_file_name(tmp_name);
    let written = (|| {
        let mut file = File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if written.is_err() {
        // A full disk must not keep a half-written temporary file.
        let _ = fs::remove_file(&tmp);
    }
    written?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// Sync a directory so that a rename inside it survives a crash.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    match File::open(dir) {
        Ok(d) => d.sync_all().or(Ok(())),
        Err(e) => Err(e),
    }
}
