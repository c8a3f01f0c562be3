//! What a write leaves beside the file it writes, and when it is a leftover: the names of
//! temporaries (which host and process made them), the host's name, the rule that removes a
//! temporary only once nobody can be writing it, and the backups a writer moves a file aside to.

use std::ffi::{OsStr, OsString};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

/// Temporaries made by this process so far: with the process id, a name no other write has.
static TEMPORARIES: AtomicU64 = AtomicU64::new(0);

/// How long after its last change a temporary that this host cannot check is a leftover: one of
/// another host (its process cannot be asked from here), or one of an earlier version of stoker
/// (whose names did not say their host). No write of stoker takes a day.
pub(crate) const STALE_AFTER: Duration = Duration::from_secs(24 * 3600);

/// The longest host part of a temporary's name.
const HOST_TAG_LEN: usize = 40;

/// The host name, as the kernel gives it (`gethostname(2)`; sysinfo's with the `sys-metrics`
/// feature; `COMPUTERNAME` elsewhere), "localhost" when there is none; characters other than
/// letters, digits, `-` and `.` become `_`.
pub(crate) fn host_name() -> String {
    let name = kernel_host_name()
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "localhost".into());
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '_' }).collect()
}

/// The host name from sysinfo's `System::host_name` (feature `sys-metrics`; every platform).
#[cfg(feature = "sys-metrics")]
fn kernel_host_name() -> Option<String> {
    sysinfo::System::host_name()
}

/// The host name from `gethostname(2)` (without the `sys-metrics` feature, on unix).
#[cfg(all(not(feature = "sys-metrics"), unix))]
fn kernel_host_name() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is writable for its whole length, which is passed.
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } != 0 {
        return None;
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Some(String::from_utf8_lossy(&buf[..end]).into_owned())
}

/// The host name from `COMPUTERNAME` (without the `sys-metrics` feature, on Windows and others).
#[cfg(all(not(feature = "sys-metrics"), not(unix)))]
fn kernel_host_name() -> Option<String> {
    std::env::var("COMPUTERNAME").ok()
}

/// This host as a temporary's name carries it: [`host_name`] with `.` as `_` (a name's parts are
/// split at dots), at most [`HOST_TAG_LEN`] characters.
fn host_tag() -> &'static str {
    static TAG: OnceLock<String> = OnceLock::new();
    TAG.get_or_init(|| {
        host_name().chars().take(HOST_TAG_LEN).map(|c| if c == '.' { '_' } else { c }).collect()
    })
}

/// A name for a temporary entry beside `name`, of the form `NAME.<pid>-<n>-<host>.<suffix>`,
/// unique to this host, this process and this call: two writers never share one (not even on
/// two machines sharing the folder), and [`leftover_of`] tells who made it.
pub(crate) fn temporary_name(name: &OsStr, suffix: &str) -> OsString {
    let mut temporary = name.to_os_string();
    let n = TEMPORARIES.fetch_add(1, Ordering::Relaxed);
    temporary.push(format!(".{}-{n}-{}.{suffix}", std::process::id(), host_tag()));
    temporary
}

/// Who made a temporary entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Maker<'a> {
    /// Its process.
    pub(crate) pid: u32,
    /// Its host as the name carries it; `None` for a name of an earlier version (no host).
    pub(crate) host: Option<&'a str>,
}

impl Maker<'_> {
    /// Whether it is this process (of this host).
    pub(crate) fn is_this_process(self) -> bool {
        self.pid == std::process::id() && self.host == Some(host_tag())
    }
}

/// The name the temporary entry `name` (named by [`temporary_name`] with `suffix`) stands in
/// for, and who made it; `None` when `name` is not of that form.
pub(crate) fn leftover_of<'a>(name: &'a str, suffix: &str) -> Option<(&'a str, Maker<'a>)> {
    let rest = name.strip_suffix(suffix)?.strip_suffix('.')?;
    let (base, tag) = rest.rsplit_once('.')?;
    let (pid, rest) = tag.split_once('-')?;
    let (n, host) = match rest.split_once('-') {
        Some((n, host)) if !host.is_empty() => (n, Some(host)),
        Some(_) => return None,
        None => (rest, None),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if base.is_empty() || !digits(pid) || !digits(n) {
        return None;
    }
    // A process id is a positive `pid_t`: any other number was not written by stoker.
    let pid: i32 = pid.parse().ok()?;
    Some((base, Maker { pid: u32::try_from(pid).ok()?, host }))
}

/// Whether the temporary entry at `path`, made by `maker`, is a leftover that nobody writes any
/// more, so that it may be removed:
///
/// - one of this host: once its process has certainly ended (this process's never: it may be
///   writing it);
/// - one of another host, whose process cannot be asked from here: once it has not changed for
///   [`STALE_AFTER`] (a day);
/// - one of an earlier version (no host in its name): once both hold (its process is gone here,
///   and it has not changed for a day), as it may be another host's.
pub(crate) fn is_leftover(path: &Path, maker: Maker<'_>) -> bool {
    let own = maker.pid == std::process::id();
    let stale = || {
        fs::symlink_metadata(path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|at| SystemTime::now().duration_since(at).ok())
            .is_some_and(|age| age > STALE_AFTER)
    };
    match maker.host {
        Some(host) if host == host_tag() => !own && process_is_gone(maker.pid),
        Some(_) => stale(),
        None => !own && process_is_gone(maker.pid) && stale(),
    }
}

/// Whether the process `pid` has certainly ended, so that what it left half-written is a
/// leftover. A process that exists, or one this system cannot tell about, has not.
pub(crate) fn process_is_gone(pid: u32) -> bool {
    #[cfg(unix)]
    {
        let Ok(pid) = libc::pid_t::try_from(pid) else { return false };
        if pid <= 0 {
            return false;
        }
        // SAFETY: kill(2) with signal 0 sends nothing; it only checks that the process exists.
        let sent = unsafe { libc::kill(pid, 0) };
        sent != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        false
    }
}

/// Remove the temporary files that [`write_atomic`](super::write_atomic) left in `dir` (a crash
/// between its write and its rename), by [`is_leftover`]'s rule; folders and every other name
/// stay. Returns how many were removed.
pub(crate) fn remove_leftover_temporaries(dir: &Path) -> usize {
    let Ok(entries) = fs::read_dir(dir) else { return 0 };
    let mut removed = 0;
    for entry in entries.flatten() {
        let Some(name) = entry.file_name().to_str().map(str::to_string) else { continue };
        let Some((_, maker)) = leftover_of(&name, "tmp") else { continue };
        let path = entry.path();
        if entry.file_type().is_ok_and(|kind| kind.is_file())
            && is_leftover(&path, maker)
            && fs::remove_file(&path).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

/// Move the file at `path` aside to `<name>.bak-<unix seconds>` (`-2`, `-3`... appended when that
/// name is taken: two backups within one second both stay); returns where it went.
pub(crate) fn move_aside(path: &Path) -> std::io::Result<PathBuf> {
    let seconds = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let name = path.file_name().unwrap_or_default();
    let named = |n: u64| {
        let mut backup = name.to_os_string();
        backup.push(if n < 2 { format!(".bak-{seconds}") } else { format!(".bak-{seconds}-{n}") });
        path.with_file_name(backup)
    };
    let mut n = 1;
    let mut backup = named(n);
    // Never over an existing entry: a rename would replace it.
    while fs::symlink_metadata(&backup).is_ok() {
        n += 1;
        backup = named(n);
    }
    fs::rename(path, &backup)?;
    Ok(backup)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_names_are_unique_and_tell_their_host_and_process() {
        let a = temporary_name(OsStr::new("step-5"), "tmp");
        let b = temporary_name(OsStr::new("step-5"), "tmp");
        assert_ne!(a, b);
        let a = a.into_string().unwrap();
        let me = Maker { pid: std::process::id(), host: Some(host_tag()) };
        assert_eq!(leftover_of(&a, "tmp"), Some(("step-5", me)));
        assert!(!host_tag().contains('.'), "{}", host_tag());
        assert_eq!(leftover_of(&a, "deleting"), None);
        let old = Maker { pid: 12, host: None };
        assert_eq!(leftover_of("index.json.12-3.tmp", "tmp"), Some(("index.json", old)));
        let other = Maker { pid: 12, host: Some("node-7_cluster") };
        assert_eq!(leftover_of("index.json.12-3-node-7_cluster.tmp", "tmp"), Some(("index.json", other)));
        assert_eq!(leftover_of("x.3000000000-3.tmp", "tmp"), None, "not a process id");
        for not_ours in [
            "step-5.tmp",
            "notes.tmp",
            ".12-3.tmp",
            "a.12-.tmp",
            "a.-3.tmp",
            "a.1x-3.tmp",
            "a.12-3.tmpx",
            "a.12-3-.tmp",
            "a.12-x-host.tmp",
        ] {
            assert_eq!(leftover_of(not_ours, "tmp"), None, "{not_ours}");
        }
    }

    #[test]
    fn only_a_process_that_is_certainly_gone_is_gone() {
        assert!(!process_is_gone(std::process::id()));
        #[cfg(unix)]
        {
            // Above Linux's largest pid_max (2^22): no process has it.
            assert!(process_is_gone((1 << 22) + 7));
            assert!(!process_is_gone(0), "0 is not a process id");
        }
    }
}
