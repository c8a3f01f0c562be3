//! The benchmarks' tests that may share a process (`alloc.rs` stays apart: its counting global
//! allocator counts every thread of its process).

mod flush;
mod setup;
