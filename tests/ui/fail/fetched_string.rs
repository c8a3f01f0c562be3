use burn_stoker::prelude::*;

#[callback(on = after_step)]
#[fetch("cost")]
fn report(cost: String) {
    let _ = cost;
}

fn main() {}
