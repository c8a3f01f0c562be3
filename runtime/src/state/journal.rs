//! Long histories kept beside the checkpoints ([`Journal`]): an append-only file of JSON lines to
//! which each checkpoint adds what was recorded since the one before, and which a checkpoint
//! names by its length and checksum ([`Mark`]) instead of holding it: a checkpoint's cost no
//! longer grows with the run. A resume reads the file up to the checkpoint's mark, verified, and
//! the next append cuts off what a later checkpoint, or a crash, left after it. A run resumed in
//! another log directory starts a journal of its own there, holding the whole history again.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use super::log_file::{open_own, open_regular};

/// The folder of the journals inside the log directory.
pub const JOURNAL_DIR: &str = "history";

/// Where a checkpoint's history ends in its journal: the file (its absolute path when written),
/// the length of the history and the CRC-32C of those bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mark {
    pub(crate) file: PathBuf,
    pub(crate) len: u64,
    pub(crate) crc32c: u32,
}

impl Mark {
    /// As a checkpoint holds it.
    pub(crate) fn to_json(&self) -> Json {
        serde_json::json!({ "file": self.file.to_string_lossy(), "len": self.len, "crc32c": self.crc32c })
    }

    /// The mark a checkpoint holds at `v`; `None` when it holds none (or not this form).
    pub(crate) fn from_json(v: &Json) -> Option<Mark> {
        Some(Mark {
            file: PathBuf::from(v.get("file")?.as_str()?),
            len: v.get("len")?.as_u64()?,
            crc32c: u32::try_from(v.get("crc32c")?.as_u64()?).ok()?,
        })
    }
}

/// An append-only history file. Only the chief appends; a rank that only resumes reads.
#[derive(Debug, Default)]
pub(crate) struct Journal {
    /// The file appended to, once known (a fresh run names it at its start).
    path: Option<PathBuf>,
    /// The bytes of history it holds, and their checksum: what the last checkpoint named (the
    /// file may hold more, cut off at the next append).
    len: u64,
    crc32c: u32,
    /// The file, open once appended to.
    file: Option<File>,
    /// The copies of the history kept in other folders ([`mirror_into`](Self::mirror_into)), and
    /// how many of its bytes each holds.
    mirrors: Vec<(PathBuf, u64)>,
}

/// Whether a journal that could not be read back is missing or holds another history (removed,
/// cut back, replaced): what a resume survives with a shorter history. Any other failure (a
/// permission, an I/O error) is not.
pub(crate) fn is_missing_or_mismatched(error: &std::io::Error) -> bool {
    use std::io::ErrorKind::{InvalidData, NotFound, UnexpectedEof};
    matches!(error.kind(), NotFound | UnexpectedEof | InvalidData)
}

impl Journal {
    /// Continue from `mark`, the history a checkpoint names: the history read back, verified
    /// against the mark. The journal is looked for under its name in each of `dirs` first (the
    /// run's own `history/` folder, the checkpoint's log directory's: a log directory moved or
    /// copied takes its journal with it), then where the checkpoint wrote it. The next append
    /// cuts off what follows the history in the file found.
    pub(crate) fn resume(mark: &Mark, dirs: &[PathBuf]) -> std::io::Result<(Journal, Vec<u8>)> {
        let name = mark.file.file_name().unwrap_or_default();
        let mut places: Vec<PathBuf> = dirs.iter().map(|dir| dir.join(name)).collect();
        places.push(mark.file.clone());
        let mut failure = None;
        for place in places.iter().filter(|place| place.exists()) {
            match read_verified(place, mark) {
                Ok(bytes) => {
                    let journal = Journal {
                        path: Some(place.clone()),
                        len: mark.len,
                        crc32c: mark.crc32c,
                        ..Journal::default()
                    };
                    return Ok((journal, bytes));
                }
                Err(error) => {
                    failure.get_or_insert(error);
                }
            }
        }
        Err(failure.unwrap_or_else(|| {
            let looked: Vec<String> = places.iter().map(|p| p.display().to_string()).collect();
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("the journal is not there (looked for {})", looked.join(", ")),
            )
        }))
    }

    /// Whether it appends to the file `path` (a resumed run's journal is its log directory's
    /// only when the checkpoint was written there).
    pub(crate) fn is_at(&self, path: &Path) -> bool {
        self.path.as_deref().is_some_and(|own| same_file(own, path))
    }

    /// Whether the file it appends to is in the folder `dir`.
    pub(crate) fn is_in(&self, dir: &Path) -> bool {
        self.path.as_deref().and_then(Path::parent).is_some_and(|parent| same_file(parent, dir))
    }

    /// Whether the file it appends to is known.
    pub(crate) fn is_named(&self) -> bool {
        self.path.is_some()
    }

    /// A new journal at `path`, empty (what the file holds is cut off at the first append).
    pub(crate) fn at(path: PathBuf) -> Journal {
        Journal { path: Some(path), ..Journal::default() }
    }

    /// Append `bytes` (whole JSON lines) after the history, synced to disk before this returns:
    /// the mark of the history now. A failed append (a full disk) leaves the history as it was.
    pub(crate) fn append(&mut self, bytes: &[u8]) -> std::io::Result<Mark> {
        let path = self.path.clone().ok_or_else(|| std::io::Error::other("the journal has no file"))?;
        if self.file.is_none() {
            self.file = Some(open_for_append(&path)?);
        }
        let before = (self.len, self.crc32c);
        self.write_at_end(bytes)?;
        let file = self.file.as_ref().ok_or_else(|| std::io::Error::other("the journal is not open"))?;
        if let Err(error) = file.sync_data() {
            // Not appended: the next append writes these lines again, over them, not after them.
            (self.len, self.crc32c) = before;
            let _ = file.set_len(self.len);
            return Err(error);
        }
        Ok(Mark { file: absolute(&path), len: self.len, crc32c: self.crc32c })
    }

    /// Keep a copy of the history in the folder `dir` under the journal's name, so that a folder
    /// of checkpoints outside the log directory (a saver's `checkpoint_dir`) holds the history its
    /// checkpoints name: a resume finds it there when the log directory is gone. The first copy a
    /// run makes into a folder is written whole (atomically: it replaces whatever timeline was
    /// there); later ones append what the journal gained since, synced.
    pub(crate) fn mirror_into(&mut self, dir: &Path) -> std::io::Result<()> {
        let path = self.path.clone().ok_or_else(|| std::io::Error::other("the journal has no file"))?;
        let target = dir.join(path.file_name().unwrap_or_default());
        if same_file(&target, &path) {
            return Ok(());
        }
        let known = self.mirrors.iter().position(|(place, _)| *place == target);
        let from = known.map_or(0, |i| self.mirrors[i].1);
        let bytes = read_range(&path, from, self.len)?;
        match known {
            None => {
                super::create_dir_all_synced(dir)?;
                super::write_atomic(&target, &bytes)?;
                self.mirrors.push((target, self.len));
            }
            Some(i) => {
                let mut file = open_own(OpenOptions::new().write(true), &target)?;
                file.set_len(from)?;
                file.seek(SeekFrom::Start(from))?;
                file.write_all(&bytes)?;
                file.sync_data()?;
                self.mirrors[i].1 = self.len;
            }
        }
        Ok(())
    }

    /// Write `bytes` at the end of the history (cutting off anything after it first).
    fn write_at_end(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let file = self.file.as_mut().ok_or_else(|| std::io::Error::other("the journal is not open"))?;
        let written = file
            .set_len(self.len)
            .and_then(|()| file.seek(SeekFrom::Start(self.len)))
            .and_then(|_| file.write_all(bytes));
        if let Err(error) = written {
            let _ = file.set_len(self.len);
            return Err(error);
        }
        self.len += bytes.len() as u64;
        self.crc32c = crc32c::crc32c_append(self.crc32c, bytes);
        Ok(())
    }
}

/// One entry of a journal, as the line `value` serializes to, after `out`'s lines.
pub(crate) fn push_line(out: &mut Vec<u8>, value: &impl serde::Serialize) -> std::io::Result<()> {
    serde_json::to_writer(&mut *out, value)?;
    out.push(b'\n');
    Ok(())
}

/// The entries of a journal's history (each line a JSON array), with each line's 1-based
/// number; `None` for a line that is not one.
pub(crate) fn entries(bytes: &[u8]) -> impl Iterator<Item = (usize, Option<Vec<Json>>)> + '_ {
    bytes
        .split(|&b| b == b'\n')
        .enumerate()
        .filter(|(_, line)| !line.is_empty())
        .map(|(n, line)| (n + 1, serde_json::from_slice(line).ok()))
}

/// The first `mark.len` bytes of the journal at `path`, checked against the mark.
fn read_verified(path: &Path, mark: &Mark) -> std::io::Result<Vec<u8>> {
    let bytes = read_prefix(path, mark.len)?;
    if crc32c::crc32c(&bytes) != mark.crc32c {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "the first {} bytes of {} are not the history the checkpoint recorded (checksum differs): a resume from an older checkpoint replaced what followed",
                mark.len,
                path.display()
            ),
        ));
    }
    Ok(bytes)
}

/// The journal `path` opened to append to: created (a fresh run's), or an existing regular file
/// of this user, never through a symlink.
fn open_for_append(path: &Path) -> std::io::Result<File> {
    if let Some(dir) = path.parent() {
        super::create_dir_all_synced(dir)?;
    }
    match OpenOptions::new().write(true).create_new(true).open(path) {
        Ok(file) => {
            if let Some(dir) = path.parent() {
                super::sync_dir(dir)?;
            }
            Ok(file)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            open_own(OpenOptions::new().write(true), path)
        }
        Err(e) => Err(e),
    }
}

/// The first `len` bytes of the journal at `path` (a regular file, never waited on); an error
/// when it is shorter.
fn read_prefix(path: &Path, len: u64) -> std::io::Result<Vec<u8>> {
    let file = open_regular(OpenOptions::new().read(true), path)?;
    let size = file.metadata()?.len();
    if size < len {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!(
                "it holds {size} bytes, the checkpoint's history {len}: it was cut back by a resume from an older checkpoint, or replaced"
            ),
        ));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(len).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The bytes `from..to` of the journal at `path` (a regular file, never waited on).
fn read_range(path: &Path, from: u64, to: u64) -> std::io::Result<Vec<u8>> {
    let mut file = open_regular(OpenOptions::new().read(true), path)?;
    file.seek(SeekFrom::Start(from))?;
    let mut bytes = Vec::with_capacity(usize::try_from(to.saturating_sub(from)).unwrap_or(0));
    file.take(to.saturating_sub(from)).read_to_end(&mut bytes)?;
    if (bytes.len() as u64) < to.saturating_sub(from) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the journal is shorter than its history",
        ));
    }
    Ok(bytes)
}

/// `path` made absolute (a checkpoint names its journal wherever the run was started from).
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Whether `a` and `b` are the same file (or both missing and spelled alike).
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => absolute(a) == absolute(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("stoker-journal-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_resume_reads_the_marked_history_and_the_next_append_cuts_what_followed() {
        let dir = scratch("resume");
        let path = dir.join(JOURNAL_DIR).join("a.jsonl");
        let mut journal = Journal::at(path.clone());
        let first = journal.append(b"[1]\n").unwrap();
        let second = journal.append(b"[2]\n").unwrap();
        assert_eq!((first.len, second.len), (4, 8));
        // Resumed from the first checkpoint: its history, then the next append replaces [2].
        let (mut resumed, bytes) = Journal::resume(&first, &[]).unwrap();
        assert!(resumed.is_at(&path) && !resumed.is_at(&dir.join("b.jsonl")));
        assert_eq!(bytes, b"[1]\n");
        let third = resumed.append(b"[3]\n").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"[1]\n[3]\n");
        assert_eq!(Journal::resume(&third, &[]).unwrap().1, b"[1]\n[3]\n");
        // The second checkpoint's history is gone: its mark no longer verifies.
        let error = Journal::resume(&second, &[]).unwrap_err().to_string();
        assert!(error.contains("checksum differs"), "{error}");
        // A log directory moved elsewhere: its journal is found there, under its name.
        let moved = dir.join("moved");
        std::fs::create_dir_all(&moved).unwrap();
        std::fs::copy(&path, moved.join("a.jsonl")).unwrap();
        let (found, _) = Journal::resume(&third, std::slice::from_ref(&moved)).unwrap();
        assert!(found.is_at(&moved.join("a.jsonl")));
        // A new journal over an old file starts empty.
        let mut again = Journal::at(path.clone());
        again.append(b"[9]\n").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"[9]\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_mark_past_the_end_is_an_error_not_a_short_history() {
        let dir = scratch("short");
        let path = dir.join("a.jsonl");
        std::fs::write(&path, b"[1]\n").unwrap();
        let mark = Mark { file: path.clone(), len: 9, crc32c: 0 };
        assert!(Journal::resume(&mark, &[]).unwrap_err().to_string().contains("holds 4 bytes"));
        assert_eq!(Mark::from_json(&mark.to_json()), Some(mark));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_mirror_holds_the_history_whole_then_follows_each_append() {
        let dir = scratch("mirror");
        let path = dir.join(JOURNAL_DIR).join("a.jsonl");
        let archive = dir.join("archive").join(JOURNAL_DIR);
        // Whatever another timeline left there is replaced by the first copy.
        std::fs::create_dir_all(&archive).unwrap();
        std::fs::write(archive.join("a.jsonl"), b"[7]\n[7]\n[7]\n").unwrap();
        let mut journal = Journal::at(path.clone());
        journal.append(b"[1]\n").unwrap();
        journal.mirror_into(&archive).unwrap();
        assert_eq!(std::fs::read(archive.join("a.jsonl")).unwrap(), b"[1]\n");
        let mark = journal.append(b"[2]\n").unwrap();
        journal.mirror_into(&archive).unwrap();
        assert_eq!(std::fs::read(archive.join("a.jsonl")).unwrap(), b"[1]\n[2]\n");
        // The log directory's journal gone, the mark is read from the copy.
        std::fs::remove_dir_all(dir.join(JOURNAL_DIR)).unwrap();
        let error = Journal::resume(&mark, &[]).unwrap_err();
        assert!(is_missing_or_mismatched(&error), "{error}");
        let (found, bytes) = Journal::resume(&mark, std::slice::from_ref(&archive)).unwrap();
        assert!(found.is_at(&archive.join("a.jsonl")));
        assert_eq!(bytes, b"[1]\n[2]\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
