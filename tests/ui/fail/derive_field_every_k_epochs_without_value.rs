use burn_stoker::prelude::*;

#[callback(on = trigger)]
fn report<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

#[derive(Callbacks)]
struct Training {
    #[every_k_epochs]
    report: Report,
}

fn main() {}
