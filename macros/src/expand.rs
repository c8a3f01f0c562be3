//! Code generation. Generated code reaches the runtime only through its hidden module,
//! `::burn_stoker::__private` (or `<crate>::__private` with `crate = "..."`), always by that
//! absolute path, and every generated impl is `#[automatically_derived]`.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{GenericParam, Ident, ReturnType, Type, TypeParamBound};

use crate::ast::{CallbackFn, CallbackImpl, Hook, Model, Param};
use crate::attr::{OrderAttr, Period};
use crate::event::EventKind;

/// Where generated code finds the runtime: `::burn_stoker` unless `crate = "..."` names it.
pub struct Runtime {
    krate: Option<syn::Path>,
}

impl Runtime {
    /// The runtime at `krate`, or at `::burn_stoker`.
    pub fn new(krate: Option<&syn::Path>) -> Runtime {
        Runtime { krate: krate.cloned() }
    }

    /// The hidden module, at the call site.
    pub fn private(&self) -> TokenStream {
        self.private_at(Span::call_site())
    }

    /// The hidden module, every token written at `span` (so that errors of a spanned obligation
    /// point at the user's tokens, and two obligations at one place give one error).
    pub fn private_at(&self, span: Span) -> TokenStream {
        let Some(krate) = &self.krate else { return quote_spanned!(span=> ::burn_stoker::__private) };
        let leading = krate.leading_colon.map(|_| quote_spanned!(span=> ::));
        let segments = krate.segments.iter().map(|segment| {
            let name = segment.ident.to_string();
            match name.strip_prefix("r#") {
                Some(raw) => Ident::new_raw(raw, span),
                None => Ident::new(&name, span),
            }
        });
        quote_spanned!(span=> #leading #(#segments)::* ::__private)
    }
}

/// The trait methods a set of hooks fills, in one place so that several hooks can share one.
#[derive(Default)]
struct Methods {
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

fn option(period: Option<Period>) -> TokenStream {
    match period {
        Some(p) => {
            let v = p.value;
            quote!(::core::option::Option::Some(#v))
        }
        None => quote!(::core::option::Option::None),
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

/// Add what `hook` does to `methods`.
fn add_hook(
    rt: &Runtime,
    methods: &mut Methods,
    hook: &Hook,
    call: impl Fn(Vec<TokenStream>) -> TokenStream,
) {
    let Some(event) = hook.event else { return };
    let p = rt.private();
    let ks = option(hook.args.every_k_steps);
    let ke = option(hook.args.every_k_epochs);
    let periodic = hook.args.every_k_steps.is_some() || hook.args.every_k_epochs.is_some();
    let pred = hook.args.enable_if.as_ref();
    let gate = |counters: TokenStream| match pred {
        Some(pred) => quote!(#pred(#counters)),
        None => quote!(true),
    };
    // This hook's fetches follow those of the hooks before it in the callback's `fetches()`.
    let run = invocation(rt, hook, &call, event.has_values(), methods.fetches.len());
    let guarded = |condition: TokenStream| quote!(if #condition { #run });
    if event == EventKind::Trigger {
        let g = gate(quote!(ctx.counters()));
        methods.push(EventKind::Trigger, guarded(g.clone()));
        if let Some(k) = hook.args.every_k_steps {
            let k = k.value;
            methods.push(EventKind::TriggerStep, guarded(quote!(ctx.global_step().is_multiple_of(#k) && #g)));
        }
        match (hook.args.every_k_epochs, hook.args.every_k_steps) {
            (Some(k), _) => {
                let k = k.value;
                methods
                    .push(EventKind::TriggerEpoch, guarded(quote!(ctx.epoch_num().is_multiple_of(#k) && #g)));
            }
            (None, Some(_)) => {}
            (None, None) => methods.push(EventKind::TriggerEpoch, guarded(g.clone())),
        }
        if matches!(hook.args.before_train, Some((true, _))) {
            methods.push(EventKind::BeforeTrain, guarded(g));
        }
    } else if event.has_step() {
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
        let mut condition = gate(counters);
        if periodic {
            condition = quote!(#p::step_due(#ks, #ke, #step, ctx.counters()) && #condition);
        }
        let deferred = hook.fetch.as_ref().and_then(|fetch| fetch.deferred);
        match deferred {
            // Deferred values arrive in `fetched` at a later step, for the steps the period and
            // the predicate let the hook ask at: the call waits for its own values.
            Some(_) if event == EventKind::AfterStep => {
                let first = methods.fetches.len();
                methods.push(EventKind::Fetched, guarded(quote!(values.holds(#first))));
            }
            _ => methods.push(event, guarded(condition)),
        }
        if event.has_values()
            && let Some(fetch) = &hook.fetch
        {
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
            let mut wants = gate(quote!(counters));
            if periodic {
                wants = quote!(#p::step_due(#ks, #ke, counters.next_step(), counters) && #wants);
            }
            methods.wants.push(wants);
        }
    } else if event.is_epoch() {
        let mut condition = gate(quote!(ctx.counters()));
        if periodic {
            condition = quote!(#p::epoch_due(#ks, #ke, ctx.counters()) && #condition);
        }
        methods.push(event, guarded(condition));
    } else {
        // Runs once: no period, no predicate (both are errors there).
        methods.push(event, run);
    }
}

/// The `Order` of `order`'s constraints. Each target is a type, named by its
/// `CallbackKind::NAME`: a path that names no type, or a type that is not a callback, is a
/// compile error on the path.
fn order_value(rt: &Runtime, order: &OrderAttr) -> TokenStream {
    let p = rt.private();
    let name = |path: &syn::Path| {
        let span = Span::call_site().located_at(path.span());
        let at = rt.private_at(span);
        quote_spanned!(span=> <#path as #at::CallbackKind>::NAME)
    };
    let after = order.after.iter().map(name);
    let before = order.before.iter().map(name);
    let value = order.value.map(|(value, _)| quote!(.value(#value)));
    quote!(#p::Order::none() #(.after(#after))* #(.before(#before))* #value)
}

fn order_method(rt: &Runtime, order: &Option<OrderAttr>) -> TokenStream {
    let p = rt.private();
    let Some(order) = order else { return TokenStream::new() };
    let value = order_value(rt, order);
    quote! {
        fn order(&self) -> #p::Order {
            #value
        }
    }
}

/// `impl CallbackKind for #ty`: the name an order target naming this type designates.
pub fn kind_impl(rt: &Runtime, generics: &syn::Generics, ty: &TokenStream, name: &str) -> TokenStream {
    let p = rt.private();
    let (impl_generics, _, where_clause) = generics.split_for_impl();
    quote! {
        #[automatically_derived]
        impl #impl_generics #p::CallbackKind for #ty #where_clause {
            const NAME: &'static str = #name;
        }
    }
}

fn trait_methods(rt: &Runtime, methods: Methods, model: &TokenStream) -> TokenStream {
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
            fn step_hooks(&self) -> #p::StepHooks {
                #p::StepHooks { batch: #batch, pred: #pred, loss: #loss, gradients: #gradients }
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

/// The model type parameter introduced when the model is `impl Trait` or not named at all.
fn model_param() -> Ident {
    Ident::new("__StokerModel", Span::call_site())
}

/// `<A, B>` of the struct's type parameters.
pub fn struct_generics(params: &[Ident]) -> syn::Generics {
    if params.is_empty() { syn::Generics::default() } else { syn::parse_quote!(<#(#params),*>) }
}

/// The type parameters of a callback function that its struct carries: all but the model's.
pub fn struct_params(input: &CallbackFn) -> Vec<Ident> {
    let model_generic = match input.hook.model() {
        Some(Model::Generic(ident)) => Some(ident),
        _ => None,
    };
    input
        .item
        .sig
        .generics
        .params
        .iter()
        .filter_map(|p| match p {
            GenericParam::Type(t) if Some(&t.ident) != model_generic => Some(t.ident.clone()),
            _ => None,
        })
        .collect()
}

/// The struct `#[callback]` makes of a function (and its `Default`, `Clone`, `Copy`, `Debug`), and
/// its type with parameters. Also used by the fallback, so that code naming the struct compiles.
pub fn callback_struct(input: &CallbackFn, struct_params: &[Ident]) -> (TokenStream, TokenStream) {
    let name = &input.name;
    let name_str = name.to_string();
    let vis = &input.item.vis;
    let fn_ident = &input.item.sig.ident;
    let doc = format!("The callback `#[callback]` made of [`{fn_ident}`], on `{}`.", input.hook.event_name());
    if struct_params.is_empty() {
        return (
            quote! {
                #[doc = #doc]
                #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
                #vis struct #name;
            },
            quote!(#name),
        );
    }
    // The parameters' defaults let an order target name the bare struct (`after = Tagged`).
    let params = struct_params;
    (
        quote! {
            #[doc = #doc]
            #vis struct #name<#(#params = ()),*>(::core::marker::PhantomData<fn() -> (#(#params,)*)>);
            #[automatically_derived]
            impl<#(#params),*> ::core::default::Default for #name<#(#params),*> {
                fn default() -> Self { #name(::core::marker::PhantomData) }
            }
            #[automatically_derived]
            impl<#(#params),*> ::core::clone::Clone for #name<#(#params),*> {
                fn clone(&self) -> Self { *self }
            }
            #[automatically_derived]
            impl<#(#params),*> ::core::marker::Copy for #name<#(#params),*> {}
            #[automatically_derived]
            impl<#(#params),*> ::core::fmt::Debug for #name<#(#params),*> {
                fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                    f.write_str(#name_str)
                }
            }
        },
        quote!(#name<#(#params),*>),
    )
}

pub fn callback_fn(input: &CallbackFn) -> TokenStream {
    let rt = Runtime::new(input.hook.args.krate.as_ref());
    let p = rt.private();
    let item = &input.item;
    let hook = &input.hook;
    let name = &input.name;
    let fn_ident = &item.sig.ident;
    let name_str = name.to_string();

    // The generic parameter that is the model (if any) stays on the impl; the others become the struct's.
    let struct_params = struct_params(input);
    let mut impl_params: Vec<TokenStream> = Vec::new();
    for param in &item.sig.generics.params {
        match param {
            GenericParam::Type(t) => impl_params.push(quote!(#t)),
            GenericParam::Lifetime(_) | GenericParam::Const(_) => {}
        }
    }
    let model = match hook.model() {
        Some(Model::Impl(bounds)) => {
            let m = model_param();
            impl_params.push(quote!(#m: #bounds));
            quote!(#m)
        }
        Some(Model::Generic(ident)) => quote!(#ident),
        Some(Model::Concrete(ty)) => quote!(#ty),
        None => {
            let m = model_param();
            impl_params.push(quote!(#m));
            quote!(#m)
        }
    };
    let type_args: Vec<&Ident> = item
        .sig
        .generics
        .params
        .iter()
        .filter_map(|p| match p {
            GenericParam::Type(t) => Some(&t.ident),
            _ => None,
        })
        .collect();
    // Explicit arguments are allowed next to `impl Trait` parameters (Rust 1.63): a parameter
    // that is not the model is only known from them.
    let turbofish = if type_args.is_empty() { quote!() } else { quote!(::<#(#type_args),*>) };
    let where_clause = &item.sig.generics.where_clause;

    let mut methods = Methods::default();
    add_hook(&rt, &mut methods, hook, |args| quote!(#fn_ident #turbofish (#(#args),*)));
    let trait_methods = trait_methods(&rt, methods, &model);
    let order = order_method(&rt, &input.order);
    let chief = hook.args.chief_only.map(|(value, _)| quote!(fn chief_only(&self) -> bool { #value }));
    let (struct_def, struct_ty) = callback_struct(input, &struct_params);
    let kind = kind_impl(&rt, &struct_generics(&struct_params), &struct_ty, &name_str);

    quote! {
        #item
        #struct_def
        #kind
        #[automatically_derived]
        impl<#(#impl_params),*> #p::Callback<#model> for #struct_ty #where_clause {
            fn name(&self) -> #p::Cow<'static, str> {
                #p::Cow::Borrowed(#name_str)
            }
            #order
            #chief
            #trait_methods
        }
    }
}

pub fn callback_impl(input: &CallbackImpl) -> TokenStream {
    let rt = Runtime::new(input.args.krate.as_ref());
    let p = rt.private();
    let item = &input.item;
    let self_ty = &item.self_ty;
    let name_str = &input.name;

    // The model: a concrete type named by some hook, else a parameter with every hook's bounds.
    let mut concrete: Option<&Type> = None;
    let mut bounds: Vec<TypeParamBound> = Vec::new();
    for hook in &input.hooks {
        let method_generics = item.items.iter().find_map(|i| match i {
            syn::ImplItem::Fn(f) if f.sig.ident == hook.ident => Some(&f.sig.generics),
            _ => None,
        });
        match hook.model() {
            Some(Model::Concrete(ty)) => concrete = Some(ty),
            Some(Model::Impl(b)) => bounds.extend(b.iter().cloned()),
            Some(Model::Generic(ident)) => {
                if let Some(generics) = method_generics {
                    for param in &generics.params {
                        if let GenericParam::Type(t) = param
                            && &t.ident == ident
                        {
                            bounds.extend(t.bounds.iter().cloned());
                        }
                    }
                }
            }
            None => {}
        }
    }
    let where_clause = &item.generics.where_clause;
    let mut params: Vec<TokenStream> = item.generics.params.iter().map(|p| quote!(#p)).collect();
    let model = match concrete {
        Some(ty) => quote!(#ty),
        None => {
            let m = model_param();
            params.push(quote!(#m: #(#bounds +)*));
            quote!(#m)
        }
    };
    let mut methods = Methods::default();
    for hook in &input.hooks {
        let method = &hook.ident;
        add_hook(&rt, &mut methods, hook, |args| quote!(self.#method(#(#args),*)));
    }
    let trait_methods = trait_methods(&rt, methods, &model);
    let order = order_method(&rt, &input.order);
    let kind = kind_impl(&rt, &item.generics, &quote!(#self_ty), name_str);
    let chief = input.args.chief_only.map(|(value, _)| quote!(fn chief_only(&self) -> bool { #value }));
    let state = input.args.state.map(|span| {
        // Both calls carry the same obligation at the `state` token: one error, not one per call.
        let span = Span::call_site().located_at(span);
        let at = rt.private_at(span);
        let save = quote_spanned!(span=> <Self as #at::StateCallback>::save(self));
        let load = quote_spanned!(span=> <Self as #at::StateCallback>::load(self, state));
        quote! {
            fn save_state(&self) -> #p::Result<#p::Option<#p::StateValue>> {
                #save.map(#p::Some)
            }
            fn load_state(&mut self, state: #p::StateValue) -> #p::Result<()> {
                #load
            }
        }
    });
    quote! {
        #item
        #kind
        #[automatically_derived]
        impl<#(#params),*> #p::Callback<#model> for #self_ty #where_clause {
            fn name(&self) -> #p::Cow<'static, str> {
                #p::Cow::Borrowed(#name_str)
            }
            #order
            #chief
            #state
            #trait_methods
        }
    }
}

pub fn derive_callbacks(input: &crate::ast::Composition) -> TokenStream {
    let rt = Runtime::new(input.krate.as_ref());
    let p = rt.private();
    let ident = &input.ident;
    let m = model_param();
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let mut params: Vec<TokenStream> = input.generics.params.iter().map(|p| quote!(#p)).collect();
    params.push(quote!(#m));
    let mut predicates: Vec<TokenStream> =
        where_clause.map(|w| w.predicates.iter().map(|p| quote!(#p)).collect()).unwrap_or_default();
    let mut markers = Vec::new();
    let mut len = Vec::new();
    let mut info = Vec::new();
    let mut wants = Vec::new();
    let mut dispatch = Vec::new();
    let mut state = Vec::new();
    let mut all = Vec::new();
    for (i, field) in input.fields.iter().enumerate() {
        let marker = format_ident!("__StokerMarker{}", i);
        let ty = &field.ty;
        let member = &field.member;
        params.push(quote!(#marker));
        predicates.push(quote_spanned!(ty.span()=> #ty: #p::Callbacks<#m, #marker>));
        markers.push(marker.clone());
        let set = quote!(<#ty as #p::Callbacks<#m, #marker>>);
        len.push(quote!(#set::len(&self.#member)));
        let extra_order = match &field.order {
            Some(order) => {
                let value = order_value(&rt, order);
                quote!(info.order = info.order.merge(#value);)
            }
            None => quote!(),
        };
        let extra_order = match field.chief_only {
            Some(value) => quote!(#extra_order info.chief_only = #value;),
            None => extra_order,
        };
        let ks = option(field.every_k_steps);
        let ke = option(field.every_k_epochs);
        let pred = match &field.enable_if {
            Some(path) => quote!(::core::option::Option::Some(#path as fn(&#p::Counters) -> bool)),
            None => quote!(::core::option::Option::None),
        };
        let gated =
            field.every_k_steps.is_some() || field.every_k_epochs.is_some() || field.enable_if.is_some();
        info.push(quote! {
            let len = #set::len(&self.#member);
            if index < len {
                let mut info = #set::info(&self.#member, index);
                #extra_order
                return info;
            }
            index -= len;
        });
        let wants_gate = if gated { quote!(#p::field_wants(#ks, #ke, #pred, counters) &&) } else { quote!() };
        wants.push(quote! {
            let len = #set::len(&self.#member);
            if index < len {
                return #wants_gate #set::wants_fetch(&self.#member, index, counters);
            }
            index -= len;
        });
        let dispatch_gate = if gated {
            quote!(if !#p::field_gate(#ks, #ke, #pred, &event, ctx.counters()) { return #p::Ok(()); })
        } else {
            quote!()
        };
        dispatch.push(quote! {
            let len = #set::len(&self.#member);
            if index < len {
                #dispatch_gate
                return #set::dispatch(&mut self.#member, index, event, ctx);
            }
            index -= len;
        });
        let all_gate =
            if gated { quote!(if #p::field_gate(#ks, #ke, #pred, &event, ctx.counters())) } else { quote!() };
        all.push(quote! {
            #all_gate {
                #set::dispatch_all(&mut self.#member, base, event, ctx, cursor)?;
            }
            base += #set::len(&self.#member);
        });
        state.push(quote! {
            let len = #set::len(&self.#member);
            if index < len {
                return #set::state(&mut self.#member, index, op);
            }
            index -= len;
        });
    }
    let checks = field_checks(&rt, input);
    quote! {
        #checks
        #[automatically_derived]
        impl #impl_generics #p::CallbackField for #ident #ty_generics #where_clause {}
        #[automatically_derived]
        impl<#(#params),*> #p::Callbacks<#m, (#(#markers,)*)> for #ident #ty_generics
        where #(#predicates,)*
        {
            fn len(&self) -> usize {
                0 #(+ #len)*
            }
            #[allow(unused_mut)]
            fn info(&self, mut index: usize) -> #p::CallbackInfo<'_> {
                #(#info)*
                ::core::panic!("callback index {} out of range", index)
            }
            #[allow(unused_mut, unused_variables)]
            fn wants_fetch(&self, mut index: usize, counters: &#p::Counters) -> bool {
                #(#wants)*
                false
            }
            #[allow(unused_mut, unused_variables)]
            fn dispatch(
                &mut self,
                mut index: usize,
                event: #p::Event<'_>,
                ctx: &mut #p::Context<'_, #m>,
            ) -> #p::Result<()> {
                #(#dispatch)*
                #p::Ok(())
            }
            #[allow(unused_mut, unused_variables)]
            fn state(
                &mut self,
                mut index: usize,
                op: #p::StateOp,
            ) -> #p::Result<#p::Option<#p::StateValue>> {
                #(#state)*
                #p::Ok(#p::None)
            }
            #[inline]
            #[allow(unused_mut, unused_variables)]
            fn dispatch_all(
                &mut self,
                mut base: usize,
                event: #p::Event<'_>,
                ctx: &mut #p::Context<'_, #m>,
                cursor: &mut usize,
            ) -> #p::Result<()> {
                #(#all)*
                #p::Ok(())
            }
        }
    }
}

/// Every field is a callback or a set of callbacks, checked where the struct is defined, with the
/// error on the field's type (without it, a wrong field shows only where the set is used, as an
/// unsatisfied `Callbacks` bound that does not name the field). A field whose type mentions a
/// type parameter of the struct is left to the `Callbacks` impl's bounds.
fn field_checks(rt: &Runtime, input: &crate::ast::Composition) -> TokenStream {
    let type_params: Vec<&Ident> = input.generics.type_params().map(|t| &t.ident).collect();
    let checks: Vec<TokenStream> = input
        .fields
        .iter()
        .filter(|field| !mentions(field.ty.to_token_stream(), &type_params))
        .map(|field| {
            let ty = &field.ty;
            let span = Span::call_site().located_at(ty.span());
            quote_spanned!(span=> __stoker_is_callback_set::<#ty>();)
        })
        .collect();
    if checks.is_empty() {
        return TokenStream::new();
    }
    let p = rt.private();
    let (impl_generics, _, where_clause) = input.generics.split_for_impl();
    quote! {
        const _: () = {
            fn __stoker_is_callback_set<T: #p::CallbackField + ?::core::marker::Sized>() {}
            #[allow(dead_code, clippy::extra_unused_type_parameters)]
            fn __stoker_fields #impl_generics () #where_clause {
                #(#checks)*
            }
        };
    }
}

/// Whether `tokens` name one of `idents` anywhere.
fn mentions(tokens: TokenStream, idents: &[&Ident]) -> bool {
    tokens.into_iter().any(|tree| match tree {
        TokenTree::Ident(ident) => idents.contains(&&ident),
        TokenTree::Group(group) => mentions(group.stream(), idents),
        _ => false,
    })
}
