//! Compile-time behaviour of the macros: every misuse rule fails to compile with a message that
//! points at the mistake (tests/ui/fail/*.rs and their reviewed .stderr). `TRYBUILD=overwrite`
//! rewrites the .stderr files: review the diff. The forms that compile (tests/ui/pass/*.rs) are
//! modules of `ui_pass.rs`: with only `compile_fail` cases trybuild runs `cargo check`, so it type-checks
//! burn in debug but never generates its code.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("ui/fail/*.rs");
}
