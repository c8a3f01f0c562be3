//! fastai's `MixUp` as a library item (`modify::MixUp`, fastai/callback/mixup.py): one step
//! against a hand computation, validation unmixed, a resumed run's draws, a threads world.

use std::sync::{Arc, Mutex};

use burn::nn::{Linear, LinearConfig};
use burn::tensor::activation::log_softmax;
use burn::tensor::{Device, Int, Tensor, TensorData};
use burn_stoker::callback::{StepBatch, StepEvents};
use burn_stoker::fetch::{Fetch, Fetched};
use burn_stoker::modify::{Mix, MixUp};
use burn_stoker::prelude::*;
use burn_stoker::world::Threads;
use stoker_tests::{scratch_dir, weights};

/// A classification batch: inputs and class indices (a `MixUpBatch` as it is).
type Labelled = (Tensor<2>, Tensor<1, Int>);

/// The cross-entropy of each sample (fastai's loss function under `NoneReduce`).
fn cross_entropy(pred: Tensor<2>, y: Tensor<1, Int>) -> Tensor<1> {
    let n = y.dims()[0];
    -log_softmax(pred, 1).gather(1, y.reshape([n, 1])).reshape([n])
}

/// The per-sample loss MixUp mixes.
type PerSample = fn(Tensor<2>, Tensor<1, Int>) -> Tensor<1>;

fn mixup() -> MixUp<Labelled, Tensor<2>, PerSample> {
    MixUp::new(0.4, cross_entropy)
}

/// `batches` batches of 4 samples of 3 features, 3 classes.
fn labelled(batches: usize, device: &Device) -> Vec<Labelled> {
    (0..batches)
        .map(|b| {
            let xs: Vec<f32> = (0..12).map(|i| ((b * 12 + i) as f32 * 0.61).cos()).collect();
            let ys: Vec<i64> = (0..4).map(|i| ((b * 4 + i) * 7 % 3) as i64).collect();
            (
                Tensor::from_data(TensorData::new(xs, [4, 3]), device),
                Tensor::from_data(TensorData::new(ys, [4]), device),
            )
        })
        .collect()
}

/// The step function: the prediction handed over, the plain loss (which MixUp replaces).
fn step(model: &Linear, (x, y): Labelled, step: &mut Step<'_>) -> Tensor<1> {
    let pred = step.pred(model.forward(x));
    cross_entropy(pred, y).mean().reshape([1])
}

/// Records, before each training step, the global step and the weights it starts from; after
/// each step, the loss that was minimized (the `"loss"` output).
#[derive(Default, Clone)]
struct Probe(Arc<Mutex<ProbeLog>>);

#[derive(Default)]
struct ProbeLog {
    /// (rank, global step, weights) before each training step.
    starts: Vec<(usize, u64, Vec<Vec<f32>>)>,
    /// (rank, loss) after each step.
    losses: Vec<(usize, f32)>,
}

impl Probe {
    /// The losses of rank `rank`.
    fn losses(&self, rank: usize) -> Vec<f32> {
        self.0.lock().unwrap().losses.iter().filter(|l| l.0 == rank).map(|l| l.1).collect()
    }
    /// The global step and the weights each training step of rank `rank` started from.
    fn starts(&self, rank: usize) -> Vec<(u64, Vec<Vec<f32>>)> {
        self.0.lock().unwrap().starts.iter().filter(|s| s.0 == rank).map(|s| (s.1, s.2.clone())).collect()
    }
}

static LOSS: [Fetch; 1] = [Fetch::host("loss")];

impl Callback<Linear> for Probe {
    fn chief_only(&self) -> bool {
        false
    }
    fn fetches(&self) -> &[Fetch] {
        &LOSS
    }
    fn step_events(&self) -> StepEvents {
        StepEvents::BATCH
    }
    fn before_batch(
        &mut self,
        ctx: &mut Context<'_, Linear>,
        _batch: &StepBatch<'_>,
    ) -> burn_stoker::Result<()> {
        if ctx.training() {
            self.0.lock().unwrap().starts.push((ctx.rank(), ctx.global_step(), weights(ctx.model())));
        }
        Ok(())
    }
    fn after_step(&mut self, ctx: &mut Context<'_, Linear>, values: &Fetched<'_>) -> burn_stoker::Result<()> {
        self.0.lock().unwrap().losses.push((ctx.rank(), values.get::<f32>("loss")?));
        Ok(())
    }
}

/// A sample's cross-entropy for class `class`, by hand: `w` is `[weight (3x3, in x out), bias]`.
fn hand_cross_entropy(w: &[Vec<f32>], x: &[f64], class: usize) -> f64 {
    let logits: Vec<f64> =
        (0..3).map(|o| w[1][o] as f64 + (0..3).map(|i| x[i] * w[0][i * 3 + o] as f64).sum::<f64>()).collect();
    let max = logits.iter().cloned().fold(f64::MIN, f64::max);
    let log_sum = max + logits.iter().map(|l| (l - max).exp()).sum::<f64>().ln();
    log_sum - logits[class]
}

/// The mixed loss of one batch by hand, from the weights `w` the step started from and what
/// MixUp drew; whether some sample was mixed with another.
fn hand_mixed_loss(w: &[Vec<f32>], (x, y): &Labelled, mix: &Mix) -> (f64, bool) {
    let xs: Vec<f64> = x.clone().into_data().iter::<f32>().map(f64::from).collect();
    let ys: Vec<usize> = y.clone().into_data().iter::<i64>().map(|c| c as usize).collect();
    let (mut total, mut mixed_any) = (0.0, false);
    for i in 0..4 {
        let lam = f64::from(mix.lam()[i]);
        assert!((0.5..=1.0).contains(&lam), "λ = max(λ, 1 - λ): {lam}");
        let j = mix.partners()[i] as usize;
        mixed_any |= j != i && lam < 0.99;
        let mixed: Vec<f64> = (0..3).map(|f| lam * xs[i * 3 + f] + (1.0 - lam) * xs[j * 3 + f]).collect();
        total +=
            lam * hand_cross_entropy(w, &mixed, ys[i]) + (1.0 - lam) * hand_cross_entropy(w, &mixed, ys[j]);
    }
    (total / 4.0, mixed_any)
}

/// The validation cost at the end of training.
struct ValidationCost(Arc<Mutex<Option<f64>>>);

impl<M> Callback<M> for ValidationCost {
    fn after_train(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        *self.0.lock().unwrap() = ctx.monitors_ref().latest("validation_cost");
        Ok(())
    }
}

// fastai fastai/callback/mixup.py (MixUp.before_batch, MixHandler.lf): the batch mixed with its
// shuffled copy by torch.lerp(xb1, xb, lam), λ = max(λ, 1 - λ) from Beta(α, α), the loss
// torch.lerp(lf(pred, yb1), lf(pred, yb), lam) reduced by the mean; run_valid = False.
#[test]
fn mixup_step_equals_a_hand_computation() {
    let device = burn_stoker::device::cpu();
    let model: Linear = LinearConfig::new(3, 3).init(&device);
    let data = labelled(2, &device);
    let (probe, cost) = (Probe::default(), Arc::default());
    let runner = InferenceRunner::new(data.clone(), |model: &Linear, (x, y): Labelled, out: &mut Outputs| {
        out.put("cost", cross_entropy(model.forward(x), y).mean());
        4usize
    })
    .with(ScalarStats::new(["cost"]));
    let report = Trainer::new(model, burn::optim::SgdConfig::new().init(), data.clone())
        .max_epoch(1)
        .learning_rate(0.5)
        .seed(42)
        .log_dir(scratch_dir("mixup-hand"))
        .default_callbacks(DefaultCallbacks::none())
        .callbacks((probe.clone(), mixup(), runner, ValidationCost(Arc::clone(&cost))))
        .train(step)
        .unwrap();
    let (starts, losses) = (probe.starts(0), probe.losses(0));
    assert_eq!((starts.len(), losses.len()), (2, 2));
    let mut seen_mixed = false;
    for ((global_step, w), (batch, &got)) in starts.iter().zip(data.iter().zip(&losses)) {
        // What MixUp draws at that step from the run's seed.
        let (expected, mixed) = hand_mixed_loss(w, batch, &mixup().draw(42, 0, *global_step, 4));
        seen_mixed |= mixed;
        assert!(
            (f64::from(got) - expected).abs() < 1e-5,
            "step {global_step}: the mixed loss {got}, by hand {expected}"
        );
    }
    assert!(seen_mixed, "some sample was mixed with another");
    // Validation is not mixed: the plain cross-entropy of the trained model over both batches.
    let w = weights(&report.model);
    let mut plain = 0.0;
    for (x, y) in &data {
        let xs: Vec<f64> = x.clone().into_data().iter::<f32>().map(f64::from).collect();
        let ys: Vec<i64> = y.clone().into_data().iter::<i64>().collect();
        plain += (0..4).map(|i| hand_cross_entropy(&w, &xs[i * 3..i * 3 + 3], ys[i] as usize)).sum::<f64>();
    }
    let cost = cost.lock().unwrap().expect("a validation pass ran");
    assert!((cost - plain / 8.0).abs() < 1e-5, "validation cost {cost}, unmixed by hand {}", plain / 8.0);
}

/// A linear model of 3 inputs and 3 classes with fixed weights (the same in every run, whatever
/// else the process draws).
fn fixed_linear(device: &Device) -> Linear {
    let mut model: Linear = LinearConfig::new(3, 3).init(device);
    let w: Vec<f32> = (0..9).map(|i| ((i as f32) * 1.3).sin() * 0.5).collect();
    model.weight = burn::module::Param::from_tensor(Tensor::from_data(TensorData::new(w, [3, 3]), device));
    model.bias = Some(burn::module::Param::from_tensor(Tensor::zeros([3], device)));
    model
}

/// A run of `epochs` epochs of 2 batches in `dir` with MixUp (unseeded, or seeded by the
/// trainer), a checkpoint at each epoch's end; resumed from `resume` when given.
fn run(
    dir: &std::path::Path,
    epochs: u64,
    seed: Option<u64>,
    resume: Option<&str>,
) -> (Vec<f32>, Vec<Vec<f32>>) {
    let device = burn_stoker::device::cpu();
    let model = fixed_linear(&device);
    let probe = Probe::default();
    let mut trainer = Trainer::new(model, burn::optim::SgdConfig::new().init(), labelled(2, &device))
        .max_epoch(epochs)
        .learning_rate(0.5)
        .handle_signals(false)
        .log_dir(dir)
        .default_callbacks(DefaultCallbacks::none())
        .callbacks((probe.clone(), mixup(), PeriodicTrigger::new(ModelSaver::new(100)).every_k_epochs(1)));
    if let Some(seed) = seed {
        trainer = trainer.seed(seed);
    }
    if let Some(checkpoint) = resume {
        trainer = trainer.resume_from(dir.join("checkpoints").join(checkpoint));
    }
    let report = trainer.train(step).unwrap();
    (probe.losses(0), weights(&report.model))
}

// fastai draws from torch's generator; here the draws follow the run's seed, the rank and the
// global step, and an unseeded run's seed (from the clock) is saved with the checkpoints.
#[test]
fn a_resumed_run_draws_what_the_uninterrupted_run_drew() {
    for seed in [None, Some(7)] {
        let dir = scratch_dir("mixup-resume");
        let (straight, straight_weights) = run(&dir, 3, seed, None);
        assert_eq!(straight.len(), 6);
        // Resumed from the end of epoch 1: steps 3 to 6 again, with the same draws.
        let (resumed, resumed_weights) = run(&dir, 3, seed, Some("step-2"));
        assert_eq!(resumed, straight[2..], "seed {seed:?}");
        assert_eq!(resumed_weights, straight_weights, "seed {seed:?}");
        // Another unseeded run draws otherwise (its clock seed), a seeded one the same.
        let other = scratch_dir("mixup-resume-other");
        let (again, _) = run(&other, 3, seed, None);
        assert_eq!(again == straight, seed.is_some(), "seed {seed:?}: {again:?} vs {straight:?}");
    }
}

// Each rank of a threads world mixes its own shard with draws of its own (the rank is in the
// seed), and its loss is the mix of its own batch.
#[test]
fn each_rank_of_a_threads_world_mixes_with_draws_of_its_own() {
    let mix = mixup();
    assert_ne!(mix.draw(42, 0, 0, 4), mix.draw(42, 1, 0, 4));
    let probe = Probe::default();
    let dir = scratch_dir("mixup-threads");
    let devices = [burn_stoker::device::cpu(), burn_stoker::device::cpu()];
    let shards = std::sync::Mutex::new(Vec::new());
    Threads::new(devices)
        .run(|world| {
            let data = world.shard(labelled(4, world.device()));
            shards.lock().unwrap().push((world.rank(), data.clone()));
            Trainer::new(
                LinearConfig::new(3, 3).init(world.device()),
                burn::optim::SgdConfig::new().init(),
                data,
            )
            .max_epoch(1)
            .learning_rate(0.5)
            .seed(42)
            .handle_signals(false)
            .log_dir(&dir)
            .default_callbacks(DefaultCallbacks::none())
            .world(world)
            .callbacks((probe.clone(), mixup()))
            .train(step)
        })
        .expect("two ranks");
    for (rank, shard) in shards.into_inner().unwrap() {
        let (starts, losses) = (probe.starts(rank), probe.losses(rank));
        assert_eq!((starts.len(), losses.len()), (2, 2), "rank {rank}");
        for ((global_step, w), (batch, &got)) in starts.iter().zip(shard.iter().zip(&losses)) {
            let (expected, _) = hand_mixed_loss(w, batch, &mixup().draw(42, rank, *global_step, 4));
            assert!(
                (f64::from(got) - expected).abs() < 1e-5,
                "rank {rank}, step {global_step}: the mixed loss {got}, by hand {expected}"
            );
        }
    }
}
