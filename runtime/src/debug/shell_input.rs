//! Where [`InjectShell`](super::InjectShell)'s lines come from: a reader, or stdin read through
//! its descriptor (on unix, its wait ended by a signal or a `StopHandle` stop); each line
//! bounded, so that input without a newline cannot grow memory.

use std::io::BufRead;

use crate::signal::StopHandle;

/// The longest line kept, in bytes: a longer one is read to its end and dropped.
pub(super) const MAX_LINE: usize = 64 * 1024;

/// Where the prompt's lines come from.
pub(super) enum Input<'a> {
    Reader(&'a mut dyn BufRead),
    /// Stdin, read through its descriptor; a stop asked through `stop` ends the wait, and with
    /// `signals` a signal does too.
    Stdin {
        pending: &'a mut Pending,
        signals: bool,
        stop: &'a StopHandle,
    },
}

/// What reading a line gave.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Read {
    Line,
    /// A line longer than [`MAX_LINE`], read to its end and dropped.
    TooLong,
    End,
    /// A signal or a stop ended the wait.
    Signal,
}

/// Bytes read from stdin past the last line handled, and whether the line they belong to was
/// already too long (its rest is dropped up to its newline).
#[derive(Debug, Default)]
pub(crate) struct Pending {
    bytes: Vec<u8>,
    dropping: bool,
}

impl Input<'_> {
    /// The next line, into `line` (its newline included when it has one).
    pub(super) fn read_line(&mut self, line: &mut String) -> std::io::Result<Read> {
        match self {
            Input::Reader(reader) => reader_line(*reader, line),
            #[cfg(unix)]
            Input::Stdin { pending, signals, stop } => {
                let (signals, stop) = (*signals, *stop);
                next_line(pending, line, |buf| {
                    if !crate::signal::wait_readable_or_stop(0, stop, signals)? {
                        return Ok(None);
                    }
                    // SAFETY: read(2) into a buffer of its length.
                    let n = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
                    if n < 0 { Err(std::io::Error::last_os_error()) } else { Ok(Some(n as usize)) }
                })
            }
            #[cfg(not(unix))]
            Input::Stdin { pending, .. } => next_line(pending, line, |buf| {
                use std::io::Read as _;
                std::io::stdin().lock().read(buf).map(Some)
            }),
        }
    }
}

/// One line of `reader`, at most [`MAX_LINE`] bytes kept.
fn reader_line(reader: &mut dyn BufRead, line: &mut String) -> std::io::Result<Read> {
    let mut bytes = Vec::new();
    let mut too_long = false;
    loop {
        let buffer = match reader.fill_buf() {
            Ok(buffer) => buffer,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buffer.is_empty() {
            break;
        }
        let (taken, ended) = match buffer.iter().position(|&b| b == b'\n') {
            Some(end) => (end + 1, true),
            None => (buffer.len(), false),
        };
        if !too_long && bytes.len() + taken <= MAX_LINE {
            bytes.extend_from_slice(&buffer[..taken]);
        } else {
            too_long = true;
            bytes = Vec::new();
        }
        reader.consume(taken);
        if ended {
            break;
        }
    }
    if too_long {
        return Ok(Read::TooLong);
    }
    if bytes.is_empty() {
        return Ok(Read::End);
    }
    line.push_str(&String::from_utf8_lossy(&bytes));
    Ok(Read::Line)
}

/// One line from `read` (`pending` keeps what was read past it); `read` gives `None` when a
/// signal ended its wait. At most [`MAX_LINE`] bytes are held.
pub(super) fn next_line(
    pending: &mut Pending,
    line: &mut String,
    mut read: impl FnMut(&mut [u8]) -> std::io::Result<Option<usize>>,
) -> std::io::Result<Read> {
    loop {
        if let Some(end) = pending.bytes.iter().position(|&b| b == b'\n') {
            let rest = pending.bytes.split_off(end + 1);
            let this = std::mem::replace(&mut pending.bytes, rest);
            if std::mem::take(&mut pending.dropping) {
                return Ok(Read::TooLong);
            }
            line.push_str(&String::from_utf8_lossy(&this));
            return Ok(Read::Line);
        }
        if pending.bytes.len() >= MAX_LINE {
            pending.bytes.clear();
            pending.dropping = true;
        }
        let mut buf = [0u8; 4096];
        let room = (MAX_LINE - pending.bytes.len()).min(buf.len());
        let n = match read(&mut buf[..room]) {
            Ok(None) => return Ok(Read::Signal),
            Ok(Some(n)) => n,
            Err(e)
                if matches!(e.kind(), std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock) =>
            {
                continue;
            }
            Err(e) => return Err(e),
        };
        if n == 0 {
            if std::mem::take(&mut pending.dropping) {
                pending.bytes.clear();
                return Ok(Read::TooLong);
            }
            if pending.bytes.is_empty() {
                return Ok(Read::End);
            }
            line.push_str(&String::from_utf8_lossy(&pending.bytes));
            pending.bytes.clear();
            return Ok(Read::Line);
        }
        pending.bytes.extend_from_slice(&buf[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `total` bytes of `x` without a newline, then `rest`, handed out as a descriptor would.
    struct Flood {
        left: usize,
        rest: &'static [u8],
    }

    impl Flood {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<Option<usize>> {
            if self.left > 0 {
                let n = self.left.min(buf.len());
                buf[..n].fill(b'x');
                self.left -= n;
                return Ok(Some(n));
            }
            let n = self.rest.len().min(buf.len());
            buf[..n].copy_from_slice(&self.rest[..n]);
            self.rest = &self.rest[n..];
            Ok(Some(n))
        }
    }

    impl std::io::Read for Flood {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            Flood::read(self, buf).map(|n| n.unwrap_or(0))
        }
    }

    const FLOOD: usize = 64 * 1024 * 1024;

    #[test]
    fn a_line_without_a_newline_is_dropped_with_memory_bounded_on_stdin() {
        let mut flood = Flood { left: FLOOD, rest: b"xyz\nstatus\n" };
        let mut pending = Pending::default();
        let mut line = String::new();
        let read = next_line(&mut pending, &mut line, |buf| flood.read(buf)).unwrap();
        assert_eq!(read, Read::TooLong);
        assert!(line.is_empty());
        assert!(pending.bytes.capacity() <= 2 * MAX_LINE, "held {} bytes", pending.bytes.capacity());
        // The next line is read as usual.
        let read = next_line(&mut pending, &mut line, |buf| flood.read(buf)).unwrap();
        assert_eq!((read, line.as_str()), (Read::Line, "status\n"));
        assert_eq!(next_line(&mut pending, &mut String::new(), |buf| flood.read(buf)).unwrap(), Read::End);
        // A long line cut by the end of the input is dropped too.
        let mut flood = Flood { left: MAX_LINE + 1, rest: b"" };
        let read = next_line(&mut Pending::default(), &mut String::new(), |buf| flood.read(buf)).unwrap();
        assert_eq!(read, Read::TooLong);
    }

    #[test]
    fn a_line_without_a_newline_is_dropped_with_memory_bounded_from_a_reader() {
        let mut reader = std::io::BufReader::new(Flood { left: FLOOD, rest: b"\ncontinue\n" });
        let mut line = String::new();
        assert_eq!(reader_line(&mut reader, &mut line).unwrap(), Read::TooLong);
        assert!(line.capacity() <= MAX_LINE);
        assert_eq!(reader_line(&mut reader, &mut line).unwrap(), Read::Line);
        assert_eq!(line, "continue\n");
        assert_eq!(reader_line(&mut reader, &mut String::new()).unwrap(), Read::End);
        // A line of exactly the limit is kept.
        let mut reader = std::io::BufReader::new(Flood { left: MAX_LINE - 1, rest: b"\n" });
        let mut line = String::new();
        assert_eq!(reader_line(&mut reader, &mut line).unwrap(), Read::Line);
        assert_eq!(line.len(), MAX_LINE);
    }
}
