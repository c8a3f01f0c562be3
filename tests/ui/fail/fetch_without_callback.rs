use burn_stoker::prelude::*;

#[fetch("cost")]
fn report(cost: f32) {
    let _ = cost;
}

fn main() {}
