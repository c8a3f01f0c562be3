//! [`LoadModel`]: the model's weights read from a file before training (neon's `--model_file`).

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use burn::module::Module;
use burn::store::ModuleRecord;
use burn::tensor::Bytes;

use super::checkpoint::MODEL_FILE;
use crate::callback::{Callback, Context};
use crate::error::{Error, Result};

/// Loads the model's weights from a file at the start of training: neon's `--model_file`
/// (`Callbacks(model, model_file=...)`, which calls `model.load_params(model_file)` in
/// `on_train_begin`).
///
/// The file is a burnpack of the model (`Module::save_file`, a checkpoint's `model.bpk`,
/// [`SaveBestState`](super::SaveBestState)'s) or a checkpoint folder, whose `model.bpk` is read.
/// A relative path is taken from the working directory, as neon's.
///
/// - **When**: at `before_train`, before the first step. A resumed run
///   ([`Trainer::resume_from`](crate::trainer::Trainer::resume_from)) keeps the weights of its
///   checkpoint and does not read the file (a note says so): the file is where a run starts, the
///   checkpoint where it stands.
/// - **Errors** at setup, before any step, as neon's argument parser checks them: a file that is
///   missing or unreadable, named; at `before_train`: a file that is not a burnpack, or one of
///   another architecture (burn's message, with the path).
/// - **Where**: on every rank of a data-parallel run (each replica starts from the file).
///
/// ```
/// use burn_stoker::saver::LoadModel;
/// // Start from the best model of an earlier run.
/// let load = LoadModel::new("train_log/run1/best.bpk");
/// # let _ = load;
/// ```
#[derive(Debug, Clone)]
pub struct LoadModel {
    path: PathBuf,
    /// The burnpack read at setup.
    bytes: Option<Vec<u8>>,
}
crate::kind::kind!(LoadModel);

impl LoadModel {
    /// Load the weights from `path`: a burnpack, or a checkpoint folder.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        LoadModel { path: path.into(), bytes: None }
    }
    /// The file, as given.
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// The burnpack to read: the path itself, or a folder's `model.bpk`.
    fn file(&self) -> PathBuf {
        if self.path.is_dir() { self.path.join(MODEL_FILE) } else { self.path.clone() }
    }
}

impl<M: Module> Callback<M> for LoadModel {
    fn name(&self) -> Cow<'static, str> {
        crate::kind::name_of::<Self>()
    }
    fn chief_only(&self) -> bool {
        false
    }
    fn setup(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        let file = self.file();
        let bytes = std::fs::read(&file).map_err(|e| {
            Error::context(format!("LoadModel: cannot read the model file {}", file.display()), e)
        })?;
        self.bytes = Some(bytes);
        Ok(())
    }
    fn before_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let Some(bytes) = self.bytes.take() else { return Ok(()) };
        let file = self.file();
        if ctx.monitors_ref().is_resumed() {
            crate::logging::info!(
                "LoadModel: a resumed run keeps its checkpoint's weights; {} is not read",
                file.display()
            );
            return Ok(());
        }
        let record = ModuleRecord::from_bytes(Bytes::from_bytes_vec(bytes)).map_err(|e| {
            Error::context(format!("LoadModel: {} is not a burnpack of a model", file.display()), e)
        })?;
        let model = ctx.model().clone().try_load_record(record).map_err(|e| {
            Error::context(
                format!(
                    "LoadModel: {} does not fit the model being trained (another architecture?)",
                    file.display()
                ),
                e,
            )
        })?;
        *ctx.model_mut() = model;
        crate::logging::info!("LoadModel: the weights were loaded from {}", file.display());
        Ok(())
    }
}
