use burn::module::Module;
use burn_stoker::prelude::*;

#[callback(on = trigger, every_k_epochs = 2)]
fn dump_weights(ctx: &mut Context<'_, impl Module>) -> burn_stoker::Result<()> {
    let _ = ctx.epoch_num();
    Ok(())
}

#[callback(on = after_step, every_k_steps = 100)]
#[fetch("cost", "accuracy")]
fn watch<M>(cost: f32, accuracy: f64, ctx: &mut Context<'_, M>) {
    let _ = (cost, accuracy, ctx.global_step());
}

pub fn main() {
    let _ = (DumpWeights, Watch);
}
