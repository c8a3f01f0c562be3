use burn_stoker::prelude::*;

#[order(after = ModelSaver)]
fn report<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

fn main() {}
