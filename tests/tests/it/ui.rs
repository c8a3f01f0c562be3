//! Compile-time behaviour of the macros: every misuse rule fails to compile with a message that
//! points at the mistake (tests/ui/fail/*.rs and their reviewed .stderr). `TRYBUILD=overwrite`
//! rewrites the .stderr files: review the diff. The forms that compile (tests/ui/pass/*.rs) are
//! modules of `ui_pass.rs`: with only `compile_fail` cases trybuild runs `cargo check`, so it type-checks
//! burn in debug but never generates its code.
//!
//! Some expected outputs list the types that implement a trait, as rustc does, and those are the
//! built-in callbacks of the test build: the `.stderr` files are written for the build the test
//! command makes (`.ci/run`'s build 1, with the feature `hdf5`, which adds `CallbackDataWriter`).
//! Without that feature the case is ignored, saying so.

#[test]
#[cfg_attr(
    not(feature = "hdf5"),
    ignore = "the expected compiler output lists the built-in callbacks of the test command's build: run with --features stoker-tests/hdf5"
)]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("ui/fail/*.rs");
}
