//! The `Callback` trait methods a set of hooks fills: each hook's gate (its event, periods and
//! predicate), its fetches, and the call that extracts the fetched values, calls the hook and
//! applies what it returned.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Ident, ReturnType, Type};

use super::{Runtime, option};
use crate::ast::{Hook, Param};
use crate::attr::FetchAttr;
use crate::event::EventKind;

/// The trait methods a set of hooks fills, in one place so that several hooks can share one.
#[derive(Default)]
pub struct Methods {
    /// The statements of each event's method, indexed by [`EventKind::index`].
    events: [Vec<TokenStream>; EventKind::ALL.len()],
    fetches: Vec<TokenStream>,
    wants: Vec<TokenStream>,
}

impl Methods {
    fn push(&mut self, event: EventKind, code: TokenStream) {
        self.events[event.index()].push(code);
    }
}

/// A span at the user's `ty`, resolved at the call site.
fn at(ty: &Type) -> Span {
    Span::call_site().located_at(ty.span())
}

/// The statements that call a hook once its gate passed: extract fetched values, call, apply the
/// returned value.
fn invocation(
    rt: &Runtime,
    hook: &Hook,
    call: impl Fn(Vec<TokenStream>) -> TokenStream,
    with_values: bool,
    first_fetch: usize,
) -> TokenStream {
    let mut extract = Vec::new();
    let mut args = Vec::new();
    let names = hook.fetch.as_ref().map(|f| f.names.clone()).unwrap_or_default();
    let mut value_index = 0;
    let payload = hook.event.and_then(EventKind::payload);
    for param in &hook.params {
        match param {
            Param::Context { .. } => args.push(quote!(&mut *ctx)),
            // An in-step event's payload: the loss or the gradients the trait method received.
            Param::Value { .. } if payload.is_some() => {
                let name = Ident::new(payload.map_or("loss", |(name, _)| name), Span::call_site());
                args.push(quote!(#name));
            }
            Param::Value { ty } => {
                let var = format_ident!("__stoker_value_{}", value_index);
                if with_values && let Some(name) = names.get(value_index) {
                    // Located at the type (errors point there), resolved at the call site
                    // (hygiene: the user's tokens may come from a `macro_rules!`). Every token of
                    // the path sits at the type.
                    let p = rt.private_at(at(ty));
                    // Its position in the callback's `fetches()`: the slot is resolved at setup.
                    let k = first_fetch + value_index;
                    extract.push(quote_spanned! {at(ty)=>
                        let #var: #ty =
                            <#ty as #p::FetchValue>::from_fetched(&values.nth(#k, #name), #name)?;
                    });
                }
                args.push(quote!(#var));
                value_index += 1;
            }
        }
    }
    let call = call(args);
    let span = match &hook.output {
        ReturnType::Type(_, ty) => ty.span(),
        ReturnType::Default => hook.span,
    };
    let span = Span::call_site().located_at(span);
    let p = rt.private_at(span);
    let apply = quote_spanned!(span=> #p::CallbackReturn::apply(__stoker_returned, &mut *ctx)?;);
    quote! {
        #(#extract)*
        let __stoker_returned = #call;
        #apply
    }
}

/// A hook's call and the predicate that gates it.
struct Guard<'a> {
    pred: Option<&'a syn::Path>,
    /// The statements of one call ([`invocation`]).
    run: TokenStream,
}

impl Guard<'_> {
    /// The predicate called on `counters`, or `true` without one.
    fn gate(&self, counters: TokenStream) -> TokenStream {
        match self.pred {
            Some(pred) => quote!(#pred(#counters)),
            None => quote!(true),
        }
    }

    /// The call, when `condition` holds.
    fn guarded(&self, condition: TokenStream) -> TokenStream {
        let run = &self.run;
        quote!(if #condition { #run })
    }
}

/// Whether the hook has a period.
fn periodic(hook: &Hook) -> bool {
    hook.args.every_k_steps.is_some() || hook.args.every_k_epochs.is_some()
}

/// Add what `hook` does to `methods`.
pub fn add_hook(
    rt: &Runtime,
    methods: &mut Methods,
    hook: &Hook,
    call: impl Fn(Vec<TokenStream>) -> TokenStream,
) {
    let Some(event) = hook.event else { return };
    // This hook's fetches follow those of the hooks before it in the callback's `fetches()`.
    let run = invocation(rt, hook, &call, event.has_values(), methods.fetches.len());
    let guard = Guard { pred: hook.args.enable_if.as_ref(), run };
    if event == EventKind::Trigger {
        add_trigger(methods, hook, &guard);
    } else if event.has_step() {
        add_step(rt, methods, hook, event, &guard);
    } else if event.is_epoch() {
        add_epoch(rt, methods, hook, event, &guard);
    } else {
        // Runs once: no period, no predicate (both are errors there).
        methods.push(event, guard.run);
    }
}

/// `trigger`: tensorpack's `PeriodicTrigger`, on `trigger`, `trigger_step`, `trigger_epoch` and,
/// with `before_train = true`, `before_train`.
fn add_trigger(methods: &mut Methods, hook: &Hook, guard: &Guard) {
    let g = guard.gate(quote!(ctx.counters()));
    methods.push(EventKind::Trigger, guard.guarded(g.clone()));
    if let Some(k) = hook.args.every_k_steps {
        let k = k.value;
        methods
            .push(EventKind::TriggerStep, guard.guarded(quote!(ctx.global_step().is_multiple_of(#k) && #g)));
    }
    match (hook.args.every_k_epochs, hook.args.every_k_steps) {
        (Some(k), _) => {
            let k = k.value;
            methods.push(
                EventKind::TriggerEpoch,
                guard.guarded(quote!(ctx.epoch_num().is_multiple_of(#k) && #g)),
            );
        }
        (None, Some(_)) => {}
        (None, None) => methods.push(EventKind::TriggerEpoch, guard.guarded(g.clone())),
    }
    if matches!(hook.args.before_train, Some((true, _))) {
        methods.push(EventKind::BeforeTrain, guard.guarded(g));
    }
}

/// A step event: `PeriodicCallback`'s gate and `EnableCallbackIf`'s, and on `after_step` the
/// fetches (deferred ones delivered in `fetched`).
fn add_step(rt: &Runtime, methods: &mut Methods, hook: &Hook, event: EventKind, guard: &Guard) {
    let p = rt.private();
    let ks = option(hook.args.every_k_steps);
    let ke = option(hook.args.every_k_epochs);
    // `EnableCallbackIf`'s rule: `before_step` reads the predicate before the step,
    // `after_step` keeps that answer (the counters of before the step), `trigger_step`
    // reads it after the step.
    let (step, counters) = match event {
        EventKind::BeforeStep => (quote!(ctx.counters().next_step()), quote!(ctx.counters())),
        EventKind::AfterStep => {
            (quote!(ctx.global_step()), quote!(&#p::counters_before_step(ctx.counters())))
        }
        _ => (quote!(ctx.global_step()), quote!(ctx.counters())),
    };
    let mut condition = guard.gate(counters);
    if periodic(hook) {
        condition = quote!(#p::step_due(#ks, #ke, #step, ctx.counters()) && #condition);
    }
    let deferred = hook.fetch.as_ref().and_then(|fetch| fetch.deferred);
    match deferred {
        // Deferred values arrive in `fetched` at a later step, for the steps the period and
        // the predicate let the hook ask at: the call waits for its own values.
        Some(_) if event == EventKind::AfterStep => {
            let first = methods.fetches.len();
            methods.push(EventKind::Fetched, guard.guarded(quote!(values.holds(#first))));
        }
        _ => methods.push(event, guard.guarded(condition)),
    }
    if event.has_values()
        && let Some(fetch) = &hook.fetch
    {
        add_fetches(rt, methods, hook, fetch, deferred);
        let mut wants = guard.gate(quote!(counters));
        if periodic(hook) {
            wants = quote!(#p::step_due(#ks, #ke, counters.next_step(), counters) && #wants);
        }
        methods.wants.push(wants);
    }
}

/// The entries of `fetches()` for the values `fetch` names, one per value parameter.
fn add_fetches(rt: &Runtime, methods: &mut Methods, hook: &Hook, fetch: &FetchAttr, deferred: Option<Span>) {
    let tys: Vec<&Type> = hook.values().collect();
    for (name, ty) in fetch.names.iter().zip(tys) {
        // The same obligation, at the same span, as the extraction in
        // `invocation`: a type that cannot be fetched gets one error, not two.
        let p = rt.private_at(at(ty));
        let kind = match deferred {
            // A device tensor cannot be deferred: `FetchKind::deferred` panics in the
            // static's evaluation, a compile error naming the fix.
            Some(span) => {
                let word = quote_spanned!(span=> deferred);
                quote_spanned!(at(ty)=> <#ty as #p::FetchValue>::KIND.#word())
            }
            None => quote_spanned!(at(ty)=> <#ty as #p::FetchValue>::KIND),
        };
        methods.fetches.push(quote_spanned! {at(ty)=>
            #p::Fetch {
                name: #p::Cow::Borrowed(#name),
                kind: #kind,
            }
        });
    }
}

/// An epoch event: `PeriodicCallback`'s gate and the predicate.
fn add_epoch(rt: &Runtime, methods: &mut Methods, hook: &Hook, event: EventKind, guard: &Guard) {
    let p = rt.private();
    let ks = option(hook.args.every_k_steps);
    let ke = option(hook.args.every_k_epochs);
    let mut condition = guard.gate(quote!(ctx.counters()));
    if periodic(hook) {
        condition = quote!(#p::epoch_due(#ks, #ke, ctx.counters()) && #condition);
    }
    methods.push(event, guard.guarded(condition));
}
pub fn trait_methods(rt: &Runtime, methods: Methods, model: &TokenStream) -> TokenStream {
    let p = rt.private();
    let mut out = TokenStream::new();
    for event in EventKind::ALL {
        let parts = &methods.events[event.index()];
        // trigger_epoch is always written so that it runs exactly the hooks due at an epoch's
        // end, not every trigger hook through the default `trigger_epoch` -> `trigger`.
        if parts.is_empty() && event != EventKind::TriggerEpoch {
            continue;
        }
        let ident = Ident::new(event.name(), Span::call_site());
        let values = event.parameter().map(|(name, ty)| {
            let (name, ty) = (Ident::new(name, Span::call_site()), Ident::new(ty, Span::call_site()));
            // `StepLoss` and `Fetched` borrow the step's outputs; `StepGradients` borrows nothing.
            let lifetime = (event != EventKind::AfterBackward).then(|| quote!(<'_>));
            quote!(#name: &#p::#ty #lifetime,)
        });
        out.extend(quote! {
            #[allow(unused_variables, unreachable_code, clippy::needless_return)]
            fn #ident(&mut self, ctx: &mut #p::Context<'_, #model>, #values) -> #p::Result<()> {
                #(#parts)*
                #p::Ok(())
            }
        });
    }
    // The events inside a step reach only the callbacks that ask for them.
    let takes = |event: EventKind| !methods.events[event.index()].is_empty();
    let batch = takes(EventKind::BeforeBatch);
    let pred = takes(EventKind::AfterPred);
    let loss = takes(EventKind::BeforeBackward);
    let gradients = takes(EventKind::AfterBackward);
    if batch || pred || loss || gradients {
        out.extend(quote! {
            fn step_events(&self) -> #p::StepEvents {
                #p::StepEvents { batch: #batch, pred: #pred, loss: #loss, gradients: #gradients }
            }
        });
    }
    if !takes(EventKind::AfterBatch) {
        out.extend(quote! {
            fn takes_after_batch(&self) -> bool {
                false
            }
        });
    }
    let fetches = &methods.fetches;
    if !fetches.is_empty() {
        let n = fetches.len();
        let wants = &methods.wants;
        out.extend(quote! {
            fn fetches(&self) -> &[#p::Fetch] {
                static FETCHES: [#p::Fetch; #n] = [#(#fetches),*];
                &FETCHES
            }
            #[allow(unused_variables)]
            fn wants_fetch(&self, counters: &#p::Counters) -> bool {
                false #(|| #wants)*
            }
        });
    }
    out
}
