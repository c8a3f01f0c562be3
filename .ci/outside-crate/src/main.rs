use burn::module::Module;
use burn::nn::{loss::CrossEntropyLossConfig, Linear, LinearConfig, Relu};
use burn::optim::AdamConfig;
use burn::tensor::{Device, Distribution, Int, Tensor};
use burn_stoker::prelude::*;

#[derive(Clone, Debug)]
struct Batch { points: Tensor<2>, labels: Tensor<1, Int> }

/// Your data, here made up: 64 random points a batch, each classed by the ring it falls in.
fn rings(batches: usize, device: &Device) -> Vec<Batch> {
    let batch = |_| {
        let points = Tensor::<2>::random([64, 2], Distribution::Uniform(-1.0, 1.0), device);
        let radius = points.clone().powi_scalar(2).sum_dim(1).sqrt().squeeze_dim::<1>(1);
        let labels = radius.clone().greater_elem(0.5).int() + radius.greater_elem(0.9).int();
        Batch { points, labels }
    };
    (0..batches).map(batch).collect()
}

#[derive(Module, Debug)]
struct Net { hidden: Linear, output: Linear, relu: Relu }

impl Net {
    fn new(device: &Device) -> Self {
        let (hidden, output) = (LinearConfig::new(2, 64), LinearConfig::new(64, 3));
        Net { hidden: hidden.init(device), output: output.init(device), relu: Relu::new() }
    }
    /// The loss, plus named outputs that callbacks may fetch.
    fn loss(&self, batch: Batch, out: &mut Outputs) -> Tensor<1> {
        let logits = self.output.forward(self.relu.forward(self.hidden.forward(batch.points)));
        let predicted = logits.clone().argmax(1).squeeze_dim::<1>(1);
        out.put("wrong", predicted.not_equal(batch.labels.clone()).float());
        let loss = CrossEntropyLossConfig::new().init(&logits.device()).forward(logits, batch.labels);
        out.put("cost", loss.clone());
        loss
    }
}

// A callback of your own: "cost" reaches it with the step, copied to the host every 100 steps.
#[callback(on = after_step, every_k_steps = 100)]
#[fetch("cost")]
fn watch(cost: f32, ctx: &mut Context<'_, impl Module>) -> Flow {
    if cost.is_finite() { return Flow::Continue; }
    Flow::Stop(format!("cost {cost} at step {}", ctx.global_step()))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let device = burn_stoker::device::cpu();
    let (train, valid) = (rings(50, &device), rings(10, &device));
    let report = Trainer::new(Net::new(&device), AdamConfig::new().init(), train)
        .max_epoch(10)
        .learning_rate(1e-2)
        .log_dir("train_log/net") // the default callbacks write TensorBoard events and stats.json here
        .log_dir_policy(LogDirPolicy::NewVersion) // each run in a new train_log/net/version_N
        .callbacks((
            InferenceRunner::new(valid, |net: &Net, batch: Batch, out: &mut Outputs| {
                net.loss(batch, out);
            })
            .with(ScalarStats::new(["cost"])) // validation_cost
            .with(ClassificationError::new("wrong", "validation_error")),
            ModelSaver::new(3), // a checkpoint every epoch: the last 3 kept, and one per half hour
            EarlyStopping::new("validation_error").patience(3).restore_best_weights(true),
            Watch,
        ))
        .train(|net: &Net, batch: Batch, step: &mut Step<'_>| net.loss(batch, step.outputs()))?;
    report.model.save_file("net.bpk")?; // the best epoch's weights
    Ok(())
}
