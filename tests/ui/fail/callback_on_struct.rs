use stoker::prelude::*;

#[callback(on = trigger)]
struct Report;

fn main() {}
