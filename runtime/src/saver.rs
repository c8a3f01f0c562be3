//! Checkpoints: the model in burn's own format, the optimizer's state and the counters, written
//! atomically.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use burn::module::Module;

use crate::callback::{Callback, Context};
use crate::error::{Error, Result};

/// Write `bytes` to `path` atomically: a temporary file beside it, synced, then renamed over
/// `path`, then the directory synced. A crash at any moment leaves the old file or the new one.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(".tmp");
    let tmp = path.with_file_name(tmp_name);
    {
        let mut file = File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// Sync a directory so that a rename inside it survives a crash.
pub(crate) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    match File::open(dir) {
        Ok(d) => d.sync_all().or(Ok(())),
        Err(e) => Err(e),
    }
}

/// The folder of checkpoints inside the log directory.
pub const CHECKPOINT_DIR: &str = "checkpoints";
/// The file naming the latest complete checkpoint.
pub const LATEST_FILE: &str = "latest";
/// The model's file inside a checkpoint (burnpack, loadable by plain burn with
/// `Module::load_file`).
pub const MODEL_FILE: &str = "model.bpk";
/// The optimizer's file inside a checkpoint.
pub const OPTIMIZER_FILE: &str = "optimizer.bpk";
/// The counters and hyper-parameters inside a checkpoint.
pub const TRAINER_FILE: &str = "trainer.json";

/// Saves a checkpoint when triggered (every epoch by default, tensorpack's `ModelSaver`) into
/// `<log dir>/checkpoints/step-<global_step>/`, keeping the last `max_to_keep`. Each checkpoint is
/// written under a temporary name and renamed when complete; `checkpoints/latest` then names it.
#[derive(Debug, Clone)]
pub struct ModelSaver {
    max_to_keep: usize,
    kept: Vec<PathBuf>,
}

impl Default for ModelSaver {
    fn default() -> Self {
        ModelSaver::new(10)
    }
}

impl ModelSaver {
    /// Keep the `max_to_keep` most recent checkpoints (at least 1).
    pub fn new(max_to_keep: usize) -> Self {
        ModelSaver { max_to_keep: max_to_keep.max(1), kept: Vec::new() }
    }

    fn save<M: Module>(&mut self, ctx: &mut Context<'_, M>) -> Result<PathBuf> {
        let root = ctx.log_dir().join(CHECKPOINT_DIR);
        let step = ctx.global_step();
        let name = format!("step-{step}");
        let dir = root.join(&name);
        let tmp = root.join(format!("{name}.tmp"));
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |e: std::io::Error| Error::io(path, e)
        };
        if tmp.exists() {
            fs::remove_dir_all(&tmp).map_err(io(&tmp))?;
        }
        fs::create_dir_all(&tmp).map_err(io(&tmp))?;
        let model_path = tmp.join(MODEL_FILE);
        ctx.model()
            .clone()
            .save_file(&model_path)
            .map_err(|e| Error::msg(format!("saving the model to {}: {e}", model_path.display())))?;
        let optimizer_path = tmp.join(OPTIMIZER_FILE);
        ctx.optimizer()
            .save(&optimizer_path)
            .map_err(|e| Error::msg(format!("saving the optimizer to {}: {e}", optimizer_path.display())))?;
        let counters = ctx.counters();
        let hyper: serde_json::Map<String, serde_json::Value> = ctx
            .hyper()
            .names()
            .map(|n| (n.to_string(), serde_json::Value::from(ctx.hyper().get(n))))
            .collect();
        let trainer = serde_json::json!({
            "epoch_num": counters.epoch_num(),
            "global_step": counters.global_step(),
            "local_step": counters.local_step(),
            "hyper_params": hyper,
        });
        let trainer_path = tmp.join(TRAINER_FILE);
        write_atomic(&trainer_path, trainer.to_string().as_bytes()).map_err(io(&trainer_path))?;
        for file in [&model_path, &optimizer_path] {
            File::open(file).and_then(|f| f.sync_all()).map_err(io(file))?;
        }
        if dir.exists() {
            fs::remove_dir_all(&dir).map_err(io(&dir))?;
        }
        fs::rename(&tmp, &dir).map_err(io(&dir))?;
        sync_dir(&root).map_err(io(&root))?;
        let latest = root.join(LATEST_FILE);
        write_atomic(&latest, name.as_bytes()).map_err(io(&latest))?;
        Ok(dir)
    }
}

impl<M: Module> Callback<M> for ModelSaver {
    fn setup(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let root = ctx.log_dir().join(CHECKPOINT_DIR);
        fs::create_dir_all(&root).map_err(|e| Error::io(&root, e))
    }

    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let dir = self.save(ctx)?;
        self.kept.retain(|d| *d != dir);
        self.kept.push(dir);
        while self.kept.len() > self.max_to_keep {
            let old = self.kept.remove(0);
            fs::remove_dir_all(&old).map_err(|e| Error::io(&old, e))?;
        }
        Ok(())
    }
}
