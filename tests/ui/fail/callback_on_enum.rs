use burn_stoker::prelude::*;

#[callback(on = trigger)]
enum Report {
    Epoch,
}

fn main() {}
