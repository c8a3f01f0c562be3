//! stoker's attribute macros: `#[callback]`, `#[fetch]`, `#[order]` and `#[derive(Callbacks)]`.
//!
//! Not written yet: until they are, callbacks implement `stoker::Callback` by hand and compose as
//! tuples, `Vec`s and `Option`s. This crate exports nothing.
