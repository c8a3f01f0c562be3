use burn_stoker::prelude::*;

fn warm(counters: &Counters) -> bool {
    counters.global_step() > 10
}

#[callback(on = setup, enable_if = warm)]
fn report<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

fn main() {}
