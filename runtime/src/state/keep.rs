//! Which checkpoints to keep: what a callback asks for with a checkpoint, and the names of the
//! checkpoint layout that the layers below the savers read (the savers' `checkpoint` module
//! publishes them).

/// The folder of checkpoints inside the log directory (`saver::checkpoint::CHECKPOINT_DIR`).
pub(crate) const CHECKPOINTS: &str = "checkpoints";
/// The file of a checkpoint holding the callbacks' states (`saver::checkpoint::TRAINER_FILE`).
pub(crate) const TRAINER: &str = "trainer.json";

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

/// The suffixes stoker gives the folders it writes (`.tmp`), replaces (`.old`), removes
/// (`.deleting`) or sets aside (`.abandoned`) inside `checkpoints/`.
const RESERVED_SUFFIXES: [&str; 4] = [".tmp", ".old", ".deleting", ".abandoned"];

/// The longest copy name, in bytes: with the suffix of its temporary folder
/// (`.<pid>-<n>.tmp`), it stays within the 255 bytes a file name may have.
const MAX_COPY_NAME: usize = 200;

/// Check that `name` can name a checkpoint copy (MinSaver's `min-<statistic>`): a plain folder
/// name of its own inside `checkpoints/`. `Err` says what is wrong, to follow the name in a
/// message.
pub(crate) fn check_copy_name(name: &str) -> Result<(), String> {
    let why = if name.is_empty() {
        "is empty".to_string()
    } else if name.contains(['/', '\\']) {
        "holds a path separator: it names a folder inside checkpoints/, not a path".to_string()
    } else if name.chars().any(char::is_control) {
        "holds a control character (NUL, a line break...)".to_string()
    } else if name.starts_with('.') {
        "starts with `.` (`.` and `..` are not folders of their own, and stoker keeps such names for itself)"
            .to_string()
    } else if name.starts_with("step-") {
        "starts with `step-`, the name of the checkpoints ModelSaver writes and prunes".to_string()
    } else if name == "index.json" {
        "is the name of the checkpoints' index".to_string()
    } else if let Some(suffix) = RESERVED_SUFFIXES.iter().find(|s| name.ends_with(*s)) {
        format!(
            "ends with `{suffix}`, which stoker gives the folders it writes, replaces, removes or sets aside"
        )
    } else if name.len() > MAX_COPY_NAME {
        format!("is {} bytes long, more than {MAX_COPY_NAME}", name.len())
    } else {
        return Ok(());
    };
    Err(format!("{why}; give a plain folder name such as `min-validation_error` (letters, digits, `-`, `_`)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_names_are_plain_folder_names_of_their_own() {
        for good in ["min-validation_error", "best", "max-accuracy.v2", "checkpoints", "ünïcode"] {
            assert_eq!(check_copy_name(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "a/b",
            "/abs",
            "a\\b",
            "a\0b",
            "a\nb",
            ".hidden",
            "index.json",
            "step-3",
            "x.tmp",
            "x.old",
            "x.deleting",
            "x.abandoned",
        ] {
            assert!(check_copy_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_copy_name(&"x".repeat(MAX_COPY_NAME + 1)).is_err());
        assert!(check_copy_name(&"x".repeat(MAX_COPY_NAME)).is_ok());
    }
}
