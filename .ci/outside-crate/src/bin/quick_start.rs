use burn::module::Module;
use burn::nn::{Linear, LinearConfig, Relu};
use burn::optim::AdamConfig;
use burn::tensor::{Device, Distribution, Tensor};
use burn_stoker::monitor::TrainCost;
use burn_stoker::prelude::*;

// 1. Your model: any burn `Module`.
#[derive(Module, Debug)]
struct Model { hidden: Linear, output: Linear, relu: Relu }

impl Model {
    fn new(device: &Device) -> Self {
        let (hidden, output) = (LinearConfig::new(1, 32), LinearConfig::new(32, 1));
        Model { hidden: hidden.init(device), output: output.init(device), relu: Relu::new() }
    }
    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        self.output.forward(self.relu.forward(self.hidden.forward(x)))
    }
}

// 2. Your data: a `Vec` of batches (or a burn `DataLoader`). Here y = sin(3x), 32 points a batch.
fn batches(count: usize, device: &Device) -> Vec<(Tensor<2>, Tensor<2>)> {
    let batch = |_| {
        let x = Tensor::<2>::random([32, 1], Distribution::Uniform(-1.0, 1.0), device);
        let y = x.clone().mul_scalar(3.0).sin();
        (x, y)
    };
    (0..count).map(batch).collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 3. Your device: `cpu`, or `wgpu`, `cuda`, ... built with burn-stoker's feature of that name.
    let name = std::env::args().nth(1).unwrap_or_else(|| "cpu".to_string());
    let device = burn_stoker::device::by_name(&name)?;

    let report = Trainer::new(Model::new(&device), AdamConfig::new().init(), batches(100, &device))
        .max_epoch(5)
        .learning_rate(1e-2)
        .log_dir("train_log/quick-start")
        .log_dir_policy(LogDirPolicy::NewVersion) // each run in a new version_N folder
        .callbacks(TrainCost::new()) // each epoch's mean loss, printed and logged as train_cost
        // 4. The step: the loss of one batch; the trainer runs backward and the optimizer.
        .train(|model: &Model, (x, y): (Tensor<2>, Tensor<2>), _step: &mut Step<'_>| {
            (model.forward(x) - y).powi_scalar(2).mean()
        })?;
    report.model.save_file("model.bpk")?; // the trained weights, in burn's own format
    Ok(())
}
