//! `#[order(after = A, before = B)]` and the numeric order `#[order(-9)]`.

use proc_macro2::Span;
use quote::ToTokens;
use syn::parse::{ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Attribute, Ident, Lit, Meta, Path, Token};

use super::{unknown, words};
use crate::ctxt::Ctxt;
use crate::symbol::*;

/// `#[order(after = A, before = B)]`; `after = [A, B]` lists several.
#[derive(Default)]
pub struct OrderAttr {
    pub after: Vec<Path>,
    pub before: Vec<Path>,
    /// fastai's numeric `order`: `#[order(-9)]` or `#[order(value = -9)]`.
    pub value: Option<(i32, Span)>,
}

/// One entry of `#[order(...)]`.
enum OrderEntry {
    /// `after = A` / `before = [A, B]`.
    Paths(Ident, Vec<Path>),
    /// `-9` or `value = -9`: the number (or why it is not one), and where it was written.
    Value(std::result::Result<i32, String>, Span),
}

/// What a numeric order must be, for messages.
const VALUE_HELP: &str = "the numeric order is an integer, lower runs first (fastai's `order`, default 0): `#[order(-9)]` or `#[order(value = -9)]`";

/// `-9`, `5`: an optionally negative integer literal.
fn signed_int(input: ParseStream) -> syn::Result<(std::result::Result<i32, String>, Span)> {
    let minus = input.parse::<Option<Token![-]>>()?;
    let start = minus.as_ref().map(Spanned::span);
    let lit: Lit = input.parse()?;
    let span = start.and_then(|s| s.join(lit.span())).unwrap_or(lit.span());
    let Lit::Int(int) = &lit else {
        return Ok((Err(format!("`{}` is not an integer: {VALUE_HELP}", lit.to_token_stream())), span));
    };
    let text = format!("{}{}", if minus.is_some() { "-" } else { "" }, int.base10_digits());
    let value = text
        .parse::<i32>()
        .map_err(|_| format!("`{text}` does not fit an `i32`: {VALUE_HELP}"))
        .and_then(|v| match int.suffix() {
            "" | "i32" => Ok(v),
            suffix => Err(format!(
                "`{text}{suffix}`: write the integer without a suffix, it is an `i32`: {VALUE_HELP}"
            )),
        });
    Ok((value, span))
}

/// The entries of `#[order(...)]`, in order.
fn order_entries(input: ParseStream) -> syn::Result<Vec<OrderEntry>> {
    let mut entries = Vec::new();
    while !input.is_empty() {
        if input.peek(Token![-]) || input.peek(syn::LitInt) || input.peek(syn::LitFloat) {
            let (value, span) = signed_int(input)?;
            entries.push(OrderEntry::Value(value, span));
        } else {
            let key: Ident = input.parse()?;
            input.parse::<Token![=]>()?;
            if key == VALUE {
                let (value, span) = signed_int(input)?;
                entries.push(OrderEntry::Value(value, span));
            } else if key != AFTER && key != BEFORE && (input.peek(Token![-]) || input.peek(syn::Lit)) {
                // A misspelt `value = -9`: reported as an unknown key, not as a bad path.
                let _ = signed_int(input)?;
                entries.push(OrderEntry::Paths(key, Vec::new()));
            } else {
                let mut paths = Vec::new();
                if input.peek(syn::token::Bracket) {
                    let content;
                    syn::bracketed!(content in input);
                    let list = Punctuated::<Path, Token![,]>::parse_terminated(&content)?;
                    paths.extend(list);
                } else {
                    paths.push(input.parse::<Path>()?);
                }
                entries.push(OrderEntry::Paths(key, paths));
            }
        }
        if input.is_empty() {
            break;
        }
        input.parse::<Token![,]>()?;
    }
    Ok(entries)
}

pub fn parse_order(attr: &Attribute, errors: &Ctxt) -> OrderAttr {
    let mut order = OrderAttr::default();
    let tokens = match &attr.meta {
        Meta::List(list) => list.tokens.clone(),
        _ => {
            errors.push_spanned(attr, "`#[order]` needs constraints: `#[order(after = InferenceRunner)]`");
            return order;
        }
    };
    match order_entries.parse2(tokens) {
        Ok(entries) => {
            if entries.is_empty() {
                errors.push_spanned(attr, "`#[order()]` says nothing: `#[order(after = InferenceRunner)]` or `#[order(-9)]`");
            }
            for entry in entries {
                add_entry(&mut order, entry, errors);
            }
        }
        Err(error) => errors.push(
            error.span(),
            format!("{error}: write `#[order(after = A, before = B)]`, or `after = [A, B]` for several, and a numeric order as `#[order(-9)]` or `value = -9`"),
        ),
    }
    order
}

/// One entry of `#[order(...)]` added to `order` (an unknown key or a bad number reported).
fn add_entry(order: &mut OrderAttr, entry: OrderEntry, errors: &Ctxt) {
    match entry {
        OrderEntry::Paths(key, paths) if key == AFTER => order.after.extend(paths),
        OrderEntry::Paths(key, paths) if key == BEFORE => order.before.extend(paths),
        OrderEntry::Paths(key, _) => {
            unknown(errors, key.span(), "order key", &key.to_string(), &words(&[AFTER, BEFORE, VALUE]))
        }
        OrderEntry::Value(Err(message), span) => errors.push(span, message),
        OrderEntry::Value(Ok(value), span) => {
            if let Some((first, _)) = order.value {
                errors
                    .push(span, format!("a second numeric order (`{first}` is already given): give it once"));
            } else {
                order.value = Some((value, span));
            }
        }
    }
}
