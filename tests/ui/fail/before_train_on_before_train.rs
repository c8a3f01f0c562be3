use burn_stoker::prelude::*;

#[callback(on = before_train, before_train = true)]
fn report<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

fn main() {}
