use burn_stoker::prelude::*;

#[callback(on = trigger)]
union Report {
    a: u32,
    b: f32,
}

fn main() {}
