use burn_stoker::prelude::*;

#[callback(on = trigger_epok, every_k_steps = 0, chief_only = 1)]
fn report<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

fn main() {}
