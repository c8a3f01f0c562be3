use burn_stoker::prelude::*;

#[callback(on = trigger)]
#[order(after = [ModelSaver, ModelSaver])]
fn report<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

fn main() {}
