//! stoker's macros: `#[callback]`, `#[fetch]`, `#[order]` and `#[derive(Callbacks)]`. Use them
//! through the `burn_stoker` crate, which re-exports them; the documentation with examples is there.
//!
//! The crate is split by step, as thiserror-impl is: `attr` parses attributes, `ast` builds the
//! typed view of the input, `valid` checks the misuse rules, `expand` generates code, and
//! `fallback` emits what goes next to errors. Below them, as in serde_derive: `symbol` holds the
//! attribute words, `ctxt` the error collector (every error of one input is reported at once)
//! and `Attr` (a value given twice is an error), and `event` the one list of events.
//!
//! A step that outgrew one file is a folder, one file per concept: `attr/` has `mod.rs` (the
//! helpers every attribute shares: suggestions, periods, booleans, the `crate` path), `hook.rs`
//! (the arguments of `#[callback(...)]` and `#[on(...)]`), `fetch.rs` (`#[fetch(...)]`) and
//! `order.rs` (`#[order(...)]`); `ast/` has `mod.rs` (hooks, the function and impl forms),
//! `signature.rs` (a hook's signature and the model its context names) and `composition.rs`
//! (the struct of `#[derive(Callbacks)]`); `expand/` has `mod.rs` (the runtime's path and what
//! every expansion shares), `hook.rs` (the trait methods a set of hooks fills: gates, fetches,
//! calls), `callback.rs` (the struct, function and impl of `#[callback]`) and `derive.rs` (the
//! `Callbacks` impl of `#[derive(Callbacks)]`).

mod ast;
mod attr;
mod ctxt;
mod event;
mod expand;
mod fallback;
mod symbol;
mod valid;

#[cfg(test)]
mod tests;

use proc_macro2::TokenStream;
use quote::quote;
use syn::spanned::Spanned;

use attr::Place;
use ctxt::Ctxt;
use symbol::{CALLBACK, FETCH, ORDER, Symbol};

/// Turn a function or an impl block into a callback.
///
/// On a function: `#[callback(on = EVENT, every_k_steps = N, every_k_epochs = N, before_train =
/// bool, enable_if = path, chief_only = bool, name = "Name")]` generates a unit struct named after
/// the function in UpperCamelCase (or `name`) that implements `burn_stoker::callback::Callback`. The function
/// takes an optional `ctx: &mut Context<'_, M>` and, on `after_step`, the values named by
/// `#[fetch]`; it returns `()`, `burn_stoker::Result<()>`, `burn_stoker::callback::Flow` or `Result<Flow>`.
/// On `trigger`, the periods mean tensorpack's `PeriodicTrigger`; on step and epoch events,
/// `PeriodicCallback` (with `every_k_epochs`, the last step and epoch are delivered too). An
/// `enable_if` predicate is read as `EnableCallbackIf` reads it: before the step for
/// `before_step` and `after_step` (and the fetches), after the step for `trigger_step`.
///
/// Generated code names the runtime `::burn_stoker`; a crate that renamed the dependency says
/// where it is with `crate = "path"` (serde's `#[serde(crate = "...")]`), on a function or an
/// impl block: `#[callback(on = trigger, crate = "stoker")]`.
///
/// On an inherent impl block (`#[callback]`, `#[callback(state)]` to save the value in
/// checkpoints with serde, `name`, `chief_only`), methods marked `#[on(EVENT, every_k_steps =
/// N, ...)]` are bound to events; the other methods stay plain.
///
/// Examples (compiled as doc tests of `burn-stoker`, which re-exports this macro): `burn_stoker::callback`.
#[proc_macro_attribute]
pub fn callback(args: proc_macro::TokenStream, item: proc_macro::TokenStream) -> proc_macro::TokenStream {
    expand_callback(args.into(), item.into()).into()
}

/// Values fetched along with a step, bound in order to the value parameters of an `after_step`
/// callback. All host values asked for at a step leave the device in one transfer; a `Tensor`
/// parameter gets the device tensor without any. With the word `deferred` in the list
/// (`#[fetch("loss", deferred)]`) the host values are read back without the step waiting for
/// them, and the function runs when they arrive, after a later step (the `fetched` event); a
/// `Tensor` parameter cannot be deferred.
///
/// Examples (compiled as doc tests of `burn-stoker`, which re-exports this macro): `burn_stoker::fetch`.
#[proc_macro_attribute]
pub fn fetch(args: proc_macro::TokenStream, item: proc_macro::TokenStream) -> proc_macro::TokenStream {
    relocate(FETCH, args.into(), item.into()).into()
}

/// Ordering constraints of a callback within every event: `#[order(after = A, before = B)]`,
/// `after = [A, B]` for several. Targets are callback types in scope, checked by the compiler:
/// a type made by `#[callback]`, a built-in callback, or a hand-written one that implements
/// `burn_stoker::kind::CallbackKind` (one line). The trainer sorts the callbacks topologically by the
/// targets' `CallbackKind::NAME` and reports cycles and missing targets by name.
///
/// A numeric order, fastai's `order` (lower runs first, default 0), goes beside them:
/// `#[order(-9)]`, `#[order(value = -9)]`, `#[order(after = A, value = 1)]`. The constraints come
/// first; among the callbacks they leave free, the lowest value runs first, then the earliest
/// registered.
///
/// Examples (compiled as doc tests of `burn-stoker`, which re-exports this macro): `burn_stoker::order`.
#[proc_macro_attribute]
pub fn order(args: proc_macro::TokenStream, item: proc_macro::TokenStream) -> proc_macro::TokenStream {
    relocate(ORDER, args.into(), item.into()).into()
}

/// Make a struct whose fields are callbacks (or sets of callbacks) one set of callbacks,
/// dispatched statically. Fields take `#[order(after = X, before = Y)]`, `#[every_k_steps(N)]`,
/// `#[every_k_epochs(N)]` (`PeriodicCallback`'s gating), `#[enable_if(path)]` and
/// `#[chief_only]` / `#[chief_only(false)]`. Every field is a callback or a set of callbacks
/// (`burn_stoker::kind::CallbackField`), checked on the field. On the struct,
/// `#[callbacks(crate = "path")]` names a renamed runtime.
///
/// Examples (compiled as doc tests of `burn-stoker`, which re-exports this macro): `burn_stoker::Callbacks`.
#[proc_macro_derive(
    Callbacks,
    attributes(callbacks, order, every_k_steps, every_k_epochs, enable_if, chief_only)
)]
pub fn derive_callbacks(input: proc_macro::TokenStream) -> proc_macro::TokenStream {
    expand_derive(input.into()).into()
}

/// Not for users: the macros' list of events as data, `[(name, gated, parameter), ...]` in order
/// (`parameter`: the `(name, type)` of the value the event's method takes, if any), which the
/// runtime's tests compare with its own list (`for_each_event!`): a proc-macro crate exports
/// only macros, and cannot read the runtime's list.
#[doc(hidden)]
#[proc_macro]
pub fn __event_table(input: proc_macro::TokenStream) -> proc_macro::TokenStream {
    if !input.is_empty() {
        return quote!(::core::compile_error!("`__event_table!()` takes no input")).into();
    }
    event::EventKind::table().into()
}

/// The expansion of `#[callback(args)] item`, on token streams (so that tests can feed it anything).
pub(crate) fn expand_callback(args: TokenStream, item: TokenStream) -> TokenStream {
    let item: syn::Item = match syn::parse2(item.clone()) {
        Ok(item) => item,
        Err(error) => {
            let error = error.to_compile_error();
            return quote!(#error #item);
        }
    };
    // A missing event is reported on the whole `#[callback(...)]` attribute.
    let args_span = proc_macro2::Span::call_site();
    match item {
        syn::Item::Fn(function) => {
            let errors = Ctxt::new();
            let args = attr::parse_hook_args(args, Place::Function, &errors);
            let input = ast::CallbackFn::from_syn(args, function, &errors);
            valid::hook(&input.hook, &errors, args_span);
            if let Some(order) = &input.order {
                valid::order(order, &input.name.to_string(), &errors);
            }
            match errors.check() {
                Ok(()) => expand::callback_fn(&input),
                Err(mut out) => {
                    out.extend(fallback::callback_fn(&input));
                    out
                }
            }
        }
        syn::Item::Impl(block) => {
            let errors = Ctxt::new();
            let args = attr::parse_hook_args(args, Place::Impl, &errors);
            let input = ast::CallbackImpl::from_syn(args, block, &errors);
            for hook in &input.hooks {
                valid::hook(hook, &errors, hook.span);
            }
            if let Some(order) = &input.order {
                valid::order(order, &input.name, &errors);
            }
            match errors.check() {
                Ok(()) => expand::callback_impl(&input),
                Err(mut out) => {
                    out.extend(fallback::callback_impl(&input));
                    out
                }
            }
        }
        other => {
            let what = match &other {
                syn::Item::Struct(_) => {
                    "a struct: for a struct of callbacks use `#[derive(Callbacks)]`; for a callback with state, put `#[callback]` on its impl block"
                }
                syn::Item::Enum(_) => "an enum",
                syn::Item::Union(_) => "a union",
                syn::Item::Trait(_) => "a trait",
                syn::Item::Const(_) => "a constant",
                syn::Item::Static(_) => "a static",
                syn::Item::Type(_) => "a type alias",
                syn::Item::Mod(_) => "a module",
                _ => "this item",
            };
            let message = format!("`#[callback]` goes on a function or an impl block, not on {what}");
            let error = syn::Error::new(item_span(&other), message).to_compile_error();
            quote!(#error #other)
        }
    }
}

fn item_span(item: &syn::Item) -> proc_macro2::Span {
    match item {
        syn::Item::Struct(s) => s.ident.span(),
        syn::Item::Enum(e) => e.ident.span(),
        syn::Item::Union(u) => u.ident.span(),
        syn::Item::Trait(t) => t.ident.span(),
        syn::Item::Const(c) => c.ident.span(),
        syn::Item::Static(s) => s.ident.span(),
        syn::Item::Type(t) => t.ident.span(),
        syn::Item::Mod(m) => m.ident.span(),
        other => other.span(),
    }
}

/// `#[fetch]` / `#[order]` written above `#[callback]` run first: move them below it, where
/// `#[callback]` reads them. Anywhere else they are an error.
pub(crate) fn relocate(name: Symbol, args: TokenStream, item: TokenStream) -> TokenStream {
    let ident = syn::Ident::new(name.as_str(), proc_macro2::Span::call_site());
    let mut parsed: syn::Item = match syn::parse2(item.clone()) {
        Ok(parsed) => parsed,
        Err(error) => {
            let error = error.to_compile_error();
            return quote!(#error #item);
        }
    };
    let attrs = match &mut parsed {
        syn::Item::Fn(f) => Some(&mut f.attrs),
        syn::Item::Impl(i) => Some(&mut i.attrs),
        _ => None,
    };
    let Some(attrs) = attrs.filter(|attrs| attrs.iter().any(|a| attr::is_attr(a, CALLBACK))) else {
        let message = format!(
            "`#[{name}]` works with `#[callback]`: write `#[callback(...)]` on this item, with `#[{name}(...)]` under it"
        );
        let error = syn::Error::new(proc_macro2::Span::call_site(), message).to_compile_error();
        return quote!(#error #item);
    };
    let position = attrs.iter().position(|a| attr::is_attr(a, CALLBACK)).expect("found above");
    let moved: syn::Attribute = syn::parse_quote!(#[#ident(#args)]);
    attrs.insert(position + 1, moved);
    quote!(#parsed)
}

pub(crate) fn expand_derive(input: TokenStream) -> TokenStream {
    let input: syn::DeriveInput = match syn::parse2(input) {
        Ok(input) => input,
        Err(error) => return error.to_compile_error(),
    };
    let errors = Ctxt::new();
    let composition = ast::Composition::from_syn(&input, &errors);
    let mut seen: Vec<(String, &syn::Type)> = Vec::new();
    for field in &composition.fields {
        let ty = &field.ty;
        let key = quote!(#ty).to_string();
        if seen.iter().any(|(k, _)| *k == key) {
            errors.push_spanned(
                ty,
                format!("a second callback of type `{key}`: two callbacks of one type have one name, so order constraints could not tell them apart; wrap one in a type of its own, or make one with `#[callback(name = \"...\")]`"),
            );
        }
        seen.push((key, ty));
        if let Some(order) = &field.order {
            valid::order(order, &attr::path_name(&type_path(ty)), &errors);
        }
    }
    match errors.check() {
        Ok(()) => expand::derive_callbacks(&composition),
        Err(mut out) => {
            out.extend(fallback::composition(&composition));
            out
        }
    }
}

fn type_path(ty: &syn::Type) -> syn::Path {
    match ty {
        syn::Type::Path(p) => p.path.clone(),
        _ => syn::parse_quote!(__NotAPath),
    }
}
