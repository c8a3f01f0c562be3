//! `#[fetch("a", "b")]` and `#[fetch("a", deferred)]`: the names of the values a hook receives.

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Attribute, Expr, ExprLit, Lit, LitStr, Meta, Token};

use super::unwrap_group;
use crate::ctxt::Ctxt;

/// `#[fetch("a", "b")]`: the names, in order; `#[fetch("a", deferred)]` reads them back without
/// stopping the step.
pub struct FetchAttr {
    /// The `deferred` word, when listed.
    pub deferred: Option<Span>,
    /// Every string literal listed, in order (empty and repeated ones too: they are reported, and
    /// still count when matching names to parameters).
    pub names: Vec<LitStr>,
    /// How many entries are listed, string literals or not.
    pub count: usize,
    /// The attribute, to point errors at it.
    pub tokens: TokenStream,
}

pub fn parse_fetch(attr: &Attribute, errors: &Ctxt) -> FetchAttr {
    let mut fetch = FetchAttr { deferred: None, names: Vec::new(), count: 0, tokens: attr.to_token_stream() };
    let tokens = match &attr.meta {
        Meta::List(list) => list.tokens.clone(),
        _ => {
            errors.push_spanned(
                attr,
                "`#[fetch]` lists the names it fetches: `#[fetch(\"cost\", \"accuracy\")]`",
            );
            return fetch;
        }
    };
    let parsed = Punctuated::<Expr, Token![,]>::parse_terminated.parse2(tokens);
    match parsed {
        Ok(list) => {
            if list.is_empty() {
                errors.push_spanned(attr, "`#[fetch()]` names nothing: list the outputs, `#[fetch(\"cost\")]`");
            }
            for expr in list {
                if let Expr::Path(path) = unwrap_group(&expr)
                    && path.path.is_ident("deferred")
                {
                    if fetch.deferred.is_some() {
                        errors.push_spanned(path, "`deferred` is listed twice: once makes every fetch of the hook deferred");
                    }
                    fetch.deferred = Some(path.span());
                    continue;
                }
                fetch.count += 1;
                match unwrap_group(&expr) {
                    Expr::Lit(ExprLit { lit: Lit::Str(name), .. }) => {
                        if name.value().trim().is_empty() {
                            errors.push(
                                name.span(),
                                "a fetched name cannot be empty: write the name the step gives the output, `\"cost\"`",
                            );
                        } else if fetch.names.iter().any(|n: &LitStr| n.value() == name.value()) {
                            errors.push(
                                name.span(),
                                format!("`{}` is fetched twice: name each output once", name.value()),
                            );
                        }
                        fetch.names.push(name.clone());
                    }
                    other => {
                        let hint = match other {
                            Expr::Path(path) if path.path.get_ident().is_some() => {
                                let ident = path.path.get_ident().expect("checked");
                                format!(": `#[fetch(\"{ident}\")]`")
                            }
                            _ => String::from(": `#[fetch(\"cost\")]`"),
                        };
                        errors.push_spanned(other, format!("fetched names are string literals{hint}"));
                    }
                }
            }
        }
        Err(error) => errors.push(
            error.span(),
            format!("{error}: list the names as string literals separated by commas, `#[fetch(\"cost\", \"accuracy\")]`"),
        ),
    }
    fetch
}
