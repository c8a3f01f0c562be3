use burn::tensor::Tensor;
use burn_stoker::prelude::*;

// A device tensor is never read back: there is nothing to defer.
#[callback(on = after_step)]
#[fetch("logits", deferred)]
fn watch(logits: Tensor<2>) {
    let _ = logits;
}

fn main() {}
