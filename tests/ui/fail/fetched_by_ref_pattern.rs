use burn_stoker::prelude::*;

#[callback(on = after_step)]
#[fetch("cost")]
fn report(ref cost: f32) {
    let _ = cost;
}

fn main() {}
