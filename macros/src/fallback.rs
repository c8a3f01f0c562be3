//! What is emitted next to errors, so that one mistake gives one message: the user's item (our
//! attributes removed) and a callback of the same name that does nothing, so that code using it
//! still type-checks.

use proc_macro2::TokenStream;
use quote::quote;

use crate::ast::{CallbackFn, CallbackImpl, Composition};
use crate::expand::{Runtime, kind_impl, struct_generics};

pub fn callback_fn(input: &CallbackFn) -> TokenStream {
    // The function as written, less what rustc would reject a second time (a `self` parameter,
    // already reported).
    let mut item = input.item.clone();
    item.sig.inputs =
        item.sig.inputs.into_iter().filter(|input| matches!(input, syn::FnArg::Typed(_))).collect();
    // The struct the function would have made, a callback of every model that does nothing.
    let params = crate::expand::struct_params(input);
    let (struct_def, struct_ty) = crate::expand::callback_struct(input, &params);
    let rt = Runtime::new(input.hook.args.krate.as_ref());
    let p = rt.private();
    let kind = kind_impl(&rt, &struct_generics(&params), &struct_ty, &input.name.to_string());
    quote! {
        #item
        #struct_def
        #kind
        #[automatically_derived]
        impl<#(#params,)* __StokerModel> #p::Callback<__StokerModel> for #struct_ty {}
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
    let rt = Runtime::new(input.args.krate.as_ref());
    let p = rt.private();
    let kind = kind_impl(&rt, &item.generics, &quote!(#self_ty), &input.name);
    quote! {
        #item
        #kind
        #[automatically_derived]
        impl<#(#params,)* __StokerModel> #p::Callback<__StokerModel> for #self_ty #where_clause {}
    }
}

pub fn composition(input: &Composition) -> TokenStream {
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let params: Vec<_> = input.generics.params.iter().collect();
    let p = Runtime::new(input.krate.as_ref()).private();
    quote! {
        #[automatically_derived]
        impl #impl_generics #p::CallbackField for #ident #ty_generics #where_clause {}
        #[automatically_derived]
        impl<#(#params,)* __StokerModel> #p::SealedCallbacks<__StokerModel, ()> for #ident #ty_generics #where_clause {}
        #[automatically_derived]
        impl<#(#params,)* __StokerModel> #p::Callbacks<__StokerModel, ()> for #ident #ty_generics #where_clause {
            fn len(&self) -> usize { 0 }
            fn info(&self, index: usize) -> #p::CallbackInfo<'_> {
                ::core::panic!("callback index {} out of range", index)
            }
            fn wants_fetch(&self, _: usize, _: &#p::Counters) -> bool { false }
            fn dispatch(
                &mut self,
                _: usize,
                _: #p::Event<'_>,
                _: &mut #p::Context<'_, __StokerModel>,
            ) -> #p::Result<()> {
                #p::Ok(())
            }
            fn state(
                &mut self,
                _: usize,
                _: #p::StateOp,
            ) -> #p::Result<#p::Option<#p::StateValue>> {
                #p::Ok(#p::None)
            }
        }
    }
}
