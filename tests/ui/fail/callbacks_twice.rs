// `.callbacks(...)` twice: the second call would replace the first silently, so it does not
// compile; the message says to give every callback in one call, as a tuple.
use burn::nn::{Linear, LinearConfig};
use burn::optim::SgdConfig;
use burn::tensor::Tensor;
use burn_stoker::prelude::*;

fn main() {
    let device = burn_stoker::device::cpu();
    let model: Linear = LinearConfig::new(2, 1).init(&device);
    let data: Vec<(Tensor<2>, Tensor<2>)> = Vec::new();
    let _trainer = Trainer::new(model, SgdConfig::new().init(), data)
        .callbacks(ModelSaver::new(3))
        .callbacks(EarlyStopping::new("validation_error"));
}
