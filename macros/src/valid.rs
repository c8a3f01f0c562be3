//! The misuse rules: each problem reported on the token that causes it, with what to do instead.

use syn::spanned::Spanned;

use crate::ast::Hook;
use crate::attr::{self, FetchAttr, OrderAttr};
use crate::ctxt::Ctxt;
use crate::event::EventKind;

/// Check one hook. `callback_span` is where to point when the event is missing.
pub fn hook(hook: &Hook, errors: &Ctxt, callback_span: proc_macro2::Span) {
    if hook.event.is_none() && !hook.args.incomplete {
        errors.push(callback_span, "name the event this callback runs on: `#[callback(on = trigger)]`");
    }
    ungated(hook, errors);
    before_train(hook, errors);
    let values: Vec<&syn::Type> = hook.values().collect();
    match &hook.fetch {
        Some(fetch) => fetch_count(hook, fetch, &values, errors),
        None if hook.event.is_some_and(|event| event.in_step()) => payload_values(hook, &values, errors),
        None => unfetched_values(hook, &values, errors),
    }
}

/// A period or a predicate on an event that is never gated.
fn ungated(hook: &Hook, errors: &Ctxt) {
    let event = hook.event_name();
    let ungated = hook.event.filter(|event| event.ungated());
    // Why a period or a predicate cannot apply to the event.
    let why = match ungated {
        Some(event) if event.runs_once() => "which runs once",
        Some(event) if event.in_step() => "which runs inside every step and is never gated",
        _ => "which follows what the loop did (a validation pass, a cancellation) and is never gated",
    };
    for (key, period) in
        [("every_k_steps", hook.args.every_k_steps), ("every_k_epochs", hook.args.every_k_epochs)]
    {
        if let (Some(_), Some(period)) = (ungated, period) {
            errors.push(
                period.span,
                format!(
                    "`{key}` on `{event}`, {why}: remove it, or bind the callback to a step or epoch event"
                ),
            );
        }
    }
    if let Some(path) = &hook.args.enable_if
        && ungated.is_some()
    {
        errors.push(
            path.span(),
            format!("`enable_if` on `{event}`, {why}: test the condition inside the function"),
        );
    }
}

/// `before_train` on another event than `trigger`.
fn before_train(hook: &Hook, errors: &Ctxt) {
    let event = hook.event_name();
    // On `trigger`, `true` also runs it before training and `false` is the default: both fine.
    if let Some((_, span)) = hook.args.before_train {
        if hook.event == Some(EventKind::BeforeTrain) {
            errors.push(span, "`before_train = true` makes a `trigger` callback also run before training; this callback already runs on `before_train`: remove the key");
        } else if hook.event.is_some_and(|event| event != EventKind::Trigger) {
            errors.push(span, format!("`before_train` asks `trigger` to also run before training; this callback runs on `{event}`: use `on = trigger`, or `on = before_train`"));
        }
    }
}

/// `#[fetch]` on an event without values, or naming as many values as there are parameters.
fn fetch_count(hook: &Hook, fetch: &FetchAttr, values: &[&syn::Type], errors: &Ctxt) {
    let event = hook.event_name();
    if hook.event.is_some_and(|event| !event.has_values()) {
        errors.push_spanned(&fetch.tokens, format!("`#[fetch]` on `{event}`: fetched values exist only in `after_step`, right after the step that computed them"));
    } else if fetch.count != values.len() && fetch.count != 0 {
        let message = format!(
            "`#[fetch]` names {} value{} but the function takes {} value parameter{}: one parameter per name, in order",
            fetch.count,
            if fetch.count == 1 { "" } else { "s" },
            values.len(),
            if values.len() == 1 { "" } else { "s" },
        );
        if let Some(extra) = values.get(fetch.count) {
            // The first parameter without a name.
            errors.push_spanned(extra, message);
        } else if let (true, Some(extra)) = (fetch.names.len() == fetch.count, fetch.names.get(values.len()))
        {
            // The first name without a parameter.
            errors.push(extra.span(), message);
        } else {
            errors.push_spanned(&fetch.tokens, message);
        }
    }
}

/// The parameters of an in-step event: its payload, once.
fn payload_values(hook: &Hook, values: &[&syn::Type], errors: &Ctxt) {
    let event = hook.event_name();
    let (name, ty) = hook.event.and_then(EventKind::payload).unwrap_or(("loss", "StepLoss"));
    // Another in-step event's payload: named here, rather than as a type mismatch
    // inside the generated call.
    if let Some(other) = values.first().and_then(|value| payload_type(value)).filter(|other| *other != ty) {
        errors.push_spanned(
            values[0],
            format!(
                "`{other}` is another event's value: {} `{event}` callback takes `{name}: &{ty}`",
                if event.starts_with('a') { "an" } else { "a" }
            ),
        );
    }
    if let Some(extra) = values.get(1) {
        errors.push_spanned(
            extra,
            format!(
                "{} `{event}` callback takes `ctx: &mut Context<'_, M>` and `{name}: &{ty}` (in any order), nothing else",
                if event.starts_with('a') { "an" } else { "a" }
            ),
        );
    }
}

/// A value parameter without `#[fetch]`.
fn unfetched_values(hook: &Hook, values: &[&syn::Type], errors: &Ctxt) {
    let event = hook.event_name();
    if let Some(first) = values.first() {
        let message = if hook.event.is_some_and(EventKind::has_values) {
            "this parameter receives nothing: name the value it fetches with `#[fetch(\"name\")]`, or take `ctx: &mut Context<'_, M>`".to_string()
        } else {
            format!(
                "{} `{event}` callback takes only `ctx: &mut Context<'_, M>`; fetched values come to `after_step` with `#[fetch(...)]`",
                if event.starts_with('a') { "an" } else { "a" }
            )
        };
        errors.push_spanned(first, message);
    }
}

/// The name of the in-step payload type `ty` names (`&StepBatch<'_>`, `&callback::StepLoss`...),
/// if it names one.
fn payload_type(ty: &syn::Type) -> Option<&'static str> {
    let syn::Type::Reference(reference) = ty else { return None };
    let syn::Type::Path(path) = &*reference.elem else { return None };
    let last = path.path.segments.last()?.ident.to_string();
    EventKind::ALL.iter().filter_map(|event| event.payload()).map(|(_, ty)| ty).find(|ty| last == *ty)
}

/// Check order constraints of the callback named `own`.
pub fn order(order: &OrderAttr, own: &str, errors: &Ctxt) {
    for (key, list) in [("after", &order.after), ("before", &order.before)] {
        for (i, path) in list.iter().enumerate() {
            let name = attr::path_name(path);
            if name.starts_with(|c: char| c.is_lowercase()) {
                errors.push_spanned(
                    path,
                    format!("`{name}` is not a callback type: order targets name types, such as `{}`, the struct `#[callback]` makes of `fn {name}`", crate::ast::camel_case(&name)),
                );
                continue;
            }
            if name == own {
                errors.push(path.span(), format!("`{own}` cannot run {key} itself: name another callback"));
            }
            if list[..i].iter().any(|p| attr::path_name(p) == name) {
                errors.push(path.span(), format!("`{name}` is listed twice in `{key}`: list it once"));
            }
        }
    }
    for path in &order.after {
        let name = attr::path_name(path);
        if let Some(other) = order.before.iter().find(|p| attr::path_name(p) == name) {
            errors.push(
                other.span(),
                format!(
                    "`{name}` is in both `after` and `before`: a callback cannot run both after and before it"
                ),
            );
        }
    }
}
