use burn_stoker::prelude::*;

#[callback(state, on = trigger)]
fn report<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

fn main() {}
