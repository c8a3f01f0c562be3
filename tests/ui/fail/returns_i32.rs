use burn_stoker::prelude::*;

#[callback(on = trigger)]
fn report<M>(ctx: &mut Context<'_, M>) -> i32 {
    let _ = ctx;
    0
}

fn main() {}
