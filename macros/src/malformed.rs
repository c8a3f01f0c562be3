//! The macros never panic, whatever they are given: hundreds of malformed inputs, mutated from
//! valid ones with a fixed-seed generator, go through the expansion functions on token streams.

use proc_macro2::{Delimiter, Group, Ident, Literal, Punct, Spacing, Span, TokenStream, TokenTree};

use crate::{expand_callback, expand_derive, relocate};

/// (attribute arguments, item) pairs that expand without error.
const VALID_CALLBACKS: &[(&str, &str)] = &[
    (
        "on = trigger, every_k_epochs = 2",
        "fn dump(ctx: &mut Context<'_, impl Module>) -> stoker::Result<()> { Ok(()) }",
    ),
    ("on = trigger, every_k_steps = 3, before_train = true", "fn f<M>(ctx: &mut Context<'_, M>) {}"),
    (
        "on = after_step, every_k_steps = 100",
        "#[fetch(\"cost\", \"accuracy\")] fn watch(cost: f32, accuracy: f64, ctx: &mut Context<'_, Mlp>) {}",
    ),
    ("on = before_step, enable_if = warm, chief_only = false, name = \"Warm\"", "fn warm_up() {}"),
    ("on = setup", "fn prepare<T: Default>(ctx: &mut Context<'_, impl Module>) -> Flow { Flow::Continue }"),
    ("on = after_train", "#[order(after = InferenceRunner, before = [A, B])] pub(crate) fn last() {}"),
    ("on = trigger_epoch, every_k_epochs = 5", "fn epochs(ctx: &mut Context<'_, impl Module + Clone>) {}"),
    (
        "state",
        "impl Best { #[on(after_step)] #[fetch(\"cost\")] fn track(&mut self, cost: f32) {} #[on(trigger)] fn report(&mut self, ctx: &mut Context<'_, impl Module>) {} fn plain(&self) {} }",
    ),
    (
        "",
        "#[order(after = Other)] impl<T: Clone> Holder<T> where T: Send { #[on(trigger_step, every_k_steps = 2)] fn count(&mut self) {} }",
    ),
    ("on = trigger", "fn r#fn() {}"),
    (
        "name = \"Named\", chief_only = true",
        "impl X { #[on(before_epoch, every_k_epochs = 2, enable_if = p)] fn go(&self, ctx: &mut Context<'_, Mlp>) -> stoker::Result<Flow> { Ok(Flow::Continue) } }",
    ),
];

const VALID_DERIVES: &[&str] = &[
    "struct Training { saver: ModelSaver, #[order(after = InferenceRunner)] best: MinSaver, #[every_k_epochs(2)] dump: DumpWeights }",
    "struct Generic<T: Clone> { inner: T, #[every_k_steps(10)] #[enable_if(warm)] #[chief_only(false)] watch: Watch }",
    "struct Tuple(A, #[chief_only] B);",
    "struct Empty {}",
];

/// Known to be wrong: each must produce a `compile_error!`.
const INVALID_CALLBACKS: &[(&str, &str)] = &[
    ("", ""),
    ("on = trigger", ""),
    ("on = trigger", "fn"),
    ("on = trigger", "impl for {}"),
    ("on = trigger", "struct S;"),
    ("on = trigger", "enum E { A }"),
    ("on = trigger", "trait T {}"),
    ("on = trigger", "const C: u8 = 0;"),
    ("on =", "fn f() {}"),
    ("on = 3", "fn f() {}"),
    ("on = trigger, on = trigger", "fn f() {}"),
    ("every_k_steps = 0, on = trigger", "fn f() {}"),
    ("every_k_steps = -1, on = trigger", "fn f() {}"),
    ("every_k_steps = 1.5, on = trigger", "fn f() {}"),
    ("every_k_steps = 99999999999999999999999, on = trigger", "fn f() {}"),
    ("on = setup, every_k_epochs = 2", "fn f() {}"),
    ("on = trigger", "async fn f() {}"),
    ("on = trigger", "unsafe fn f() {}"),
    ("on = trigger", "const fn f() {}"),
    ("on = trigger", "extern \"C\" fn f() {}"),
    ("on = trigger", "fn f(self) {}"),
    ("on = trigger", "fn f(a: &mut Context<'_, M>, b: &mut Context<'_, M>) {}"),
    ("on = trigger", "#[fetch(\"a\")] fn f(a: f32) {}"),
    ("on = after_step", "#[fetch()] fn f() {}"),
    ("on = after_step", "#[fetch(\"a\", \"a\")] fn f(a: f32, b: f32) {}"),
    ("on = after_step", "#[fetch(\"\")] fn f(a: f32) {}"),
    ("on = after_step", "#[fetch(a)] fn f(a: f32) {}"),
    ("on = after_step", "#[fetch(\"a\", \"b\")] fn f(a: f32) {}"),
    ("on = trigger", "#[order(after = F)] fn f() {}"),
    ("on = trigger", "#[order(after = X, before = X)] fn f() {}"),
    ("on = trigger", "#[order(sideways = X)] fn f() {}"),
    ("on = trigger", "#[order] fn f() {}"),
    ("", "impl X {}"),
    ("", "impl Trait for X { #[on(trigger)] fn f(&mut self) {} }"),
    ("", "impl X { #[on(trigger)] fn f(self) {} }"),
    ("", "impl X { #[on(trigger)] fn f() {} }"),
    ("", "impl X { #[on] fn f(&mut self) {} }"),
    ("", "impl X { #[on(every_k_steps = 2)] fn f(&mut self) {} }"),
    ("", "impl X { #[on(trigger)] #[on(setup)] fn f(&mut self) {} }"),
    ("on = trigger", "impl X { #[on(trigger)] fn f(&mut self) {} }"),
    ("state", "fn f() {}"),
    ("name = \"has space\", on = trigger", "fn f() {}"),
    ("enable_if = 3, on = trigger", "fn f() {}"),
];

/// A tiny deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { (self.next() % n as u64) as usize }
    }
}

const IDENTS: &[&str] = &[
    "trigger",
    "after_step",
    "setup",
    "on",
    "every_k_steps",
    "state",
    "self",
    "Self",
    "async",
    "impl",
    "fn",
    "Context",
    "fetch",
    "order",
    "after",
    "before",
    "enable_if",
    "name",
    "mut",
    "dyn",
    "r#type",
    "ünïcode",
];

fn random_tree(rng: &mut Rng) -> TokenTree {
    match rng.below(4) {
        0 => TokenTree::Ident(Ident::new(
            IDENTS[rng.below(IDENTS.len())].trim_start_matches("r#"),
            Span::call_site(),
        )),
        1 => TokenTree::Literal(match rng.below(6) {
            0 => Literal::u64_unsuffixed(0),
            1 => Literal::i64_unsuffixed(-1),
            2 => Literal::f64_unsuffixed(1.5),
            3 => Literal::string(""),
            4 => Literal::string("x y"),
            _ => Literal::u64_suffixed(u64::MAX),
        }),
        2 => TokenTree::Punct(Punct::new(
            ['=', ',', '#', ':', '&', '<', '>', '-'][rng.below(8)],
            Spacing::Alone,
        )),
        _ => TokenTree::Group(Group::new(
            [Delimiter::Parenthesis, Delimiter::Bracket, Delimiter::Brace, Delimiter::None][rng.below(4)],
            TokenStream::new(),
        )),
    }
}

/// One random edit somewhere in the stream, recursing into groups.
fn mutate(stream: TokenStream, rng: &mut Rng) -> TokenStream {
    let mut trees: Vec<TokenTree> = stream.into_iter().collect();
    if trees.is_empty() {
        return std::iter::once(random_tree(rng)).collect();
    }
    let i = rng.below(trees.len());
    match rng.below(8) {
        0 => {
            trees.remove(i);
        }
        1 => {
            let copy = trees[i].clone();
            trees.insert(i, copy);
        }
        2 if i + 1 < trees.len() => trees.swap(i, i + 1),
        3 => trees[i] = random_tree(rng),
        4 => trees.truncate(i),
        5 => trees.insert(i, random_tree(rng)),
        6 => {
            let inner: TokenStream = trees.drain(..).collect();
            trees.push(TokenTree::Group(Group::new(Delimiter::Parenthesis, inner)));
        }
        _ => {
            let groups: Vec<usize> = trees
                .iter()
                .enumerate()
                .filter(|(_, t)| matches!(t, TokenTree::Group(_)))
                .map(|(i, _)| i)
                .collect();
            if let Some(&g) = groups.get(rng.below(groups.len())) {
                if let TokenTree::Group(group) = &trees[g] {
                    let inner = mutate(group.stream(), rng);
                    trees[g] = TokenTree::Group(Group::new(group.delimiter(), inner));
                }
            } else {
                trees[i] = random_tree(rng);
            }
        }
    }
    trees.into_iter().collect()
}

fn tokens(text: &str) -> TokenStream {
    text.parse().unwrap_or_else(|e| panic!("seed {text:?} does not tokenize: {e}"))
}

fn has_error(output: &TokenStream) -> bool {
    output.to_string().contains("compile_error")
}

/// Run `f`, failing the test with the input if it panics.
fn no_panic(what: &str, input: &str, f: impl FnOnce() -> TokenStream) -> TokenStream {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or_else(|_| panic!("{what} panicked on input:\n{input}"))
}

#[test]
fn valid_seeds_expand_without_errors_to_parseable_code() {
    for (args, item) in VALID_CALLBACKS {
        let output = no_panic("callback", item, || expand_callback(tokens(args), tokens(item)));
        assert!(!has_error(&output), "#[callback({args})] {item}\n=> {output}");
        syn::parse2::<syn::File>(output.clone()).unwrap_or_else(|e| panic!("{e}: {output}"));
    }
    for item in VALID_DERIVES {
        let output = no_panic("derive", item, || expand_derive(tokens(item)));
        assert!(!has_error(&output), "{item}\n=> {output}");
        syn::parse2::<syn::File>(output.clone()).unwrap_or_else(|e| panic!("{e}: {output}"));
    }
}

#[test]
fn known_mistakes_are_compile_errors() {
    for (args, item) in INVALID_CALLBACKS {
        let output = no_panic("callback", item, || expand_callback(tokens(args), tokens(item)));
        assert!(has_error(&output), "no error for #[callback({args})] {item}\n=> {output}");
    }
    for item in [
        "enum E { A }",
        "union U { a: u8 }",
        "struct S { #[every_k_steps(0)] a: A }",
        "struct S { a: A, b: A }",
        "struct S { #[order(after = [A,, B])] a: A }",
        "",
        "fn f() {}",
    ] {
        let output = no_panic("derive", item, || expand_derive(tokens(item)));
        assert!(has_error(&output), "no error for derive on {item}\n=> {output}");
    }
    for item in ["fn f() {}", "struct S;", "", "impl X {}"] {
        let output = no_panic("relocate", item, || relocate("fetch", tokens("\"a\""), tokens(item)));
        assert!(has_error(&output), "no error for #[fetch] without #[callback] on {item}");
    }
}

#[test]
fn hundreds_of_mutants_never_panic() {
    let mut rng = Rng(0x5EED);
    let mut runs = 0;
    let mut still_valid = 0;
    for round in 0..40 {
        for (args, item) in VALID_CALLBACKS {
            let (mut args, mut item) = (tokens(args), tokens(item));
            // One to three edits, to the arguments, the item, or both.
            for _ in 0..=(round % 3) {
                match rng.below(3) {
                    0 => args = mutate(args, &mut rng),
                    1 => item = mutate(item, &mut rng),
                    _ => {
                        args = mutate(args, &mut rng);
                        item = mutate(item, &mut rng);
                    }
                }
            }
            let shown = format!("#[callback({args})] {item}");
            let output = no_panic("callback", &shown, || expand_callback(args.clone(), item.clone()));
            assert!(!output.is_empty(), "empty output for {shown}");
            still_valid += usize::from(!has_error(&output));
            let output = no_panic("relocate", &shown, || relocate("order", args.clone(), item.clone()));
            assert!(!output.is_empty());
            runs += 2;
        }
        for item in VALID_DERIVES {
            let mut item = tokens(item);
            for _ in 0..=(round % 3) {
                item = mutate(item, &mut rng);
            }
            let shown = item.to_string();
            let output = no_panic("derive", &shown, || expand_derive(item.clone()));
            still_valid += usize::from(!has_error(&output));
            runs += 1;
        }
    }
    eprintln!("{runs} malformed inputs, {still_valid} of the mutants were still valid");
    assert!(runs >= 600);
}
