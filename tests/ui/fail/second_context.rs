use burn_stoker::prelude::*;

#[callback(on = trigger)]
fn report<M>(ctx: &mut Context<'_, M>, again: &mut Context<'_, M>) {
    let _ = (ctx, again);
}

fn main() {}
