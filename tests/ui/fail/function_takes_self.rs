use burn_stoker::prelude::*;

#[callback(on = trigger)]
fn report(&mut self) {

}

fn main() {}
