use burn_stoker::callback::{StepGradients, StepLoss};
use burn_stoker::prelude::*;

fn warm(counters: &Counters) -> bool {
    counters.global_step() > 10
}

#[callback(on = before_backward, every_k_steps = 2)]
fn loss_every_other_step(loss: &StepLoss<'_>) {
    let _ = loss;
}

#[callback(on = before_validate, enable_if = warm)]
fn validate_when_warm<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

#[callback(on = after_cancel_epoch, every_k_epochs = 2)]
fn every_other_cancel<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

#[callback(on = after_backward)]
fn two_payloads(grads: &StepGradients, more: &StepGradients) {
    let _ = (grads, more);
}

#[callback(on = before_backward)]
#[fetch("loss")]
fn fetch_in_step(loss: f32) {
    let _ = loss;
}

fn main() {}
