//! `stats.json` on disk: a JSON list of rows, one a line, written in place. A catch-up writes
//! its rows over the list's closing bracket (or the last row again, when a row joined it), then
//! the bracket, and syncs once; the file is read back a row at a time, never whole, so that a
//! resume cuts it back to its checkpoint's rows in place whatever its size.

use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::state::{open_own, sync_dir, write_atomic};

/// The most bytes of one row read back: a row is a step's scalars, far below this; a longer one
/// is no row of stoker's, and the list is taken as damaged there.
const MAX_ROW_BYTES: usize = 64 << 20;

/// The open list: where its rows end on disk.
#[derive(Debug)]
pub(super) struct ListFile {
    file: File,
    /// Just past the last row (past the `[` when there is none): where the next one goes.
    end_of_rows: u64,
    /// Where the last row starts (after its separator), when there is one.
    last_start: Option<u64>,
    /// The file's length.
    len: u64,
    /// The bytes written into the file so far (what a catch-up costs, which the tests check).
    written: u64,
}

/// The existing file at `path` opened to be read and written (`None` when there is none): a
/// regular file of this user's with one name, never through a symlink (`open_own`); a FIFO or a
/// device there (a symlink to `/dev/zero` included) is an error, found without opening it.
pub(super) fn open_existing(path: &Path) -> std::io::Result<Option<File>> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
        Ok(meta) if !meta.is_file() => {
            let what = if meta.is_dir() { "a directory" } else { "a FIFO, a socket or a device" };
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "it is not a regular file ({what}); only a regular file is read or written (remove it)"
                ),
            ));
        }
        Ok(_) => {}
    }
    open_own(OpenOptions::new().read(true).write(true), path).map(Some)
}

/// Put `rows` in `buf`, whose first byte goes at offset `pos` of the file (`buf` may already hold
/// bytes before it), each after its separator (`\n` before the list's first row, `,\n` before
/// the others; none before the first one when it takes the place of the last row, `replacing`),
/// then the list's end, `\n]\n`. `has_rows`: the file holds rows before. Returns where the rows
/// end and where the last one starts.
fn layout(
    buf: &mut Vec<u8>,
    pos: u64,
    mut has_rows: bool,
    replacing: bool,
    rows: &[Vec<u8>],
) -> (u64, Option<u64>) {
    let base = pos - buf.len() as u64;
    let mut last = None;
    for (i, row) in rows.iter().enumerate() {
        if !(replacing && i == 0) {
            buf.extend_from_slice(if has_rows { b",\n" } else { b"\n" });
        }
        last = Some(base + buf.len() as u64);
        buf.extend_from_slice(row);
        has_rows = true;
    }
    let end = base + buf.len() as u64;
    buf.extend_from_slice(b"\n]\n");
    (end, last)
}

impl ListFile {
    /// Create `path` anew holding `rows` (atomically: a temporary file renamed there, so that a
    /// crash leaves the old file or the new one), and open it.
    pub(super) fn create(path: &Path, rows: &[Vec<u8>]) -> std::io::Result<ListFile> {
        let mut bytes = b"[".to_vec();
        let (end_of_rows, last_start) = layout(&mut bytes, 1, false, false, rows);
        write_atomic(path, &bytes)?;
        let file = open_own(OpenOptions::new().read(true).write(true), path)?;
        let len = bytes.len() as u64;
        Ok(ListFile { file, end_of_rows, last_start, len, written: len })
    }

    /// The bytes written into the file so far.
    #[cfg(test)]
    pub(super) fn written(&self) -> u64 {
        self.written
    }

    /// Write `rows` after the last row (`replacing`: the first of them over the last row), then
    /// the list's end, in one write, and sync once. When the file gets shorter (a row written
    /// again, shorter), spaces fill it to its old length in that write and it is cut after the
    /// sync: the file is a JSON list at every moment but the write's own.
    pub(super) fn append(&mut self, rows: &[Vec<u8>], replacing: bool) -> std::io::Result<()> {
        let replacing = replacing && self.last_start.is_some();
        let pos = if replacing { self.last_start.unwrap_or(self.end_of_rows) } else { self.end_of_rows };
        let mut buf = Vec::new();
        let (end_of_rows, last_start) = layout(&mut buf, pos, self.last_start.is_some(), replacing, rows);
        let len = pos + buf.len() as u64;
        buf.resize(buf.len() + self.len.saturating_sub(len) as usize, b' ');
        self.write_at(pos, &buf)?;
        self.file.sync_data()?;
        if self.len > len {
            self.file.set_len(len)?;
        }
        (self.end_of_rows, self.len) = (end_of_rows, len);
        self.last_start = last_start.or(self.last_start);
        Ok(())
    }

    /// Cut the file after its row ending at `end_of_rows` (the last kept one starting at
    /// `last_start`), write `rows` after it with the list's end, and sync.
    fn cut(&mut self, end_of_rows: u64, last_start: Option<u64>, rows: &[Vec<u8>]) -> std::io::Result<()> {
        let mut buf = Vec::new();
        let (end, last) = layout(&mut buf, end_of_rows, last_start.is_some(), false, rows);
        self.write_at(end_of_rows, &buf)?;
        let len = end_of_rows + buf.len() as u64;
        self.file.set_len(len)?;
        self.file.sync_data()?;
        (self.end_of_rows, self.last_start, self.len) = (end, last.or(last_start), len);
        Ok(())
    }

    fn write_at(&mut self, pos: u64, bytes: &[u8]) -> std::io::Result<()> {
        self.file.seek(SeekFrom::Start(pos))?;
        self.file.write_all(bytes)?;
        self.written += bytes.len() as u64;
        Ok(())
    }
}

/// What [`resume`] did to the file beyond keeping the checkpoint's rows.
#[derive(Debug, Default)]
pub(super) struct Resumed {
    /// Complete rows after the checkpoint's (or differing from them) cut off, and where they
    /// were kept.
    pub(super) dropped: Option<(u64, PathBuf)>,
    /// Bytes after the last complete row that were no row (a write cut short by a crash).
    pub(super) torn: bool,
    /// The file held no list at all: it was moved there and a new one started.
    pub(super) moved: Option<PathBuf>,
}

/// Make the file at `path` (open as `file`) hold exactly `restored` (the rows of the checkpoint a
/// run resumes from, each as [`serde_json::to_vec`] writes it): the rows it shares with them at
/// its start are kept in place; the rows after those are copied to `stats.json.bak-<unix
/// seconds>` (a JSON list of them) before the file is cut after the kept ones; the checkpoint's
/// rows it lacks are appended. A file that holds no list is moved aside whole.
pub(super) fn resume(path: &Path, file: File, restored: &[Vec<u8>]) -> std::io::Result<(ListFile, Resumed)> {
    let len = file.metadata()?.len();
    let mut rows = Rows::new(&file);
    let (mut kept, mut kept_end, mut kept_last) = (0, None, None);
    let mut backup: Option<Backup> = None;
    let complete = loop {
        match rows.next()? {
            Next::Row { start, end }
                if backup.is_none() && kept < restored.len() && rows.row_is(&restored[kept]) =>
            {
                (kept, kept_end, kept_last) = (kept + 1, Some(end), Some(start));
            }
            Next::Row { .. } => {
                if backup.is_none() {
                    backup = Some(Backup::create(path)?);
                }
                if let Some(backup) = backup.as_mut() {
                    backup.push(rows.row())?;
                }
            }
            Next::End { complete } => break complete,
        }
    };
    let Some(opened_at) = rows.opened_at else {
        drop(file);
        let moved = crate::state::move_aside(path)?;
        let list = ListFile::create(path, restored)?;
        return Ok((list, Resumed { moved: Some(moved), ..Resumed::default() }));
    };
    let mut resumed = Resumed { torn: !complete, ..Resumed::default() };
    if let Some(backup) = backup {
        resumed.dropped = Some(backup.finish(path)?);
    }
    let end_of_rows = kept_end.unwrap_or(opened_at);
    let mut list = ListFile { file, end_of_rows, last_start: kept_last, len, written: 0 };
    let exact = complete && resumed.dropped.is_none() && kept == restored.len();
    if !exact {
        list.cut(end_of_rows, kept_last, &restored[kept..])?;
    }
    Ok((list, resumed))
}

/// The list in `file`, whole and valid (`None` otherwise), opened to be continued: with its last
/// row.
pub(super) fn continue_list(file: File) -> std::io::Result<Option<(ListFile, Option<Vec<u8>>)>> {
    let len = file.metadata()?.len();
    let mut rows = Rows::new(&file);
    let mut last = None;
    loop {
        match rows.next()? {
            Next::Row { start, .. } => last = Some((start, rows.row().to_vec())),
            Next::End { complete: true } => break,
            Next::End { complete: false } => return Ok(None),
        }
    }
    let Some(end_of_rows) = rows.end_of_rows else { return Ok(None) };
    let last_start = last.as_ref().map(|(start, _)| *start);
    let list = ListFile { file, end_of_rows, last_start, len, written: 0 };
    Ok(Some((list, last.map(|(_, row)| row))))
}

/// The rows cut off by a resume, kept in a list of their own beside the file.
struct Backup {
    file: File,
    path: PathBuf,
    rows: u64,
}

impl Backup {
    /// A new file `<path>.bak-<unix seconds>` (`-2`, `-3`... when that name is taken: created new,
    /// so that no backup and nothing planted there is overwritten or followed).
    fn create(path: &Path) -> std::io::Result<Backup> {
        let seconds =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let name = path.file_name().unwrap_or_default().to_os_string();
        for n in 1u32.. {
            let mut backup = name.clone();
            backup.push(if n < 2 { format!(".bak-{seconds}") } else { format!(".bak-{seconds}-{n}") });
            let backup = path.with_file_name(backup);
            match OpenOptions::new().write(true).create_new(true).open(&backup) {
                Ok(mut file) => {
                    file.write_all(b"[")?;
                    return Ok(Backup { file, path: backup, rows: 0 });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
        Err(std::io::Error::other("no free backup name"))
    }

    fn push(&mut self, row: &[u8]) -> std::io::Result<()> {
        self.file.write_all(if self.rows == 0 { b"\n" } else { b",\n" })?;
        self.file.write_all(row)?;
        self.rows += 1;
        Ok(())
    }

    /// Close the list and sync it, with its folder, before the rows are cut from the file.
    fn finish(mut self, path: &Path) -> std::io::Result<(u64, PathBuf)> {
        self.file.write_all(b"\n]\n")?;
        self.file.sync_all()?;
        sync_dir(path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")))?;
        Ok((self.rows, self.path))
    }
}

/// What [`Rows::next`] found.
enum Next {
    /// A complete row, at `start..end` in the file; its bytes are [`Rows::row`].
    Row { start: u64, end: u64 },
    /// No more rows: `complete` when the list was closed with nothing but white space after it.
    End { complete: bool },
}

/// Where [`Rows`] is in the list.
#[derive(Clone, Copy, PartialEq)]
enum At {
    Start,
    First,
    After,
    Done,
}

/// The rows of the list in a file, read one at a time: each an object, whole and valid JSON, of
/// at most [`MAX_ROW_BYTES`]. The first thing that is not (a row cut short, bytes after the
/// list) ends the rows there.
struct Rows<'a> {
    input: std::io::Bytes<BufReader<&'a File>>,
    pos: u64,
    at: At,
    row: Vec<u8>,
    /// Just past the `[`, once read.
    opened_at: Option<u64>,
    /// Just past the last complete row (past the `[` before the first).
    end_of_rows: Option<u64>,
}

impl<'a> Rows<'a> {
    fn new(file: &'a File) -> Rows<'a> {
        let mut reader = BufReader::with_capacity(1 << 16, file);
        // The file's start, whatever was read of it before.
        let _ = reader.seek(SeekFrom::Start(0));
        Rows {
            input: reader.bytes(),
            pos: 0,
            at: At::Start,
            row: Vec::new(),
            opened_at: None,
            end_of_rows: None,
        }
    }

    /// The last row's bytes.
    fn row(&self) -> &[u8] {
        &self.row
    }

    /// Whether the last row is `expected`: the same bytes, or the same JSON value (a file
    /// written by an earlier version, in another layout).
    fn row_is(&self, expected: &[u8]) -> bool {
        self.row == expected
            || serde_json::from_slice::<serde_json::Value>(&self.row).is_ok_and(|row| {
                serde_json::from_slice::<serde_json::Value>(expected).is_ok_and(|e| e == row)
            })
    }

    fn byte(&mut self) -> std::io::Result<Option<u8>> {
        let byte = self.input.next().transpose()?;
        self.pos += u64::from(byte.is_some());
        Ok(byte)
    }

    /// The next byte that is not white space.
    fn skip_space(&mut self) -> std::io::Result<Option<u8>> {
        loop {
            match self.byte()? {
                Some(b' ' | b'\n' | b'\r' | b'\t') => {}
                other => return Ok(other),
            }
        }
    }

    fn next(&mut self) -> std::io::Result<Next> {
        if self.at == At::Start {
            if self.skip_space()? != Some(b'[') {
                return Ok(self.damaged());
            }
            (self.opened_at, self.end_of_rows, self.at) = (Some(self.pos), Some(self.pos), At::First);
        }
        let first = match (self.at, self.skip_space()?) {
            (At::First | At::After, Some(b']')) => {
                self.at = At::Done;
                return Ok(Next::End { complete: self.skip_space()?.is_none() });
            }
            (At::After, Some(b',')) => self.skip_space()?,
            (At::First, first) => first,
            _ => None,
        };
        if first != Some(b'{') {
            return Ok(self.damaged());
        }
        let start = self.pos - 1;
        if !self.read_object()? {
            return Ok(self.damaged());
        }
        (self.end_of_rows, self.at) = (Some(self.pos), At::After);
        Ok(Next::Row { start, end: self.pos })
    }

    /// Read the rest of an object whose `{` was read: whether it is whole and valid JSON.
    fn read_object(&mut self) -> std::io::Result<bool> {
        self.row.clear();
        self.row.push(b'{');
        let (mut depth, mut in_string, mut escaped) = (1u32, false, false);
        while depth > 0 {
            let Some(byte) = self.byte()? else { return Ok(false) };
            if self.row.len() >= MAX_ROW_BYTES {
                return Ok(false);
            }
            self.row.push(byte);
            match (in_string, escaped, byte) {
                (true, true, _) => escaped = false,
                (true, false, b'\\') => escaped = true,
                (true, false, b'"') | (false, _, b'"') => in_string = !in_string,
                (false, _, b'{' | b'[') => depth += 1,
                (false, _, b'}' | b']') => depth -= 1,
                _ => {}
            }
        }
        Ok(serde_json::from_slice::<serde::de::IgnoredAny>(&self.row).is_ok())
    }

    fn damaged(&mut self) -> Next {
        self.at = At::Done;
        Next::End { complete: false }
    }
}
