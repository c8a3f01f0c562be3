use burn_stoker::prelude::*;

#[callback(on = trigger)]
fn validate<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

#[callback(on = trigger)]
#[order(after = validate)]
fn report<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

fn main() {}
