//! The typed view of a `#[derive(Callbacks)]` struct: its fields and their attributes.

use syn::Ident;
use syn::Type;
use syn::spanned::Spanned;

use crate::attr::{self, OrderAttr};
use crate::ctxt::{Attr, Ctxt};
use crate::symbol::*;

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
