use burn_stoker::prelude::*;

#[callback(on = trigger)]
fn report<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

// The set is never used: the field is reported where the struct is defined.
#[derive(Callbacks)]
struct Training {
    report: Report,
    x: u32,
}

fn main() {}
