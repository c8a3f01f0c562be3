use burn_stoker::prelude::*;

#[callback(on = trigger)]
#[order(after = Report)]
fn report<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

fn main() {}
