use burn_stoker::prelude::*;

fn assert_set<M, K, C: Callbacks<M, K>>(_: &C) {}

#[callback(on = triger)]
fn report<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

fn main() {
    let _ = (Report,);
    assert_set::<burn::nn::Linear, _, _>(&(Report, ModelSaver::new(1)));
}
