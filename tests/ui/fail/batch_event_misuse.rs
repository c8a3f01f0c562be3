use burn_stoker::callback::{StepBatch, StepPred};
use burn_stoker::prelude::*;

fn warm(counters: &Counters) -> bool {
    counters.global_step() > 10
}

#[callback(on = before_batch, every_k_steps = 2)]
fn batch_every_other_step(batch: &StepBatch<'_>) {
    let _ = batch;
}

#[callback(on = after_pred, enable_if = warm)]
fn pred_when_warm(pred: &StepPred<'_>) {
    let _ = pred;
}

#[callback(on = before_batch)]
fn two_batches(batch: &StepBatch<'_>, again: &StepBatch<'_>) {
    let _ = (batch, again);
}

#[callback(on = after_pred)]
#[fetch("loss")]
fn fetch_in_pred(loss: f32) {
    let _ = loss;
}

#[callback(on = after_pred)]
fn pred_as_batch(pred: &StepBatch<'_>) {
    let _ = pred;
}

#[callback(on = after_loss, every_k_epochs = 2)]
fn loss_every_other_epoch(loss: &burn_stoker::callback::StepLoss<'_>) {
    let _ = loss;
}

fn main() {}
