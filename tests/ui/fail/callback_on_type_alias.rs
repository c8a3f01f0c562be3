use burn_stoker::prelude::*;

#[callback(on = trigger)]
type Report = u32;

fn main() {}
