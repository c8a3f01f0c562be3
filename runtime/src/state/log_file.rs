//! The one way a file of the log directory (or of a checkpoint folder) is opened: a directory
//! others can write into may hold a FIFO, a device, a symlink to someone's file or a huge sparse
//! file under any of stoker's names. Every read takes a regular file only, opened without
//! waiting on a FIFO, and at most a bound of bytes ([`read_bounded`], [`read_exact_len`]); every
//! write into an existing file (an append, a truncation) opens it without following a symlink and
//! only when it is a regular file of this process's user ([`open_own`]); a new file is created new
//! under a name of its own (`write_atomic`). [`warn_if_shared`] says when a directory is open to
//! other users.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::path::Path;

/// The most bytes read of a file whose size stoker does not know in advance (`stats.json`,
/// `stats.csv`): 1 GiB, far above what a run's statistics take.
pub(crate) const MAX_STATS_BYTES: u64 = 1 << 30;

/// The most bytes read of a small bookkeeping file (`index.json`, a checkpoint's manifest): 64 MiB.
pub(crate) const MAX_INDEX_BYTES: u64 = 64 << 20;

/// Open `path` with `options`, never waiting on a FIFO (`O_NONBLOCK`: no open waits for the other
/// end), and keep it only if it is a regular file. A symlink is followed: a read of it is harmless.
pub(crate) fn open_regular(options: &mut OpenOptions, path: &Path) -> std::io::Result<File> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path)?;
    check_regular(&file)?;
    Ok(file)
}

/// An error unless `file` is a regular file.
fn check_regular(file: &File) -> std::io::Result<()> {
    let kind = file.metadata()?.file_type();
    if kind.is_file() {
        return Ok(());
    }
    let what =
        if kind.is_dir() { "a directory" } else { "not a regular file (a FIFO, a socket or a device)" };
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("it is {what}; only a regular file is read or written"),
    ))
}

/// Open the existing file `path` to write into it (append to it, truncate it, lock it): never
/// through a symlink (`O_NOFOLLOW`), never waiting on a FIFO, and only when it is a regular file
/// owned by this process's user. A symlink planted there (`.lock -> ~/.bashrc`) or another user's
/// file is an error that says so, and nothing is written.
pub(crate) fn open_own(options: &mut OpenOptions, path: &Path) -> std::io::Result<File> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW);
        let file = options.open(path).map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                std::io::Error::new(
                    e.kind(),
                    "it is a symbolic link; in a log directory stoker never writes through one, nor reads a file a person edits through one (remove it)",
                )
            } else {
                e
            }
        })?;
        check_regular(&file)?;
        let metadata = file.metadata()?;
        // A second name is another place the same bytes live (a hard link planted to a file of
        // this user's, or a backup made with `cp -l`): writing would change it there too.
        if metadata.nlink() > 1 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!(
                    "it is a file with {} names (hard links); stoker writes only into a file of one name in a log directory (remove it)",
                    metadata.nlink()
                ),
            ));
        }
        let owner = metadata.uid();
        // SAFETY: geteuid(2) cannot fail and touches no memory.
        let me = unsafe { libc::geteuid() };
        if owner != me {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!(
                    "it belongs to user {owner}, not to this process's user {me}; stoker writes only into its own files"
                ),
            ));
        }
        Ok(file)
    }
    #[cfg(not(unix))]
    {
        open_regular(options, path)
    }
}

/// The bytes of the regular file at `path`, if it holds at most `limit` bytes: a FIFO, a device
/// (a symlink to `/dev/zero`) or a larger file is an error, found before anything is read when
/// its size says so.
pub(crate) fn read_bounded(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    read_open_bounded(open_regular(OpenOptions::new().read(true), path)?, limit)
}

/// The text of a file a person edits in the log directory (`hyper.txt`), whose lines its
/// reader may quote in warnings: opened as [`open_own`] opens a file to write into it (never
/// through a symlink, only a regular file of one name that this process's user owns), so that a
/// link planted there never shows another file's lines; then read as [`read_text_bounded`] reads.
pub(crate) fn read_own_text_bounded(path: &Path, limit: u64) -> std::io::Result<String> {
    let bytes = read_open_bounded(open_own(OpenOptions::new().read(true), path)?, limit)?;
    String::from_utf8(bytes)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "it is not UTF-8"))
}

/// The bytes of the open regular file `file`, if it holds at most `limit` (see [`read_bounded`]).
fn read_open_bounded(file: File, limit: u64) -> std::io::Result<Vec<u8>> {
    let too_large = || {
        std::io::Error::new(
            std::io::ErrorKind::FileTooLarge,
            format!("it is larger than {limit} bytes, the most that is read"),
        )
    };
    if file.metadata()?.len() > limit {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    // One byte more than the limit tells a file at the limit from a larger one, whatever the
    // size its metadata claimed (a file still being written).
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(bytes)
}

/// [`read_bounded`] as UTF-8 text (`InvalidData` when it is not).
pub(crate) fn read_text_bounded(path: &Path, limit: u64) -> std::io::Result<String> {
    String::from_utf8(read_bounded(path, limit)?)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "it is not UTF-8"))
}

/// Why a file expected to hold `len` bytes was not read.
#[derive(Debug)]
pub(crate) enum LengthRead {
    /// It holds another number of bytes (found before reading it when its size says so).
    Length(u64),
    /// It could not be opened or read, or is not a regular file.
    Io(std::io::Error),
}

/// The bytes of the regular file at `path`, which must hold exactly `len` bytes: a size larger
/// than that is refused before anything is read (a sparse file of a terabyte at once), and the
/// read stops one byte past `len`. (A smaller size is read all the same: some file systems, such
/// as `/proc`, report 0 for files that are not empty, and reading at most `len` bytes is cheap.)
pub(crate) fn read_exact_len(path: &Path, len: u64) -> Result<Vec<u8>, LengthRead> {
    let file = open_regular(OpenOptions::new().read(true), path).map_err(LengthRead::Io)?;
    let size = file.metadata().map_err(LengthRead::Io)?.len();
    if size > len {
        return Err(LengthRead::Length(size));
    }
    // Room for what the file holds, not for what `len` claims: `len` comes from a manifest, which
    // a crafted or damaged one sets to anything (a reservation of `u64::MAX` bytes panics, one of
    // a terabyte aborts where memory is not overcommitted).
    let mut bytes = Vec::with_capacity(usize::try_from(size.min(len)).unwrap_or(0));
    file.take(len.saturating_add(1)).read_to_end(&mut bytes).map_err(LengthRead::Io)?;
    if bytes.len() as u64 != len {
        return Err(LengthRead::Length(bytes.len() as u64));
    }
    Ok(bytes)
}

/// A warning's text when the directory `dir` is open to other users: owned by another user, or
/// writable by everyone (`o+w`: anyone may plant files under stoker's names there). `None` when
/// it is this process's user's alone, or cannot be looked at.
pub(crate) fn shared_dir(dir: &Path) -> Option<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(dir).ok()?;
        // SAFETY: geteuid(2) cannot fail and touches no memory.
        let me = unsafe { libc::geteuid() };
        let mut why = Vec::new();
        if meta.uid() != me {
            why.push(format!("is owned by user {}, not by this process's user {me}", meta.uid()));
        }
        if meta.mode() & 0o002 != 0 {
            why.push(format!("is writable by every user (mode {:o})", meta.mode() & 0o7777));
        }
        (!why.is_empty()).then(|| {
            format!(
                "the directory {} {}: another user can put files there under the names this run uses; stoker never writes through a symlink or into another user's file, but keep a run's files in a folder of your own",
                dir.display(),
                why.join(" and ")
            )
        })
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        None
    }
}

/// Warn (once per call) when `dir` is open to other users (see [`shared_dir`]).
pub(crate) fn warn_if_shared(dir: &Path) {
    if let Some(warning) = shared_dir(dir) {
        crate::logging::warn!("{warning}");
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("stoker-log-file-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn fifo(path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn a_fifo_a_device_and_a_larger_file_are_refused_without_reading_them() {
        let dir = scratch("bounded");
        fifo(&dir.join("fifo"));
        let error = read_bounded(&dir.join("fifo"), 10).unwrap_err();
        assert!(error.to_string().contains("not a regular file"), "{error}");
        std::os::unix::fs::symlink("/dev/zero", dir.join("zero")).unwrap();
        assert!(read_bounded(&dir.join("zero"), 10).is_err());
        let sparse = File::create(dir.join("sparse")).unwrap();
        sparse.set_len(1 << 40).unwrap();
        let error = read_bounded(&dir.join("sparse"), 10).unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::FileTooLarge);
        assert!(
            matches!(read_exact_len(&dir.join("sparse"), 3), Err(LengthRead::Length(size)) if size == 1 << 40)
        );
        std::fs::write(dir.join("three"), b"abc").unwrap();
        assert_eq!(read_exact_len(&dir.join("three"), 3).unwrap(), b"abc");
        assert_eq!(read_bounded(&dir.join("three"), 3).unwrap(), b"abc");
        assert_eq!(read_bounded(&dir.join("three"), 2).unwrap_err().kind(), std::io::ErrorKind::FileTooLarge);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_write_never_goes_through_a_symlink() {
        let dir = scratch("own");
        std::fs::write(dir.join("victim"), b"precious").unwrap();
        std::os::unix::fs::symlink(dir.join("victim"), dir.join("link")).unwrap();
        let error = open_own(OpenOptions::new().append(true), &dir.join("link")).unwrap_err();
        assert!(error.to_string().contains("symbolic link"), "{error}");
        fifo(&dir.join("fifo"));
        assert!(open_own(OpenOptions::new().write(true), &dir.join("fifo")).is_err());
        assert!(open_own(OpenOptions::new().append(true), &dir.join("victim")).is_ok());
        assert_eq!(std::fs::read(dir.join("victim")).unwrap(), b"precious");
        std::fs::hard_link(dir.join("victim"), dir.join("second")).unwrap();
        let error = open_own(OpenOptions::new().write(true), &dir.join("second")).unwrap_err();
        assert!(error.to_string().contains("2 names"), "{error}");
        assert_eq!(std::fs::read(dir.join("victim")).unwrap(), b"precious");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_directory_writable_by_everyone_is_reported() {
        use std::os::unix::fs::PermissionsExt;
        let dir = scratch("shared");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(shared_dir(&dir), None);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let warning = shared_dir(&dir).expect("o+w");
        assert!(warning.contains("writable by every user (mode 777)"), "{warning}");
        assert!(
            shared_dir(Path::new("/")).is_some_and(|w| w.contains("owned by user 0"))
                || unsafe { libc::geteuid() } == 0
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
