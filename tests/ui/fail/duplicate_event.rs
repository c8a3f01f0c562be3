use burn_stoker::prelude::*;

#[callback(on = trigger, on = after_epoch)]
fn report<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

fn main() {}
