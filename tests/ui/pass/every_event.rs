use burn_stoker::prelude::*;

#[callback(on = setup)]
fn on_setup<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx.log_dir();
}

#[callback(on = before_train)]
fn on_before_train<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx.epoch_num();
}

#[callback(on = before_epoch, every_k_epochs = 2)]
fn on_before_epoch<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx.epoch_num();
}

#[callback(on = before_step, every_k_steps = 10)]
fn on_before_step<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx.global_step();
}

#[callback(on = after_step, every_k_steps = 10, every_k_epochs = 2)]
fn on_after_step<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx.local_step();
}

#[callback(on = trigger_step)]
fn on_trigger_step<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx.global_step();
}

#[callback(on = after_epoch, every_k_epochs = 3)]
fn on_after_epoch<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx.epoch_num();
}

#[callback(on = trigger_epoch)]
fn on_trigger_epoch<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx.epoch_num();
}

#[callback(on = trigger, every_k_steps = 100, before_train = true)]
fn on_trigger<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx.learning_rate();
}

#[callback(on = trigger, before_train = false, chief_only = false, name = "Renamed")]
fn on_trigger_renamed<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx.learning_rate();
}

#[callback(on = after_train)]
fn on_after_train<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx.stop_requested();
}

fn warm(counters: &Counters) -> bool {
    counters.global_step() >= 100
}

#[callback(on = trigger_step, enable_if = warm)]
fn when_warm<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

#[callback(on = trigger, enable_if = self::warm, every_k_epochs = 2)]
fn when_warm_by_path<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

fn assert_set<M, K, C: Callbacks<M, K>>(_: &C) {}

fn main() {
    let set = (
        OnSetup,
        OnBeforeTrain,
        OnBeforeEpoch,
        OnBeforeStep,
        OnAfterStep,
        OnTriggerStep,
        OnAfterEpoch,
        OnTriggerEpoch,
        OnTrigger,
        Renamed,
        OnAfterTrain,
        WhenWarm,
        WhenWarmByPath,
    );
    assert_set::<(), _, _>(&set);
}
