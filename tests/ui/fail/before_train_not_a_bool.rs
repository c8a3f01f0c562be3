use burn_stoker::prelude::*;

#[callback(on = trigger, before_train = 1)]
fn report<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

fn main() {}
