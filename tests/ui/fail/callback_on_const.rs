use burn_stoker::prelude::*;

#[callback(on = trigger)]
const REPORT: u32 = 1;

fn main() {}
