//! [`DumpTensors`]: step outputs written to `.npz` files; and the writer thread it shares with
//! [`DumpTensorAsImage`](super::DumpTensorAsImage).

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use super::npz::encode_npz;
use super::tensors::{TensorFetches, tensor_period_builders};
use crate::callback::{Callback, Context, Counters};
use crate::error::{Error, Result};
use crate::fetch::{Fetch, Fetched};
use crate::state::{BoundedSender, bounded, write_atomic};

/// Encodes a file's contents on the writer thread.
type Encode = Box<dyn FnOnce() -> std::result::Result<Vec<u8>, String> + Send>;

/// How many files may wait for a dump writer's thread (each holds its own copy of the values):
/// when it is that far behind, training waits for it, after one warning on stderr.
pub(crate) const DUMP_QUEUE_CAPACITY: usize = 8;

/// A thread that encodes and writes files atomically (a temporary file renamed over the final
/// name), off the training thread, fed by a queue of [`DUMP_QUEUE_CAPACITY`] files. The first
/// failure is printed once and returned by [`finish`](Self::finish); later files are still
/// attempted.
pub(crate) struct FileWriter {
    owner: &'static str,
    sender: Option<BoundedSender<(PathBuf, Encode)>>,
    handle: Option<JoinHandle<Result<()>>>,
}

impl FileWriter {
    pub(crate) fn start(owner: &'static str) -> Result<Self> {
        let (sender, receiver) = bounded::<(PathBuf, Encode)>(owner, DUMP_QUEUE_CAPACITY);
        let handle = std::thread::Builder::new()
            .name(format!("stoker-{owner}"))
            .spawn(move || {
                let mut first_error = None;
                for (path, encode) in receiver {
                    let what = || format!("{owner} could not write {}", path.display());
                    let written = match encode() {
                        Ok(bytes) => write_atomic(&path, &bytes).map_err(|e| Error::context(what(), e)),
                        Err(why) => Err(Error::msg(format!("{}: {why}", what()))),
                    };
                    if let Err(error) = written
                        && first_error.is_none()
                    {
                        crate::logging::error!("{error}");
                        first_error = Some(error);
                    }
                }
                first_error.map_or(Ok(()), Err)
            })
            .map_err(|e| Error::context(format!("{owner} could not start its writer thread"), e))?;
        Ok(FileWriter { owner, sender: Some(sender), handle: Some(handle) })
    }

    /// Encode and write `path` on the thread, waiting for room in its queue when it is full.
    pub(crate) fn write(&self, path: PathBuf, encode: Encode) {
        if let Some(sender) = &self.sender {
            // A thread that ended reports why in finish().
            let _ = sender.send_waiting((path, encode));
        }
    }

    /// Wait for every file to be written; the first failure.
    pub(crate) fn finish(mut self) -> Result<()> {
        drop(self.sender.take());
        match self.handle.take().map(JoinHandle::join) {
            Some(Ok(Ok(()))) | None => Ok(()),
            Some(Ok(Err(error))) => Err(error),
            Some(Err(_)) => Err(Error::msg(format!("{}'s writer thread panicked", self.owner))),
        }
    }
}

/// Writes some step outputs to `<log_dir>/DumpTensor-<global_step>.npz` at every step
/// (tensorpack's `DumpTensors(names)`): one float32 array per name, with its shape, which
/// `dict(numpy.load(path))` reads back as `{name: array}`. `<global_step>` counts the step whose
/// values the file holds (1 for the first step).
///
/// As in tensorpack, it dumps every step by default; [`every_k_steps`](Self::every_k_steps) dumps
/// every `k`-th global step, [`every_k_epochs`](Self::every_k_epochs) the last step of every
/// `k`-th epoch. The values are fetched only at those steps, and encoded and written by a thread
/// of its own, atomically (a temporary file renamed): a reader never sees half a file. Up to 8
/// files wait for that thread; when it is that far behind (a slow disk), training waits for it,
/// after one warning on stderr, so that memory stays bounded and no dump is lost. Every
/// file is written when `after_train` returns; a failure to write is reported on stderr at once
/// and returned by `after_train`.
///
/// Differences from tensorpack: a value is stored as the float32 tensor the step produced (a
/// scalar loss has shape `(1,)`); the file is written off the training thread. With
/// `every_k_epochs`, an epoch cut short ([`Context::skip_rest_of_epoch`]) has no last step, so
/// nothing is dumped for it.
///
/// ```
/// use burn_stoker::debug::DumpTensors;
/// // Every 500 steps, write `<log_dir>/DumpTensor-<step>.npz` with the logits and the loss.
/// let dump = DumpTensors::new(["logits", "loss"]).every_k_steps(500);
/// # let _ = dump;
/// ```
#[derive(Debug)]
pub struct DumpTensors {
    tensors: TensorFetches,
    writer: Option<FileWriter>,
    dir: PathBuf,
}
crate::kind::kind!(DumpTensors);

impl std::fmt::Debug for FileWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileWriter").field("owner", &self.owner).finish()
    }
}

impl DumpTensors {
    /// Dump the outputs `names` at every step.
    pub fn new<N: Into<Cow<'static, str>>>(names: impl IntoIterator<Item = N>) -> Self {
        DumpTensors {
            tensors: TensorFetches::every_step("DumpTensors", names),
            writer: None,
            dir: PathBuf::new(),
        }
    }
    tensor_period_builders!("Dump");
    /// The file written for global step `step` in `log_dir`.
    pub fn file_name(log_dir: &Path, step: u64) -> PathBuf {
        log_dir.join(format!("DumpTensor-{step}.npz"))
    }
}

impl<M> Callback<M> for DumpTensors {
    fn fetches(&self) -> &[Fetch] {
        self.tensors.fetches()
    }
    fn wants_fetch(&self, counters: &Counters) -> bool {
        self.tensors.wants(counters)
    }
    fn setup(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.tensors.check()?;
        self.dir = ctx.log_dir().to_path_buf();
        Ok(())
    }
    fn before_train(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        self.writer = Some(FileWriter::start("DumpTensors")?);
        Ok(())
    }
    fn after_step(&mut self, ctx: &mut Context<'_, M>, values: &Fetched<'_>) -> Result<()> {
        let Some(values) = self.tensors.due_values(ctx.counters(), values)? else {
            return Ok(());
        };
        // The fetched values live until the next step: copy them for the writer thread.
        let arrays: Vec<(String, Vec<f32>, Vec<usize>)> =
            values.iter().map(|t| (t.name.to_string(), t.values.to_vec(), t.shape.to_vec())).collect();
        let path = DumpTensors::file_name(&self.dir, ctx.global_step());
        if let Some(writer) = &self.writer {
            writer.write(
                path,
                Box::new(move || {
                    encode_npz(arrays.iter().map(|(n, v, s)| (n.as_str(), v.as_slice(), s.as_slice())))
                }),
            );
        }
        Ok(())
    }
    fn after_train(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        self.writer.take().map_or(Ok(()), FileWriter::finish)
    }
}
