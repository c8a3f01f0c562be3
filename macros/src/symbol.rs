//! The words of the attributes, as constants (serde_derive's `Symbol`): every comparison with an
//! attribute word goes through one of these, so that a misspelt word cannot compile.

use std::fmt::{self, Display};

use syn::{Ident, Path};

/// One word of the attribute language.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub struct Symbol(&'static str);

/// `#[callback(...)]`.
pub const CALLBACK: Symbol = Symbol("callback");
/// `#[callbacks(...)]`, the derive's container attribute.
pub const CALLBACKS: Symbol = Symbol("callbacks");
/// `#[fetch(...)]`.
pub const FETCH: Symbol = Symbol("fetch");
/// `#[order(...)]`.
pub const ORDER: Symbol = Symbol("order");
/// `after = X` in `#[order]`.
pub const AFTER: Symbol = Symbol("after");
/// `before = X` in `#[order]`.
pub const BEFORE: Symbol = Symbol("before");
pub const VALUE: Symbol = Symbol("value");
/// `#[on(EVENT)]` on a method, `on = EVENT` on a function.
pub const ON: Symbol = Symbol("on");
/// `every_k_steps = N`.
pub const EVERY_K_STEPS: Symbol = Symbol("every_k_steps");
/// `every_k_epochs = N`.
pub const EVERY_K_EPOCHS: Symbol = Symbol("every_k_epochs");
/// `before_train = bool`.
pub const BEFORE_TRAIN: Symbol = Symbol("before_train");
/// `enable_if = path`.
pub const ENABLE_IF: Symbol = Symbol("enable_if");
/// `chief_only = bool`.
pub const CHIEF_ONLY: Symbol = Symbol("chief_only");
/// `training_batches = bool`: whether the callback takes the events of a training step
/// (fastai's `run_train`).
pub const TRAINING_BATCHES: Symbol = Symbol("training_batches");
/// `validation_batches = bool`: whether the callback takes the batch events of a validation
/// pass (fastai's `run_valid`).
pub const VALIDATION_BATCHES: Symbol = Symbol("validation_batches");
/// `name = "Name"`.
pub const NAME: Symbol = Symbol("name");
/// `state`.
pub const STATE: Symbol = Symbol("state");
/// `crate = "path"`: where the runtime crate is (serde's `#[serde(crate = "...")]`).
pub const CRATE: Symbol = Symbol("crate");
/// The runtime crate's name, as in `#[burn_stoker::callback]`.
pub const RUNTIME: Symbol = Symbol("burn_stoker");

impl Symbol {
    /// The word.
    pub fn as_str(self) -> &'static str {
        self.0
    }
}

impl PartialEq<Symbol> for Ident {
    fn eq(&self, word: &Symbol) -> bool {
        self == word.0
    }
}

impl PartialEq<Symbol> for &Ident {
    fn eq(&self, word: &Symbol) -> bool {
        *self == word.0
    }
}

impl PartialEq<Symbol> for Path {
    fn eq(&self, word: &Symbol) -> bool {
        self.is_ident(word.0)
    }
}

impl PartialEq<Symbol> for &Path {
    fn eq(&self, word: &Symbol) -> bool {
        self.is_ident(word.0)
    }
}

impl PartialEq<Symbol> for str {
    fn eq(&self, word: &Symbol) -> bool {
        self == word.0
    }
}

impl Display for Symbol {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.0)
    }
}
