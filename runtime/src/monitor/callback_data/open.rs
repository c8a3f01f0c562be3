//! Where the HDF5 file comes from, by the rules of every file of a log directory: a new file is
//! created new at its path (whatever was there removed first, the file then created exclusively,
//! so that nothing planted there is followed); a resumed run's file is opened only when it is a
//! regular file of this user's with one name, never through a symlink nor waiting on a FIFO
//! (`state::open_own`), and one HDF5 cannot read (a crash during a write) is moved aside, with a
//! warning, and a new one started.

use std::fs::OpenOptions;
use std::path::Path;

use hdf5::File;

use crate::error::{Error, Result};

/// Open the file at `path` for a run: a new one, or (`resumed`) the one an earlier run wrote if
/// there is one. Returns it and whether it is new.
pub(super) fn open(path: &Path, resumed: bool) -> Result<(File, bool)> {
    if path.is_dir() {
        return Err(Error::invalid(format!(
            "CallbackDataWriter: {} is a folder, not a file",
            path.display()
        )));
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    }
    // The entry itself, a symlink included (never followed).
    let exists = std::fs::symlink_metadata(path).is_ok();
    let opened = match (resumed, exists) {
        (true, true) => match open_existing(path)? {
            Some(file) => (file, false),
            None => (create(path)?, true),
        },
        (true, false) => {
            crate::logging::warn!(
                "CallbackDataWriter: {} is missing; a new one holds only what this resumed run writes",
                path.display()
            );
            (create(path)?, true)
        }
        (false, exists) => {
            if exists {
                crate::logging::warn!("CallbackDataWriter: overwriting {}", path.display());
                std::fs::remove_file(path).map_err(|e| cannot(path, "replace", &e))?;
            }
            (create(path)?, true)
        }
    };
    close_on_exec(path);
    Ok(opened)
}

/// The file at `path` for `Deconv` at the end of training: this run's callback data file when
/// it is there (a regular file of this user's, never through a symlink; one HDF5 cannot read is
/// an error, nothing is moved aside), else a new file.
pub(super) fn open_or_create(path: &Path) -> Result<File> {
    if path.is_dir() {
        return Err(Error::invalid(format!("Deconv: {} is a folder, not a file", path.display())));
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    }
    let file = if std::fs::symlink_metadata(path).is_ok() {
        let deconv =
            |e: &dyn std::fmt::Display| Error::msg(format!("Deconv: cannot open {}: {e}", path.display()));
        let checked = crate::state::open_own(OpenOptions::new().read(true).write(true), path)
            .map_err(|e| deconv(&e))?;
        let file = File::open_rw(path).map_err(|e| deconv(&e))?;
        same_file(&checked, path)?;
        file
    } else {
        File::create_excl(path)
            .map_err(|e| Error::msg(format!("Deconv: cannot create {}: {e}", path.display())))?
    };
    close_on_exec(path);
    Ok(file)
}

fn cannot(path: &Path, what: &str, error: &dyn std::fmt::Display) -> Error {
    Error::msg(format!("CallbackDataWriter: cannot {what} {}: {error}", path.display()))
}

/// A new file at `path`, where nothing is: created exclusively (`O_EXCL`: an entry planted there
/// meanwhile, a symlink included, is an error, never followed).
fn create(path: &Path) -> Result<File> {
    File::create_excl(path).map_err(|e| cannot(path, "create", &e))
}

/// The earlier run's file, checked first as every file of a log directory is before a write;
/// `None` when HDF5 cannot read it, or it lacks the run's size (`config`): then it was moved
/// aside.
fn open_existing(path: &Path) -> Result<Option<File>> {
    let checked = crate::state::open_own(OpenOptions::new().read(true).write(true), path)
        .map_err(|e| cannot(path, "open", &e))?;
    let opened = File::open_rw(path).map_err(|e| e.to_string()).and_then(|file| {
        let sized = file.group("config").is_ok_and(|c| c.attr("total_epochs").is_ok());
        if sized { Ok(file) } else { Err("it has no `config` group with the run's size".to_string()) }
    });
    match opened {
        Ok(file) => {
            same_file(&checked, path)?;
            Ok(Some(file))
        }
        Err(why) => {
            let aside = crate::state::move_aside(path).map_err(|e| Error::io(path, e))?;
            crate::logging::warn!(
                "CallbackDataWriter: {} cannot be read ({why}; a crash during a write?): moved it to {}; a new file \
                 holds only what this resumed run writes",
                path.display(),
                aside.display()
            );
            Ok(None)
        }
    }
}

/// An error unless `path` is still the file `checked` is (HDF5 opens by name: nothing may have
/// been put there between the check and its open).
fn same_file(checked: &std::fs::File, path: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let now = std::fs::symlink_metadata(path).map_err(|e| Error::io(path, e))?;
        let then = checked.metadata().map_err(|e| Error::io(path, e))?;
        if (now.dev(), now.ino()) != (then.dev(), then.ino()) {
            return Err(cannot(path, "open", &"it was replaced while it was opened; nothing was written"));
        }
    }
    #[cfg(not(unix))]
    let _ = (checked, path);
    Ok(())
}

/// Mark the descriptors this process holds on `path` close-on-exec: libhdf5 opens its files
/// without `O_CLOEXEC`, so a program started meanwhile (a `SendStat` command, a
/// `StartProcOrThread` process) would keep the file open, with HDF5's lock on it, for its whole
/// life. Linux (`/proc/self/fd`); elsewhere nothing is done.
fn close_on_exec(path: &Path) {
    #[cfg(target_os = "linux")]
    {
        let Ok(target) = path.canonicalize() else { return };
        let Ok(fds) = std::fs::read_dir("/proc/self/fd") else { return };
        for entry in fds.flatten() {
            let points_there = std::fs::read_link(entry.path()).is_ok_and(|link| link == target);
            if let (true, Ok(fd)) = (points_there, entry.file_name().to_string_lossy().parse::<i32>()) {
                // SAFETY: fcntl on a descriptor this process holds, changing only its flags.
                unsafe {
                    let flags = libc::fcntl(fd, libc::F_GETFD);
                    if flags >= 0 {
                        libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
                    }
                }
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = path;
}
