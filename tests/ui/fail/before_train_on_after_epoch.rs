use burn_stoker::prelude::*;

#[callback(on = after_epoch, before_train = true)]
fn report<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

fn main() {}
