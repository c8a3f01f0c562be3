//! Which checkpoints to keep: what a callback asks for with a checkpoint.

/// Which checkpoints to keep (tensorpack's `max_to_keep` and `keep_checkpoint_every_n_hours`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KeepPolicy {
    /// The most recent checkpoints kept (at least 1).
    pub max_to_keep: usize,
    /// Also keep forever one checkpoint per this many hours of training, when set.
    pub keep_every_n_hours: Option<f64>,
}

impl Default for KeepPolicy {
    fn default() -> Self {
        KeepPolicy { max_to_keep: 10, keep_every_n_hours: None }
    }
}
