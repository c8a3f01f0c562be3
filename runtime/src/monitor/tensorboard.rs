//! TensorBoard event files, written by hand: TFRecord framing (lengths and masked CRC-32C) around
//! `tensorflow.Event` protocol buffers. TensorBoard reads them as it reads TensorFlow's.
//!
//! Kept hand-written on purpose: it encodes six protobuf wire shapes of a handful of messages,
//! checked field by field by `tests/tensorboard_format.rs` and by TensorBoard's own reader in
//! `tests/monitors.rs`; the `tensorboard-rs` crate is unmaintained, and `prost` with generated
//! TensorFlow protos would add a build step and dozens of types for these few fields.

mod hparams;
mod proto;
mod record;

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::callback::Context;
use crate::error::{Error, Result, io_error_at};
use crate::state::{EpochStats, MonitorSink, Record, Value};
pub use hparams::HParamValue;
use hparams::SessionStatus;
use proto::Proto;
use record::{masked_crc, summary_value};

/// Writes every monitored record to a TensorBoard event file in the log directory, which
/// TensorBoard itself reads (`tensorboard --logdir <log dir>`). On by default. tensorpack's
/// `TFEventWriter`.
///
/// A resumed run writes a new event file that starts with a restart mark at the step after its
/// checkpoint, so that TensorBoard drops what a crashed run logged after that checkpoint: the
/// curves continue without duplicates.
///
/// tensorpack's options, with what they do here (the writing happens on the writer's own thread,
/// never on the step's path):
///
/// - [`max_queue(n)`](Self::max_queue) (10, as tensorpack): at most `n` events are held in
///   memory; the `n`-th is written out with those before it.
/// - [`flush_secs(s)`](Self::flush_secs): held events are written once they are `s` seconds
///   old. stoker's default is 0, which writes them as soon as the writer has caught up with
///   training; tensorpack's is 120. The default differs so that what was logged before a
///   checkpoint is on disk when a crash comes after it (a resumed run does not log it again).
/// - [`split_files(true)`](Self::split_files) (off by default, as tensorpack): a new event file
///   after each epoch's end, started by the first event after it (tensorpack opens it at once,
///   which leaves a file holding only its header after the last epoch). For file systems where
///   appending is expensive.
///
/// Every epoch's end (after every callback's `trigger_epoch`, when some scalar was put in the
/// epoch) writes what is held, as tensorpack's flush at every epoch; the end of training writes
/// everything.
///
/// TensorBoard's *HParams* tab lists the run: at setup the writer starts an HParams session with
/// the learning rate, every hyper-parameter registered by then (the trainer's
/// [`hyper_param`](crate::trainer::Trainer::hyper_param) and its kin, those a callback's `setup`
/// registered before this writer's) at their values then, and those given with
/// [`hparams`](Self::hparams); at the end of training it writes the experiment summary (those
/// hyper-parameters, and every scalar tag written as a metric, shown with its last value) and
/// the session's end: `Success` when training finished or a callback stopped it, `Failure`
/// after an error or a non-finite loss. A run a signal interrupted gets no end (it goes on when
/// resumed); a resumed run ends the session.
///
/// ```
/// use burn_stoker::monitor::TensorBoardWriter;
/// use burn_stoker::trainer::DefaultCallbacks;
///
/// // tensorpack's TFEventWriter(max_queue=10, flush_secs=120, split_files=True).
/// let tensorboard = TensorBoardWriter::new()
///     .max_queue(10)
///     .flush_secs(120)
///     .split_files(true)
///     .hparams([("optimizer", "adam".into()), ("batch_size", 32u32.into())]);
/// let defaults = DefaultCallbacks { tensorboard: Some(tensorboard), ..DefaultCallbacks::default() };
/// # let _ = defaults;
/// ```
#[derive(Debug, Clone)]
#[doc(alias = "TensorBoard")]
#[doc(alias = "TensorBoardLogger")]
pub struct TensorBoardWriter {
    max_queue: usize,
    flush_secs: u64,
    split_files: bool,
    hparams: Vec<(String, HParamValue)>,
    /// How the HParams session ends, shared with the sink (`TensorBoardSink::end_status`).
    end_status: Option<std::sync::Arc<std::sync::atomic::AtomicU8>>,
}

impl Default for TensorBoardWriter {
    fn default() -> Self {
        TensorBoardWriter::new()
    }
}

impl TensorBoardWriter {
    /// The writer with its defaults: 10 events held at most, written as soon as the writer has
    /// caught up, one file.
    pub fn new() -> Self {
        TensorBoardWriter {
            max_queue: 10,
            flush_secs: 0,
            split_files: false,
            hparams: Vec::new(),
            end_status: None,
        }
    }

    /// Hold at most `max_queue` events before writing them (at least 1; tensorpack's
    /// `max_queue`).
    pub fn max_queue(mut self, max_queue: usize) -> Self {
        self.max_queue = max_queue;
        self
    }

    /// Write held events once they are `seconds` old (tensorpack's `flush_secs`; 0, the default,
    /// as soon as the writer has caught up).
    pub fn flush_secs(mut self, seconds: u64) -> Self {
        self.flush_secs = seconds;
        self
    }

    /// A new event file after each epoch's end (tensorpack's `split_files`).
    pub fn split_files(mut self, split: bool) -> Self {
        self.split_files = split;
        self
    }

    /// More hyper-parameters for TensorBoard's *HParams* tab, after the learning rate and the
    /// registered ones (a name given twice: the last value); numbers, texts or flags
    /// ([`HParamValue`]). They are only shown, never read by training.
    pub fn hparams<N: Into<String>>(mut self, hparams: impl IntoIterator<Item = (N, HParamValue)>) -> Self {
        self.hparams.extend(hparams.into_iter().map(|(name, value)| (name.into(), value)));
        self
    }

    /// The HParams session's hyper-parameters: the learning rate, the registered ones, then
    /// [`hparams`](Self::hparams)' (a later value of a name replaces an earlier one).
    fn session_hparams(&self, hyper: &crate::state::HyperParams) -> Vec<(String, HParamValue)> {
        let mut all: Vec<(String, HParamValue)> = Vec::new();
        let registered = hyper.names().filter_map(|name| Some((name.to_owned(), hyper.get(name)?.into())));
        for (name, value) in registered.chain(self.hparams.iter().cloned()) {
            match all.iter_mut().find(|(n, _)| *n == name) {
                Some(entry) => entry.1 = value,
                None => all.push((name, value)),
            }
        }
        all
    }
}

#[crate::callback]
impl TensorBoardWriter {
    #[on(setup)]
    fn open<M>(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let dir = ctx.log_dir().to_path_buf();
        let mut sink = TensorBoardSink::create(&dir)
            .map_err(|e| Error::io(&dir, e))?
            .max_queue(self.max_queue)
            .flush_secs(self.flush_secs)
            .split_files(self.split_files);
        if ctx.monitors_ref().is_resumed() {
            // What a crashed run logged after the checkpoint this run resumes from is stale.
            let step = ctx.global_step() + 1;
            sink.restart_at(step).map_err(|e| Error::io(sink.path(), e))?;
        }
        let hparams = self.session_hparams(ctx.hyper());
        sink.start_session(hparams).map_err(|e| Error::io(sink.path(), e))?;
        self.end_status = Some(sink.end_status());
        ctx.monitors().add_sink(sink);
        Ok(())
    }

    /// The HParams session's status, from how training ended; the sink writes it when closed.
    #[on(after_train)]
    fn end<M>(&mut self, ctx: &mut Context<'_, M>) {
        use crate::callback::Outcome;
        let status = match ctx.outcome() {
            Some(Outcome::Finished | Outcome::Stopped(_)) => SessionStatus::Success as u8,
            Some(Outcome::Failed | Outcome::NonFinite { .. }) => SessionStatus::Failure as u8,
            Some(Outcome::Interrupted { .. }) => u8::MAX,
            None => SessionStatus::Unknown as u8,
        };
        if let Some(end_status) = &self.end_status {
            end_status.store(status, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// Pending bytes past which [`TensorBoardSink::write`] writes them out without waiting for
/// [`flush`](TensorBoardSink::flush).
const PENDING_LIMIT: usize = 1 << 16;

/// Writes [`Record`]s to an `events.out.tfevents.<seconds>.<host>` file.
///
/// Events are held in memory and written out by [`flush`](Self::flush) (the monitors call it,
/// through [`MonitorSink`](crate::state::MonitorSink), each time the writer's thread has caught
/// up), with tensorpack's `TFEventWriter` options (see
/// [`TensorBoardWriter`](crate::monitor::TensorBoardWriter)): at most
/// [`max_queue`](Self::max_queue) events are held, held events are written once they are
/// [`flush_secs`](Self::flush_secs) old, and every epoch's end writes them all (and, with
/// [`split_files`](Self::split_files), starts a new file at the next event).
///
/// Each event is written whole or not at all: events are encoded whole into a buffer, and when
/// writing the buffer fails (a full disk), the file is cut back to the end of the last event
/// written whole before the error is returned. TensorBoard stops reading an event file at the
/// first torn record; here there is none, and what is written after the disk has room again
/// reads back too.
#[derive(Debug)]
struct TensorBoardSink {
    path: PathBuf,
    file: File,
    /// The file's length: every byte of it belongs to a whole event.
    written: u64,
    /// Whole events not written yet.
    pending: Vec<u8>,
    /// Where each event in `pending` ends.
    ends: Vec<usize>,
    /// The directory, where a new file goes when the events are split.
    dir: PathBuf,
    /// How many events may be held before they are written.
    max_queue: usize,
    /// How long an event may be held.
    flush_every: Duration,
    /// A new file after each epoch's end.
    split_files: bool,
    /// The next event starts a new file (the epoch ended and the files are split).
    reopen: bool,
    /// When the held events were last written.
    last_write: Instant,
    /// The HParams session's hyper-parameters, once [`start_session`](Self::start_session) began
    /// it and until it ends.
    session: Option<Vec<(String, HParamValue)>>,
    /// Every scalar tag written: the HParams experiment's metrics.
    scalar_tags: BTreeSet<String>,
    /// How the session ends when the sink is closed (a [`SessionStatus`]; `u8::MAX`: not at all).
    end_status: Arc<AtomicU8>,
}

impl TensorBoardSink {
    /// Create a new event file in `dir` (created if missing), starting with the file-version
    /// event.
    ///
    /// Its options are [`TensorBoardWriter`](crate::monitor::TensorBoardWriter)'s defaults: at
    /// most 10 events held, none held longer than until the writer has caught up
    /// (`flush_secs(0)`), one file.
    fn create(dir: &Path) -> std::io::Result<TensorBoardSink> {
        std::fs::create_dir_all(dir)?;
        let (path, file, now) = new_event_file(dir)?;
        let mut sink = TensorBoardSink {
            path,
            file,
            written: 0,
            pending: Vec::new(),
            ends: Vec::new(),
            dir: dir.to_path_buf(),
            max_queue: DEFAULT_MAX_QUEUE,
            flush_every: Duration::ZERO,
            split_files: false,
            reopen: false,
            last_write: Instant::now(),
            session: None,
            scalar_tags: BTreeSet::new(),
            end_status: Arc::new(AtomicU8::new(SessionStatus::Unknown as u8)),
        };
        sink.version_event(now);
        sink.flush()?;
        Ok(sink)
    }

    /// Hold at most `max_queue` events (at least 1) before writing them (tensorpack's
    /// `max_queue`, TensorFlow's `FileWriter` queue of pending events).
    fn max_queue(mut self, max_queue: usize) -> Self {
        self.max_queue = max_queue.max(1);
        self
    }

    /// Write held events once they are `seconds` old (tensorpack's `flush_secs`); 0 writes them
    /// as soon as the writer's thread has caught up.
    fn flush_secs(mut self, seconds: u64) -> Self {
        self.flush_every = Duration::from_secs(seconds);
        self
    }

    /// Start a new event file after each epoch's end (tensorpack's `split_files`), at the first
    /// event after it.
    fn split_files(mut self, split: bool) -> Self {
        self.split_files = split;
        self
    }

    /// The file-version event every event file starts with.
    fn version_event(&mut self, now: Duration) {
        let mut event = Proto::default();
        event.double(1, now.as_secs_f64());
        event.bytes(3, b"brain.Event:2");
        self.record(&event.0);
    }

    /// How many events are held, not written yet.
    fn held(&self) -> usize {
        self.ends.len()
    }

    /// Write what is held when the options say so: `max_queue` events are held, or the oldest
    /// has waited `flush_secs`.
    fn flush_if_due(&mut self) -> std::io::Result<()> {
        if self.held() >= self.max_queue || self.last_write.elapsed() >= self.flush_every {
            self.write_pending()?;
        }
        Ok(())
    }

    /// When held events are due to be written, if any are held.
    fn flush_due(&self) -> Option<Instant> {
        (self.held() > 0).then(|| self.last_write + self.flush_every)
    }

    /// The epoch ended: write everything held (tensorpack flushes at every epoch's end); with
    /// split files, the next event starts a new file.
    fn end_epoch(&mut self) -> std::io::Result<()> {
        self.write_pending()?;
        if self.split_files {
            self.reopen = true;
        }
        Ok(())
    }

    /// Mark a restart at `step` (a `SessionLog` START event): TensorBoard then drops the events
    /// of earlier files at `step` and later, which a run that crashed after its last checkpoint
    /// wrote and the resumed run writes again.
    fn restart_at(&mut self, step: u64) -> std::io::Result<()> {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let mut session_log = Proto::default();
        session_log.varint(1, 1);
        let mut event = Proto::default();
        event.double(1, now.as_secs_f64());
        event.varint(2, step);
        event.message(7, &session_log);
        self.record(&event.0);
        self.flush()
    }

    /// Start a session of TensorBoard's *HParams* tab: write its start (the hyper-parameters'
    /// values) now. [`end_session`](Self::end_session), or closing the sink, ends it with the
    /// experiment summary (the hyper-parameters and, as metrics, every scalar tag written) and
    /// the status; the tab then lists the run with its hyper-parameters and the last value of
    /// each metric.
    ///
    fn start_session(&mut self, hparams: Vec<(String, HParamValue)>) -> std::io::Result<()> {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs_f64();
        self.hparams_event(hparams::SESSION_START_INFO_TAG, &hparams::session_start(&hparams, now), 0);
        self.session = Some(hparams);
        self.flush()
    }

    /// End the session [`start_session`](Self::start_session) began (nothing when none is
    /// going on): write the experiment summary and the session's end with `status`, at the last
    /// step written.
    fn end_session(&mut self, status: SessionStatus) -> std::io::Result<()> {
        let Some(hparams) = self.session.take() else { return Ok(()) };
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs_f64();
        let experiment = hparams::experiment(&hparams, &self.scalar_tags, now);
        self.hparams_event(hparams::EXPERIMENT_TAG, &experiment, 0);
        self.hparams_event(hparams::SESSION_END_INFO_TAG, &hparams::session_end(status, now), 0);
        self.flush()
    }

    /// Where the status closing the sink ends the session with is set (by the writer's
    /// callback, from the run's outcome); `u8::MAX` leaves the session without an end.
    fn end_status(&self) -> Arc<AtomicU8> {
        self.end_status.clone()
    }

    /// One event holding one HParams plugin summary.
    fn hparams_event(&mut self, tag: &str, data: &Proto, step: u64) {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let mut summary = Proto::default();
        summary.message(1, &hparams::summary_value(tag, data));
        let mut event = Proto::default();
        event.double(1, now.as_secs_f64());
        event.varint(2, step);
        event.message(5, &summary);
        self.record(&event.0);
    }

    /// The event file.
    fn path(&self) -> &Path {
        &self.path
    }

    /// Append one event per record. An image that cannot be encoded is an `InvalidInput` error
    /// (the other records are still written).
    fn write(&mut self, records: &[Record]) -> std::io::Result<()> {
        if self.reopen && !records.is_empty() {
            self.write_pending()?;
            let (path, file, now) = new_event_file(&self.dir)?;
            (self.path, self.file, self.written, self.reopen) = (path, file, 0, false);
            self.version_event(now);
        }
        let mut first_error = None;
        for record in records {
            if matches!(record.value, Value::Scalar(_)) && !self.scalar_tags.contains(&*record.name) {
                self.scalar_tags.insert(record.name.to_string());
            }
            match summary_value(record) {
                Ok(value) => {
                    let mut summary = Proto::default();
                    summary.message(1, &value);
                    let mut event = Proto::default();
                    event.double(1, record.wall_time);
                    event.varint(2, record.global_step);
                    event.message(5, &summary);
                    self.record(&event.0);
                    if self.pending.len() >= PENDING_LIMIT {
                        self.write_pending()?;
                    }
                }
                Err(message) => {
                    first_error.get_or_insert_with(|| {
                        std::io::Error::new(
                            std::io::ErrorKind::InvalidInput,
                            format!("{}: {message}", record.name),
                        )
                    });
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Write what is buffered to the operating system. On an error, the file ends with the last
    /// event written whole, and the events that were not are dropped.
    fn flush(&mut self) -> std::io::Result<()> {
        self.write_pending()
    }

    /// Buffer one event (TFRecord framing: length, its masked CRC, data, its masked CRC).
    fn record(&mut self, data: &[u8]) {
        let len = (data.len() as u64).to_le_bytes();
        self.pending.extend_from_slice(&len);
        self.pending.extend_from_slice(&masked_crc(&len).to_le_bytes());
        self.pending.extend_from_slice(data);
        self.pending.extend_from_slice(&masked_crc(data).to_le_bytes());
        self.ends.push(self.pending.len());
    }

    /// Write the pending events; on an error, cut the file back to its last whole event.
    fn write_pending(&mut self) -> std::io::Result<()> {
        let mut done = 0;
        let mut failure = None;
        while done < self.pending.len() {
            match self.file.write(&self.pending[done..]) {
                Ok(0) => {
                    failure = Some(std::io::Error::from(std::io::ErrorKind::WriteZero));
                    break;
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        let whole = match failure {
            None => done,
            // The events written whole before the error stay; the rest of them goes.
            Some(_) => self.ends.iter().copied().take_while(|&end| end <= done).last().unwrap_or(0),
        };
        let torn = done - whole;
        self.written += whole as u64;
        self.pending.clear();
        self.ends.clear();
        self.last_write = Instant::now();
        let Some(error) = failure else { return Ok(()) };
        if torn > 0 {
            let cut =
                self.file.set_len(self.written).and_then(|()| self.file.seek(SeekFrom::Start(self.written)));
            if let Err(cut) = cut {
                return Err(std::io::Error::new(
                    error.kind(),
                    format!(
                        "{error}; cutting {} back to its last whole event (at byte {}) failed too: {cut}",
                        self.path.display(),
                        self.written
                    ),
                ));
            }
        }
        Err(error)
    }
}

/// The sink as the monitors drive it, on the writer's thread
/// ([`TensorBoardWriter`](crate::monitor::TensorBoardWriter) registers it).
impl MonitorSink for TensorBoardSink {
    fn name(&self) -> &str {
        "TensorBoard"
    }
    // The errors name the event file (a writer's failure is reported with its error alone).
    fn write(&mut self, records: &[Record]) -> std::io::Result<()> {
        TensorBoardSink::write(self, records)
            .and_then(|()| self.flush_if_due())
            .map_err(|e| io_error_at(self.path(), e))
    }
    /// Writes what is held when `max_queue` events are held or the oldest is `flush_secs` old.
    fn flush(&mut self) -> std::io::Result<()> {
        self.flush_if_due().map_err(|e| io_error_at(self.path(), e))
    }
    fn flush_due(&self) -> Option<std::time::Instant> {
        TensorBoardSink::flush_due(self)
    }
    fn end_epoch(&mut self, _stats: &EpochStats) -> std::io::Result<()> {
        TensorBoardSink::end_epoch(self).map_err(|e| io_error_at(self.path(), e))
    }
    /// Ends the HParams session, if one was started, with the status the writer's callback set.
    fn close(&mut self) -> std::io::Result<()> {
        let status = match self.end_status.load(Ordering::Relaxed) {
            1 => Some(SessionStatus::Success),
            2 => Some(SessionStatus::Failure),
            3 => Some(SessionStatus::Running),
            u8::MAX => None,
            _ => Some(SessionStatus::Unknown),
        };
        let ended = status.map_or(Ok(()), |status| self.end_session(status));
        ended.and_then(|()| TensorBoardSink::flush(self)).map_err(|e| io_error_at(self.path(), e))
    }
}

impl Drop for TensorBoardSink {
    /// Write what is still buffered, as a `BufWriter` would.
    fn drop(&mut self) {
        let _ = self.write_pending();
    }
}

/// How many events a [`TensorBoardSink`] holds by default (tensorpack's and TensorFlow's).
const DEFAULT_MAX_QUEUE: usize = 10;

/// A new `events.out.tfevents.<seconds>.<host>` file in `dir` (`.1`, `.2`... appended when the
/// name is taken), and the time it is named after.
fn new_event_file(dir: &Path) -> std::io::Result<(PathBuf, File, Duration)> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    // As TensorFlow's `socket.gethostname()`: the kernel's, never `/etc/hostname`.
    let host = crate::state::host_name();
    let base = format!("events.out.tfevents.{}.{host}", now.as_secs());
    let mut path = dir.join(&base);
    let mut n = 1;
    while path.exists() {
        path = dir.join(format!("{base}.{n}"));
        n += 1;
    }
    let file = File::options().write(true).create_new(true).open(&path)?;
    Ok((path, file, now))
}

#[cfg(test)]
mod tests;
