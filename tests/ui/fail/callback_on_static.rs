use burn_stoker::prelude::*;

#[callback(on = trigger)]
static REPORT: u32 = 1;

fn main() {}
