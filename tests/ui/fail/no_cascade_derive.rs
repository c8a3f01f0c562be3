use burn_stoker::prelude::*;

fn assert_set<M, K, C: Callbacks<M, K>>(_: &C) {}

#[callback(on = trigger)]
fn report<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

#[derive(Callbacks)]
struct Training {
    #[every_k_steps(-1)]
    report: Report,
}

fn main() {
    assert_set::<(), _, _>(&Training { report: Report });
}
