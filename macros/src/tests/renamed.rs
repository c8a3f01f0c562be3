//! With `crate = "..."`, generated code names the runtime only by that path: not one
//! `burn_stoker` token is left in the expansion (of a success, or of an error's fallback).

use proc_macro2::{TokenStream, TokenTree};

use crate::{expand_callback, expand_derive};

fn names_default_crate(tokens: TokenStream) -> bool {
    tokens.into_iter().any(|tree| match tree {
        TokenTree::Ident(ident) => ident == "burn_stoker",
        TokenTree::Group(group) => names_default_crate(group.stream()),
        _ => false,
    })
}

fn tokens(text: &str) -> TokenStream {
    text.parse().expect("tokens")
}

#[test]
fn a_renamed_runtime_is_the_only_path_in_generated_code() {
    let cases = [
        (
            "on = after_step, every_k_steps = 2, crate = \"renamed\"",
            "#[fetch(\"cost\")] #[order(after = A, before = B)] fn watch(cost: f32, ctx: &mut Context<'_, impl Module>) {}",
        ),
        (
            "on = trigger, enable_if = warm, crate = \"::renamed\"",
            "fn report<M>(ctx: &mut Context<'_, M>) {}",
        ),
        (
            "state, chief_only = false, crate = \"renamed\"",
            "#[order(after = A)] impl Count { #[on(trigger, every_k_epochs = 3)] fn count(&mut self) {} #[on(after_step)] #[fetch(\"x\")] fn see(&mut self, x: f64) {} }",
        ),
        // Errors: the fallback too.
        ("on = trigger, every_k_steps = 0, crate = \"renamed\"", "fn report() {}"),
        ("crate = \"renamed\"", "impl Count { fn nothing(&self) {} }"),
    ];
    for (args, item) in cases {
        let out = expand_callback(tokens(args), tokens(item));
        assert!(!names_default_crate(out.clone()), "#[callback({args})] {item} expands to {out}");
    }
    for item in [
        "#[callbacks(crate = \"renamed\")] struct S { #[order(after = A)] #[every_k_steps(2)] a: A, b: (B, C) }",
        "#[callbacks(crate = \"renamed\")] struct S { #[every_k_steps(0)] a: A }",
    ] {
        let out = expand_derive(tokens(item));
        assert!(!names_default_crate(out.clone()), "#[derive(Callbacks)] {item} expands to {out}");
    }
}
