//! A hook's signature: its qualifiers, its receiver, the context parameter and the model it
//! names, and the value parameters.

use syn::spanned::Spanned;
use syn::{FnArg, GenericArgument, GenericParam, Ident, Pat, PathArguments, Signature, Type};

use super::{Model, Param};
use crate::ctxt::Ctxt;

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
pub fn read_signature(sig: &Signature, method: bool, errors: &Ctxt) -> Vec<Param> {
    let what = if method { "a hook method" } else { "a callback function" };
    check_qualifiers(sig, what, errors);
    check_const_params(sig, what, errors);
    let generics: Vec<Ident> = sig
        .generics
        .params
        .iter()
        .filter_map(|p| match p {
            GenericParam::Type(t) => Some(t.ident.clone()),
            _ => None,
        })
        .collect();
    let (params, has_receiver) = read_inputs(sig, method, &generics, errors);
    if method && !has_receiver {
        errors.push(sig.ident.span(), "a hook method takes `&mut self` (or `&self`); a function without `self` can be a callback of its own with `#[callback(on = ...)]`");
    }
    params
}

/// `async`, `unsafe`, `const`, an `extern` ABI, a variadic: none of them on a hook.
fn check_qualifiers(sig: &Signature, what: &str, errors: &Ctxt) {
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
}

/// A const generic parameter: nothing gives it a value when the event runs.
fn check_const_params(sig: &Signature, what: &str, errors: &Ctxt) {
    for param in &sig.generics.params {
        if let GenericParam::Const(param) = param {
            errors.push_spanned(
                param,
                format!("{what} cannot have a const parameter: nothing would give `{}` a value when the event runs; use a constant, or a field of a `#[callback]` impl", param.ident),
            );
        }
    }
}

/// The parameters (the context, once, and the values), and whether there is a receiver.
fn read_inputs(sig: &Signature, method: bool, generics: &[Ident], errors: &Ctxt) -> (Vec<Param>, bool) {
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
                if let Some(model) = context_model(&typed.ty, generics, errors) {
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
    (params, has_receiver)
}
