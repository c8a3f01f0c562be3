use burn_stoker::callback::{StepBatch, StepEvents, StepGradients, StepLoss, StepPred};
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

#[callback(on = before_batch)]
fn on_before_batch<M>(batch: &StepBatch<'_>, ctx: &mut Context<'_, M>) {
    let _ = (batch.type_name(), ctx.training());
}

#[callback(on = after_pred)]
fn on_after_pred(pred: &StepPred<'_>) -> burn_stoker::Result<()> {
    pred.update(|pred: f32| pred * 2.0)
}

#[callback(on = after_loss)]
fn on_after_loss(loss: &StepLoss<'_>) {
    loss.update(|loss| loss * 2.0);
}

#[callback(on = before_backward)]
fn on_before_backward(loss: &StepLoss<'_>) {
    loss.update(|loss| loss * 2.0);
}

#[callback(on = after_backward)]
fn on_after_backward<M>(grads: &StepGradients, ctx: &mut Context<'_, M>) {
    let _ = (grads.is_present(), ctx.global_step());
}

#[callback(on = before_validate)]
fn on_before_validate<M>(ctx: &mut Context<'_, M>) {
    assert!(!ctx.training());
}

#[callback(on = validate)]
fn on_validate<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx.training();
}

#[callback(on = after_validate)]
fn on_after_validate<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx.training();
}

#[callback(on = after_cancel_batch)]
fn on_after_cancel_batch<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx.global_step();
}

#[callback(on = after_cancel_epoch)]
fn on_after_cancel_epoch<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx.epoch_num();
}

#[callback(on = after_cancel_fit)]
fn on_after_cancel_fit<M>(ctx: &mut Context<'_, M>) -> Flow {
    let _ = ctx.stop_requested();
    Flow::Continue
}

#[callback(on = after_cancel_step)]
fn on_after_cancel_step<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx.global_step();
}

#[callback(on = after_cancel_train)]
fn on_after_cancel_train<M>(ctx: &mut Context<'_, M>) -> Flow {
    let _ = ctx.epoch_num();
    Flow::CancelEpoch
}

#[callback(on = after_cancel_validate)]
fn on_after_cancel_validate<M>(ctx: &mut Context<'_, M>) {
    assert!(!ctx.training());
}

/// The three cancels fastai adds to `CancelBatch`, `CancelEpoch` and `CancelFit`, from the DSL.
#[callback(on = after_backward)]
fn cancel_the_optimizer_step(grads: &StepGradients) -> Flow {
    if grads.is_present() { Flow::CancelStep } else { Flow::Continue }
}

#[callback(on = before_step)]
fn cancel_the_training<M>(ctx: &mut Context<'_, M>) -> Flow {
    if ctx.local_step() > 2 { Flow::CancelTrain } else { Flow::Continue }
}

#[callback(on = before_validate)]
fn cancel_the_validation() -> Flow {
    Flow::CancelValid
}

fn assert_set<M, K, C: Callbacks<M, K>>(_: &C) {}

pub fn main() {
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
    let fastai = (
        OnBeforeBatch,
        OnAfterPred,
        OnAfterLoss,
        OnBeforeBackward,
        OnAfterBackward,
        OnBeforeValidate,
        OnValidate,
        OnAfterValidate,
        OnAfterCancelBatch,
        OnAfterCancelEpoch,
        OnAfterCancelFit,
        OnAfterCancelStep,
        OnAfterCancelTrain,
        OnAfterCancelValidate,
    );
    assert_set::<(), _, _>(&fastai);
    let cancels = (CancelTheOptimizerStep, CancelTheTraining, CancelTheValidation);
    assert_set::<(), _, _>(&cancels);
    assert_eq!(Callback::<()>::step_events(&OnBeforeBatch), StepEvents::BATCH);
    assert_eq!(Callback::<()>::step_events(&OnAfterPred), StepEvents::PRED);
    assert_eq!(Callback::<()>::step_events(&OnAfterLoss), StepEvents::LOSS);
    assert_eq!(Callback::<()>::step_events(&OnBeforeBackward), StepEvents::LOSS);
    assert_eq!(Callback::<()>::step_events(&OnAfterBackward), StepEvents::GRADIENTS);
    assert_eq!(Callback::<()>::step_events(&OnBeforeValidate), StepEvents::NONE);
    assert_eq!(Callback::<()>::step_events(&CancelTheOptimizerStep), StepEvents::GRADIENTS);
    assert_eq!(Callback::<()>::step_events(&OnAfterCancelStep), StepEvents::NONE);
}
