use burn_stoker::prelude::*;

#[callback(on = trigger)]
#[fetch("cost")]
fn report(cost: f32) {
    let _ = cost;
}

fn main() {}
