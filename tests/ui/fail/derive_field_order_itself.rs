use burn_stoker::prelude::*;

#[callback(on = trigger)]
fn report<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

#[derive(Callbacks)]
struct Training {
    saver: ModelSaver,
    #[order(after = Report)]
    report: Report,
}

fn main() {}
