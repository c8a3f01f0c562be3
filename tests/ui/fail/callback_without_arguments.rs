use burn_stoker::prelude::*;

#[callback]
fn report<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

fn main() {}
