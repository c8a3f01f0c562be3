use burn_stoker::prelude::*;

#[callback(on = after_step)]
#[fetch("cost", "cost")]
fn report(cost: f32, again: f32) {
    let _ = (cost, again);
}

fn main() {}
