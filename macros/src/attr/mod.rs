//! Attribute parsing: `#[callback(...)]`, `#[on(...)]`, `#[fetch(...)]`, `#[order(...)]`, and the
//! field attributes of `#[derive(Callbacks)]`. Parsing never stops at the first problem: every
//! error goes to [`Ctxt`] and parsing goes on with what it could read.
//!
//! One file per attribute: `hook.rs` the arguments of `#[callback(...)]` and `#[on(...)]`,
//! `fetch.rs` `#[fetch(...)]`, `order.rs` `#[order(...)]`; this file the helpers they share (the
//! "did you mean" suggestion, periods, booleans, the `crate` path, attribute names).

mod fetch;
mod hook;
mod order;

pub use fetch::{FetchAttr, parse_fetch};
pub use hook::{HookArgs, Place, parse_hook_args};
pub use order::{OrderAttr, parse_order};

use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{Attribute, Expr, ExprLit, Ident, Lit, Path};

use crate::ctxt::Ctxt;
use crate::symbol::*;

/// The closest of `candidates` to `name`, if close enough to be a likely typo.
pub fn did_you_mean<'a>(name: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (edit_distance(name, c), *c))
        .filter(|(d, c)| *d <= (c.len().max(name.len()) / 3).max(1) || c.contains(name) && name.len() >= 3)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            let next = (previous + cost).min(row[j + 1] + 1).min(row[j] + 1);
            previous = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

/// `unknown <what> `name``, with a suggestion and the list of valid names.
pub fn unknown(errors: &Ctxt, span: Span, what: &str, name: &str, valid: &[&str]) {
    let list = valid.iter().map(|v| format!("`{v}`")).collect::<Vec<_>>().join(", ");
    match did_you_mean(name, valid) {
        Some(close) => {
            errors.push(span, format!("unknown {what} `{name}`; did you mean `{close}`? (valid: {list})"))
        }
        None => errors.push(span, format!("unknown {what} `{name}`; valid: {list}")),
    }
}

/// A period `every_k_* = N`, validated to a positive integer.
#[derive(Clone, Copy)]
pub struct Period {
    pub value: u64,
    pub span: Span,
}

/// The words of `symbols`, for [`unknown`].
fn words(symbols: &[Symbol]) -> Vec<&'static str> {
    symbols.iter().map(|symbol| symbol.as_str()).collect()
}

/// `crate = "path"`: the path of the runtime crate, as a user who renamed the dependency names it.
pub fn crate_path(value: &Expr, cx: &Ctxt) -> Option<Path> {
    let message = "`crate` takes the path of the runtime crate as a string: `crate = \"burn_stoker\"`";
    match unwrap_group(value) {
        Expr::Lit(ExprLit { lit: Lit::Str(lit), .. }) => match lit.parse_with(Path::parse_mod_style) {
            Ok(path) => Some(path),
            Err(_) => {
                cx.push(lit.span(), message);
                None
            }
        },
        other => {
            cx.push_spanned(other, message);
            None
        }
    }
}

/// `text` as an identifier at `span`, if it is exactly one (not raw, not a keyword).
pub fn struct_ident(text: &str, span: Span) -> Option<Ident> {
    let mut ident =
        syn::parse_str::<Ident>(text).ok().filter(|ident| *ident == text && !text.starts_with("r#"))?;
    ident.set_span(span);
    Some(ident)
}

/// `expr` without the invisible group a `macro_rules!` fragment (`$k:literal`) comes wrapped in.
pub fn unwrap_group(mut expr: &Expr) -> &Expr {
    while let Expr::Group(group) = expr {
        expr = &group.expr;
    }
    expr
}

pub fn period(value: &Expr, key: Symbol, errors: &Ctxt) -> Option<Period> {
    let value = unwrap_group(value);
    let span = value.span();
    let negative = format!("`{key}` must be at least 1, not negative: `{key} = 2`");
    match value {
        Expr::Lit(ExprLit { lit: Lit::Int(int), .. }) if int.base10_digits().starts_with('-') => {
            errors.push_spanned(value, negative);
            None
        }
        Expr::Lit(ExprLit { lit: Lit::Int(int), .. }) => match int.base10_parse::<u64>() {
            Ok(0) => {
                errors.push(span, format!("`{key}` must be at least 1: a period of 0 would never run"));
                None
            }
            Ok(value) => Some(Period { value, span }),
            Err(_) => {
                errors.push(span, format!("`{key}` is too large: it must fit in a `u64`"));
                None
            }
        },
        Expr::Unary(unary) if matches!(unary.op, syn::UnOp::Neg(_)) => {
            errors.push_spanned(value, negative);
            None
        }
        Expr::Lit(ExprLit { lit: Lit::Float(_), .. }) => {
            errors.push(span, format!("`{key}` counts whole steps or epochs: write an integer, `{key} = 2`"));
            None
        }
        Expr::Lit(ExprLit { lit: Lit::Str(_), .. }) => {
            errors.push(span, format!("`{key}` takes an integer, not a string: `{key} = 2`"));
            None
        }
        Expr::Path(_) => {
            errors.push_spanned(
                value,
                format!("`{key}` takes an integer literal: a macro cannot read the value of a constant; write `{key} = 2`"),
            );
            None
        }
        _ => {
            errors.push_spanned(value, format!("`{key}` must be a positive integer literal: `{key} = 2`"));
            None
        }
    }
}

fn boolean(value: &Expr, key: Symbol, errors: &Ctxt) -> Option<(bool, Span)> {
    match unwrap_group(value) {
        Expr::Lit(ExprLit { lit: Lit::Bool(b), .. }) => Some((b.value, b.span())),
        _ => {
            errors.push_spanned(value, format!("`{key}` takes `true` or `false`"));
            None
        }
    }
}

/// The last segment of a path, as the callback name it designates.
pub fn path_name(path: &Path) -> String {
    path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default()
}

/// Whether `attr` is `#[name]` or `#[burn_stoker::name]`.
pub fn is_attr(attr: &Attribute, name: Symbol) -> bool {
    let path = attr.path();
    *path == name
        || (path.segments.len() == 2 && path.segments[0].ident == RUNTIME && path.segments[1].ident == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventKind;

    #[test]
    fn edit_distance_counts_insertions_deletions_and_substitutions() {
        assert_eq!(edit_distance("trigger_epok", "trigger_epoch"), 2);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("same", "same"), 0);
    }

    #[test]
    fn suggestions_are_close_names_only() {
        assert_eq!(did_you_mean("trigger_epok", &EventKind::names()), Some("trigger_epoch"));
        assert_eq!(did_you_mean("afterstep", &EventKind::names()), Some("after_step"));
        assert_eq!(did_you_mean("every_k_step", &["every_k_steps", "every_k_epochs"]), Some("every_k_steps"));
        assert_eq!(did_you_mean("xyzzy", &EventKind::names()), None);
    }
}
