//! The typed view of the input: a callback function, or an impl block whose methods are hooks.

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{
    FnArg, GenericArgument, GenericParam, Ident, ImplItem, ImplItemFn, ItemFn, ItemImpl, Pat, PathArguments,
    ReturnType, Signature, Type, TypeParamBound,
};

use crate::attr::{self, FetchAttr, HookArgs, OrderAttr, Place, struct_ident};
use crate::ctxt::{Attr, Ctxt};
use crate::event::EventKind;
use crate::symbol::*;

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

/// `&mut Context<'_, X>` → the model `X`.
fn context_model(ty: &Type, generics: &[Ident], errors: &Ctxt) -> Option<Model> {
    let (mutable, inner) = match ty {
        Type::Reference(reference) => (Some(reference.mutability.is_some()), &*reference.elem),
        other => (None, other),
    };
    let Type::Path(path) = inner else { return None };
    let last = path.path.segments.last()?;
    if last.ident != "Context" {
        return None;
    }
    match mutable {
        Some(true) => {}
        Some(false) => {
            errors.push_spanned(ty, "the context is taken by mutable reference: `ctx: &mut Context<'_, M>`")
        }
        None => errors.push_spanned(
            ty,
            "the context is borrowed from the trainer, by mutable reference: `ctx: &mut Context<'_, M>`",
        ),
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        errors.push(last.span(), "name the model type: `Context<'_, M>` (`M` a type parameter), `Context<'_, impl Module>` or `Context<'_, MyModel>`");
        return Some(Model::Impl(Default::default()));
    };
    let model = args.args.iter().find_map(|a| match a {
        GenericArgument::Type(t) => Some(t.clone()),
        _ => None,
    });
    Some(match model {
        Some(Type::ImplTrait(bounds)) => Model::Impl(bounds.bounds),
        Some(Type::Path(p))
            if p.qself.is_none() && p.path.get_ident().is_some_and(|i| generics.contains(i)) =>
        {
            Model::Generic(p.path.get_ident().cloned().expect("an ident"))
        }
        Some(t) => Model::Concrete(t),
        None => {
            errors.push_spanned(last, "name the model type: `Context<'_, M>`");
            Model::Impl(Default::default())
        }
    })
}

/// Read a hook's signature: its parameters, its receiver, its qualifiers.
fn read_signature(sig: &Signature, method: bool, errors: &Ctxt) -> Vec<Param> {
    let what = if method { "a hook method" } else { "a callback function" };
    if let Some(token) = &sig.asyncness {
        errors.push(
            token.span(),
            format!("{what} cannot be `async`: callbacks run between training steps, synchronously"),
        );
    }
    if let Some(token) = &sig.unsafety {
        errors.push(
            token.span(),
            format!("{what} cannot be `unsafe`: wrap the unsafe code in a safe function"),
        );
    }
    if let Some(token) = &sig.constness {
        errors.push(token.span(), format!("{what} cannot be `const`"));
    }
    if let Some(abi) = &sig.abi {
        errors.push_spanned(
            abi,
            format!("{what} cannot have an `extern` ABI: the trainer calls it as a Rust function"),
        );
    }
    if let Some(variadic) = &sig.variadic {
        errors.push(variadic.span(), format!("{what} cannot be variadic"));
    }
    for param in &sig.generics.params {
        if let GenericParam::Const(param) = param {
            errors.push_spanned(
                param,
                format!("{what} cannot have a const parameter: nothing would give `{}` a value when the event runs; use a constant, or a field of a `#[callback]` impl", param.ident),
            );
        }
    }
    let generics: Vec<Ident> = sig
        .generics
        .params
        .iter()
        .filter_map(|p| match p {
            GenericParam::Type(t) => Some(t.ident.clone()),
            _ => None,
        })
        .collect();
    let mut params = Vec::new();
    let mut has_receiver = false;
    let mut context_seen = false;
    for input in &sig.inputs {
        match input {
            FnArg::Receiver(receiver) => {
                has_receiver = true;
                if !method {
                    errors.push_spanned(receiver, "a callback function cannot take `self`; for a callback with state, put `#[callback]` on an impl block and `#[on(EVENT)]` on its methods");
                } else if receiver.reference.is_none() {
                    errors.push_spanned(receiver, "a hook takes `&mut self` or `&self`, not `self` by value: the callback lives on after the event");
                }
            }
            FnArg::Typed(typed) => {
                if let Some(model) = context_model(&typed.ty, &generics, errors) {
                    if context_seen {
                        errors.push_spanned(
                            typed,
                            "a second context parameter: take `ctx: &mut Context<'_, M>` once",
                        );
                    } else {
                        context_seen = true;
                        params.push(Param::Context { model });
                    }
                } else {
                    if let Pat::Ident(ident) = &*typed.pat
                        && ident.by_ref.is_some()
                    {
                        errors.push(ident.by_ref.span(), "a fetched value is taken by value: remove `ref`");
                    }
                    params.push(Param::Value { ty: (*typed.ty).clone() });
                }
            }
        }
    }
    if method && !has_receiver {
        errors.push(sig.ident.span(), "a hook method takes `&mut self` (or `&self`); a function without `self` can be a callback of its own with `#[callback(on = ...)]`");
    }
    params
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

/// One field of a `#[derive(Callbacks)]` struct.
pub struct Field {
    pub member: syn::Member,
    pub ty: Type,
    pub order: Option<OrderAttr>,
    pub every_k_steps: Option<attr::Period>,
    pub every_k_epochs: Option<attr::Period>,
    pub enable_if: Option<syn::Path>,
    pub chief_only: Option<bool>,
}

/// A `#[derive(Callbacks)]` struct.
pub struct Composition {
    pub ident: Ident,
    pub generics: syn::Generics,
    pub fields: Vec<Field>,
    /// `#[callbacks(crate = "path")]`: the runtime crate's path, when it is not `::burn_stoker`.
    pub krate: Option<syn::Path>,
}

/// `#[callbacks(crate = "path")]` on the struct.
fn read_container_attrs(attrs: &[syn::Attribute], errors: &Ctxt) -> Option<syn::Path> {
    let mut krate = Attr::none(errors, CRATE);
    for a in attrs.iter().filter(|a| *a.path() == CALLBACKS) {
        let metas = match a
            .parse_args_with(syn::punctuated::Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated)
        {
            Ok(metas) => metas,
            Err(error) => {
                errors.push(error.span(), format!("{error}: write `#[callbacks(crate = \"burn_stoker\")]`"));
                continue;
            }
        };
        for meta in metas {
            match &meta {
                syn::Meta::NameValue(pair) if pair.path == CRATE => {
                    krate.set_opt(&pair.path, attr::crate_path(&pair.value, errors));
                }
                _ => {
                    let key = meta.path().get_ident().map(ToString::to_string).unwrap_or_default();
                    attr::unknown(errors, meta.path().span(), "key", &key, &[CRATE.as_str()]);
                }
            }
        }
    }
    krate.get()
}

impl Composition {
    pub fn from_syn(input: &syn::DeriveInput, errors: &Ctxt) -> Composition {
        let mut fields = Vec::new();
        match &input.data {
            syn::Data::Struct(data) => {
                for (index, field) in data.fields.iter().enumerate() {
                    let member = match &field.ident {
                        Some(ident) => syn::Member::Named(ident.clone()),
                        None => syn::Member::Unnamed(syn::Index::from(index)),
                    };
                    let mut parsed = Field {
                        member,
                        ty: field.ty.clone(),
                        order: None,
                        every_k_steps: None,
                        every_k_epochs: None,
                        enable_if: None,
                        chief_only: None,
                    };
                    read_field_attrs(&field.attrs, &mut parsed, errors);
                    fields.push(parsed);
                }
            }
            syn::Data::Enum(data) => errors.push(
                data.enum_token.span(),
                "`#[derive(Callbacks)]` composes the fields of a struct; an enum has no fixed set of callbacks",
            ),
            syn::Data::Union(data) => {
                errors.push(data.union_token.span(), "`#[derive(Callbacks)]` goes on a struct, not a union")
            }
        }
        let krate = read_container_attrs(&input.attrs, errors);
        Composition { ident: input.ident.clone(), generics: input.generics.clone(), fields, krate }
    }
}

/// The attributes of one field of a `#[derive(Callbacks)]` struct.
fn read_field_attrs(attrs: &[syn::Attribute], field: &mut Field, errors: &Ctxt) {
    let mut order =
        Attr::with_duplicate(errors, "a second `#[order]` on this field: put every constraint in one");
    let mut every_k_steps =
        Attr::with_duplicate(errors, "a second `#[every_k_steps]` on this field: keep one");
    let mut every_k_epochs =
        Attr::with_duplicate(errors, "a second `#[every_k_epochs]` on this field: keep one");
    let mut enable_if = Attr::with_duplicate(errors, "a second `#[enable_if]` on this field: keep one");
    let mut chief_only = Attr::with_duplicate(errors, "a second `#[chief_only]` on this field: keep one");
    for a in attrs {
        let path = a.path();
        if *path == ORDER {
            order.set(a, attr::parse_order(a, errors));
        } else if *path == CHIEF_ONLY {
            match &a.meta {
                syn::Meta::Path(_) => chief_only.set_opt(a, Some(true)),
                _ => match a.parse_args::<syn::LitBool>() {
                    Ok(value) => chief_only.set_opt(a, Some(value.value)),
                    Err(_) => errors.push_spanned(
                        a,
                        "`#[chief_only]` takes nothing or a bool: `#[chief_only]`, `#[chief_only(false)]`",
                    ),
                },
            }
        } else if *path == ENABLE_IF {
            match a.parse_args::<syn::Path>() {
                Ok(path) => enable_if.set_opt(a, Some(path)),
                Err(_) => errors.push_spanned(a, "`#[enable_if(...)]` takes the path of a function `fn(&Counters) -> bool`: `#[enable_if(is_warm)]`"),
            }
        } else if *path == EVERY_K_STEPS || *path == EVERY_K_EPOCHS {
            let key = if *path == EVERY_K_STEPS { EVERY_K_STEPS } else { EVERY_K_EPOCHS };
            let value = match a.parse_args::<syn::Expr>() {
                Ok(value) => value,
                Err(_) => {
                    errors
                        .push_spanned(a, format!("`#[{key}(...)]` takes a positive integer: `#[{key}(2)]`"));
                    continue;
                }
            };
            let period = attr::period(&value, key, errors);
            if key == EVERY_K_STEPS {
                every_k_steps.set_opt(a, period);
            } else {
                every_k_epochs.set_opt(a, period);
            }
        }
    }
    field.order = order.get();
    field.every_k_steps = every_k_steps.get();
    field.every_k_epochs = every_k_epochs.get();
    field.enable_if = enable_if.get();
    field.chief_only = chief_only.get();
}
