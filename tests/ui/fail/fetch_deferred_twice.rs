use burn_stoker::prelude::*;

#[callback(on = after_step)]
#[fetch("cost", deferred, deferred)]
fn watch(cost: f32) {
    let _ = cost;
}

fn main() {}
