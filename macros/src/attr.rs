//! Attribute parsing: `#[callback(...)]`, `#[on(...)]`, `#[fetch(...)]`, `#[order(...)]`, and the
//! field attributes of `#[derive(Callbacks)]`. Parsing never stops at the first problem: every
//! error goes to [`Errors`] and parsing goes on with what it could read.

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::parse::{ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Attribute, Expr, ExprLit, Ident, Lit, LitStr, Meta, Path, Token};

/// Errors collected over a whole input, reported together (serde_derive's way).
#[derive(Default)]
pub struct Errors {
    errors: Vec<syn::Error>,
}

impl Errors {
    pub fn push(&mut self, span: Span, message: impl std::fmt::Display) {
        self.errors.push(syn::Error::new(span, message));
    }
    /// An error over all of `tokens`, first to last (a single `Span` covers one token on stable).
    pub fn push_spanned(&mut self, tokens: impl quote::ToTokens, message: impl std::fmt::Display) {
        self.errors.push(syn::Error::new_spanned(tokens, message));
    }
    #[allow(dead_code)]
    pub fn push_error(&mut self, error: syn::Error) {
        self.errors.push(error);
    }
    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }
    pub fn to_compile_errors(&self) -> TokenStream {
        self.errors.iter().map(syn::Error::to_compile_error).collect()
    }
}

/// The events a callback can be bound to.
pub const EVENTS: &[&str] = &[
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
];

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
pub fn unknown(errors: &mut Errors, span: Span, what: &str, name: &str, valid: &[&str]) {
    let list = valid.iter().map(|v| format!("`{v}`")).collect::<Vec<_>>().join(", ");
    match did_you_mean(name, valid) {
        Some(close) => {
            errors.push(span, format!("unknown {what} `{name}`; did you mean `{close}`? (valid: {list})"))
        }
        None => errors.push(span, format!("unknown {what} `{name}`; valid: {list}")),
    }
}

/// An event name with its span.
#[derive(Clone)]
pub struct EventName {
    pub name: String,
    #[allow(dead_code)]
    pub span: Span,
}

/// A period `every_k_* = N`, validated to a positive integer.
#[derive(Clone, Copy)]
pub struct Period {
    pub value: u64,
    #[allow(dead_code)]
    pub span: Span,
}

/// The keys of `#[callback(...)]` (function form) and `#[on(...)]` (impl form).
#[derive(Default, Clone)]
pub struct HookArgs {
    pub on: Option<EventName>,
    pub every_k_steps: Option<Period>,
    pub every_k_epochs: Option<Period>,
    pub before_train: Option<(bool, Span)>,
    pub enable_if: Option<Path>,
    pub chief_only: Option<(bool, Span)>,
    pub name: Option<LitStr>,
    pub state: Option<Span>,
    /// An event was written but could not be read (already reported): no "name the event" error.
    pub incomplete: bool,
}

/// Where keys are read: which ones are allowed there.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// `#[callback(...)]` on a function.
    Function,
    /// `#[callback(...)]` on an impl block.
    Impl,
    /// `#[on(...)]` on a method.
    Method,
}

impl Place {
    fn keys(self) -> &'static [&'static str] {
        match self {
            Place::Function => {
                &["on", "every_k_steps", "every_k_epochs", "before_train", "enable_if", "chief_only", "name"]
            }
            Place::Impl => &["state", "chief_only", "name"],
            Place::Method => &["every_k_steps", "every_k_epochs", "before_train", "enable_if"],
        }
    }
}

/// Parse the comma-separated arguments of `#[callback(...)]` or `#[on(...)]`.
pub fn parse_hook_args(tokens: TokenStream, place: Place, errors: &mut Errors) -> HookArgs {
    let mut args = HookArgs::default();
    let metas = match Punctuated::<Meta, Token![,]>::parse_terminated.parse2(tokens) {
        Ok(metas) => metas,
        Err(error) => {
            let example = match place {
                Place::Function => "`#[callback(on = trigger, every_k_epochs = 2)]`",
                Place::Impl => "`#[callback(state, name = \"Best\")]`",
                Place::Method => "`#[on(trigger, every_k_epochs = 2)]`",
            };
            errors.push(
                error.span(),
                format!("{error}: write `key = value` pairs separated by commas, {example}"),
            );
            args.incomplete = true;
            return args;
        }
    };
    let mut metas: Vec<Meta> = metas.into_iter().collect();
    // `#[on(after_step, every_k_steps = 2)]`: the event comes first, bare. (An empty `#[on()]`
    // is reported by the caller, which has its span.)
    if place == Place::Method && !metas.is_empty() {
        let bare = |meta: &Meta| match meta {
            Meta::Path(path) => path.get_ident().cloned(),
            _ => None,
        };
        match metas.iter().position(|m| bare(m).is_some()) {
            Some(index) => {
                let ident = bare(&metas.remove(index)).expect("a bare name");
                if index > 0 {
                    errors.push(ident.span(), format!("write the event first: `#[on({ident}, ...)]`"));
                }
                args.on = Some(event_name(&ident, errors));
            }
            None => {
                let first = metas.remove(0);
                errors.push_spanned(
                    &first,
                    "`#[on]` names its event first: `#[on(after_step)]`, `#[on(trigger, every_k_epochs = 2)]`",
                );
                args.incomplete = true;
            }
        }
    }
    for meta in metas {
        let Some(key) = meta.path().get_ident().map(ToString::to_string) else {
            errors.push(meta.path().span(), "expected a key such as `on = after_step`");
            continue;
        };
        let span = meta.path().span();
        if !place.keys().contains(&key.as_str()) {
            let elsewhere = match (place, key.as_str()) {
                (Place::Impl, "on") => Some(
                    "an impl block is not bound to an event, its methods are: put `#[on(trigger)]` on a method"
                        .to_string(),
                ),
                (Place::Impl, "every_k_steps" | "every_k_epochs" | "before_train" | "enable_if") => Some(
                    format!("`{key}` belongs on a method of the impl: `#[on(trigger, {key} = ...)]`"),
                ),
                (Place::Method, "on") => Some("write the event first, bare: `#[on(after_step)]`".to_string()),
                (Place::Method, "state") => Some("`state` belongs on the impl: `#[callback(state)]`".to_string()),
                (Place::Method, "name" | "chief_only") => {
                    Some(format!("`{key}` belongs on the impl: `#[callback({key} = ...)]`"))
                }
                (Place::Method, event) if EVENTS.contains(&event) => Some(format!(
                    "a method is bound to one event: write another method for `{event}`, with its own `#[on({event})]`"
                )),
                (Place::Function, "state") => Some(
                    "`state` saves a callback's fields in checkpoints; a function has none: put `#[callback(state)]` on an impl block of a serializable type".to_string(),
                ),
                _ => None,
            };
            match elsewhere {
                Some(message) => errors.push(span, message),
                None => unknown(errors, span, "key", &key, place.keys()),
            }
            continue;
        }
        let duplicate = match key.as_str() {
            "on" => args.on.is_some(),
            "every_k_steps" => args.every_k_steps.is_some(),
            "every_k_epochs" => args.every_k_epochs.is_some(),
            "before_train" => args.before_train.is_some(),
            "enable_if" => args.enable_if.is_some(),
            "chief_only" => args.chief_only.is_some(),
            "name" => args.name.is_some(),
            "state" => args.state.is_some(),
            _ => false,
        };
        if duplicate {
            errors.push(span, format!("`{key}` is given twice: keep one"));
            if key == "on" {
                args.incomplete = true;
            }
            continue;
        }
        match key.as_str() {
            "state" => match &meta {
                Meta::Path(_) => args.state = Some(span),
                _ => errors.push(meta.span(), "`state` takes no value: `#[callback(state)]`"),
            },
            _ => {
                let Meta::NameValue(pair) = &meta else {
                    let example = match key.as_str() {
                        "on" => "on = trigger",
                        "every_k_steps" => "every_k_steps = 100",
                        "every_k_epochs" => "every_k_epochs = 2",
                        "before_train" => "before_train = true",
                        "chief_only" => "chief_only = false",
                        "enable_if" => "enable_if = is_warm",
                        _ => "name = \"Dump\"",
                    };
                    errors.push_spanned(&meta, format!("`{key}` needs a value: `{example}`"));
                    if key == "on" {
                        args.incomplete = true;
                    }
                    continue;
                };
                let value = unwrap_group(&pair.value);
                match key.as_str() {
                    "on" => match expr_ident(value) {
                        Some(ident) => args.on = Some(event_name(&ident, errors)),
                        None => {
                            errors.push_spanned(
                                value,
                                "`on` takes an event name, not a string or an expression: `on = trigger`",
                            );
                            args.incomplete = true;
                        }
                    },
                    "every_k_steps" => args.every_k_steps = period(value, "every_k_steps", errors),
                    "every_k_epochs" => args.every_k_epochs = period(value, "every_k_epochs", errors),
                    "before_train" => args.before_train = boolean(value, "before_train", errors),
                    "chief_only" => args.chief_only = boolean(value, "chief_only", errors),
                    "enable_if" => match value {
                        Expr::Path(path) if path.qself.is_none() => args.enable_if = Some(path.path.clone()),
                        _ => errors.push_spanned(
                            value,
                            "`enable_if` takes the path of a function `fn(&Counters) -> bool`: `enable_if = is_warm`",
                        ),
                    },
                    "name" => match value {
                        Expr::Lit(ExprLit { lit: Lit::Str(name), .. }) => {
                            if crate::ast::struct_ident(&name.value(), name.span()).is_some() {
                                args.name = Some(name.clone());
                            } else {
                                errors.push(
                                    name.span(),
                                    format!(
                                        "`name` names the generated struct: an identifier such as \"DumpWeights\", not {:?}",
                                        name.value()
                                    ),
                                );
                            }
                        }
                        _ => errors.push_spanned(value, "`name` takes a string: `name = \"Dump\"`"),
                    },
                    _ => {}
                }
            }
        }
    }
    args
}

fn expr_ident(expr: &Expr) -> Option<Ident> {
    match unwrap_group(expr) {
        Expr::Path(path) if path.qself.is_none() => path.path.get_ident().cloned(),
        _ => None,
    }
}

fn event_name(ident: &Ident, errors: &mut Errors) -> EventName {
    let name = ident.to_string();
    if !EVENTS.contains(&name.as_str()) {
        unknown(errors, ident.span(), "event", &name, EVENTS);
    }
    EventName { name, span: ident.span() }
}

/// `expr` without the invisible group a `macro_rules!` fragment (`$k:literal`) comes wrapped in.
pub fn unwrap_group(mut expr: &Expr) -> &Expr {
    while let Expr::Group(group) = expr {
        expr = &group.expr;
    }
    expr
}

pub fn period(value: &Expr, key: &str, errors: &mut Errors) -> Option<Period> {
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

fn boolean(value: &Expr, key: &str, errors: &mut Errors) -> Option<(bool, Span)> {
    match unwrap_group(value) {
        Expr::Lit(ExprLit { lit: Lit::Bool(b), .. }) => Some((b.value, b.span())),
        _ => {
            errors.push_spanned(value, format!("`{key}` takes `true` or `false`"));
            None
        }
    }
}

/// `#[fetch("a", "b")]`: the names, in order.
pub struct FetchAttr {
    /// Every string literal listed, in order (empty and repeated ones too: they are reported, and
    /// still count when matching names to parameters).
    pub names: Vec<LitStr>,
    /// How many entries are listed, string literals or not.
    pub count: usize,
    /// The attribute, to point errors at it.
    pub tokens: TokenStream,
}

pub fn parse_fetch(attr: &Attribute, errors: &mut Errors) -> FetchAttr {
    let mut fetch = FetchAttr { names: Vec::new(), count: 0, tokens: attr.to_token_stream() };
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

/// `#[order(after = A, before = B)]`; `after = [A, B]` lists several.
#[derive(Default)]
pub struct OrderAttr {
    pub after: Vec<Path>,
    pub before: Vec<Path>,
}

pub fn parse_order(attr: &Attribute, errors: &mut Errors) -> OrderAttr {
    let mut order = OrderAttr::default();
    let tokens = match &attr.meta {
        Meta::List(list) => list.tokens.clone(),
        _ => {
            errors.push_spanned(attr, "`#[order]` needs constraints: `#[order(after = InferenceRunner)]`");
            return order;
        }
    };
    let parser = |input: ParseStream| {
        let mut pairs = Vec::new();
        while !input.is_empty() {
            let key: Ident = input.parse()?;
            input.parse::<Token![=]>()?;
            let mut paths = Vec::new();
            if input.peek(syn::token::Bracket) {
                let content;
                syn::bracketed!(content in input);
                let list = Punctuated::<Path, Token![,]>::parse_terminated(&content)?;
                paths.extend(list);
            } else {
                paths.push(input.parse::<Path>()?);
            }
            pairs.push((key, paths));
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        Ok(pairs)
    };
    match parser.parse2(tokens) {
        Ok(pairs) => {
            if pairs.is_empty() {
                errors.push_spanned(attr, "`#[order()]` says nothing: `#[order(after = InferenceRunner)]`");
            }
            for (key, paths) in pairs {
                match key.to_string().as_str() {
                    "after" => order.after.extend(paths),
                    "before" => order.before.extend(paths),
                    other => unknown(errors, key.span(), "order key", other, &["after", "before"]),
                }
            }
        }
        Err(error) => errors.push(
            error.span(),
            format!("{error}: write `#[order(after = A, before = B)]`, or `after = [A, B]` for several"),
        ),
    }
    order
}

/// The last segment of a path, as the callback name it designates.
pub fn path_name(path: &Path) -> String {
    path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default()
}

/// Whether `attr` is `#[name]` or `#[burn_stoker::name]`.
pub fn is_attr(attr: &Attribute, name: &str) -> bool {
    let path = attr.path();
    path.is_ident(name)
        || (path.segments.len() == 2
            && path.segments[0].ident == "burn_stoker"
            && path.segments[1].ident == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_insertions_deletions_and_substitutions() {
        assert_eq!(edit_distance("trigger_epok", "trigger_epoch"), 2);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("same", "same"), 0);
    }

    #[test]
    fn suggestions_are_close_names_only() {
        assert_eq!(did_you_mean("trigger_epok", EVENTS), Some("trigger_epoch"));
        assert_eq!(did_you_mean("afterstep", EVENTS), Some("after_step"));
        assert_eq!(did_you_mean("every_k_step", &["every_k_steps", "every_k_epochs"]), Some("every_k_steps"));
        assert_eq!(did_you_mean("xyzzy", EVENTS), None);
    }
}
