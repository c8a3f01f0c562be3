use burn_stoker::prelude::*;

// A type, but not a callback: ordering after it could never be satisfied.
struct NotACallback;

#[callback(on = trigger)]
#[order(after = NotACallback)]
fn report<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

#[derive(Callbacks)]
struct Training {
    #[order(before = NotACallback)]
    report: Report,
}

fn main() {
    let _ = NotACallback;
}
