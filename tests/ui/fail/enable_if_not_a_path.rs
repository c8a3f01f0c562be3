use burn_stoker::prelude::*;

#[callback(on = trigger, enable_if = 3)]
fn report<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

fn main() {}
