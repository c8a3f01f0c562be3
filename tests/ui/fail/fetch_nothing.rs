use burn_stoker::prelude::*;

#[callback(on = after_step)]
#[fetch()]
fn report() {

}

fn main() {}
