use burn_stoker::prelude::*;

#[callback(on = after_step)]
#[fetch("cost" "accuracy")]
fn report(cost: f32, accuracy: f32) {
    let _ = (cost, accuracy);
}

fn main() {}
