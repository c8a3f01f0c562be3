//! The macros never panic, whatever they are given. Valid seeds expand without error to code
//! that parses; known mistakes (hand-written, and long ones built here) give a `compile_error!`;
//! hundreds of mutants of the seeds, made with a fixed-seed generator so that every run sees the
//! same inputs, and a few odd inputs expand without panicking, and when they expand without error
//! their output parses. Everything goes through the three expansion functions on token streams.

use std::collections::HashSet;
use std::panic::{AssertUnwindSafe, catch_unwind};

use proc_macro2::{Delimiter, Group, Ident, Literal, Punct, Spacing, Span, TokenStream, TokenTree};
use quote::quote;

use crate::symbol::{CALLBACK, FETCH, ORDER};
use crate::{expand_callback, expand_derive, relocate};

/// Which macro an input goes to.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Kind {
    /// `#[callback(args)] item`: `expand_callback`.
    Callback,
    /// `#[fetch(args)] item`: `relocate("fetch", ..)`, then the rest as the compiler would.
    Fetch,
    /// `#[order(args)] item`: `relocate("order", ..)`, then the rest.
    Order,
    /// `#[derive(Callbacks)] item`: `expand_derive` (no arguments).
    Derive,
}

use Kind::{Callback, Derive, Fetch, Order};

#[derive(Clone)]
struct Input {
    kind: Kind,
    args: TokenStream,
    item: TokenStream,
}

impl Input {
    fn new(kind: Kind, args: &str, item: &str) -> Input {
        Input { kind, args: tokens(args), item: tokens(item) }
    }

    fn show(&self) -> String {
        let (args, item) = (&self.args, &self.item);
        match self.kind {
            Callback => format!("#[callback({args})] {item}"),
            Fetch => format!("#[fetch({args})] {item}"),
            Order => format!("#[order({args})] {item}"),
            Derive => format!("#[derive(Callbacks)] {item}"),
        }
    }
}

fn tokens(text: &str) -> TokenStream {
    text.parse().unwrap_or_else(|e| panic!("{text:?} does not tokenize: {e}"))
}

/// (macro, arguments, item) that expand without any error.
const SEEDS: &[(Kind, &str, &str)] = &[
    (
        Callback,
        "on = trigger, every_k_steps = 3, every_k_epochs = 2, before_train = true, enable_if = burn_stoker::is_warm, chief_only = true, name = \"Everything\"",
        "fn every_key<M>(ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> { Ok(()) }",
    ),
    (
        Callback,
        "on = after_step, every_k_steps = 50",
        "#[fetch(\"loss\", \"accuracy\")] fn watch(loss: f32, accuracy: f64) -> Flow { Flow::Continue }",
    ),
    (
        Callback,
        "on = after_step, enable_if = warm, chief_only = false",
        "#[doc = \"cost\"] #[fetch(\"cost\")] #[order(after = InferenceRunner, before = [A, B])] pub fn cost<T: Default, M>(cost: f32, ctx: &mut Context<'_, M>) -> burn_stoker::Result<Flow> where T: Clone { Ok(Flow::Continue) }",
    ),
    (Callback, "on = setup", "fn prepare(ctx: &mut Context<'_, impl Module + Clone>) {}"),
    (Callback, "on = before_step, every_k_epochs = 4", "pub(crate) fn warm(ctx: &mut Context<'_, Mlp>) {}"),
    (Callback, "on = trigger_epoch, every_k_epochs = 5", "fn r#fn() {}"),
    (Callback, "on = after_train, name = \"Ünïcode\"", "fn ünïcode_name() {}"),
    (
        Callback,
        "state",
        "impl StepCount { #[on(trigger_step)] fn count(&mut self) { self.0 += 1; } #[on(trigger)] fn report<M>(&mut self, ctx: &mut Context<'_, M>) {} fn plain(&self) {} const C: u8 = 0; }",
    ),
    (
        Callback,
        "name = \"Best\", chief_only = true",
        "#[order(after = ModelSaver)] impl<T: Clone> Holder<T> where T: Send { #[on(after_step, every_k_steps = 2, enable_if = warm)] #[fetch(\"cost\")] fn track(&mut self, cost: f32) {} #[on(before_epoch, every_k_epochs = 3)] fn go(&self, ctx: &mut Context<'_, impl Module>) -> burn_stoker::Result<Flow> { Ok(Flow::Continue) } }",
    ),
    (
        Callback,
        "",
        "impl X { #[on(trigger, before_train = true)] fn t(&mut self, ctx: &mut Context<'_, Mlp>) {} }",
    ),
    (
        Fetch,
        "\"loss\", \"accuracy\"",
        "#[callback(on = after_step, every_k_steps = 50)] fn watch(loss: f32, accuracy: f64) {}",
    ),
    (
        Fetch,
        "\"a\"",
        "#[doc = \"x\"] #[burn_stoker::callback(on = after_step)] #[order(after = Saver)] fn f(a: f32, ctx: &mut Context<'_, M>) {}",
    ),
    (
        Order,
        "after = InferenceRunner, before = [A, B]",
        "#[callback(on = trigger)] fn after_validation<M>(ctx: &mut Context<'_, M>) {}",
    ),
    (Order, "before = Saver", "#[fetch(\"a\")] #[callback(on = after_step)] fn f(a: f32) {}"),
    (
        Order,
        "after = [Saver, burn_stoker::Other]",
        "#[callback(state)] impl Count { #[on(trigger)] fn t(&mut self) {} }",
    ),
    (
        Derive,
        "",
        "struct Training { saver: ModelSaver, #[every_k_epochs(5)] #[order(after = ModelSaver)] note: CheckpointNote, #[every_k_steps(10)] #[enable_if(warm)] #[chief_only(false)] watch: Watch, #[chief_only] only: Only }",
    ),
    (
        Derive,
        "",
        "pub struct Generic<'a, T: Clone> where T: Send { inner: T, #[order(before = [A, B])] r: Runner<'a> }",
    ),
    (Derive, "", "struct Tuple(pub A, #[chief_only] #[every_k_steps(2)] B);"),
    (Derive, "", "struct Empty {}"),
    (Derive, "", "struct Unit;"),
    // fastai's loop: the events inside a step, around validation and after a cancel; numeric order.
    (Callback, "on = before_batch", "fn mix(batch: &StepBatch<'_>) -> Result<()> { Ok(()) }"),
    (Callback, "on = after_pred", "fn keep<M>(ctx: &mut Context<'_, M>, pred: &StepPred<'_>) {}"),
    (Callback, "on = after_loss", "fn triple(loss: &StepLoss<'_>) { loss.update(|l| l * 3.0); }"),
    (Callback, "on = after_create", "fn created(ctx: &mut Context<'_, M>) {}"),
    (
        Callback,
        "on = before_batch, validation_batches = false, training_batches = true",
        "fn mix(batch: &StepBatch<'_>) {}",
    ),
    (
        Callback,
        "training_batches = false, chief_only = false",
        "impl Watch { #[on(after_validate)] fn seen(&mut self) {} }",
    ),
    (Callback, "on = before_backward", "fn double(loss: &StepLoss<'_>) { loss.update(|l| l * 2.0); }"),
    (Callback, "on = after_backward", "fn clip<M>(grads: &StepGradients, ctx: &mut Context<'_, M>) {}"),
    (Callback, "on = before_validate", "fn reset(ctx: &mut Context<'_, Rnn>) { ctx.model_mut().reset() }"),
    (Callback, "on = after_cancel_fit", "fn note<M>(ctx: &mut Context<'_, M>) -> Flow { Flow::Continue }"),
    (
        Order,
        "-9",
        "#[callback(on = after_step)] #[fetch(\"loss\")] fn nan(loss: f32) -> Flow { Flow::CancelFit }",
    ),
    (
        Order,
        "after = A, value = 3, before = [B]",
        "#[callback(on = trigger)] fn t<M>(ctx: &mut Context<'_, M>) {}",
    ),
];

/// Known mistakes: each must give a `compile_error!`.
const INVALID: &[(Kind, &str, &str)] = &[
    // Not an item, not the right item.
    (Callback, "", ""),
    (Callback, "on = trigger", ""),
    (Callback, "on = trigger", "fn"),
    (Callback, "on = trigger", "fn f"),
    (Callback, "on = trigger", "fn f()"),
    (Callback, "", "impl for {}"),
    (Callback, "on = trigger", "impl for {}"),
    (Callback, "", "impl {}"),
    (Callback, "on = trigger", "fn f() {} fn g() {}"),
    (Callback, "on = trigger", "r#fn f() {}"),
    (Callback, "on = trigger", "struct S;"),
    (Callback, "on = trigger", "enum E { A }"),
    (Callback, "on = trigger", "union U { a: u8 }"),
    (Callback, "on = trigger", "trait T {}"),
    (Callback, "on = trigger", "const C: u8 = 0;"),
    (Callback, "on = trigger", "static S: u8 = 0;"),
    (Callback, "on = trigger", "type T = u8;"),
    (Callback, "on = trigger", "mod m {}"),
    (Callback, "on = trigger", "use x::y;"),
    // Arguments.
    (Callback, "", "fn f() {}"),
    (Callback, "on", "fn f() {}"),
    (Callback, "on =", "fn f() {}"),
    (Callback, "= trigger", "fn f() {}"),
    (Callback, "on = 3", "fn f() {}"),
    (Callback, "on = \"trigger\"", "fn f() {}"),
    (Callback, "on = trigger::x", "fn f() {}"),
    (Callback, "on = trïggér", "fn f() {}"),
    (Callback, "ön = trigger", "fn f() {}"),
    (Callback, "r#on = trigger", "fn f() {}"),
    (Callback, "on = trigger, r#name = \"X\"", "fn f() {}"),
    (Callback, "on = trigger, ñame = \"X\"", "fn f() {}"),
    (Callback, "on = trigger, on = setup", "fn f() {}"),
    (Callback, "on = trigger,, every_k_steps = 2", "fn f() {}"),
    (Callback, "on = trigger every_k_steps = 2", "fn f() {}"),
    (Callback, "on = trigger, 3", "fn f() {}"),
    (Callback, "on = trigger, every_k_steps = 0", "fn f() {}"),
    (Callback, "on = trigger, every_k_steps = -1", "fn f() {}"),
    (Callback, "on = trigger, every_k_steps = 1.5", "fn f() {}"),
    (Callback, "on = trigger, every_k_steps = \"2\"", "fn f() {}"),
    (Callback, "on = trigger, every_k_steps = N", "fn f() {}"),
    (Callback, "on = trigger, every_k_steps = 2 + 3", "fn f() {}"),
    (Callback, "on = trigger, every_k_epochs = 99999999999999999999999", "fn f() {}"),
    (Callback, "on = trigger, every_k_epochs", "fn f() {}"),
    (Callback, "on = setup, every_k_steps = 2", "fn f() {}"),
    (Callback, "on = after_train, enable_if = p", "fn f() {}"),
    (Callback, "on = before_backward, every_k_steps = 2", "fn f() {}"),
    (Callback, "on = after_cancel_batch, enable_if = p", "fn f() {}"),
    (Callback, "on = after_backward", "fn f(a: &StepGradients, b: &StepGradients) {}"),
    (Callback, "on = after_pred", "fn f(a: &StepBatch<'_>) {}"),
    (Callback, "on = before_batch, every_k_epochs = 3", "fn f(a: &(), b: &StepLoss) {}"),
    (Order, "value = 1.5", "#[callback(on = trigger)] fn f() {}"),
    (Order, "-9, value = 3", "#[callback(on = trigger)] fn f() {}"),
    (Order, "4294967296", "#[callback(on = trigger)] fn f() {}"),
    (Order, "value = \"x\"", "#[callback(on = trigger)] fn f() {}"),
    (Order, "valeu = 3", "#[callback(on = trigger)] fn f() {}"),
    (Order, "- - 3", "#[callback(on = trigger)] fn f() {}"),
    (Order, "value =", "#[callback(on = trigger)] fn f() {}"),
    (Callback, "on = before_train, before_train = true", "fn f() {}"),
    (Callback, "on = after_epoch, before_train = true", "fn f() {}"),
    (Callback, "on = trigger, before_train = 1", "fn f() {}"),
    (Callback, "on = trigger, chief_only", "fn f() {}"),
    (Callback, "on = trigger, chief_only = yes", "fn f() {}"),
    (Callback, "on = trigger, validation_batches = maybe", "fn f() {}"),
    (Callback, "on = trigger, enable_if = 3", "fn f() {}"),
    (Callback, "on = trigger, enable_if = <T as X>::f", "fn f() {}"),
    (Callback, "on = trigger, name = Foo", "fn f() {}"),
    (Callback, "on = trigger, name = \"\"", "fn f() {}"),
    (Callback, "on = trigger, name = \"x y\"", "fn f() {}"),
    (Callback, "on = trigger, name = \"fn\"", "fn f() {}"),
    (Callback, "on = trigger, name = \"self\"", "fn f() {}"),
    (Callback, "on = trigger, name = \"1x\"", "fn f() {}"),
    (Callback, "on = trigger, state", "fn f() {}"),
    // Names that are not exactly an identifier (these panicked in `Ident::new`).
    (Callback, "on = trigger, name = \"r#Foo\"", "fn f() {}"),
    (Callback, "on = trigger, name = \" Padded \"", "fn f() {}"),
    (Callback, "on = trigger, name = \"Dump // note\"", "fn f() {}"),
    (Callback, "on = trigger, name = \"/* note */ Dump\"", "fn f() {}"),
    (Callback, "on = trigger, name = \"Self\"", "fn f() {}"),
    (Callback, "on = trigger", "fn _1() {}"),
    (Callback, "on = trigger", "fn _1a() {}"),
    (Callback, "on = trigger", "fn self_() {}"),
    (Callback, "name = \"r#Best\"", "impl X { #[on(trigger)] fn f(&mut self) {} }"),
    (Callback, "name = \" Best \"", "impl X { #[on(trigger)] fn f(&mut self) {} }"),
    (Callback, "on = trigger, fetch = 1", "fn f() {}"),
    // Signatures.
    (Callback, "on = trigger", "async fn f() {}"),
    (Callback, "on = trigger", "unsafe fn f() {}"),
    (Callback, "on = trigger", "const fn f() {}"),
    (Callback, "on = trigger", "extern \"C\" fn f() {}"),
    (Callback, "on = trigger", "fn f(self) {}"),
    (Callback, "on = trigger", "fn f(&mut self) {}"),
    (Callback, "on = trigger", "fn f<const N: usize>() {}"),
    (Callback, "on = trigger", "fn f(ctx: Context<'_, M>) {}"),
    (Callback, "on = trigger", "fn f(ctx: &Context<'_, M>) {}"),
    (Callback, "on = trigger", "fn f(ctx: &mut Context) {}"),
    (Callback, "on = trigger", "fn f(ctx: &mut Context<'_>) {}"),
    (Callback, "on = trigger", "fn f(a: &mut Context<'_, M>, b: &mut Context<'_, M>) {}"),
    (Callback, "on = trigger", "fn f(x: f32) {}"),
    (Callback, "on = trigger", "fn f(ctx: &mut Cöntext<'_, M>) {}"),
    (Callback, "on = trigger", "fn ünïcode(x: ü8) {}"),
    (Callback, "on = after_step", "fn f(x: f32) {}"),
    (Callback, "on = after_step", "#[fetch(\"x\")] fn f(ref x: f32) {}"),
    (Callback, "on = trigger", "#[r#fetch(\"a\")] fn f(a: f32) {}"),
    (Callback, "on = trigger", "#[on(trigger)] fn f() {}"),
    // `#[fetch]` under `#[callback]`.
    (Callback, "on = trigger", "#[fetch(\"a\")] fn f(a: f32) {}"),
    (Callback, "on = after_step", "#[fetch] fn f() {}"),
    (Callback, "on = after_step", "#[fetch()] fn f() {}"),
    (Callback, "on = after_step", "#[fetch = \"a\"] fn f(a: f32) {}"),
    (Callback, "on = after_step", "#[fetch(\"a\", \"a\")] fn f(a: f32, b: f32) {}"),
    (Callback, "on = after_step", "#[fetch(\"\")] fn f(a: f32) {}"),
    (Callback, "on = after_step", "#[fetch(\" \")] fn f(a: f32) {}"),
    (Callback, "on = after_step", "#[fetch(a)] fn f(a: f32) {}"),
    (Callback, "on = after_step", "#[fetch(1)] fn f(a: f32) {}"),
    (Callback, "on = after_step", "#[fetch(\"a\",, \"b\")] fn f(a: f32, b: f32) {}"),
    (Callback, "on = after_step", "#[fetch(\"a\", \"b\")] fn f(a: f32) {}"),
    (Callback, "on = after_step", "#[fetch(\"a\")] fn f(a: f32, b: f32) {}"),
    (Callback, "on = after_step", "#[fetch(\"a\")] #[fetch(\"b\")] fn f(a: f32, b: f32) {}"),
    // `#[order]` under `#[callback]`.
    (Callback, "on = trigger", "#[order(after = F)] fn f() {}"),
    (Callback, "on = trigger", "#[order(after = X, before = X)] fn f() {}"),
    (Callback, "on = trigger", "#[order(sideways = X)] fn f() {}"),
    (Callback, "on = trigger", "#[order] fn f() {}"),
    (Callback, "on = trigger", "#[order()] fn f() {}"),
    (Callback, "on = trigger", "#[order(after)] fn f() {}"),
    (Callback, "on = trigger", "#[order(after = )] fn f() {}"),
    (Callback, "on = trigger", "#[order(after = [X,, Y])] fn f() {}"),
    (Callback, "on = trigger", "#[order(after = x)] fn f() {}"),
    (Callback, "on = trigger", "#[order(after = [X, X])] fn f() {}"),
    (Callback, "on = trigger", "#[order(after = X)] #[order(before = Y)] fn f() {}"),
    (Callback, "on = trigger", "#[order(after = 3)] fn f() {}"),
    // Impl blocks.
    (Callback, "", "impl X {}"),
    (Callback, "", "impl X { fn f(&self) {} }"),
    (Callback, "", "impl Trait for X { #[on(trigger)] fn f(&mut self) {} }"),
    (Callback, "", "impl X { #[on(trigger)] fn f(self) {} }"),
    (Callback, "", "impl X { #[on(trigger)] fn f() {} }"),
    (Callback, "", "impl X { #[on] fn f(&mut self) {} }"),
    (Callback, "", "impl X { #[on()] fn f(&mut self) {} }"),
    (Callback, "", "impl X { #[on = trigger] fn f(&mut self) {} }"),
    (Callback, "", "impl X { #[on(every_k_steps = 2)] fn f(&mut self) {} }"),
    (Callback, "", "impl X { #[on(every_k_steps = 2, trigger)] fn f(&mut self) {} }"),
    (Callback, "", "impl X { #[on(trigger, setup)] fn f(&mut self) {} }"),
    (Callback, "", "impl X { #[on(trigger, on = setup)] fn f(&mut self) {} }"),
    (Callback, "", "impl X { #[on(trigger)] #[on(setup)] fn f(&mut self) {} }"),
    (Callback, "", "impl X { #[on(trigger, state)] fn f(&mut self) {} }"),
    (Callback, "", "impl X { #[on(trigger, name = \"X\")] fn f(&mut self) {} }"),
    (Callback, "", "impl X { #[on(trigger_epok)] fn f(&mut self) {} }"),
    (Callback, "", "impl X { #[on(setup, every_k_steps = 2)] fn f(&mut self) {} }"),
    (Callback, "", "impl X { #[on(trigger)] async fn f(&mut self) {} }"),
    (Callback, "", "impl X { #[on(trigger)] fn f(&mut self, x: f32) {} }"),
    (Callback, "", "impl X { #[fetch(\"a\")] fn f(&mut self, a: f32) {} }"),
    (Callback, "", "impl X { #[on(trigger)] #[order(after = A)] fn f(&mut self) {} }"),
    (Callback, "", "#[fetch(\"a\")] impl X { #[on(trigger)] fn f(&mut self) {} }"),
    (Callback, "", "#[on(trigger)] impl X { #[on(trigger)] fn f(&mut self) {} }"),
    (Callback, "", "#[order(after = X)] impl X { #[on(trigger)] fn f(&mut self) {} }"),
    (Callback, "", "impl [u8] { #[on(trigger)] fn f(&self) {} }"),
    (Callback, "on = trigger", "impl X { #[on(trigger)] fn f(&mut self) {} }"),
    (Callback, "every_k_steps = 2", "impl X { #[on(trigger)] fn f(&mut self) {} }"),
    (Callback, "state = true", "impl X { #[on(trigger)] fn f(&mut self) {} }"),
    (Callback, "state, state", "impl X { #[on(trigger)] fn f(&mut self) {} }"),
    // `#[fetch]` / `#[order]` above `#[callback]`, or without it.
    (Fetch, "\"a\"", "fn f() {}"),
    (Fetch, "\"a\"", ""),
    (Fetch, "\"a\"", "fn"),
    (Fetch, "\"a\"", "struct S;"),
    (Fetch, "\"a\"", "impl X {}"),
    (Fetch, "\"a\"", "#[callbacks(on = after_step)] fn f(a: f32) {}"),
    (Fetch, "\"a\"", "#[callback(on = after_step)] struct S;"),
    (Order, "after = A", "fn f() {}"),
    (Order, "after = A", "impl for {}"),
    (Order, "", "#[on(trigger)] fn f() {}"),
    (Fetch, "", "#[callback(on = after_step)] fn f() {}"),
    (Fetch, "\"a\", \"a\"", "#[callback(on = after_step)] fn f(a: f32, b: f32) {}"),
    (Fetch, "a", "#[callback(on = after_step)] fn f(a: f32) {}"),
    (Fetch, "\"a\"", "#[callback(on = trigger)] fn f(a: f32) {}"),
    (Fetch, "\"a\"", "#[callback(on = after_step)] #[fetch(\"b\")] fn f(a: f32, b: f32) {}"),
    (Fetch, "\"a\"", "#[callback(state)] impl X { #[on(after_step)] fn f(&mut self, a: f32) {} }"),
    (Order, "after = F", "#[callback(on = trigger)] fn f() {}"),
    (Order, "sideways = X", "#[callback(on = trigger)] fn f() {}"),
    (Order, "after = A", "#[callback(on = trigger)] #[order(before = B)] fn f() {}"),
    (Order, "after = A", "#[callback] impl X {}"),
    (Order, "after = A", "#[fetch(\"a\")] #[callback(on = trigger)] fn f(a: f32) {}"),
    // `#[derive(Callbacks)]`.
    (Derive, "", ""),
    (Derive, "", "struct"),
    (Derive, "", "fn f() {}"),
    (Derive, "", "impl for {}"),
    (Derive, "", "enum E { A }"),
    (Derive, "", "union U { a: u8 }"),
    (Derive, "", "struct S { a: A, b: A }"),
    (Derive, "", "struct S { #[every_k_steps(0)] a: A }"),
    (Derive, "", "struct S { #[every_k_steps] a: A }"),
    (Derive, "", "struct S { #[every_k_steps(\"x y\")] a: A }"),
    (Derive, "", "struct S { #[every_k_epochs(-1)] a: A }"),
    (Derive, "", "struct S { #[every_k_epochs(1.5)] a: A }"),
    (Derive, "", "struct S { #[every_k_epochs(99999999999999999999999)] a: A }"),
    (Derive, "", "struct S { #[every_k_epochs(1, 2)] a: A }"),
    (Derive, "", "struct S { #[enable_if(3)] a: A }"),
    (Derive, "", "struct S { #[enable_if] a: A }"),
    (Derive, "", "struct S { #[chief_only(3)] a: A }"),
    (Derive, "", "struct S { #[chief_only = true] a: A }"),
    (Derive, "", "struct S { #[order] a: A }"),
    (Derive, "", "struct S { #[order()] a: A }"),
    (Derive, "", "struct S { #[order(sideways = X)] a: A }"),
    (Derive, "", "struct S { #[order(after = [B,, C])] a: A }"),
    (Derive, "", "struct S { #[order(after = A)] a: A }"),
    (Derive, "", "struct S { #[order(after = x)] a: A }"),
    (Derive, "", "struct S { #[order(after = B)] #[order(before = C)] a: A }"),
    (Derive, "", "struct Ŝ { #[every_k_steps(0)] ä: Ä }"),
];

/// Odd but possibly valid inputs: they must not panic, and must parse back when they expand
/// without error.
const ODD: &[(Kind, &str, &str)] = &[
    (Callback, "on = r#trigger", "fn f() {}"),
    (Callback, "on = (trigger)", "fn f() {}"),
    (Callback, "on = trigger, every_k_steps = 3u8", "fn f() {}"),
    (Callback, "on = trigger, every_k_steps = 0x10", "fn f() {}"),
    (Callback, "on = trigger, every_k_steps = (2)", "fn f() {}"),
    (Callback, "on = trigger,", "fn f() {}"),
    (Callback, "on = trigger", "fn r#type() {}"),
    (Callback, "on = trigger", "fn __() {}"),
    (Callback, "on = trigger", "fn _() {}"),
    (Callback, "on = trigger", "fn ß_ǆ() {}"),
    (Callback, "on = trigger", "fn ŉ() {}"),
    (Callback, "on = trigger", "fn _ᾳ_x() {}"),
    (Callback, "on = trigger", "fn 変換() {}"),
    (Callback, "on = trigger", "pub(in crate::x) fn f() {}"),
    (Callback, "on = trigger", "#[doc = \"x\"] #[inline] fn f() where Self: Sized {}"),
    (Callback, "on = trigger", "fn f() -> impl Sized {}"),
    (Callback, "on = trigger", "fn f<'a>(ctx: &'a mut Context<'a, M>) {}"),
    (Callback, "on = trigger", "fn f(ctx: &mut burn_stoker::callback::Context<'_, <M as Tr>::Out>) {}"),
    (Callback, "on = trigger", "fn f(ctx: &mut Context<'_, dyn Module>) {}"),
    (Callback, "on = after_step", "#[fetch(\"a\")] fn f((a, b): (f32, f32)) {}"),
    (Callback, "on = after_step", "#[fetch(\"a\", \"b\",)] fn f(_: f32, _: Tensor) {}"),
    (Callback, "on = trigger", "#[callback(on = trigger)] fn f() {}"),
    (Callback, "on = trigger", "#[burn_stoker::order(after = A)] fn f() {}"),
    (Callback, "on = trigger", "#[order(after = r#A)] fn f() {}"),
    (Callback, "", "impl<'a> X<'a> { #[on(trigger)] fn f(&mut self) {} }"),
    (Callback, "", "unsafe impl X { #[on(trigger)] fn f(&mut self) {} }"),
    (Callback, "", "impl !X { #[on(trigger)] fn f(&mut self) {} }"),
    (Callback, "", "impl<const N: usize> X<N> { #[on(trigger)] fn f(&mut self) {} }"),
    (Callback, "", "impl X { #[on(trigger)] fn f(&mut self) {} #[on(trigger)] fn f(&mut self) {} }"),
    (Callback, "", "impl X { #[on(trigger)] fn f<M: Clone>(&mut self, ctx: &mut Context<'_, M>) {} }"),
    (Callback, "", "impl X { #[on(trigger)] fn f(self: &mut Self) {} }"),
    (Callback, "", "impl crate::a::X { #[on(trigger)] fn f(&mut self) {} }"),
    (Callback, "", "impl <X as Y>::Z { #[on(trigger)] fn f(&mut self) {} }"),
    (Fetch, "\"a\"", "#[callback(on = after_step)] #[callback(on = after_step)] fn f(a: f32) {}"),
    (Order, "after = A", "#[callback = \"x\"] fn f() {}"),
    (Derive, "", "struct r#Foo { a: A }"),
    (Derive, "", "struct S { _: A, b: B }"),
    (Derive, "", "struct S<const N: usize> { a: A }"),
    (Derive, "", "struct S<T = u8> where T: Clone { a: T }"),
    (Derive, "", "struct S { #[every_k_steps(3u8)] a: A, #[every_k_epochs((2))] b: B }"),
    (Derive, "", "struct S { a: A, b: crate::A, c: <A as X>::Y, d: [A; 2], e: (A,), f: &'static A }"),
    (Derive, "", "struct S { #[serde(skip)] #[doc = \"x\"] a: A }"),
    (Derive, "", "struct S { #[order(after = [])] a: A }"),
];

/// Long known mistakes, built here.
fn long_invalid() -> Vec<Input> {
    let n = |count: usize, f: &dyn Fn(usize) -> String, sep: &str| {
        (0..count).map(f).collect::<Vec<_>>().join(sep)
    };
    let mut out = vec![
        // 500 times the same key.
        Input::new(
            Callback,
            &format!("on = trigger, {}", n(500, &|_| "every_k_steps = 2".into(), ", ")),
            "fn f() {}",
        ),
        // 1000 unknown keys.
        Input::new(
            Callback,
            &format!("on = trigger, {}", n(1000, &|i| format!("k{i} = {i}"), ", ")),
            "fn f() {}",
        ),
        // 300 `#[fetch]` on one function.
        Input::new(
            Callback,
            "on = after_step",
            &format!("{} fn f(a: f32) {{}}", n(300, &|i| format!("#[fetch(\"v{i}\")]"), " ")),
        ),
        // 1000 names for one parameter.
        Input::new(
            Fetch,
            &n(1000, &|i| format!("\"v{i}\""), ", "),
            "#[callback(on = after_step)] fn f(a: f32) {}",
        ),
        // 1000 targets, one listed twice.
        Input::new(
            Order,
            &format!("after = [{}, A0]", n(1000, &|i| format!("A{i}"), ", ")),
            "#[callback(on = trigger)] fn f() {}",
        ),
        // 300 `#[on]` on one method.
        Input::new(
            Callback,
            "",
            &format!("impl X {{ {} fn f(&mut self) {{}} }}", n(300, &|_| "#[on(trigger)]".into(), " ")),
        ),
        // 500 hooks, one of them wrong.
        Input::new(
            Callback,
            "state",
            &format!(
                "impl X {{ {} #[on(nope)] fn broken(&mut self) {{}} }}",
                n(500, &|i| format!("#[on(trigger)] fn f{i}(&mut self) {{}}"), " ")
            ),
        ),
        // 400 fields of one type.
        Input::new(Derive, "", &format!("struct S {{ {} }}", n(400, &|i| format!("f{i}: A"), ", "))),
        // 300 period attributes on one field.
        Input::new(
            Derive,
            "",
            &format!("struct S {{ {} a: A }}", n(300, &|_| "#[every_k_steps(0)]".into(), " ")),
        ),
        // 200 `#[order]` on one field.
        Input::new(
            Derive,
            "",
            &format!("struct S {{ {} a: A }}", n(200, &|i| format!("#[order(after = B{i})]"), " ")),
        ),
    ];
    // An event 64 parentheses deep.
    let deep = format!("on = {}trigger{}", "(".repeat(64), ")".repeat(64));
    out.push(Input::new(Callback, &format!("{deep}, on = setup"), "fn f() {}"));
    out
}

/// What the macros made of an input: the output of every expansion step, or the panic message.
fn expand(input: &Input) -> Result<Vec<TokenStream>, String> {
    catch_unwind(AssertUnwindSafe(|| expand_unguarded(input))).map_err(|payload| {
        payload
            .downcast_ref::<&str>()
            .map(ToString::to_string)
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".into())
    })
}

fn expand_unguarded(input: &Input) -> Vec<TokenStream> {
    let (args, item) = (input.args.clone(), input.item.clone());
    match input.kind {
        Callback => vec![expand_callback(args, item)],
        Derive => vec![expand_derive(item)],
        Fetch | Order => {
            let name = if input.kind == Fetch { FETCH } else { ORDER };
            let mut outputs = vec![relocate(name, args, item)];
            // Go on as the compiler would: the next of our attributes on the item expands.
            while let Some(last) = outputs.last()
                && !has_error(last)
                && outputs.len() < 1000
            {
                match next_expansion(last) {
                    Some((output, done)) => {
                        outputs.push(output);
                        if done {
                            break;
                        }
                    }
                    None => break,
                }
            }
            outputs
        }
    }
}

/// Expand the first of `#[callback]`, `#[fetch]`, `#[order]` on the item `tokens`; with `true`
/// when that was `#[callback]`, after which none of ours is left.
fn next_expansion(tokens: &TokenStream) -> Option<(TokenStream, bool)> {
    let mut item: syn::Item = syn::parse2(tokens.clone()).ok()?;
    let attrs = match &mut item {
        syn::Item::Fn(f) => &mut f.attrs,
        syn::Item::Impl(i) => &mut i.attrs,
        _ => return None,
    };
    let names = [CALLBACK, FETCH, ORDER];
    let index = attrs.iter().position(|a| names.iter().any(|n| crate::attr::is_attr(a, *n)))?;
    let attr = attrs.remove(index);
    let args = match &attr.meta {
        syn::Meta::List(list) => list.tokens.clone(),
        syn::Meta::Path(_) => TokenStream::new(),
        // `#[callback = ...]` is refused by the compiler before any macro runs.
        syn::Meta::NameValue(_) => return None,
    };
    let rest = quote!(#item);
    if crate::attr::is_attr(&attr, CALLBACK) {
        Some((expand_callback(args, rest), true))
    } else if crate::attr::is_attr(&attr, FETCH) {
        Some((relocate(FETCH, args, rest), false))
    } else {
        Some((relocate(ORDER, args, rest), false))
    }
}

/// Whether `tokens` invoke `compile_error!` anywhere.
fn has_error(tokens: &TokenStream) -> bool {
    tokens.clone().into_iter().any(|tree| match tree {
        TokenTree::Ident(ident) => ident == "compile_error",
        TokenTree::Group(group) => has_error(&group.stream()),
        _ => false,
    })
}

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

    /// A number in `0..n` (0 when `n` is 0).
    fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { (self.next() % n as u64) as usize }
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Identifiers a mutation puts in place of another: events, keys, keywords, odd names.
const IDENTS: &[&str] = &[
    "setup",
    "before_train",
    "before_epoch",
    "before_step",
    "after_step",
    "trigger_step",
    "after_epoch",
    "trigger_epoch",
    "trigger",
    "after_train",
    "on",
    "every_k_steps",
    "every_k_epochs",
    "enable_if",
    "chief_only",
    "training_batches",
    "validation_batches",
    "name",
    "state",
    "callback",
    "fetch",
    "order",
    "after",
    "before",
    "self",
    "Self",
    "async",
    "impl",
    "fn",
    "unsafe",
    "const",
    "mut",
    "dyn",
    "where",
    "struct",
    "crate",
    "super",
    "extern",
    "true",
    "Context",
    "Flow",
    "Result",
    "_",
    "_1",
    "self_",
    "r#type",
    "r#fn",
    "ünïcode",
    "Ĉontext",
];

fn pool_ident(rng: &mut Rng) -> TokenTree {
    let name = rng.pick(IDENTS);
    TokenTree::Ident(match name.strip_prefix("r#") {
        Some(raw) => Ident::new_raw(raw, Span::call_site()),
        None => Ident::new(name, Span::call_site()),
    })
}

/// A literal of some kind (or `true` / `false`, identifiers to the tokenizer).
fn pool_literal(rng: &mut Rng) -> TokenTree {
    let literal = match rng.below(19) {
        0 => Literal::u64_unsuffixed(0),
        1 => Literal::i64_unsuffixed(-1),
        2 => Literal::f64_unsuffixed(1.5),
        3 => Literal::string(""),
        4 => Literal::string("x y"),
        5 => return TokenTree::Ident(Ident::new("true", Span::call_site())),
        6 => return TokenTree::Ident(Ident::new("false", Span::call_site())),
        7 => Literal::u8_suffixed(3),
        8 => Literal::character('c'),
        9 => Literal::byte_string(b"b"),
        10 => Literal::string("r#fn"),
        11 => Literal::string(" Padded "),
        12 => Literal::string("Dump // note"),
        13 => Literal::u128_unsuffixed(u128::MAX),
        14 => Literal::string("ünïcode"),
        15 => Literal::string("self"),
        16 => Literal::u64_suffixed(u64::MAX),
        17 => Literal::string("Fine"),
        _ => Literal::u64_unsuffixed(2),
    };
    TokenTree::Literal(literal)
}

const DELIMITERS: &[Delimiter] =
    &[Delimiter::Parenthesis, Delimiter::Bracket, Delimiter::Brace, Delimiter::None];

fn random_token(rng: &mut Rng) -> TokenTree {
    match rng.below(4) {
        0 => pool_ident(rng),
        1 => pool_literal(rng),
        2 => {
            let ch = *rng.pick(&['=', ',', '#', ':', '&', '<', '>', '-', '\'', '!', ';', '.']);
            let spacing = if rng.below(2) == 0 { Spacing::Alone } else { Spacing::Joint };
            TokenTree::Punct(Punct::new(ch, spacing))
        }
        _ => TokenTree::Group(Group::new(*rng.pick(DELIMITERS), TokenStream::new())),
    }
}

/// The address of every token: its index in each enclosing stream, outermost first.
fn addresses(stream: &TokenStream, prefix: &mut Vec<usize>, out: &mut Vec<(Vec<usize>, TokenTree)>) {
    for (i, tree) in stream.clone().into_iter().enumerate() {
        prefix.push(i);
        out.push((prefix.clone(), tree.clone()));
        if let TokenTree::Group(group) = &tree {
            addresses(&group.stream(), prefix, out);
        }
        prefix.pop();
    }
}

/// Apply `f` to the stream that holds the token at `path` (with its index there), rebuilding the
/// groups around it.
fn edit(stream: TokenStream, path: &[usize], f: &mut dyn FnMut(&mut Vec<TokenTree>, usize)) -> TokenStream {
    let mut trees: Vec<TokenTree> = stream.into_iter().collect();
    match path {
        [] => {}
        [i] => f(&mut trees, *i),
        [i, rest @ ..] => {
            if let Some(TokenTree::Group(group)) = trees.get(*i).cloned() {
                let mut nested = Group::new(group.delimiter(), edit(group.stream(), rest, f));
                nested.set_span(group.span());
                trees[*i] = TokenTree::Group(nested);
            }
        }
    }
    trees.into_iter().collect()
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Drop,
    Duplicate,
    Swap,
    ReplaceIdent,
    ReplaceLiteral,
    Truncate,
    WrapToken,
    WrapAll,
    Redelimit,
    EmptyGroup,
    Insert,
    /// Arguments only: `#[callback()]`.
    EmptyArgs,
}

const OPS: &[Op] = &[
    Op::Drop,
    Op::Duplicate,
    Op::Swap,
    Op::ReplaceIdent,
    Op::ReplaceLiteral,
    Op::Truncate,
    Op::WrapToken,
    Op::WrapAll,
    Op::Redelimit,
    Op::EmptyGroup,
    Op::Insert,
    Op::EmptyArgs,
];

/// One edit of `stream` at a random depth.
fn mutate(stream: TokenStream, rng: &mut Rng, is_args: bool) -> TokenStream {
    let ops = if is_args { OPS } else { &OPS[..OPS.len() - 1] };
    let op = *rng.pick(ops);
    let mut all = Vec::new();
    addresses(&stream, &mut Vec::new(), &mut all);
    let fits = |tree: &TokenTree| match op {
        Op::ReplaceIdent => matches!(tree, TokenTree::Ident(_)),
        Op::ReplaceLiteral => {
            matches!(tree, TokenTree::Literal(_))
                || matches!(tree, TokenTree::Ident(i) if i == "true" || i == "false")
        }
        Op::Redelimit | Op::EmptyGroup => matches!(tree, TokenTree::Group(_)),
        _ => true,
    };
    let candidates: Vec<&Vec<usize>> =
        all.iter().filter(|(_, tree)| fits(tree)).map(|(path, _)| path).collect();
    match op {
        Op::EmptyArgs => return TokenStream::new(),
        Op::WrapAll => return TokenTree::Group(Group::new(*rng.pick(DELIMITERS), stream)).into(),
        _ => {}
    }
    let Some(path) = candidates.get(rng.below(candidates.len())).map(|p| p.to_vec()) else {
        // Nothing fits (an empty stream, no literal): insert a token instead.
        let token = random_token(rng);
        let path = all.get(rng.below(all.len())).map_or(vec![0], |(p, _)| p.clone());
        return edit(stream, &path, &mut |trees, i| trees.insert(i.min(trees.len()), token.clone()));
    };
    let token = match op {
        Op::ReplaceIdent => pool_ident(rng),
        Op::ReplaceLiteral => pool_literal(rng),
        _ => random_token(rng),
    };
    let delimiter = *rng.pick(DELIMITERS);
    edit(stream, &path, &mut |trees, i| match op {
        Op::Drop => {
            trees.remove(i);
        }
        Op::Duplicate => {
            let copy = trees[i].clone();
            trees.insert(i, copy);
        }
        Op::Swap if i + 1 < trees.len() => trees.swap(i, i + 1),
        Op::Swap if i > 0 => trees.swap(i - 1, i),
        Op::Truncate => trees.truncate(i),
        Op::ReplaceIdent | Op::ReplaceLiteral => trees[i] = token.clone(),
        Op::WrapToken => {
            let inner: TokenStream = std::iter::once(trees[i].clone()).collect();
            trees[i] = TokenTree::Group(Group::new(delimiter, inner));
        }
        Op::Redelimit | Op::EmptyGroup => {
            if let TokenTree::Group(group) = &trees[i] {
                let inner = if matches!(op, Op::EmptyGroup) { TokenStream::new() } else { group.stream() };
                trees[i] = TokenTree::Group(Group::new(delimiter, inner));
            }
        }
        _ => trees.insert(i, token.clone()),
    })
}

fn seeds() -> Vec<Input> {
    SEEDS.iter().map(|(kind, args, item)| Input::new(*kind, args, item)).collect()
}

/// Rounds of mutation over the seeds: about 3500 distinct mutants, well under a second in release.
const ROUNDS: usize = 200;

/// Mutants of the seeds, one to three edits each, to the arguments, the item or both; the same
/// ones on every run, without repeats.
fn mutants() -> Vec<Input> {
    let mut rng = Rng(0x5EED_CAFE);
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for _round in 0..ROUNDS {
        for seed in seeds() {
            let mut input = seed;
            for _ in 0..=rng.below(3) {
                if input.kind != Derive && rng.below(3) == 0 {
                    input.args = mutate(input.args, &mut rng, true);
                } else {
                    input.item = mutate(input.item, &mut rng, false);
                }
            }
            if seen.insert(input.show()) {
                out.push(input);
            }
        }
    }
    out
}

fn odd() -> Vec<Input> {
    ODD.iter().map(|(kind, args, item)| Input::new(*kind, args, item)).collect()
}

/// Fail with every problem found, not only the first.
fn report(what: &str, failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{} {what}:\n\n{}",
        failures.len(),
        failures.iter().take(20).cloned().collect::<Vec<_>>().join("\n\n")
    );
}

/// Each output parses as a file; the problems in `failures`.
fn check_parses(input: &Input, outputs: &[TokenStream], failures: &mut Vec<String>) {
    for output in outputs {
        if let Err(error) = syn::parse2::<syn::File>(output.clone()) {
            failures.push(format!("{}\n=> {error}: {output}", input.show()));
        }
    }
}

#[test]
fn valid_seeds_expand_without_errors_to_parseable_code() {
    let mut failures = Vec::new();
    for input in seeds() {
        match expand(&input) {
            Err(panic) => failures.push(format!("{}\n=> panicked: {panic}", input.show())),
            Ok(outputs) if outputs.iter().any(has_error) => failures.push(format!(
                "{}\n=> an error: {}",
                input.show(),
                outputs.last().cloned().unwrap_or_default()
            )),
            Ok(outputs) => {
                if matches!(input.kind, Fetch | Order) {
                    // Relocated, then expanded by `#[callback]`.
                    assert!(outputs.len() >= 2, "{} was only relocated", input.show());
                }
                check_parses(&input, &outputs, &mut failures);
            }
        }
    }
    report("valid seeds failed", &failures);
}

#[test]
fn known_mistakes_are_compile_errors() {
    let mut failures = Vec::new();
    let inputs: Vec<Input> = INVALID
        .iter()
        .map(|(kind, args, item)| Input::new(*kind, args, item))
        .chain(long_invalid())
        .collect();
    for input in &inputs {
        match expand(input) {
            Err(panic) => failures.push(format!("{}\n=> panicked: {panic}", input.show())),
            Ok(outputs) if !outputs.iter().any(has_error) => failures.push(format!(
                "{}\n=> no error: {}",
                input.show(),
                outputs.last().cloned().unwrap_or_default()
            )),
            Ok(_) => {}
        }
    }
    eprintln!("{} known mistakes, each a compile_error!", inputs.len());
    report("known mistakes failed", &failures);
}

#[test]
fn mutants_and_odd_inputs_never_panic() {
    let mutants = mutants();
    let odd = odd();
    let mut failures = Vec::new();
    let mut still_valid = 0;
    let mut odd_valid = 0;
    for (input, is_mutant) in mutants.iter().map(|m| (m, true)).chain(odd.iter().map(|o| (o, false))) {
        match expand(input) {
            Err(panic) => failures.push(format!("{}\n=> panicked: {panic}", input.show())),
            Ok(outputs) => {
                if outputs.iter().any(TokenStream::is_empty) {
                    failures.push(format!("{}\n=> an empty output", input.show()));
                }
                if !outputs.iter().any(has_error) {
                    if is_mutant {
                        still_valid += 1;
                    } else {
                        odd_valid += 1;
                    }
                }
            }
        }
    }
    eprintln!(
        "{} inputs: {} seeds, {} known mistakes, {} odd inputs ({odd_valid} valid), {} mutants ({still_valid} still valid)",
        SEEDS.len() + INVALID.len() + long_invalid().len() + odd.len() + mutants.len(),
        SEEDS.len(),
        INVALID.len() + long_invalid().len(),
        odd.len(),
        mutants.len(),
    );
    assert!(mutants.len() >= 1000, "only {} distinct mutants", mutants.len());
    report("inputs panicked or expanded to nothing", &failures);
}

#[test]
fn outputs_without_errors_parse_back() {
    let mut failures = Vec::new();
    let mut skipped = 0;
    for input in mutants().iter().chain(&odd()) {
        if rustc_refuses(input) {
            skipped += 1;
            continue;
        }
        if let Ok(outputs) = expand(input)
            && !outputs.iter().any(has_error)
        {
            check_parses(input, &outputs, &mut failures);
        }
    }
    eprintln!("{skipped} inputs skipped: syn parses them, rustc refuses them before any derive runs");
    report("outputs without errors do not parse", &failures);
}

/// Whether the compiler refuses `input` before a macro sees it although syn parses it: a field
/// named `_` (syn still reads the removed `unnamed_fields` syntax; rustc says "expected
/// identifier, found reserved identifier `_`" and the derive never runs).
fn rustc_refuses(input: &Input) -> bool {
    input.kind == Derive
        && syn::parse2::<syn::DeriveInput>(input.item.clone()).is_ok_and(|item| match &item.data {
            syn::Data::Struct(data) => data.fields.iter().any(|f| f.ident.as_ref().is_some_and(|i| i == "_")),
            _ => false,
        })
}
