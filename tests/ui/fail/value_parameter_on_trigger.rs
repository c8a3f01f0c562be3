use burn_stoker::prelude::*;

#[callback(on = trigger)]
fn report(epoch: u64) {
    let _ = epoch;
}

fn main() {}
