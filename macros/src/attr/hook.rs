//! The arguments of `#[callback(...)]` (on a function or an impl block) and `#[on(...)]` (on a
//! method): which keys are allowed where, and each key's value read and checked.

use proc_macro2::{Span, TokenStream};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, Ident, Lit, LitStr, Meta, Path, Token};

use super::{Period, boolean, crate_path, period, struct_ident, unknown, unwrap_group, words};
use crate::ctxt::{Attr, Ctxt};
use crate::event::EventKind;
use crate::symbol::*;

/// The keys of `#[callback(...)]` (function form) and `#[on(...)]` (impl form).
#[derive(Default, Clone)]
pub struct HookArgs {
    pub on: Option<EventKind>,
    pub every_k_steps: Option<Period>,
    pub every_k_epochs: Option<Period>,
    pub before_train: Option<(bool, Span)>,
    pub enable_if: Option<Path>,
    pub chief_only: Option<(bool, Span)>,
    pub training_batches: Option<(bool, Span)>,
    pub validation_batches: Option<(bool, Span)>,
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
            Place::Function => &[
                ON,
                EVERY_K_STEPS,
                EVERY_K_EPOCHS,
                BEFORE_TRAIN,
                ENABLE_IF,
                CHIEF_ONLY,
                TRAINING_BATCHES,
                VALIDATION_BATCHES,
                NAME,
            ],
            Place::Impl => &[STATE, CHIEF_ONLY, TRAINING_BATCHES, VALIDATION_BATCHES, NAME],
            Place::Method => &[EVERY_K_STEPS, EVERY_K_EPOCHS, BEFORE_TRAIN, ENABLE_IF],
        }
    }
}

/// The keys read so far, each given at most once (a second value is reported, the first kept).
struct Keys<'c> {
    on: Attr<'c, EventKind>,
    every_k_steps: Attr<'c, Period>,
    every_k_epochs: Attr<'c, Period>,
    before_train: Attr<'c, (bool, Span)>,
    enable_if: Attr<'c, Path>,
    chief_only: Attr<'c, (bool, Span)>,
    training_batches: Attr<'c, (bool, Span)>,
    validation_batches: Attr<'c, (bool, Span)>,
    name: Attr<'c, LitStr>,
    state: Attr<'c, Span>,
    krate: Attr<'c, Path>,
    incomplete: bool,
}

impl<'c> Keys<'c> {
    fn new(cx: &'c Ctxt) -> Self {
        Keys {
            on: Attr::none(cx, ON),
            every_k_steps: Attr::none(cx, EVERY_K_STEPS),
            every_k_epochs: Attr::none(cx, EVERY_K_EPOCHS),
            before_train: Attr::none(cx, BEFORE_TRAIN),
            enable_if: Attr::none(cx, ENABLE_IF),
            chief_only: Attr::none(cx, CHIEF_ONLY),
            training_batches: Attr::none(cx, TRAINING_BATCHES),
            validation_batches: Attr::none(cx, VALIDATION_BATCHES),
            name: Attr::none(cx, NAME),
            state: Attr::none(cx, STATE),
            krate: Attr::none(cx, CRATE),
            incomplete: false,
        }
    }

    fn finish(self) -> HookArgs {
        HookArgs {
            on: self.on.get(),
            every_k_steps: self.every_k_steps.get(),
            every_k_epochs: self.every_k_epochs.get(),
            before_train: self.before_train.get(),
            enable_if: self.enable_if.get(),
            chief_only: self.chief_only.get(),
            training_batches: self.training_batches.get(),
            validation_batches: self.validation_batches.get(),
            name: self.name.get(),
            state: self.state.get(),
            krate: self.krate.get(),
            incomplete: self.incomplete,
        }
    }
}

/// Parse the comma-separated arguments of `#[callback(...)]` or `#[on(...)]`.
pub fn parse_hook_args(tokens: TokenStream, place: Place, cx: &Ctxt) -> HookArgs {
    let Some(mut metas) = parse_metas(tokens, place, cx) else {
        return HookArgs { incomplete: true, ..HookArgs::default() };
    };
    let mut keys = Keys::new(cx);
    // `#[on(after_step, every_k_steps = 2)]`: the event comes first, bare. (An empty `#[on()]`
    // is reported by the caller, which has its span.)
    if place == Place::Method && !metas.is_empty() {
        read_bare_event(&mut metas, &mut keys, cx);
    }
    for meta in metas {
        read_key(meta, place, &mut keys, cx);
    }
    keys.finish()
}

/// The `key = value` entries, or `None` (reported, with an example for `place`) when they do
/// not parse.
fn parse_metas(tokens: TokenStream, place: Place, cx: &Ctxt) -> Option<Vec<Meta>> {
    match Punctuated::<Meta, Token![,]>::parse_terminated.parse2(tokens) {
        Ok(metas) => Some(metas.into_iter().collect()),
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
            None
        }
    }
}

/// The event of `#[on(EVENT, ...)]`, taken out of `metas`: the first bare name.
fn read_bare_event(metas: &mut Vec<Meta>, keys: &mut Keys, cx: &Ctxt) {
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
                Some(event) => keys.on.set_opt(&ident, Some(event)),
                None => keys.incomplete = true,
            }
        }
        None => {
            let first = metas.remove(0);
            cx.push_spanned(
                &first,
                "`#[on]` names its event first: `#[on(after_step)]`, `#[on(trigger, every_k_epochs = 2)]`",
            );
            keys.incomplete = true;
        }
    }
}

/// One `key = value` entry (or the bare `state`), if its key is allowed at `place`.
fn read_key(meta: Meta, place: Place, keys: &mut Keys, cx: &Ctxt) {
    let Some(key) = meta.path().get_ident().cloned() else {
        cx.push(meta.path().span(), "expected a key such as `on = after_step`");
        return;
    };
    let span = key.span();
    let allowed = place.keys().iter().any(|word| key == *word) || (key == CRATE && place != Place::Method);
    if !allowed {
        match misplaced(place, &key) {
            Some(message) => cx.push(span, message),
            None => unknown(cx, span, "key", &key.to_string(), &words(place.keys())),
        }
        return;
    }
    if key == STATE {
        match &meta {
            Meta::Path(_) => keys.state.set_opt(&key, Some(span)),
            _ => cx.push(meta.span(), "`state` takes no value: `#[callback(state)]`"),
        }
        return;
    }
    let Meta::NameValue(pair) = &meta else {
        let example = value_example(&key);
        cx.push_spanned(&meta, format!("`{key}` needs a value: `{example}`"));
        if key == ON {
            keys.incomplete = true;
        }
        return;
    };
    read_value(&key, unwrap_group(&pair.value), keys, cx);
}

/// Where a key not allowed at `place` belongs, if it belongs somewhere else.
fn misplaced(place: Place, key: &Ident) -> Option<String> {
    let event = EventKind::from_name(&key.to_string());
    match place {
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
    }
}

/// An example of `key` with a value, for a key written without one.
fn value_example(key: &Ident) -> &'static str {
    if key == ON {
        "on = trigger"
    } else if key == EVERY_K_STEPS {
        "every_k_steps = 100"
    } else if key == EVERY_K_EPOCHS {
        "every_k_epochs = 2"
    } else if key == BEFORE_TRAIN {
        "before_train = true"
    } else if key == CHIEF_ONLY {
        "chief_only = false"
    } else if key == TRAINING_BATCHES {
        "training_batches = false"
    } else if key == VALIDATION_BATCHES {
        "validation_batches = false"
    } else if key == ENABLE_IF {
        "enable_if = is_warm"
    } else if key == CRATE {
        "crate = \"burn_stoker\""
    } else {
        "name = \"Dump\""
    }
}

/// The value of an allowed `key` (its invisible group removed).
fn read_value(key: &Ident, value: &Expr, keys: &mut Keys, cx: &Ctxt) {
    if key == ON {
        read_on(key, value, keys, cx);
    } else if key == EVERY_K_STEPS {
        keys.every_k_steps.set_opt(key, period(value, EVERY_K_STEPS, cx));
    } else if key == EVERY_K_EPOCHS {
        keys.every_k_epochs.set_opt(key, period(value, EVERY_K_EPOCHS, cx));
    } else if key == BEFORE_TRAIN {
        keys.before_train.set_opt(key, boolean(value, BEFORE_TRAIN, cx));
    } else if key == CHIEF_ONLY {
        keys.chief_only.set_opt(key, boolean(value, CHIEF_ONLY, cx));
    } else if key == TRAINING_BATCHES {
        keys.training_batches.set_opt(key, boolean(value, TRAINING_BATCHES, cx));
    } else if key == VALIDATION_BATCHES {
        keys.validation_batches.set_opt(key, boolean(value, VALIDATION_BATCHES, cx));
    } else if key == ENABLE_IF {
        match value {
            Expr::Path(path) if path.qself.is_none() => keys.enable_if.set_opt(key, Some(path.path.clone())),
            _ => cx.push_spanned(
                value,
                "`enable_if` takes the path of a function `fn(&Counters) -> bool`: `enable_if = is_warm`",
            ),
        }
    } else if key == CRATE {
        keys.krate.set_opt(key, crate_path(value, cx));
    } else if key == NAME {
        read_name(key, value, keys, cx);
    }
}

/// `on = EVENT`.
fn read_on(key: &Ident, value: &Expr, keys: &mut Keys, cx: &Ctxt) {
    match expr_ident(value) {
        Some(ident) => match event_name(&ident, cx) {
            Some(event) => keys.on.set_opt(key, Some(event)),
            None => keys.incomplete = true,
        },
        None => {
            cx.push_spanned(value, "`on` takes an event name, not a string or an expression: `on = trigger`");
            keys.incomplete = true;
        }
    }
}

/// `name = "Struct"`: the generated struct's name, an identifier.
fn read_name(key: &Ident, value: &Expr, keys: &mut Keys, cx: &Ctxt) {
    match value {
        Expr::Lit(ExprLit { lit: Lit::Str(lit), .. }) => {
            if struct_ident(&lit.value(), lit.span()).is_some() {
                keys.name.set_opt(key, Some(lit.clone()));
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

/// The event named by `expr`, a bare identifier.
fn expr_ident(expr: &Expr) -> Option<Ident> {
    match unwrap_group(expr) {
        Expr::Path(path) if path.qself.is_none() => path.path.get_ident().cloned(),
        _ => None,
    }
}

/// The event `ident` names, or `None` (reported, with the closest name).
fn event_name(ident: &Ident, cx: &Ctxt) -> Option<EventKind> {
    let name = ident.to_string();
    let kind = EventKind::from_name(&name);
    if kind.is_none() {
        unknown(cx, ident.span(), "event", &name, &EventKind::names());
    }
    kind
}
