use burn_stoker::prelude::*;

#[callback(on = after_train, every_k_steps = 10)]
fn report<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

fn main() {}
