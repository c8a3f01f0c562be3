//! [`ConfigError`]: a trainer or a callback set up in a way that cannot train as asked.

/// A trainer or a callback set up in a way that cannot train as asked: what
/// [`Error::Config`](crate::Error::Config) holds. Found at setup (or when a value is set), before
/// anything runs on it; the message names the callback or the setting and says what to change.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A setting's value breaks its rule: `<owner>: <setting> must be <rule>, not <value>`.
    #[error("{owner}: {setting} must be {rule}, not {value}")]
    Setting {
        /// Who was given it: the callback (`TrainLogger`) or the builder method.
        owner: String,
        /// The setting (`every_k_epochs`).
        setting: String,
        /// What it must be (`at least 1`).
        rule: String,
        /// The value given, as written in Rust.
        value: String,
    },
    /// The callbacks' order constraints cannot be satisfied: a cycle, or a target that is not
    /// registered.
    #[error("{0}")]
    Order(String),
    /// A callback asked for a value the training step does not produce, or of another kind or
    /// shape than it can take.
    #[error("{0}")]
    Fetch(String),
    /// A hyper-parameter is unknown or was given an invalid value.
    #[error("{0}")]
    HyperParam(String),
    /// A combination that cannot train as asked (a model on a device without autodiff, a
    /// chief-only callback that takes a value inside the step of a data-parallel world, an event
    /// a callback answers where the loop cannot act on it).
    #[error("{0}")]
    Misuse(String),
    /// A callback's or a writer's settings are invalid in another way (an empty name, a name
    /// given twice, a path that is a folder): the message names it.
    #[error("{0}")]
    Invalid(String),
}
