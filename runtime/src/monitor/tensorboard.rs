//! PLACEHOLDER until the TensorBoard writer lands.
use super::record::Record;
use std::path::{Path, PathBuf};
/// TensorBoard event writer.
pub struct TensorBoardSink {
    path: PathBuf,
}
impl TensorBoardSink {
    /// Create.
    pub fn create(dir: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        Ok(Self { path: dir.join("events.out.tfevents.0.placeholder") })
    }
    /// Write.
    pub fn write(&mut self, _records: &[Record]) -> std::io::Result<()> {
        Ok(())
    }
    /// Flush.
    pub fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
    /// Path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}
