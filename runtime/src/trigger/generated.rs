//! The period rules as the macros' generated code calls them, with the counts as `Option<u64>`
//! (reached through `__private` alone, not part of the public API).

use crate::callback::{Counters, Event, Period};

/// `PeriodicCallback`'s rule for a step event of step `step` ([`Period::step_due`]), for code
/// that holds the counts as `Option<u64>`.
pub fn step_due(
    every_k_steps: Option<u64>,
    every_k_epochs: Option<u64>,
    step: u64,
    counters: &Counters,
) -> bool {
    Period::new(every_k_steps, every_k_epochs).step_due(step, counters)
}

/// `PeriodicCallback`'s rule for an epoch event ([`Period::epoch_due`]), for code that holds the
/// counts as `Option<u64>`.
pub fn epoch_due(every_k_steps: Option<u64>, every_k_epochs: Option<u64>, counters: &Counters) -> bool {
    Period::new(every_k_steps, every_k_epochs).epoch_due(counters)
}

/// Whether a `#[derive(Callbacks)]` field with `#[every_k_*]` / `#[enable_if]` receives `event`
/// ([`Period::gate`]).
pub fn field_gate(
    every_k_steps: Option<u64>,
    every_k_epochs: Option<u64>,
    predicate: Option<fn(&Counters) -> bool>,
    event: &Event<'_>,
    counters: &Counters,
) -> bool {
    Period::new(every_k_steps, every_k_epochs).gate(predicate, event, counters)
}

/// Whether a gated `#[derive(Callbacks)]` field may fetch at the next step ([`Period::wants`]).
pub fn field_wants(
    every_k_steps: Option<u64>,
    every_k_epochs: Option<u64>,
    predicate: Option<fn(&Counters) -> bool>,
    counters: &Counters,
) -> bool {
    Period::new(every_k_steps, every_k_epochs).wants(predicate, counters)
}
