use burn_stoker::prelude::*;

#[callback(on = trigger)]
fn report(ctx: &mut Context) {
    let _ = ctx;
}

fn main() {}
