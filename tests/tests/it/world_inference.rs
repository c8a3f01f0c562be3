//! Validation across the ranks of a data-parallel world (tensorpack's
//! `DataParallelInferenceRunner`), with the threads transport on the CPU: each rank runs its shard
//! of the validation set, the inferencers' partial sums are added up over the ranks, and the
//! chief's statistics equal those of one rank over the whole set; the statistics appear once
//! (the chief's monitors and stats.json), never on the other rank; a runner with an inferencer
//! that gives no partial sums fails at setup naming it.

use std::sync::{Arc, Mutex};

use burn::nn::{Linear, LinearConfig};
use burn::optim::SgdConfig;
use burn::tensor::{Device, Tensor, TensorData};
use burn_stoker::inference::{BinaryClassificationStats, Inferencer, MultiLabelStats};
use burn_stoker::prelude::*;
use burn_stoker::world::{Threads, World};
use stoker_tests::scratch_dir;

const EPOCHS: u64 = 2;

/// Every statistic the runner puts.
const NAMES: [&str; 19] = [
    "validation_cost",
    "validation_error",
    "binary_precision",
    "binary_recall",
    "binary_f1",
    "val_precision/a",
    "val_precision/b",
    "val_precision/c",
    "val_precision",
    "val_recall/a",
    "val_recall/b",
    "val_recall/c",
    "val_recall",
    "val_misclassification/a",
    "val_misclassification/b",
    "val_misclassification/c",
    "val_misclassification",
    "neon_precision",
    "neon_recall",
];

fn cpu() -> Device {
    burn_stoker::device::cpu()
}

/// `n` training batches of 4 points, 6 -> 3.
fn training(n: usize, device: &Device) -> Vec<(Tensor<2>, Tensor<2>)> {
    (0..n)
        .map(|b| {
            let xs: Vec<f32> = (0..24).map(|i| (((b * 24 + i) as f32) * 0.731).sin()).collect();
            let ys: Vec<f32> = xs.chunks(6).flat_map(|x| [x[0] - x[1], x[2] * x[3], x[4] + x[5]]).collect();
            (
                Tensor::from_data(TensorData::new(xs, [4, 6]), device),
                Tensor::from_data(TensorData::new(ys, [4, 3]), device),
            )
        })
        .collect()
}

/// Validation batches of these sizes: inputs `[n, 6]` and one-hot labels `[n, 3]` (the class
/// of each point a fixed function of its inputs, which the untrained model gets partly right).
fn validation(sizes: &[usize], device: &Device) -> Vec<(Tensor<2>, Tensor<2>)> {
    let mut start = 0;
    sizes
        .iter()
        .map(|&n| {
            let xs: Vec<f32> = (0..n * 6).map(|i| (((start * 6 + i) as f32) * 1.37 + 0.2).cos()).collect();
            start += n;
            let one_hot: Vec<f32> = xs
                .chunks(6)
                .flat_map(|x| {
                    let class = if x[0] + x[1] > 0.5 {
                        0
                    } else if x[2] > x[3] {
                        1
                    } else {
                        2
                    };
                    (0..3).map(move |c| f32::from(u8::from(c == class)))
                })
                .collect();
            (
                Tensor::from_data(TensorData::new(xs, [n, 6]), device),
                Tensor::from_data(TensorData::new(one_hot, [n, 3]), device),
            )
        })
        .collect()
}

/// Uneven batches (the cost is a per-batch mean, weighted by the batch size); equal halves when
/// dealt round-robin to 2 ranks.
const SIZES: [usize; 6] = [5, 5, 3, 3, 2, 2];

fn forward(model: &Linear, (x, one_hot): (Tensor<2>, Tensor<2>), out: &mut Outputs) -> usize {
    let n = x.dims()[0];
    let logits = model.forward(x);
    let predicted = logits.clone().argmax(1);
    let labels = one_hot.clone().argmax(1);
    out.put("cost", (logits.clone() - one_hot.clone()).powi_scalar(2).mean());
    out.put("wrong", predicted.clone().not_equal(labels.clone()).float().reshape([n]));
    out.put("says_a", predicted.equal_elem(0).float().reshape([n]));
    out.put("is_a", labels.equal_elem(0).float().reshape([n]));
    out.put("logits", logits);
    out.put("one_hot", one_hot);
    n
}

type Forward = fn(&Linear, (Tensor<2>, Tensor<2>), &mut Outputs) -> usize;

fn runner(data: Vec<(Tensor<2>, Tensor<2>)>) -> InferenceRunner<Vec<(Tensor<2>, Tensor<2>)>, Forward> {
    InferenceRunner::new(data, forward as Forward)
        .with(ScalarStats::new(["cost"]))
        .with(ClassificationError::new("wrong", "validation_error"))
        .with(BinaryClassificationStats::new("says_a", "is_a").prefix("binary"))
        .with(MultiLabelStats::new("logits", "one_hot", ["a", "b", "c"]).argmax(true))
        .with(
            MultiLabelStats::new("logits", "one_hot", ["a", "b", "c"])
                .argmax(true)
                .mean_over_batches(true)
                .prefix("neon"),
        )
}

/// At each trigger, on every rank: the rank, the epoch and the latest value of each of `NAMES`.
type Seen = Arc<Mutex<Vec<(usize, u64, Vec<Option<f64>>)>>>;

#[derive(Clone, Default)]
struct Record(Seen);

impl Callback<Linear> for Record {
    fn chief_only(&self) -> bool {
        false
    }
    fn order(&self) -> Order {
        Order::none().after("InferenceRunner")
    }
    fn trigger(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let values = NAMES.iter().map(|n| ctx.monitors_ref().latest(n)).collect();
        self.0.lock().unwrap().push((ctx.rank(), ctx.epoch_num(), values));
        Ok(())
    }
}

fn mse(model: &Linear, (x, y): (Tensor<2>, Tensor<2>), _step: &mut Step<'_>) -> Tensor<1> {
    (model.forward(x) - y).powi_scalar(2).mean()
}

/// The statistics of one rank, with a plain runner over the whole set `sizes`, per epoch. The
/// learning rate is 0: the model stays `initial`, the weights every rank of the world starts from.
fn single_rank(initial: &Linear, sizes: &[usize]) -> Vec<Vec<f64>> {
    let device = cpu();
    let record = Record::default();
    Trainer::new(initial.clone(), SgdConfig::new().init(), training(8, &device))
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .learning_rate(0.0)
        .max_epoch(EPOCHS)
        .log_dir(scratch_dir("world-inference-single"))
        .callbacks((runner(validation(sizes, &device)), record.clone()))
        .train(mse)
        .expect("one rank");
    let seen = record.0.lock().unwrap().clone();
    assert_eq!(seen.len(), EPOCHS as usize);
    seen.into_iter()
        .map(|(_, _, values)| values.into_iter().map(|v| v.expect("the single rank's statistics")).collect())
        .collect()
}

/// Validation batches.
type Batches = Vec<(Tensor<2>, Tensor<2>)>;
/// What each rank's monitors held: (rank, epoch, values).
type Held = Vec<(usize, u64, Vec<Option<f64>>)>;

/// Two ranks, each validating `shard(world, batches)`, from the chief's `initial` weights; returns
/// what each rank's monitors held after the runner, and the log directory.
fn two_ranks(
    initial: &Linear,
    sizes: &[usize],
    shard: fn(&World, Batches) -> Batches,
) -> (Held, std::path::PathBuf) {
    let initial = Mutex::new(initial.clone());
    let record = Record::default();
    let dir = scratch_dir("world-inference-pair");
    Threads::new([cpu(), cpu()])
        .run(|world| {
            // Rank 1 starts from other weights: the chief's must reach it before it validates.
            let model = if world.is_chief() {
                initial.lock().unwrap().clone()
            } else {
                LinearConfig::new(6, 3).init(world.device())
            };
            let valid = shard(&world, validation(sizes, world.device()));
            let data = world.shard(training(8, world.device()));
            // The default callbacks: the chief's writers (stats.json).
            Trainer::new(model, SgdConfig::new().init(), data)
                .handle_signals(false)
                .learning_rate(0.0)
                .max_epoch(EPOCHS)
                .log_dir(&dir)
                .world(world)
                .callbacks((runner(valid).data_parallel(), record.clone()))
                .train(mse)
        })
        .expect("two ranks");
    let seen = record.0.lock().unwrap().clone();
    (seen, dir)
}

/// The chief's statistics equal the single rank's; rank 1's monitors hold none of them.
fn check(single: &[Vec<f64>], seen: &[(usize, u64, Vec<Option<f64>>)]) {
    assert_eq!(seen.len(), 2 * EPOCHS as usize, "{seen:?}");
    for (rank, epoch, values) in seen {
        match rank {
            0 => {
                let expected = &single[*epoch as usize - 1];
                for ((name, value), expected) in NAMES.iter().zip(values).zip(expected) {
                    let value = value.unwrap_or_else(|| panic!("the chief has no `{name}`"));
                    assert!(
                        (value - expected).abs() < 1e-6,
                        "{name}: {value} over 2 ranks, {expected} over 1 rank (epoch {epoch})"
                    );
                }
            }
            _ => assert!(values.iter().all(Option::is_none), "rank {rank} has statistics: {values:?}"),
        }
    }
}

#[test]
fn two_ranks_validating_halves_report_on_the_chief_what_one_rank_reports_over_the_whole_set() {
    // Seeded: an unseeded draw can get every validation sample wrong (seen once in CI-like runs).
    cpu().seed(11);
    let initial: Linear = LinearConfig::new(6, 3).init(&cpu());
    let single = single_rank(&initial, &SIZES);
    // Not a trivial set: some right, some wrong, a cost that is not 0.
    let [cost, error] = [single[0][0], single[0][1]];
    assert!(cost > 0.0 && error > 0.0 && error < 1.0, "cost {cost}, error {error}");

    let (seen, dir) = two_ranks(&initial, &SIZES, |world, batches| world.shard(batches));
    check(&single, &seen);

    // The statistics appear once per epoch in the one stats.json, the chief's.
    let text = std::fs::read_to_string(dir.join("stats.json")).expect("the chief's stats.json");
    let stats: Vec<serde_json::Map<String, serde_json::Value>> = serde_json::from_str(&text).unwrap();
    assert_eq!(stats.len(), EPOCHS as usize, "{text}");
    for (entry, expected) in stats.iter().zip(&single) {
        let value = entry["validation_cost"].as_f64().expect("validation_cost in stats.json");
        assert!((value - expected[0]).abs() < 1e-6, "{value} vs {}", expected[0]);
        assert!(entry.contains_key("validation_error"), "{entry:?}");
    }
}

#[test]
fn shards_of_different_lengths_combine_exactly_too() {
    // 7 batches, every one kept: rank 0 validates 4 of them, rank 1 the other 3.
    let sizes = [5, 5, 3, 3, 2, 2, 4];
    // Seeded: an unseeded draw can get every validation sample wrong (seen once in CI-like runs).
    cpu().seed(11);
    let initial: Linear = LinearConfig::new(6, 3).init(&cpu());
    let single = single_rank(&initial, &sizes);
    let (seen, _) = two_ranks(&initial, &sizes, |world, batches| {
        batches.into_iter().skip(world.rank()).step_by(world.size()).collect()
    });
    check(&single, &seen);
}

/// The largest cost of the pass: no partial sums (a maximum does not add up).
struct WorstCost {
    fetches: [Fetch; 1],
    worst: f64,
}

impl Inferencer for WorstCost {
    fn fetches(&self) -> &[Fetch] {
        &self.fetches
    }
    fn before_inference(&mut self) {
        self.worst = f64::NEG_INFINITY;
    }
    fn on_batch(&mut self, values: &Fetched<'_>) -> burn_stoker::Result<()> {
        self.worst = self.worst.max(values.get::<f64>("cost")?);
        Ok(())
    }
    fn after_inference(&mut self) -> Vec<(String, f64)> {
        vec![("worst_cost".into(), self.worst)]
    }
}

#[test]
fn an_inferencer_without_partial_sums_fails_the_data_parallel_runner_at_setup_naming_it() {
    let dir = scratch_dir("world-inference-opaque");
    let result = Threads::new([cpu(), cpu()]).run(|world| {
        let model: Linear = LinearConfig::new(6, 3).init(world.device());
        let valid = world.shard(validation(&SIZES, world.device()));
        let runner = runner(valid)
            .with(WorstCost { fetches: [Fetch::host("cost")], worst: f64::NEG_INFINITY })
            .data_parallel();
        Trainer::new(model, SgdConfig::new().init(), world.shard(training(8, world.device())))
            .default_callbacks(DefaultCallbacks::none())
            .handle_signals(false)
            .log_dir(&dir)
            .world(world)
            .callbacks(runner)
            .train(mse)
    });
    let text = result.expect_err("the runner cannot combine WorstCost").to_string();
    assert!(text.contains("setup"), "{text}");
    assert!(
        text.contains(
            "a data-parallel InferenceRunner cannot combine the results of `WorstCost` over the ranks"
        ),
        "{text}"
    );

    // The same runner without `.data_parallel()` runs on the chief alone, over the whole set.
    let device = cpu();
    let runner = runner(validation(&SIZES, &device))
        .with(WorstCost { fetches: [Fetch::host("cost")], worst: f64::NEG_INFINITY });
    Trainer::new(LinearConfig::new(6, 3).init(&device), SgdConfig::new().init(), training(2, &device))
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .log_dir(scratch_dir("world-inference-opaque-single"))
        .callbacks(runner)
        .train(mse)
        .expect("a chief-only runner takes any inferencer");
}
