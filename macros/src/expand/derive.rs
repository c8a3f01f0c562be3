//! `#[derive(Callbacks)]`: the `Callbacks` impl of a struct of callbacks, one arm per field in
//! each method, and the check that every field is a callback or a set of callbacks.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::Ident;
use syn::spanned::Spanned;

use super::{Runtime, model_param, option, order_value};
use crate::ast::{Composition, Field};

pub fn derive_callbacks(input: &Composition) -> TokenStream {
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
    let mut arms = Arms::default();
    for (i, field) in input.fields.iter().enumerate() {
        let marker = format_ident!("__StokerMarker{}", i);
        let ty = &field.ty;
        params.push(quote!(#marker));
        predicates.push(quote_spanned!(ty.span()=> #ty: #p::Callbacks<#m, #marker>));
        markers.push(marker.clone());
        let set = quote!(<#ty as #p::Callbacks<#m, #marker>>);
        arms.add(&rt, field, &set);
    }
    let checks = field_checks(&rt, input);
    let methods = callbacks_methods(&p, &m, &arms);
    let version = super::version_check(&rt);
    quote! {
        #version
        #checks
        #[automatically_derived]
        impl #impl_generics #p::CallbackField for #ident #ty_generics #where_clause {}
        #[automatically_derived]
        impl<#(#params),*> #p::SealedCallbacks<#m, (#(#markers,)*)> for #ident #ty_generics
        where #(#predicates,)*
        {
        }
        #[automatically_derived]
        impl<#(#params),*> #p::Callbacks<#m, (#(#markers,)*)> for #ident #ty_generics
        where #(#predicates,)*
        {
            #methods
        }
    }
}

/// The arms of the `Callbacks` methods, one per field, in the fields' order: each finds whether
/// the index falls in its field's set, and goes on with the index past it if not.
#[derive(Default)]
struct Arms {
    len: Vec<TokenStream>,
    info: Vec<TokenStream>,
    wants: Vec<TokenStream>,
    dispatch: Vec<TokenStream>,
    state: Vec<TokenStream>,
    all: Vec<TokenStream>,
}

impl Arms {
    /// The arms of `field`, whose set of callbacks is `set` (`<Type as Callbacks<M, Marker>>`).
    fn add(&mut self, rt: &Runtime, field: &Field, set: &TokenStream) {
        let p = rt.private();
        let member = &field.member;
        self.len.push(quote!(#set::len(&self.#member)));
        self.info.push(info_arm(rt, field, set));
        let gate = FieldGate::new(&p, field);
        let wants_gate = gate.wants(&p);
        self.wants.push(quote! {
            let len = #set::len(&self.#member);
            if index < len {
                return #wants_gate #set::wants_fetch(&self.#member, index, counters);
            }
            index -= len;
        });
        let dispatch_gate = gate.dispatch(&p);
        self.dispatch.push(quote! {
            let len = #set::len(&self.#member);
            if index < len {
                #dispatch_gate
                return #set::dispatch(&mut self.#member, index, event, ctx);
            }
            index -= len;
        });
        let all_gate = gate.all(&p);
        self.all.push(quote! {
            #all_gate {
                #set::dispatch_all(&mut self.#member, base, event, ctx, cursor)?;
            }
            base += #set::len(&self.#member);
        });
        self.state.push(quote! {
            let len = #set::len(&self.#member);
            if index < len {
                return #set::state(&mut self.#member, index, op);
            }
            index -= len;
        });
    }
}

/// The arm of `info`: the field's own info, with the field's `#[order]` and `#[chief_only]`.
fn info_arm(rt: &Runtime, field: &Field, set: &TokenStream) -> TokenStream {
    let member = &field.member;
    let extra_order = match &field.order {
        Some(order) => {
            let value = order_value(rt, order);
            quote!(info.order = info.order.merge(#value);)
        }
        None => quote!(),
    };
    let extra_order = match field.chief_only {
        Some(value) => quote!(#extra_order info.chief_only = #value;),
        None => extra_order,
    };
    quote! {
        let len = #set::len(&self.#member);
        if index < len {
            let mut info = #set::info(&self.#member, index);
            #extra_order
            return info;
        }
        index -= len;
    }
}

/// A field's gate: its periods (`PeriodicCallback`) and predicate (`EnableCallbackIf`), as the
/// runtime's `field_gate` and `field_wants` take them.
struct FieldGate {
    ks: TokenStream,
    ke: TokenStream,
    pred: TokenStream,
    gated: bool,
}

impl FieldGate {
    fn new(p: &TokenStream, field: &Field) -> FieldGate {
        let pred = match &field.enable_if {
            Some(path) => quote!(::core::option::Option::Some(#path as fn(&#p::Counters) -> bool)),
            None => quote!(::core::option::Option::None),
        };
        FieldGate {
            ks: option(field.every_k_steps),
            ke: option(field.every_k_epochs),
            pred,
            gated: field.every_k_steps.is_some()
                || field.every_k_epochs.is_some()
                || field.enable_if.is_some(),
        }
    }

    /// Before `wants_fetch`: `field_wants(...) &&`, or nothing for an ungated field.
    fn wants(&self, p: &TokenStream) -> TokenStream {
        let FieldGate { ks, ke, pred, .. } = self;
        if self.gated { quote!(#p::field_wants(#ks, #ke, #pred, counters) &&) } else { quote!() }
    }

    /// Before `dispatch`: return when the gate is shut, or nothing for an ungated field.
    fn dispatch(&self, p: &TokenStream) -> TokenStream {
        let FieldGate { ks, ke, pred, .. } = self;
        if self.gated {
            quote!(if !#p::field_gate(#ks, #ke, #pred, &event, ctx.counters()) { return #p::Ok(()); })
        } else {
            quote!()
        }
    }

    /// Before `dispatch_all`'s block: `if field_gate(...)`, or nothing for an ungated field.
    fn all(&self, p: &TokenStream) -> TokenStream {
        let FieldGate { ks, ke, pred, .. } = self;
        if self.gated { quote!(if #p::field_gate(#ks, #ke, #pred, &event, ctx.counters())) } else { quote!() }
    }
}

/// The methods of the `Callbacks` impl, made of the fields' arms.
fn callbacks_methods(p: &TokenStream, m: &Ident, arms: &Arms) -> TokenStream {
    let Arms { len, info, wants, dispatch, state, all } = arms;
    quote! {
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

/// Every field is a callback or a set of callbacks, checked where the struct is defined, with the
/// error on the field's type (without it, a wrong field shows only where the set is used, as an
/// unsatisfied `Callbacks` bound that does not name the field). A field whose type mentions a
/// type parameter of the struct is left to the `Callbacks` impl's bounds.
fn field_checks(rt: &Runtime, input: &Composition) -> TokenStream {
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
