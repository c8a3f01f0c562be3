use burn_stoker::prelude::*;

#[callback(on = trigger_step)]
fn report<M>(ctx: &mut Context<'_, M>) -> bool {
    ctx.global_step() > 10
}

fn main() {}
