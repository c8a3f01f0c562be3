//! The crate's own tests that need its private entry points (the expansion functions on token
//! streams). The trybuild cases in `tests/ui` check the messages; these check that nothing panics
//! and that a renamed runtime is honoured.

mod never_panic;
mod renamed;
