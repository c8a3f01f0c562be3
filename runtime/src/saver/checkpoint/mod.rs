//! The checkpoint format on disk (described in the `saver` module's docs), and how it is written
//! and read back: the names of its files and what the trainer hands over
//! ([`format`](mod@format)), the checkpoints of a folder found by listing it
//! ([`listing`](mod@listing)), the manifest that verifies them ([`manifest`](mod@manifest)),
//! writing one and pruning the old ones ([`write`](mod@write)), removing one and cleaning what a
//! crash left ([`remove`](mod@remove)), reading one back ([`read`](mod@read)).

mod format;
mod listing;
mod manifest;
mod read;
mod remove;
mod write;

pub use format::{
    CHECKPOINT_DIR, FORMAT_VERSION, INDEX_FILE, KEEP_FILE, MANIFEST_FILE, MODEL_FILE, MONITORS_FILE,
    OPTIMIZER_FILE, TRAINER_FILE,
};
pub(crate) use format::{Content, new_run_id, now};
pub use read::Checkpoint;
pub(crate) use remove::{abandon_if_newer, abandon_newer};
pub(crate) use write::{run_of, write, write_copy};

#[cfg(test)]
mod tests;
