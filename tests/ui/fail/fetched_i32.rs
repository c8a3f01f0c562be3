use burn_stoker::prelude::*;

#[callback(on = after_step)]
#[fetch("wrong")]
fn report<M>(wrong: i32, ctx: &mut Context<'_, M>) {
    let _ = (wrong, ctx);
}

fn main() {}
