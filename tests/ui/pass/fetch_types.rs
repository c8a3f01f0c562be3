use burn::tensor::{Tensor, TensorData};
use burn_stoker::prelude::*;

#[callback(on = after_step)]
#[fetch("cost")]
fn scalar_f32(cost: f32) {
    let _ = cost;
}

#[callback(on = after_step, every_k_steps = 10)]
#[fetch("cost", "accuracy")]
fn scalar_f64<M>(cost: f64, ctx: &mut Context<'_, M>, accuracy: f64) {
    let _ = (cost, accuracy, ctx.global_step());
}

#[callback(on = after_step)]
#[fetch("logits")]
fn vector(logits: Vec<f32>) {
    let _ = logits.len();
}

#[callback(on = after_step)]
#[fetch("logits")]
fn data(logits: TensorData) {
    let _ = logits;
}

#[callback(on = after_step)]
#[fetch("loss", "logits")]
fn device_tensors(loss: Tensor<1>, logits: Tensor<2>) {
    let _ = (loss.dims(), logits.dims());
}

#[callback(on = after_step)]
#[fetch("cost", "wrong", "logits")]
fn mixed(ctx: &mut Context<'_, impl burn::module::Module>, cost: f32, wrong: Vec<f32>, logits: Tensor<2>) {
    let _ = (ctx.global_step(), cost, wrong, logits);
}

#[callback(on = after_step)]
#[fetch("cost")]
fn mutable_binding(mut cost: f32) {
    cost += 1.0;
    let _ = cost;
}

#[callback(on = after_step)]
#[fetch("cost")]
fn full_path(cost: ::core::primitive::f32) {
    let _ = cost;
}

fn assert_set<M, K, C: Callbacks<M, K>>(_: &C) {}

pub fn main() {
    assert_set::<(), _, _>(&(ScalarF32, ScalarF64, Vector, Data, DeviceTensors, MutableBinding, FullPath));
    assert_set::<burn::nn::Linear, _, _>(&Mixed);
}
