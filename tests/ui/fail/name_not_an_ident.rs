use burn_stoker::prelude::*;

#[callback(on = trigger, name = "not an ident")]
fn report<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

fn main() {}
