use burn_stoker::prelude::*;

#[callback(on = trigger, frequency = 2)]
fn report<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

fn main() {}
