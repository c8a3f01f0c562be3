//! The examples' integration tests, one binary (each file a module). `bridge.rs` stays apart: it
//! needs the `burn-train` feature, built on its own (see CONTRIBUTING.md).

mod callback_list;
mod config;
// tmux, /proc and kill(2): unix only.
#[cfg(unix)]
mod dashboard;
mod digits;
mod digits_cli;
mod fault;
mod setup;
mod sink;
mod tour;
mod wgpu;
