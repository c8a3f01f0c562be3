//! Attribute parsing: `#[callback(...)]`, `#[on(...)]`, `#[fetch(...)]`, `#[order(...)]`, and the
//! field attributes of `#[derive(Callbacks)]`. Parsing never stops at the first problem: every
//! error goes to [`Ctxt`] and parsing goes on with what it could read.

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::parse::{ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Attribute, Expr, ExprLit, Ident, Lit, LitStr, Meta, Path, Token};

use crate::ctxt::{Attr, Ctxt};
use crate::event::EventKind;
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

/// The keys of `#[callback(...)]` (function form) and `#[on(...)]` (impl form).
#[derive(Default, Clone)]
pub struct HookArgs {
    pub on: Option<EventKind>,
    pub every_k_steps: Option<Period>,
    pub every_k_epochs: Option<Period>,
    pub before_train: Option<(bool, Span)>,
    pub enable_if: Option<Path>,
    pub chief_only: Option<(bool, Span)>,
    pub name: Option<LitStr>,
    pub state: Option<Span>,
    /// `crate = "path"`: the runtime crate's path, when it is not `::burn_stoker`.
    pub krate: Option<Path>,
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
    /// The keys allowed here, as listed in messages (`crate`, for the few who rename the
    /// dependency, is allowed on `#[callback]` but not listed).
    fn keys(self) -> &'static [Symbol] {
        match self {
            Place::Function => {
                &[ON, EVERY_K_STEPS, EVERY_K_EPOCHS, BEFORE_TRAIN, ENABLE_IF, CHIEF_ONLY, NAME]
            }
            Place::Impl => &[STATE, CHIEF_ONLY, NAME],
            Place::Method => &[EVERY_K_STEPS, EVERY_K_EPOCHS, BEFORE_TRAIN, ENABLE_IF],
        }
    }
}

/// The words of `symbols`, for [`unknown`].
fn words(symbols: &[Symbol]) -> Vec<&'static str> {
    symbols.iter().map(|symbol| symbol.as_str()).collect()
}

/// Parse the comma-separated arguments of `#[callback(...)]` or `#[on(...)]`.
pub fn parse_hook_args(tokens: TokenStream, place: Place, cx: &Ctxt) -> HookArgs {
    let metas = match Punctuated::<Meta, Token![,]>::parse_terminated.parse2(tokens) {
        Ok(metas) => metas,
        Err(error) => {
            let example = match place {
                Place::Function => "`#[callback(on = trigger, every_k_epochs = 2)]`",
                Place::Impl => "`#[callback(state, name = \"Best\")]`",
                Place::Method => "`#[on(trigger, every_k_epochs = 2)]`",
            };
            cx.push(
                error.span(),
                format!("{error}: write `key = value` pairs separated by commas, {example}"),
            );
            return HookArgs { incomplete: true, ..HookArgs::default() };
        }
    };
    let mut on = Attr::none(cx, ON);
    let mut every_k_steps = Attr::none(cx, EVERY_K_STEPS);
    let mut every_k_epochs = Attr::none(cx, EVERY_K_EPOCHS);
    let mut before_train = Attr::none(cx, BEFORE_TRAIN);
    let mut enable_if = Attr::none(cx, ENABLE_IF);
    let mut chief_only = Attr::none(cx, CHIEF_ONLY);
    let mut name = Attr::none(cx, NAME);
    let mut state = Attr::none(cx, STATE);
    let mut krate = Attr::none(cx, CRATE);
    let mut incomplete = false;
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
                    cx.push(ident.span(), format!("write the event first: `#[on({ident}, ...)]`"));
                }
                match event_name(&ident, cx) {
                    Some(event) => on.set_opt(&ident, Some(event)),
                    None => incomplete = true,
                }
            }
            None => {
                let first = metas.remove(0);
                cx.push_spanned(
                    &first,
                    "`#[on]` names its event first: `#[on(after_step)]`, `#[on(trigger, every_k_epochs = 2)]`",
                );
                incomplete = true;
            }
        }
    }
    for meta in metas {
        let Some(key) = meta.path().get_ident().cloned() else {
            cx.push(meta.path().span(), "expected a key such as `on = after_step`");
            continue;
        };
        let span = key.span();
        let allowed =
            place.keys().iter().any(|word| key == *word) || (key == CRATE && place != Place::Method);
        if !allowed {
            let event = EventKind::from_name(&key.to_string());
            let elsewhere = match place {
                Place::Impl if key == ON => Some(
                    "an impl block is not bound to an event, its methods are: put `#[on(trigger)]` on a method"
                        .to_string(),
                ),
                Place::Impl if [EVERY_K_STEPS, EVERY_K_EPOCHS, BEFORE_TRAIN, ENABLE_IF].iter().any(|w| key == *w) => {
                    Some(format!("`{key}` belongs on a method of the impl: `#[on(trigger, {key} = ...)]`"))
                }
                Place::Method if key == ON => Some("write the event first, bare: `#[on(after_step)]`".to_string()),
                Place::Method if key == STATE => Some("`state` belongs on the impl: `#[callback(state)]`".to_string()),
                Place::Method if key == NAME || key == CHIEF_ONLY || key == CRATE => {
                    Some(format!("`{key}` belongs on the impl: `#[callback({key} = ...)]`"))
                }
                Place::Method if event.is_some() => Some(format!(
                    "a method is bound to one event: write another method for `{key}`, with its own `#[on({key})]`"
                )),
                Place::Function if key == STATE => Some(
                    "`state` saves a callback's fields in checkpoints; a function has none: put `#[callback(state)]` on an impl block of a serializable type".to_string(),
                ),
                _ => None,
            };
            match elsewhere {
                Some(message) => cx.push(span, message),
                None => unknown(cx, span, "key", &key.to_string(), &words(place.keys())),
            }
            continue;
        }
        if key == STATE {
            match &meta {
                Meta::Path(_) => state.set_opt(&key, Some(span)),
                _ => cx.push(meta.span(), "`state` takes no value: `#[callback(state)]`"),
            }
            continue;
        }
        let Meta::NameValue(pair) = &meta else {
            let example = if key == ON {
                "on = trigger"
            } else if key == EVERY_K_STEPS {
                "every_k_steps = 100"
            } else if key == EVERY_K_EPOCHS {
                "every_k_epochs = 2"
            } else if key == BEFORE_TRAIN {
                "before_train = true"
            } else if key == CHIEF_ONLY {
                "chief_only = false"
            } else if key == ENABLE_IF {
                "enable_if = is_warm"
            } else if key == CRATE {
                "crate = \"burn_stoker\""
            } else {
                "name = \"Dump\""
            };
            cx.push_spanned(&meta, format!("`{key}` needs a value: `{example}`"));
            if key == ON {
                incomplete = true;
            }
            continue;
        };
        let value = unwrap_group(&pair.value);
        if key == ON {
            match expr_ident(value) {
                Some(ident) => match event_name(&ident, cx) {
                    Some(event) => on.set_opt(&key, Some(event)),
                    None => incomplete = true,
                },
                None => {
                    cx.push_spanned(
                        value,
                        "`on` takes an event name, not a string or an expression: `on = trigger`",
                    );
                    incomplete = true;
                }
            }
        } else if key == EVERY_K_STEPS {
            every_k_steps.set_opt(&key, period(value, EVERY_K_STEPS, cx));
        } else if key == EVERY_K_EPOCHS {
            every_k_epochs.set_opt(&key, period(value, EVERY_K_EPOCHS, cx));
        } else if key == BEFORE_TRAIN {
            before_train.set_opt(&key, boolean(value, BEFORE_TRAIN, cx));
        } else if key == CHIEF_ONLY {
            chief_only.set_opt(&key, boolean(value, CHIEF_ONLY, cx));
        } else if key == ENABLE_IF {
            match value {
                Expr::Path(path) if path.qself.is_none() => enable_if.set_opt(&key, Some(path.path.clone())),
                _ => cx.push_spanned(
                    value,
                    "`enable_if` takes the path of a function `fn(&Counters) -> bool`: `enable_if = is_warm`",
                ),
            }
        } else if key == CRATE {
            krate.set_opt(&key, crate_path(value, cx));
        } else if key == NAME {
            match value {
                Expr::Lit(ExprLit { lit: Lit::Str(lit), .. }) => {
                    if struct_ident(&lit.value(), lit.span()).is_some() {
                        name.set_opt(&key, Some(lit.clone()));
                    } else {
                        cx.push(
                            lit.span(),
                            format!(
                                "`name` names the generated struct: an identifier such as \"DumpWeights\", not {:?}",
                                lit.value()
                            ),
                        );
                    }
                }
                _ => cx.push_spanned(value, "`name` takes a string: `name = \"Dump\"`"),
            }
        }
    }
    HookArgs {
        on: on.get(),
        every_k_steps: every_k_steps.get(),
        every_k_epochs: every_k_epochs.get(),
        before_train: before_train.get(),
        enable_if: enable_if.get(),
        chief_only: chief_only.get(),
        name: name.get(),
        state: state.get(),
        krate: krate.get(),
        incomplete,
    }
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

fn expr_ident(expr: &Expr) -> Option<Ident> {
    match unwrap_group(expr) {
        Expr::Path(path) if path.qself.is_none() => path.path.get_ident().cloned(),
        _ => None,
    }
}

fn event_name(ident: &Ident, cx: &Ctxt) -> Option<EventKind> {
    let name = ident.to_string();
    let kind = EventKind::from_name(&name);
    if kind.is_none() {
        unknown(cx, ident.span(), "event", &name, &EventKind::names());
    }
    kind
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

pub fn parse_order(attr: &Attribute, errors: &Ctxt) -> OrderAttr {
    let mut order = OrderAttr::default();
    let tokens = match &attr.meta {
        Meta::List(list) => list.tokens.clone(),
        _ => {
            errors.push_spanned(attr, "`#[order]` needs constraints: `#[order(after = InferenceRunner)]`");
            return order;
        }
    };
    let parser = |input: ParseStream| {
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
    };
    match parser.parse2(tokens) {
        Ok(entries) => {
            if entries.is_empty() {
                errors.push_spanned(attr, "`#[order()]` says nothing: `#[order(after = InferenceRunner)]` or `#[order(-9)]`");
            }
            for entry in entries {
                match entry {
                    OrderEntry::Paths(key, paths) if key == AFTER => order.after.extend(paths),
                    OrderEntry::Paths(key, paths) if key == BEFORE => order.before.extend(paths),
                    OrderEntry::Paths(key, _) => {
                        unknown(errors, key.span(), "order key", &key.to_string(), &words(&[AFTER, BEFORE, VALUE]))
                    }
                    OrderEntry::Value(Err(message), span) => errors.push(span, message),
                    OrderEntry::Value(Ok(value), span) => {
                        if let Some((first, _)) = order.value {
                            errors.push(
                                span,
                                format!("a second numeric order (`{first}` is already given): give it once"),
                            );
                        } else {
                            order.value = Some((value, span));
                        }
                    }
                }
            }
        }
        Err(error) => errors.push(
            error.span(),
            format!("{error}: write `#[order(after = A, before = B)]`, or `after = [A, B]` for several, and a numeric order as `#[order(-9)]` or `value = -9`"),
        ),
    }
    order
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
