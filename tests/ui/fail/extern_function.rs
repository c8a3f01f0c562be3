use burn_stoker::prelude::*;

#[callback(on = trigger)]
extern "C" fn report() {

}

fn main() {}
