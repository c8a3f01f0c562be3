use burn_stoker::prelude::*;

#[callback(on = trigger)]
fn report<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

#[derive(Callbacks)]
struct Training {
    report: Report,
    steps: u64,
}

fn assert_set<M, K, C: Callbacks<M, K>>(_: &C) {}

fn main() {
    assert_set::<(), _, _>(&Training { report: Report, steps: 0 });
}
