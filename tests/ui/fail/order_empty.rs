use burn_stoker::prelude::*;

#[callback(on = trigger)]
#[order()]
fn report<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

fn main() {}
