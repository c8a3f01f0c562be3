//! Data-parallel training with the threads transport, on the CPU: two ranks with batch b train
//! the same weights as one rank with batch 2b on the same samples (SGD and Adam), the replicas
//! stay bit-identical, chief-only callbacks run once and the others on every rank, only the
//! chief writes into the log directory, a stop asked on rank 1 stops both at the same step, and a
//! failure on rank 1 ends the world with an error naming it.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use burn::nn::{Linear, LinearConfig};
use burn::optim::{AdamConfig, SgdConfig};
use burn::tensor::{Device, Tensor};
use burn_stoker::prelude::*;
use burn_stoker::world::{Threads, World};
use stoker_tests::world::{B, Weights, batches, fixed_model, max_diff, mse, single_and_pair, without_bias};
use stoker_tests::{CheckpointAndStop, scratch_dir, weights};

const STEPS: usize = 50;

fn cpu() -> Device {
    burn_stoker::device::cpu()
}

#[test]
fn two_ranks_with_sgd_train_what_one_rank_with_twice_the_batch_trains() {
    let (single, chief, other) = single_and_pair([cpu(), cpu()], STEPS, || SgdConfig::new().init(), |_| {});
    assert_eq!(chief, other, "the replicas must be bit-identical");
    let diff = max_diff(&single, &chief);
    assert!(diff < 1e-5, "2 ranks x batch {B} vs 1 rank x batch {}: max difference {diff}", 2 * B);
    assert!(max_diff(&single, &weights(&LinearConfig::new(6, 3).init(&cpu()))) > 1e-3);
}

#[test]
fn two_ranks_with_adam_train_what_one_rank_with_twice_the_batch_trains() {
    let (single, chief, other) = single_and_pair([cpu(), cpu()], STEPS, || AdamConfig::new().init(), |_| {});
    assert_eq!(chief, other, "the replicas must be bit-identical");
    let diff = max_diff(&single, &chief);
    assert!(diff < 1e-5, "2 ranks x batch {B} vs 1 rank x batch {}: max difference {diff}", 2 * B);
}

/// A rank's trainer: the fixed model, SGD, its shard of `n` batches of B rows, no default
/// callbacks, no signal handling, log directory `dir`.
fn rank_trainer(
    world: World,
    n: usize,
    dir: &std::path::Path,
) -> Trainer<Linear, Vec<(Tensor<2>, Tensor<2>)>> {
    let data = world.shard(batches(n, B, world.device()));
    Trainer::new(fixed_model(world.device()), SgdConfig::new().init(), data)
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .log_dir(dir)
        .world(world)
}

/// Counts the events it sees, per rank.
#[derive(Clone)]
struct Count {
    name: &'static str,
    chief_only: bool,
    setups: Arc<AtomicUsize>,
    steps: Arc<AtomicU64>,
    ranks: Arc<Mutex<Vec<(usize, usize)>>>,
}

impl Count {
    fn new(name: &'static str, chief_only: bool) -> Self {
        Count {
            name,
            chief_only,
            setups: Default::default(),
            steps: Default::default(),
            ranks: Default::default(),
        }
    }
}

impl<M> Callback<M> for Count {
    fn name(&self) -> std::borrow::Cow<'static, str> {
        self.name.into()
    }
    fn chief_only(&self) -> bool {
        self.chief_only
    }
    fn setup(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        self.setups.fetch_add(1, Ordering::SeqCst);
        self.ranks.lock().unwrap().push((ctx.rank(), ctx.world_size()));
        Ok(())
    }
    fn trigger_step(&mut self, _ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        self.steps.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[test]
fn chief_only_callbacks_run_once_and_the_others_on_every_rank() {
    let chief = Count::new("OnTheChief", true);
    let every = Count::new("OnEveryRank", false);
    let dir = scratch_dir("world-callbacks");
    Threads::new([cpu(), cpu()])
        .run(|world| {
            let model: Linear = LinearConfig::new(6, 3).init(world.device());
            let data = world.shard(batches(8, B, world.device()));
            Trainer::new(model, SgdConfig::new().init(), data)
                .handle_signals(false)
                .max_epoch(2)
                .log_dir(&dir)
                .world(world)
                .callbacks((chief.clone(), every.clone(), ModelSaver::new(2)))
                .train(mse)
        })
        .expect("two ranks");
    assert_eq!(chief.setups.load(Ordering::SeqCst), 1);
    assert_eq!(chief.steps.load(Ordering::SeqCst), 8);
    assert_eq!(*chief.ranks.lock().unwrap(), [(0, 2)]);
    assert_eq!(every.setups.load(Ordering::SeqCst), 2);
    assert_eq!(every.steps.load(Ordering::SeqCst), 16);
    let mut ranks = every.ranks.lock().unwrap().clone();
    ranks.sort();
    assert_eq!(ranks, [(0, 2), (1, 2)]);
    // The chief's writers and saver wrote; nothing else did (one stats.json, one set of checkpoints).
    assert!(dir.join("stats.json").exists());
    let checkpoints: Vec<_> = std::fs::read_dir(dir.join("checkpoints")).unwrap().collect();
    assert!(!checkpoints.is_empty());
}

/// tensorpack's `Callback.set_chief_only(v)` (tensorpack/callbacks/base.py: it sets
/// `_chief_only`, and the trainer registers a chief-only callback on the chief alone), for any
/// callback: `.set_chief_only(false)` puts a chief-only callback on every rank,
/// `.set_chief_only(true)` an every-rank one on the chief alone, under their own names.
#[test]
fn set_chief_only_places_any_callback_on_the_chief_or_every_rank() {
    let released = Count::new("Released", true);
    let kept = Count::new("Kept", false);
    let dir = scratch_dir("world-set-chief-only");
    Threads::new([cpu(), cpu()])
        .run(|world| {
            rank_trainer(world, 8, &dir)
                .callbacks((released.clone().set_chief_only(false), kept.clone().set_chief_only(true)))
                .train(mse)
        })
        .expect("two ranks");
    let mut ranks = released.ranks.lock().unwrap().clone();
    ranks.sort();
    assert_eq!(ranks, [(0, 2), (1, 2)]);
    assert_eq!(released.steps.load(Ordering::SeqCst), 8);
    assert_eq!(*kept.ranks.lock().unwrap(), [(0, 2)]);
    assert_eq!(kept.steps.load(Ordering::SeqCst), 4);
}

/// Asks to stop on rank 1 at global step 5.
struct StopOnRank1;

impl<M> Callback<M> for StopOnRank1 {
    fn chief_only(&self) -> bool {
        false
    }
    fn trigger_step(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        if ctx.rank() == 1 && ctx.global_step() == 5 {
            ctx.request_stop("rank 1 had enough");
        }
        Ok(())
    }
}

#[test]
fn a_stop_asked_on_rank_1_stops_both_at_the_same_step() {
    let dir = scratch_dir("world-stop");
    let reports = Threads::new([cpu(), cpu()])
        .run(|world| rank_trainer(world, 40, &dir).max_epoch(3).callbacks(StopOnRank1).train(mse))
        .expect("two ranks");
    let steps: Vec<u64> = reports.iter().map(|r| r.counters.global_step()).collect();
    assert_eq!(steps[0], steps[1], "both ranks stop at the same step");
    assert!(steps[0] == 6, "the stop asked after step 5 is agreed at step 6's exchange, not {}", steps[0]);
    for report in &reports {
        assert!(matches!(report.outcome, Outcome::Stopped(_)), "{:?}", report.outcome);
    }
    assert_eq!(weights(&reports[0].model), weights(&reports[1].model));
}

/// Panics in the step on rank 1 at global step 3.
#[test]
fn a_panic_on_rank_1_ends_the_world_with_an_error_naming_rank_1() {
    let dir = scratch_dir("world-panic");
    let start = Instant::now();
    let result = Threads::new([cpu(), cpu()]).run(|world| {
        let rank = world.rank();
        rank_trainer(world, 40, &dir).max_epoch(3).train(move |model: &Linear, batch, step: &mut Step<'_>| {
            if rank == 1 && step.counters().global_step() == 3 {
                panic!("rank 1 broke on purpose");
            }
            mse(model, batch, step)
        })
    });
    let error = result.expect_err("the world fails");
    let text = error.to_string();
    assert!(matches!(error, burn_stoker::Error::Rank { rank: 1, .. }), "{text}");
    assert!(text.contains("rank 1") && text.contains("broke on purpose"), "{text}");
    assert!(start.elapsed() < Duration::from_secs(30));
}

/// A rank that fails before it trains (here: the closure returns early) still ends the others.
#[test]
fn a_rank_that_never_trains_ends_the_others_with_an_error() {
    let dir = scratch_dir("world-absent");
    let result = Threads::new([cpu(), cpu()]).run(|world: World| {
        if world.rank() == 1 {
            return Err(burn_stoker::Error::msg("rank 1 could not load its data"));
        }
        rank_trainer(world, 8, &dir).train(mse).map(|_| ()).map_err(burn_stoker::Error::from)
    });
    let text = result.expect_err("the world fails").to_string();
    assert!(text.starts_with("rank 1: rank 1 could not load its data"), "{text}");
}

/// Fetches the loss at every step on every rank and records (rank, step, loss).
#[derive(Clone)]
struct LossLog {
    fetches: Vec<burn_stoker::fetch::Fetch>,
    seen: Arc<Mutex<Vec<(usize, u64, f32)>>>,
}

impl LossLog {
    fn new() -> Self {
        LossLog { fetches: vec![burn_stoker::fetch::Fetch::host("loss")], seen: Default::default() }
    }
    fn of(&self, rank: usize) -> Vec<f32> {
        let mut seen: Vec<_> = self.seen.lock().unwrap().iter().filter(|s| s.0 == rank).cloned().collect();
        seen.sort_by_key(|s| s.1);
        seen.into_iter().map(|s| s.2).collect()
    }
}

impl Callback<Linear> for LossLog {
    fn chief_only(&self) -> bool {
        false
    }
    fn fetches(&self) -> &[burn_stoker::fetch::Fetch] {
        &self.fetches
    }
    fn after_step(&mut self, ctx: &mut Context<'_, Linear>, values: &Fetched<'_>) -> burn_stoker::Result<()> {
        self.seen.lock().unwrap().push((ctx.rank(), ctx.global_step(), values.get::<f32>("loss")?));
        Ok(())
    }
}

fn logged_losses(mean: bool) -> (Vec<f32>, Vec<f32>) {
    let log = LossLog::new();
    let dir = scratch_dir("world-mean");
    Threads::new([cpu(), cpu()])
        .run(|world| {
            let world = if mean { world.mean_of(["loss"]) } else { world };
            rank_trainer(world, 8, &dir).callbacks(log.clone()).train(mse)
        })
        .expect("two ranks");
    (log.of(0), log.of(1))
}

#[test]
fn a_fetch_averaged_over_ranks_is_the_loss_of_the_global_batch() {
    let (local0, local1) = logged_losses(false);
    assert_eq!(local0.len(), 4);
    assert_ne!(local0, local1, "without mean_of each rank sees its own loss");
    let (mean0, mean1) = logged_losses(true);
    assert_eq!(mean0, mean1, "with mean_of every rank sees the same value");
    for k in 0..4 {
        let expected = (local0[k] + local1[k]) / 2.0;
        assert!((mean0[k] - expected).abs() < 1e-6, "step {k}: {} vs {expected}", mean0[k]);
    }
}

fn world_run(dir: &std::path::Path, stop_at: Option<u64>, resume: bool) -> Vec<Weights> {
    let reports = Threads::new([cpu(), cpu()])
        .run(|world| {
            let model = fixed_model(world.device());
            let data = world.shard(batches(12, B, world.device()));
            let callbacks: Option<CheckpointAndStop> = stop_at.map(CheckpointAndStop);
            Trainer::new(model, AdamConfig::new().init(), data)
                .default_callbacks(DefaultCallbacks::none())
                .handle_signals(false)
                .max_epoch(3)
                .auto_resume(resume)
                .log_dir(dir)
                .world(world)
                .callbacks(callbacks)
                .train(mse)
        })
        .expect("two ranks");
    reports.iter().map(|r| weights(&r.model)).collect()
}

#[test]
fn a_world_resumed_from_the_chiefs_checkpoint_ends_where_an_uninterrupted_one_does() {
    let whole = world_run(&scratch_dir("world-whole"), None, false);
    assert_eq!(whole[0], whole[1]);
    let dir = scratch_dir("world-resumed");
    // Stopped mid-epoch 2 (global step 8 of 18): the chief checkpoints at step 8's boundary.
    world_run(&dir, Some(8), false);
    let checkpoints: Vec<_> = std::fs::read_dir(dir.join("checkpoints"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("step-"))
        .collect();
    assert_eq!(checkpoints, ["step-8"], "one writer, one checkpoint");
    let resumed = world_run(&dir, None, true);
    assert_eq!(resumed[0], resumed[1]);
    assert_eq!(resumed[0], whole[0], "resumed and uninterrupted worlds end bit-identical");
}

/// On the chief only: sets the learning rate to 1 / (3 + global step) after every step.
struct ChiefSetsLr;

impl<M> Callback<M> for ChiefSetsLr {
    fn trigger_step(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        ctx.set_learning_rate(1.0 / (3.0 + ctx.global_step() as f64));
        Ok(())
    }
}

/// On every rank: records (rank, step, learning rate) before each step.
#[derive(Clone, Default)]
struct LrLog(Arc<Mutex<Vec<(usize, u64, f64)>>>);

impl<M> Callback<M> for LrLog {
    fn chief_only(&self) -> bool {
        false
    }
    fn after_step(&mut self, ctx: &mut Context<'_, M>, _values: &Fetched<'_>) -> burn_stoker::Result<()> {
        self.0.lock().unwrap().push((ctx.rank(), ctx.global_step(), ctx.learning_rate()));
        Ok(())
    }
}

#[test]
fn every_rank_steps_with_the_chiefs_hyper_parameters() {
    let log = LrLog::default();
    let dir = scratch_dir("world-hyper");
    let reports = Threads::new([cpu(), cpu()])
        .run(|world| {
            rank_trainer(world, 12, &dir).learning_rate(0.01).callbacks((ChiefSetsLr, log.clone())).train(mse)
        })
        .expect("two ranks");
    let seen = log.0.lock().unwrap().clone();
    let on = |rank: usize| -> Vec<(u64, f64)> {
        let mut v: Vec<_> = seen.iter().filter(|s| s.0 == rank).map(|s| (s.1, s.2)).collect();
        v.sort_by_key(|s| s.0);
        v
    };
    assert_eq!(on(0).len(), 6);
    // The learning rate a step used (after the step's exchange) is the same on both ranks.
    assert_eq!(on(0), on(1));
    assert_eq!(on(1)[0], (1, 0.01));
    assert_eq!(on(1)[2], (3, 1.0 / 5.0));
    assert_eq!(weights(&reports[0].model), weights(&reports[1].model));
}

/// `#[chief_only(false)]` on a derive field releases a chief-only callback onto every rank;
/// `#[chief_only]` keeps an every-rank one on the chief.
#[derive(Callbacks)]
struct Placement {
    #[chief_only(false)]
    released: Count,
    #[chief_only]
    kept: LrLog,
}

impl CallbackKind for Count {
    const NAME: &'static str = "Released";
}

impl CallbackKind for LrLog {
    const NAME: &'static str = "LrLog";
}

#[test]
fn derive_fields_place_their_callbacks_on_the_ranks_they_say() {
    let released = Count::new("Released", true);
    let kept = LrLog::default();
    let dir = scratch_dir("world-placement");
    Threads::new([cpu(), cpu()])
        .run(|world| {
            rank_trainer(world, 8, &dir)
                .callbacks(Placement { released: released.clone(), kept: kept.clone() })
                .train(mse)
        })
        .expect("two ranks");
    assert_eq!(released.setups.load(Ordering::SeqCst), 2, "on every rank");
    let ranks: Vec<usize> = kept.0.lock().unwrap().iter().map(|seen| seen.0).collect();
    assert_eq!(ranks, [0, 0, 0, 0], "on the chief only, at each of its 4 steps");
}

#[test]
fn ranks_that_disagree_on_what_they_exchange_fail_on_every_rank() {
    let dir = scratch_dir("world-disagree");
    let result = Threads::new([cpu(), cpu()]).run(|world| {
        // Rank 1 averages the loss, the chief does not: their words differ in length.
        let world = if world.rank() == 1 { world.mean_of(["loss"]) } else { world };
        rank_trainer(world, 8, &dir).train(mse)
    });
    let text = result.expect_err("the world fails").to_string();
    assert!(text.contains("the `mean_of` names differ on rank 1 (rank 0: 0 names"), "{text}");
}

type RankTrainer = Trainer<Linear, Vec<(Tensor<2>, Tensor<2>)>>;

/// Every rank's error (sorted by rank), when rank 1's trainer is made by `rank_1`.
fn layout_errors(name: &str, rank_1: impl Fn(World, &std::path::Path) -> RankTrainer + Sync) -> Vec<String> {
    let dir = scratch_dir(name);
    let errors = Mutex::new(Vec::new());
    let _ = Threads::new([cpu(), cpu()]).run(|world| {
        let rank = world.rank();
        let trainer = if rank == 1 { rank_1(world, &dir) } else { rank_trainer(world, 8, &dir) };
        let result = trainer.train(mse);
        if let Err(error) = &result {
            errors.lock().unwrap().push(format!("rank {rank}: {error}"));
        }
        result
    });
    let mut errors = errors.into_inner().unwrap();
    errors.sort();
    errors
}

#[test]
fn a_rank_with_one_more_hyper_parameter_fails_every_rank_before_the_first_exchange() {
    let errors = layout_errors("world-extra-hyper", |world, dir| {
        rank_trainer(world, 8, dir).hyper_param("momentum", 0.9)
    });
    assert_eq!(errors.len(), 2, "{errors:?}");
    for error in &errors {
        assert!(error.contains("the hyper-parameters differ on rank 1 (rank 0: 1 registered"), "{error}");
    }
    assert!(errors[1].contains("here, rank 1: 2 registered"), "{errors:?}");
    assert!(errors[0].contains("here, rank 0: the same as rank 0"), "{errors:?}");
}

#[test]
fn a_rank_whose_model_lacks_a_layer_fails_every_rank_before_the_first_exchange() {
    let errors = layout_errors("world-extra-layer", |world, dir| {
        // The chief's model has one more layer's worth of parameters: its bias, which this
        // rank's replica lacks.
        let mut model = stoker_tests::world::fixed_model(world.device());
        model.bias = None;
        let data = world.shard(batches(8, B, world.device()));
        Trainer::new(model, SgdConfig::new().init(), data)
            .default_callbacks(DefaultCallbacks::none())
            .handle_signals(false)
            .log_dir(dir)
            .world(world)
    });
    assert_eq!(errors.len(), 2, "{errors:?}");
    for error in &errors {
        assert!(
            error.contains(
                "the model's float parameters differ on rank 1 (rank 0: 21 parameters in 2 tensors"
            ),
            "{error}"
        );
    }
    assert!(errors[1].contains("here, rank 1: 18 parameters in 1 tensors"), "{errors:?}");
}

/// Fetches the loss as a device tensor.
struct DeviceLoss(Vec<burn_stoker::fetch::Fetch>);

impl Callback<Linear> for DeviceLoss {
    fn chief_only(&self) -> bool {
        false
    }
    fn fetches(&self) -> &[burn_stoker::fetch::Fetch] {
        &self.0
    }
}

#[test]
fn averaging_a_value_fetched_only_on_the_device_is_an_error() {
    let dir = scratch_dir("world-device-mean");
    let result = Threads::new([cpu(), cpu()]).run(|world| {
        rank_trainer(world.mean_of(["loss"]), 8, &dir)
            .callbacks(DeviceLoss(vec![burn_stoker::fetch::Fetch::device("loss")]))
            .train(mse)
    });
    let text = result.expect_err("an error").to_string();
    assert!(text.contains("World::mean_of(\"loss\")") && text.contains("device tensor"), "{text}");
}

#[test]
fn a_world_checkpoint_resumed_by_one_rank_is_refused_unless_inexact() {
    let dir = scratch_dir("world-resized");
    // Stopped mid-epoch 2 by a world of two ranks, each with 6 of the 12 batches.
    world_run(&dir, Some(8), false);
    let one_rank = || {
        let device = cpu();
        Trainer::new(fixed_model(&device), AdamConfig::new().init(), batches(6, 2 * B, &device))
            .default_callbacks(DefaultCallbacks::none())
            .handle_signals(false)
            .max_epoch(3)
            .auto_resume(true)
            .log_dir(&dir)
    };
    let error = one_rank().train(mse).expect_err("refused").to_string();
    assert!(error.contains("was written by a world of 2 rank(s), this run has 1"), "{error}");
    assert!(error.contains("Trainer::resume_inexact(true)"), "{error}");
    let report = one_rank().resume_inexact(true).train(mse).expect("resumed inexactly");
    assert_eq!(report.counters.global_step(), 18, "the run goes on to its end");
}

/// On rank 1 only: nudges the bias after step `0`, so that its replica leaves the chief's.
struct NudgeOnRank1(u64);

impl Callback<Linear> for NudgeOnRank1 {
    fn chief_only(&self) -> bool {
        false
    }
    fn trigger_step(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        if ctx.rank() == 1 && ctx.global_step() == self.0 {
            let model = ctx.model_mut();
            let bias = model.bias.take().expect("a bias");
            model.bias = Some(bias.map(|b| b.add_scalar(1e-3)));
        }
        Ok(())
    }
}

/// Two ranks, 8 batches of 4 steps per epoch, 3 epochs, `NudgeOnRank1(nudge_at)`, the replica
/// check as `check`: each rank's outcome.
fn nudged_world(name: &str, nudge_at: u64, check: bool) -> Vec<Result<u64, String>> {
    let dir = scratch_dir(name);
    let outcomes = Mutex::new(Vec::new());
    let _ = Threads::new([cpu(), cpu()]).run(|world| {
        let rank = world.rank();
        let result = rank_trainer(world.check_replicas(check), 8, &dir)
            .max_epoch(3)
            .callbacks(NudgeOnRank1(nudge_at))
            .train(mse);
        let outcome = match &result {
            Ok(report) => Ok(report.counters.global_step()),
            Err(error) => Err(error.to_string()),
        };
        outcomes.lock().unwrap().push((rank, outcome));
        result
    });
    let mut outcomes = outcomes.into_inner().unwrap();
    outcomes.sort_by_key(|(rank, _)| *rank);
    outcomes.into_iter().map(|(_, outcome)| outcome).collect()
}

#[test]
fn replicas_that_drift_apart_stop_the_world_at_the_epochs_end() {
    let outcomes = nudged_world("world-drift", 6, true);
    let rank_1 = outcomes[1].clone().expect_err("rank 1 differs");
    assert!(
        rank_1.contains("the replicas have drifted apart: rank 1's parameters differ from rank 0's"),
        "{rank_1}"
    );
    let rank_0 = outcomes[0].clone().expect_err("the chief stops too");
    assert!(rank_0.contains("rank 1"), "{rank_0}");
    // Unchecked, the world trains on with two different models.
    let unchecked = nudged_world("world-drift-unchecked", 6, false);
    assert_eq!(unchecked, [Ok(12), Ok(12)]);
}

/// A parameter that has a gradient on some ranks only (rank 1's batches never reach the bias)
/// gets, on every rank, the sum of the ranks' gradients over the world's size, the ranks
/// without one counting zero: the replicas stay identical, and train what one device trains on
/// the mean of the two losses.
#[test]
fn a_parameter_with_a_gradient_on_some_ranks_gets_the_same_update_on_every_rank() {
    const PARTIAL_STEPS: usize = 10;
    let device = cpu();
    let pairs: Vec<_> =
        batches(2 * PARTIAL_STEPS, B, &device).chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect();
    let single = Trainer::new(fixed_model(&device), SgdConfig::new().init(), pairs)
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .learning_rate(0.05)
        .log_dir(scratch_dir("world-partial-single"))
        .train(
            |model: &Linear,
             (chiefs, ones): ((Tensor<2>, Tensor<2>), (Tensor<2>, Tensor<2>)),
             step: &mut Step<'_>| {
                (mse(model, chiefs, step) + without_bias(model, ones, step)).div_scalar(2.0)
            },
        )
        .unwrap();

    let dir = scratch_dir("world-partial-pair");
    let reports = Threads::new([cpu(), cpu()])
        .run(|world| {
            let rank = world.rank();
            rank_trainer(world, 2 * PARTIAL_STEPS, &dir).learning_rate(0.05).max_epoch(1).train(
                move |model: &Linear, batch, step: &mut Step<'_>| {
                    if rank == 1 { without_bias(model, batch, step) } else { mse(model, batch, step) }
                },
            )
        })
        .expect("the world trains, its replicas checked at the epoch's end");
    let (chief, other) = (weights(&reports[0].model), weights(&reports[1].model));
    assert_eq!(chief, other, "the replicas must be bit-identical");
    let diff = max_diff(&weights(&single.model), &chief);
    assert!(diff < 1e-6, "the world vs one device on the mean loss: max difference {diff}");
    assert!(max_diff(&chief, &weights(&fixed_model(&device))) > 1e-3, "trained");
}

/// One seeded run of a 2-rank threads world whose model burn initializes lazily (a `Linear` as
/// `LinearConfig` builds it: its weights are drawn when first read), where rank 1 draws from
/// burn's generator before it trains, as a user's own code may: the final weights of each rank.
fn seeded_lazy_world_run(name: &str) -> Vec<Weights> {
    let dir = scratch_dir(name);
    let reports = Threads::new([cpu(), cpu()])
        .run(|world| {
            let device = world.device().clone();
            if world.rank() == 1 {
                std::thread::sleep(Duration::from_millis(20));
                let _ = Tensor::<2>::random([64, 64], burn::tensor::Distribution::Default, &device);
            }
            let data = world.shard(batches(8, B, &device));
            Trainer::new(LinearConfig::new(6, 3).init(&device), SgdConfig::new().init(), data)
                .default_callbacks(DefaultCallbacks::none())
                .handle_signals(false)
                .log_dir(&dir)
                .seed(11)
                .world(world)
                .train(mse)
        })
        .expect("two ranks");
    reports.iter().map(|r| weights(&r.model)).collect()
}

/// `Trainer::seed` makes a threads world's run repeat: the chief draws the initial weights from
/// the seed once every rank has reached the first exchange (the ranks share burn's process-wide
/// generator), whatever the ranks drew before. Seen failing before: the chief read them from an
/// unseeded generator, and two runs started from other weights.
#[test]
fn a_seeded_threads_world_starts_from_the_seeds_weights_whatever_a_rank_drew_before() {
    let first = seeded_lazy_world_run("seeded-lazy-world-a");
    let second = seeded_lazy_world_run("seeded-lazy-world-b");
    assert_eq!(first[0], first[1], "the replicas must be bit-identical");
    assert_eq!(first, second, "two runs from one seed must end with the same weights");
}
