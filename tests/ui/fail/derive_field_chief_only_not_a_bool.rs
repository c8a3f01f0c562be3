use burn_stoker::prelude::*;

#[callback(on = trigger)]
fn report<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

#[derive(Callbacks)]
struct Training {
    #[chief_only(1)]
    report: Report,
}

fn main() {}
