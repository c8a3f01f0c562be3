use burn_stoker::prelude::*;

#[callback(on = trigger)]
#[order(after ModelSaver)]
fn report<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

fn main() {}
