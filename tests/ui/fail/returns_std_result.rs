use burn_stoker::prelude::*;

#[callback(on = trigger)]
fn report<M>(ctx: &mut Context<'_, M>) -> Result<(), String> {
    let _ = ctx;
    Ok(())
}

fn main() {}
