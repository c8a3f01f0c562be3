use burn_stoker::prelude::*;

#[callback(on = trigger)]
fn report<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

#[derive(Callbacks)]
struct Training {
    #[order(after = NoSuchCallback)]
    report: Report,
}

fn main() {}
