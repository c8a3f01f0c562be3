//! What is emitted next to errors, so that one mistake gives one message: the user's item (our
//! attributes removed) and a callback of the same name that does nothing, so that code using it
//! still type-checks.

use proc_macro2::TokenStream;
use quote::quote;

use crate::ast::{CallbackFn, CallbackImpl, Composition};

pub fn callback_fn(input: &CallbackFn) -> TokenStream {
    let item = &input.item;
    let vis = &item.vis;
    let name = &input.name;
    let struct_params: Vec<&syn::Ident> = item
        .sig
        .generics
        .params
        .iter()
        .filter_map(|p| match p {
            syn::GenericParam::Type(t) => Some(&t.ident),
            _ => None,
        })
        .collect();
    if struct_params.is_empty() {
        quote! {
            #item
            #[derive(Debug, Clone, Copy, Default)]
            #vis struct #name;
            impl<__StokerModel> ::stoker::__private::Callback<__StokerModel> for #name {}
        }
    } else {
        quote! {
            #item
            #vis struct #name<#(#struct_params),*>(::core::marker::PhantomData<fn() -> (#(#struct_params,)*)>);
        }
    }
}

pub fn callback_impl(input: &CallbackImpl) -> TokenStream {
    let item = &input.item;
    if item.trait_.is_some() {
        return quote!(#item);
    }
    let self_ty = &item.self_ty;
    let params = item.generics.params.iter();
    let where_clause = &item.generics.where_clause;
    quote! {
        #item
        impl<#(#params,)* __StokerModel> ::stoker::__private::Callback<__StokerModel> for #self_ty #where_clause {}
    }
}

pub fn composition(input: &Composition) -> TokenStream {
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let _ = impl_generics;
    let params = input.generics.params.iter();
    quote! {
        impl<#(#params,)* __StokerModel> ::stoker::__private::Callbacks<__StokerModel, ()> for #ident #ty_generics #where_clause {
            fn len(&self) -> usize { 0 }
            fn info(&self, index: usize) -> ::stoker::__private::CallbackInfo<'_> {
                ::core::panic!("callback index {} out of range", index)
            }
            fn wants_fetch(&self, _: usize, _: &::stoker::__private::Counters) -> bool { false }
            fn dispatch(
                &mut self,
                _: usize,
                _: ::stoker::__private::Event<'_>,
                _: &mut ::stoker::__private::Context<'_, __StokerModel>,
            ) -> ::stoker::__private::Result<()> {
                ::stoker::__private::Ok(())
            }
        }
    }
}
