//! Code generation. Generated code reaches the runtime only through its hidden module,
//! `::burn_stoker::__private` (or `<crate>::__private` with `crate = "..."`), always by that
//! absolute path, and every generated impl is `#[automatically_derived]`.
//!
//! This file holds what every expansion shares (the runtime's path, periods, order constraints,
//! the `CallbackKind` impl); `hook.rs` writes the `Callback` trait methods a set of hooks fills
//! (the gates, the fetches, the call), `callback.rs` the struct, the function and the impl of
//! `#[callback]`, `derive.rs` the `Callbacks` impl of `#[derive(Callbacks)]`.

mod callback;
mod derive;
mod hook;

pub use callback::{callback_fn, callback_impl, callback_struct, struct_generics, struct_params};
pub use derive::derive_callbacks;

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::Ident;
use syn::spanned::Spanned;

use crate::attr::{OrderAttr, Period};

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

fn option(period: Option<Period>) -> TokenStream {
    match period {
        Some(p) => {
            let v = p.value;
            quote!(::core::option::Option::Some(#v))
        }
        None => quote!(::core::option::Option::None),
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

/// `const _: () = <runtime>::__private::burn_stoker_macros_M_m_needs_burn_stoker_M_m;`, beside
/// every expansion: a runtime of another version has no such item (its hidden module holds its
/// own version's), so that a mismatched pair of crates fails to compile with an error naming
/// both and the version each needs, instead of an error about a generated item.
pub fn version_check(rt: &Runtime) -> TokenStream {
    let p = rt.private();
    let marker = version_marker();
    quote!(const _: () = #p::#marker;)
}

/// The item the hidden module of a runtime of this crate's version holds (semver's compatible
/// versions: the same minor while the major is 0).
pub fn version_marker() -> Ident {
    let (major, minor) = (env!("CARGO_PKG_VERSION_MAJOR"), env!("CARGO_PKG_VERSION_MINOR"));
    quote::format_ident!("burn_stoker_macros_{major}_{minor}_needs_burn_stoker_{major}_{minor}")
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

/// The model type parameter introduced when the model is `impl Trait` or not named at all.
fn model_param() -> Ident {
    Ident::new("__StokerModel", Span::call_site())
}
