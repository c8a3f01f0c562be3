//! The error collector (serde_derive's `Ctxt`): every error of one input is collected and all are
//! reported at once. It cannot be dropped unchecked: [`Ctxt::check`] takes the errors out, and a
//! `Ctxt` dropped without that panics (in this crate's tests), so no error is ever lost.

use std::cell::RefCell;
use std::fmt::Display;
use std::thread;

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;

/// The errors found in one input.
pub struct Ctxt {
    /// `None` once [`Ctxt::check`] took them.
    errors: RefCell<Option<Vec<syn::Error>>>,
}

impl Ctxt {
    /// An empty collector, to be [`check`](Ctxt::check)ed.
    pub fn new() -> Self {
        Ctxt { errors: RefCell::new(Some(Vec::new())) }
    }

    /// An error at `span`.
    pub fn push(&self, span: Span, message: impl Display) {
        self.error(syn::Error::new(span, message));
    }

    /// An error over all of `tokens`, first to last (a single `Span` covers one token on stable).
    pub fn push_spanned(&self, tokens: impl ToTokens, message: impl Display) {
        self.error(syn::Error::new_spanned(tokens, message));
    }

    fn error(&self, error: syn::Error) {
        self.errors.borrow_mut().as_mut().expect("a Ctxt used after check").push(error);
    }

    /// `Ok` if nothing was reported, else every error as `compile_error!` invocations, in the
    /// order they were found.
    pub fn check(self) -> Result<(), TokenStream> {
        let errors = self.errors.borrow_mut().take().expect("a Ctxt checked twice");
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.iter().map(syn::Error::to_compile_error).collect())
        }
    }
}

impl Drop for Ctxt {
    fn drop(&mut self) {
        if !thread::panicking() && self.errors.borrow().is_some() {
            panic!("a Ctxt was dropped without check: its errors would be lost");
        }
    }
}

/// An attribute value that may be given once (serde_derive's `Attr`): a second
/// [`set`](Attr::set) reports the duplicate and keeps the first.
pub struct Attr<'c, T> {
    cx: &'c Ctxt,
    duplicate: String,
    value: Option<T>,
}

impl<'c, T> Attr<'c, T> {
    /// Unset; a duplicate is reported as "`word` is given twice: keep one".
    pub fn none(cx: &'c Ctxt, word: crate::symbol::Symbol) -> Self {
        Attr::with_duplicate(cx, format!("`{word}` is given twice: keep one"))
    }

    /// Unset; a duplicate is reported with `message`.
    pub fn with_duplicate(cx: &'c Ctxt, message: impl Into<String>) -> Self {
        Attr { cx, duplicate: message.into(), value: None }
    }

    /// Set the value written at `tokens`. If it was set already, report the duplicate there
    /// and give the new value back (the first is kept).
    pub fn set(&mut self, tokens: impl ToTokens, value: T) -> Option<T> {
        if self.value.is_some() {
            self.cx.push_spanned(tokens, &self.duplicate);
            Some(value)
        } else {
            self.value = Some(value);
            None
        }
    }

    /// [`set`](Attr::set) when the value could be read (a value that could not was reported).
    pub fn set_opt(&mut self, tokens: impl ToTokens, value: Option<T>) {
        if let Some(value) = value {
            self.set(tokens, value);
        }
    }

    /// The value, if it was set.
    pub fn get_mut(&mut self) -> Option<&mut T> {
        self.value.as_mut()
    }

    /// The value, if it was set.
    pub fn get(self) -> Option<T> {
        self.value
    }
}
