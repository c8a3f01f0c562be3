//! Every form the macros accept compiles (`tests/ui/pass/*.rs`) and its `main` runs: each file is a
//! module of this test binary, built with the other tests in the README's release build, rather than
//! a trybuild `pass` case, which would make trybuild build burn once more, in debug, with codegen.
//! The misuse rules stay trybuild `compile_fail` cases (`ui.rs`), which trybuild only checks.
#![allow(dead_code, unused_imports)]
// The cases spell out forms on purpose: `-> ()` on a hook (return_types.rs), `.clone()` on a
// context type that derives both Clone and Copy (context_forms.rs).
#![allow(clippy::unused_unit, clippy::clone_on_copy)]

// `renamed_crate.rs` names the runtime `::renamed`: main.rs declares it at the crate root.

#[path = "../../ui/pass/compositions.rs"]
mod compositions;

#[test]
fn compositions_compiles_and_runs() {
    compositions::main();
}

#[path = "../../ui/pass/context_forms.rs"]
mod context_forms;

#[test]
fn context_forms_compiles_and_runs() {
    context_forms::main();
}

#[path = "../../ui/pass/every_event.rs"]
mod every_event;

#[test]
fn every_event_compiles_and_runs() {
    every_event::main();
}

#[path = "../../ui/pass/fetch_types.rs"]
mod fetch_types;

#[test]
fn fetch_types_compiles_and_runs() {
    fetch_types::main();
}

#[path = "../../ui/pass/function_forms.rs"]
mod function_forms;

#[test]
fn function_forms_compiles_and_runs() {
    function_forms::main();
}

#[path = "../../ui/pass/impl_forms.rs"]
mod impl_forms;

#[test]
fn impl_forms_compiles_and_runs() {
    impl_forms::main();
}

#[path = "../../ui/pass/inside_macro_rules.rs"]
mod inside_macro_rules;

#[test]
fn inside_macro_rules_compiles_and_runs() {
    inside_macro_rules::main();
}

#[path = "../../ui/pass/order_forms.rs"]
mod order_forms;

#[test]
fn order_forms_compiles_and_runs() {
    order_forms::main();
}

#[path = "../../ui/pass/renamed_crate.rs"]
mod renamed_crate;

#[test]
fn renamed_crate_compiles_and_runs() {
    renamed_crate::main();
}

#[path = "../../ui/pass/return_types.rs"]
mod return_types;

#[test]
fn return_types_compiles_and_runs() {
    return_types::main();
}

#[path = "../../ui/pass/deferred_fetch.rs"]
mod deferred_fetch;

#[test]
fn deferred_fetch_compiles_and_runs() {
    deferred_fetch::main();
}
