use burn_stoker::prelude::*;

// Three mistakes in three places, all reported at once.
#[callback(on = after_step, every_k_step = 2)]
#[fetch(cost)]
async fn report(cost: f32) {
    let _ = cost;
}

fn main() {}
