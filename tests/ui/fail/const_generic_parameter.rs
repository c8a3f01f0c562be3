use burn_stoker::prelude::*;

#[callback(on = trigger)]
fn report<M, const N: usize>(ctx: &mut Context<'_, M>) {
    let _ = (ctx, N);
}

fn main() {}
