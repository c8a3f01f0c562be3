use burn_stoker::prelude::*;

// Deferred values arrive after a later step: only an `after_step` hook fetches.
#[callback(on = trigger)]
#[fetch("cost", deferred)]
fn watch(cost: f32) {
    let _ = cost;
}

fn main() {}
