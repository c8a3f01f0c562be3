//! Compile-time behaviour of the macros: every misuse rule fails to compile with a message that
//! points at the mistake (tests/ui/fail/*.rs and their reviewed .stderr), and every form compiles
//! (tests/ui/pass/*.rs). `TRYBUILD=overwrite` rewrites the .stderr files: review the diff.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("ui/pass/*.rs");
    cases.compile_fail("ui/fail/*.rs");
}
