//! What the writers' tests share: a fresh folder, a small disk that fills up, and the Python
//! readers of the files the writers write (TensorBoard's, `csv`'s), in the tests crate's
//! `python/` folder.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A new empty folder for one test.
pub(super) fn scratch_dir(name: &str) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("stoker-lib-{}-{name}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("creating a scratch directory");
    dir
}

/// A tmpfs of a few KiB mounted for one test (as root), unmounted when dropped: a disk that
/// fills up.
pub(super) struct Tmpfs {
    /// The mount point.
    pub(super) dir: PathBuf,
}

impl Tmpfs {
    /// Mount a tmpfs of `kib` KiB on `dir` (created if missing).
    pub(super) fn mount(dir: &Path, kib: u64) -> Tmpfs {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        let output = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(dir)
            .output()
            .unwrap_or_else(|e| panic!("running mount: {e}"));
        assert!(
            output.status.success(),
            "mounting a {kib} KiB tmpfs on {} failed ({}): {}; these tests need root (or CAP_SYS_ADMIN)",
            dir.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
        Tmpfs { dir: dir.to_path_buf() }
    }

    /// Fill what is left with a file `name`; returns its path (remove it to free the space).
    pub(super) fn fill(&self, name: &str) -> PathBuf {
        use std::io::Write;
        let path = self.dir.join(name);
        let mut file = std::fs::File::create(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let page = [0xA5u8; 4096];
        loop {
            match file.write(&page) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::StorageFull => break,
                Err(e) => panic!("filling {}: {e}", path.display()),
            }
        }
        path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let status = std::process::Command::new("umount").arg(&self.dir).status();
        if !status.as_ref().is_ok_and(|s| s.success()) {
            eprintln!("warning: could not unmount {}: {status:?}", self.dir.display());
        }
    }
}

/// What the tests crate's `python/<script>` prints as JSON when run with `args`.
fn python(script: &str, args: &[&std::ffi::OsStr]) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/python").join(script);
    let output =
        std::process::Command::new("python3").arg(&script).args(args).output().expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{} failed (TensorBoard's reader: `python3 -m pip install tensorboard`):\n{stdout}\n{}",
        script.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// What `read_records.py` reads from `path` with the reader of `kind`'s users (`events`:
/// TensorBoard's; `csv`: Python's `csv` module).
pub(super) fn read_with_python(kind: &str, path: &Path) -> serde_json::Value {
    python("read_records.py", &[kind.as_ref(), path.as_os_str()])
}

/// What TensorBoard's *HParams* tab reads from `dir` (`read_hparams.py` asks the hparams
/// plugin's backend for the experiment and the session groups, as the tab does).
pub(super) fn read_hparams(dir: &Path) -> serde_json::Value {
    python("read_hparams.py", &[dir.as_os_str()])
}

/// CRC-32C, bit by bit (Castagnoli's polynomial, reflected): written here apart from the writers'.
pub(super) fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0x82F6_3B78 } else { crc >> 1 };
        }
    }
    !crc
}
