use burn_stoker::prelude::*;

#[callback(on = trigger)]
const fn report() {

}

fn main() {}
