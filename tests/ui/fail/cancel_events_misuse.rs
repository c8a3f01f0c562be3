use burn_stoker::callback::StepGradients;
use burn_stoker::prelude::*;

fn late(counters: &Counters) -> bool {
    counters.epoch_num() > 1
}

// fastai's `after_cancel_step`, `after_cancel_train` and `after_cancel_validate` follow what the
// loop did: never gated.
#[callback(on = after_cancel_step, every_k_steps = 2)]
fn every_other_cancelled_step<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

#[callback(on = after_cancel_train, enable_if = late)]
fn late_cancelled_training<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

#[callback(on = after_cancel_validate, every_k_epochs = 2)]
fn every_other_cancelled_pass<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

// The gradients are `after_backward`'s: the cancelled step's are gone.
#[callback(on = after_cancel_step)]
fn the_dropped_gradients(grads: &StepGradients) {
    let _ = grads;
}

// fastai's exception is `CancelValidException`; the event is `after_cancel_validate`.
#[callback(on = after_cancel_valid)]
fn misnamed<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

fn main() {}
