use burn_stoker::prelude::*;

#[callback(on = trigger)]
fn report<M>(ctx: &Context<'_, M>) {
    let _ = ctx;
}

fn main() {}
