//! `#[callback]`: the struct made of a function, and the `Callback` impl of a function or of an
//! impl block.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::{GenericParam, Ident, Type, TypeParamBound};

use super::hook::{Methods, add_hook, trait_methods};
use super::{Runtime, kind_impl, model_param, order_method, version_check};
use crate::ast::{CallbackFn, CallbackImpl, Hook, Model};
use crate::attr::HookArgs;

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
    let model = fn_model(hook, &mut impl_params);
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
    let chief = flags(&hook.args);
    let (struct_def, struct_ty) = callback_struct(input, &struct_params);
    let kind = kind_impl(&rt, &struct_generics(&struct_params), &struct_ty, &name_str);

    let version = version_check(&rt);
    quote! {
        #item
        #version
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
    let (concrete, bounds) = impl_model(input);
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
    let chief = flags(&input.args);
    let state = input.args.state.map(|span| state_methods(&rt, span));
    let version = version_check(&rt);
    quote! {
        #item
        #version
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

/// The model type of a function's impl: the type or parameter its context names, or a new
/// parameter (added to `impl_params`, with the bounds of an `impl Trait`).
fn fn_model(hook: &Hook, impl_params: &mut Vec<TokenStream>) -> TokenStream {
    match hook.model() {
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
    }
}

/// The model of an impl's hooks: a concrete type named by some hook, and the bounds every hook
/// puts on a model parameter.
fn impl_model(input: &CallbackImpl) -> (Option<&Type>, Vec<TypeParamBound>) {
    let item = &input.item;
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
    (concrete, bounds)
}

/// `save_state` and `load_state` of `#[callback(state)]`, through `StateCallback` (serde).
fn state_methods(rt: &Runtime, span: Span) -> TokenStream {
    let p = rt.private();
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
}

/// The methods the callback's flags give: `chief_only`, `takes_training_batches` and
/// `takes_validation_batches`, each when its key was written.
fn flags(args: &HookArgs) -> TokenStream {
    let chief = args.chief_only.map(|(value, _)| quote!(fn chief_only(&self) -> bool { #value }));
    let training =
        args.training_batches.map(|(value, _)| quote!(fn takes_training_batches(&self) -> bool { #value }));
    let validation = args
        .validation_batches
        .map(|(value, _)| quote!(fn takes_validation_batches(&self) -> bool { #value }));
    quote!(#chief #training #validation)
}
