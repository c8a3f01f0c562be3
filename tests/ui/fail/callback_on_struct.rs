use burn_stoker::prelude::*;

#[callback(on = trigger)]
struct Report;

fn main() {}
