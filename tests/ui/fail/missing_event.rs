use burn_stoker::prelude::*;

#[callback(every_k_epochs = 2)]
fn report<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

fn main() {}
