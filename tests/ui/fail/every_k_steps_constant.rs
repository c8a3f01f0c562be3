use burn_stoker::prelude::*;

const PERIOD: u64 = 10;

#[callback(on = trigger_step, every_k_steps = PERIOD)]
fn report<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

fn main() {}
