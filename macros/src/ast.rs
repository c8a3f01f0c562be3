//! The typed view of the input: a callback function, or an impl block whose methods are hooks.

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{
    FnArg, GenericArgument, GenericParam, Ident, ImplItem, ImplItemFn, ItemFn, ItemImpl, Pat, PathArguments,
    ReturnType, Signature, Type, TypeParamBound,
};

use crate::attr::{self, Errors, FetchAttr, HookArgs, OrderAttr, Place};

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
    pub event: Option<attr::EventName>,
    pub args: HookArgs,
    pub fetch: Option<FetchAttr>,
    pub params: Vec<Param>,
    pub output: ReturnType,
    pub span: Span,
}

impl Hook {
    pub fn event(&self) -> &str {
        self.event.as_ref().map_or("", |e| e.name.as_str())
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
    errors: &mut Errors,
) -> (Option<FetchAttr>, Option<OrderAttr>, Option<syn::Attribute>) {
    let mut fetch: Option<FetchAttr> = None;
    let mut order = None;
    let mut on = None;
    let mut kept = Vec::new();
    for attr in attrs.drain(..) {
        if attr::is_attr(&attr, "fetch") {
            let parsed = attr::parse_fetch(&attr, errors);
            match &mut fetch {
                Some(first) => {
                    errors.push_spanned(
                        &attr,
                        "a second `#[fetch]`: list every name in one `#[fetch(\"a\", \"b\")]`",
                    );
                    // Its names still count, so that the parameters are not reported as unnamed.
                    first.names.extend(parsed.names);
                    first.count += parsed.count;
                }
                None => fetch = Some(parsed),
            }
        } else if attr::is_attr(&attr, "order") {
            if order.is_some() {
                errors.push_spanned(
                    &attr,
                    "a second `#[order]`: put every constraint in one `#[order(after = A, before = B)]`",
                );
            } else {
                order = Some(attr::parse_order(&attr, errors));
            }
        } else if attr::is_attr(&attr, "on") {
            if on.is_some() {
                errors.push_spanned(
                    &attr,
                    "a second `#[on]`: a method is bound to one event; write another method for another event",
                );
            } else {
                on = Some(attr);
            }
        } else {
            kept.push(attr);
        }
    }
    *attrs = kept;
    (fetch, order, on)
}

/// `&mut Context<'_, X>` → the model `X`.
fn context_model(ty: &Type, generics: &[Ident], errors: &mut Errors) -> Option<Model> {
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
fn read_signature(sig: &Signature, method: bool, errors: &mut Errors) -> Vec<Param> {
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
    let mut context_seen: Option<Span> = None;
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
                    if let Some(first) = context_seen {
                        let _ = first;
                        errors.push_spanned(
                            typed,
                            "a second context parameter: take `ctx: &mut Context<'_, M>` once",
                        );
                    } else {
                        context_seen = Some(typed.span());
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

/// `text` as an identifier at `span`, if it is exactly one (not raw, not a keyword).
pub fn struct_ident(text: &str, span: Span) -> Option<Ident> {
    let mut ident =
        syn::parse_str::<Ident>(text).ok().filter(|ident| *ident == text && !text.starts_with("r#"))?;
    ident.set_span(span);
    Some(ident)
}

impl CallbackFn {
    pub fn from_syn(args: HookArgs, mut item: ItemFn, errors: &mut Errors) -> CallbackFn {
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
            event: args.on.clone(),
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
    pub fn from_syn(args: HookArgs, mut item: ItemImpl, errors: &mut Errors) -> CallbackImpl {
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

fn read_method(method: &mut ImplItemFn, errors: &mut Errors) -> Option<Hook> {
    let order_attr = method.attrs.iter().find(|a| attr::is_attr(a, "order")).cloned();
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
        event: args.on.clone(),
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
}

impl Composition {
    pub fn from_syn(input: &syn::DeriveInput, errors: &mut Errors) -> Composition {
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
                    for a in &field.attrs {
                        read_field_attr(a, &mut parsed, errors);
                    }
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
        Composition { ident: input.ident.clone(), generics: input.generics.clone(), fields }
    }
}

fn read_field_attr(a: &syn::Attribute, field: &mut Field, errors: &mut Errors) {
    let key = if a.path().is_ident("order") {
        "order"
    } else if a.path().is_ident("every_k_steps") {
        "every_k_steps"
    } else if a.path().is_ident("every_k_epochs") {
        "every_k_epochs"
    } else if a.path().is_ident("enable_if") {
        "enable_if"
    } else if a.path().is_ident("chief_only") {
        "chief_only"
    } else {
        return;
    };
    match key {
        "order" => {
            if field.order.is_some() {
                errors.push_spanned(a, "a second `#[order]` on this field: put every constraint in one");
            }
            field.order = Some(attr::parse_order(a, errors));
        }
        "chief_only" => match &a.meta {
            syn::Meta::Path(_) => field.chief_only = Some(true),
            _ => match a.parse_args::<syn::LitBool>() {
                Ok(value) => field.chief_only = Some(value.value),
                Err(_) => errors.push_spanned(a, "`#[chief_only]` takes nothing or a bool: `#[chief_only]`, `#[chief_only(false)]`"),
            },
        },
        "enable_if" => match a.parse_args::<syn::Path>() {
            Ok(path) => field.enable_if = Some(path),
            Err(_) => errors.push_spanned(a, "`#[enable_if(...)]` takes the path of a function `fn(&Counters) -> bool`: `#[enable_if(is_warm)]`"),
        },
        _ => {
            let value = match a.parse_args::<syn::Expr>() {
                Ok(value) => value,
                Err(_) => {
                    errors.push_spanned(a, format!("`#[{key}(...)]` takes a positive integer: `#[{key}(2)]`"));
                    return;
                }
            };
            let period = attr::period(&value, key, errors);
            if key == "every_k_steps" {
                field.every_k_steps = period;
            } else {
                field.every_k_epochs = period;
            }
        }
    }
}
