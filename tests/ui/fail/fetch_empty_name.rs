use burn_stoker::prelude::*;

#[callback(on = after_step)]
#[fetch("")]
fn report(cost: f32) {
    let _ = cost;
}

fn main() {}
