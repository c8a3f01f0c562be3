use burn_stoker::prelude::*;

#[callback(on = trigger)]
trait Report {}

fn main() {}
