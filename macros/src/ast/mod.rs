//! The typed view of the input: a callback function, or an impl block whose methods are hooks.
//!
//! This file holds the hooks and the two forms of `#[callback]`; `signature.rs` reads a hook's
//! signature (its parameters, the context and its model), `composition.rs` the struct of
//! `#[derive(Callbacks)]`.

mod composition;
mod signature;

pub use composition::{Composition, Field};

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{Ident, ImplItem, ImplItemFn, ItemFn, ItemImpl, ReturnType, Type, TypeParamBound};

use crate::attr::{self, FetchAttr, HookArgs, OrderAttr, Place, struct_ident};
use crate::ctxt::{Attr, Ctxt};
use crate::event::EventKind;
use crate::symbol::*;
use signature::read_signature;

/// The model type a hook's context names.
#[derive(Clone)]
#[allow(clippy::large_enum_variant)]
pub enum Model {
    /// `Context<'_, impl Module>`: any model with these bounds.
    Impl(syn::punctuated::Punctuated<TypeParamBound, syn::Token![+]>),
    /// `Context<'_, M>` where `M` is a generic parameter of the function.
    Generic(Ident),
    /// `Context<'_, Mlp>`.
    Concrete(Type),
}

/// One parameter of a hook (the receiver excluded).
pub enum Param {
    /// `ctx: &mut Context<'_, M>`.
    Context { model: Model },
    /// A fetched value.
    Value { ty: Type },
}

/// A function bound to an event: the function form's function, or a method of the impl form.
pub struct Hook {
    pub ident: Ident,
    pub event: Option<EventKind>,
    pub args: HookArgs,
    pub fetch: Option<FetchAttr>,
    pub params: Vec<Param>,
    pub output: ReturnType,
    pub span: Span,
}

impl Hook {
    /// The event's name, empty when it is missing or unknown (already reported).
    pub fn event_name(&self) -> &'static str {
        self.event.map_or("", EventKind::name)
    }
    pub fn model(&self) -> Option<&Model> {
        self.params.iter().find_map(|p| match p {
            Param::Context { model } => Some(model),
            Param::Value { .. } => None,
        })
    }
    pub fn values(&self) -> impl Iterator<Item = &Type> {
        self.params.iter().filter_map(|p| match p {
            Param::Value { ty } => Some(ty),
            Param::Context { .. } => None,
        })
    }
}

/// `#[callback(...)]` on a function.
pub struct CallbackFn {
    pub item: ItemFn,
    pub hook: Hook,
    pub order: Option<OrderAttr>,
    /// The struct's name.
    pub name: Ident,
}

/// `#[callback(...)]` on an impl block.
pub struct CallbackImpl {
    pub item: ItemImpl,
    pub args: HookArgs,
    pub hooks: Vec<Hook>,
    pub order: Option<OrderAttr>,
    pub name: String,
}

/// Take `#[fetch]` and `#[order]` out of `attrs`, parsed.
pub fn take_attrs(
    attrs: &mut Vec<syn::Attribute>,
    errors: &Ctxt,
) -> (Option<FetchAttr>, Option<OrderAttr>, Option<syn::Attribute>) {
    let mut fetch =
        Attr::with_duplicate(errors, "a second `#[fetch]`: list every name in one `#[fetch(\"a\", \"b\")]`");
    let mut order = Attr::with_duplicate(
        errors,
        "a second `#[order]`: put every constraint in one `#[order(after = A, before = B)]`",
    );
    let mut on = Attr::with_duplicate(
        errors,
        "a second `#[on]`: a method is bound to one event; write another method for another event",
    );
    let mut kept = Vec::new();
    for attr in attrs.drain(..) {
        if attr::is_attr(&attr, FETCH) {
            let parsed = attr::parse_fetch(&attr, errors);
            if let Some(second) = fetch.set(&attr, parsed) {
                // Its names still count, so that the parameters are not reported as unnamed.
                let first = fetch.get_mut().expect("set before");
                first.names.extend(second.names);
                first.count += second.count;
            }
        } else if attr::is_attr(&attr, ORDER) {
            if order.get_mut().is_some() {
                // Reported without reading the second one's constraints.
                order.set(&attr, OrderAttr::default());
            } else {
                order.set(&attr, attr::parse_order(&attr, errors));
            }
        } else if attr::is_attr(&attr, ON) {
            on.set(&attr, attr.clone());
        } else {
            kept.push(attr);
        }
    }
    let (fetch, order, on) = (fetch.get(), order.get(), on.get());
    *attrs = kept;
    (fetch, order, on)
}

/// `snake_case` → `UpperCamelCase`.
pub fn camel_case(name: &str) -> String {
    name.trim_start_matches("r#")
        .split('_')
        .filter(|s| !s.is_empty())
        .map(|s| {
            let mut chars = s.chars();
            chars.next().map(|c| c.to_uppercase().chain(chars).collect::<String>()).unwrap_or_default()
        })
        .collect()
}

impl CallbackFn {
    pub fn from_syn(args: HookArgs, mut item: ItemFn, errors: &Ctxt) -> CallbackFn {
        let (fetch, order, on) = take_attrs(&mut item.attrs, errors);
        if let Some(on) = on {
            errors.push_spanned(&on, "`#[on]` marks the methods of a `#[callback]` impl; on a function, write the event in `#[callback(on = EVENT)]`");
        }
        let params = read_signature(&item.sig, false, errors);
        // `Ident::new` panics on a string that is not an identifier: names are parsed instead.
        let fallback = || Ident::new("Callback", item.sig.ident.span());
        let name = match &args.name {
            Some(name) => struct_ident(&name.value(), name.span()).unwrap_or_else(fallback),
            None => {
                let camel = camel_case(&item.sig.ident.to_string());
                match struct_ident(&camel, item.sig.ident.span()) {
                    Some(ident) => ident,
                    None if camel.is_empty() => fallback(),
                    None => {
                        errors.push(
                            item.sig.ident.span(),
                            format!("the struct made of `fn {}` would be named `{camel}`, which is not an identifier: name it with `#[callback(name = \"...\")]`", item.sig.ident),
                        );
                        fallback()
                    }
                }
            }
        };
        let hook = Hook {
            ident: item.sig.ident.clone(),
            event: args.on,
            span: item.sig.ident.span(),
            args,
            fetch,
            params,
            output: item.sig.output.clone(),
        };
        CallbackFn { item, hook, order, name }
    }
}

impl CallbackImpl {
    pub fn from_syn(args: HookArgs, mut item: ItemImpl, errors: &Ctxt) -> CallbackImpl {
        let (fetch, order, on) = take_attrs(&mut item.attrs, errors);
        if let Some(fetch) = fetch {
            errors.push_spanned(
                &fetch.tokens,
                "`#[fetch]` goes on the method that receives the values, under its `#[on(after_step)]`",
            );
        }
        if let Some(on) = on {
            errors.push_spanned(&on, "`#[on]` goes on the methods of the impl, not on the impl");
        }
        if let Some((_, trait_path, _)) = &item.trait_ {
            errors.push(
                trait_path.span(),
                "`#[callback]` goes on an inherent impl (`impl MyCallback { ... }`), not on a trait impl",
            );
        }
        let mut hooks = Vec::new();
        for impl_item in &mut item.items {
            let ImplItem::Fn(method) = impl_item else { continue };
            if let Some(hook) = read_method(method, errors) {
                hooks.push(hook);
            }
        }
        if hooks.is_empty() && item.trait_.is_none() {
            errors.push(item.self_ty.span(), "this `#[callback]` impl has no hook: mark a method with `#[on(EVENT)]`, e.g. `#[on(trigger)]`");
        }
        let name = match &args.name {
            Some(name) => name.value(),
            None => match &*item.self_ty {
                Type::Path(path) => attr::path_name(&path.path),
                other => {
                    errors.push(other.span(), "`#[callback]` goes on the impl of a named type");
                    String::from("Callback")
                }
            },
        };
        CallbackImpl { item, args, hooks, order, name }
    }
}

fn read_method(method: &mut ImplItemFn, errors: &Ctxt) -> Option<Hook> {
    let order_attr = method.attrs.iter().find(|a| attr::is_attr(a, ORDER)).cloned();
    let (fetch, order, on) = take_attrs(&mut method.attrs, errors);
    if let (Some(_), Some(order_attr)) = (order, order_attr) {
        errors.push_spanned(order_attr, "`#[order]` applies to the whole callback: put it on the impl block");
    }
    let Some(on) = on else {
        if let Some(fetch) = fetch {
            errors.push_spanned(
                &fetch.tokens,
                "`#[fetch]` needs an event: add `#[on(after_step)]` to this method",
            );
        }
        return None;
    };
    let tokens = match &on.meta {
        syn::Meta::List(list) if !list.tokens.is_empty() => list.tokens.clone(),
        _ => {
            errors.push_spanned(&on, "`#[on]` names an event: `#[on(trigger)]`");
            proc_macro2::TokenStream::new()
        }
    };
    let mut args = attr::parse_hook_args(tokens, Place::Method, errors);
    if args.on.is_none() {
        // Every way of leaving the event out was reported above or by `parse_hook_args`.
        args.incomplete = true;
    }
    let params = read_signature(&method.sig, true, errors);
    Some(Hook {
        ident: method.sig.ident.clone(),
        event: args.on,
        span: method.sig.ident.span(),
        args,
        fetch,
        params,
        output: method.sig.output.clone(),
    })
}
