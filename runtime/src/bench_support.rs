//! Hooks for stoker's own benchmarks (`bench/`): entry points into the trainer's internals that
//! the benchmarks time. Not a public API: nothing here is covered by semver.

use std::path::PathBuf;

use burn::module::Module;
use burn::optim::ModuleOptimizer;

use crate::callback::{Callbacks, Control, Counters, Event, TrainState};
use crate::error::Result;
use crate::state::HyperParams;
use crate::state::Monitors;
use crate::trainer::{Holds, Resolved, Run};

/// Time `events` deliveries of `trigger_step` to every callback of `callbacks`, exactly as the
/// trainer delivers events between steps (for the dispatch benchmark; not a public API).
pub fn time_event_delivery<M: Module, K, C: Callbacks<M, K>>(
    callbacks: C,
    model: M,
    optimizer: impl Into<ModuleOptimizer>,
    events: u64,
) -> Result<std::time::Duration> {
    let mut run = Run::new(
        Resolved::new(callbacks, true, 1)?,
        TrainState {
            counters: Counters { epoch_num: 1, max_epoch: 1, starting_epoch: 1, ..Counters::default() },
            model: Some(model),
            optimizer: optimizer.into(),
            hyper: HyperParams::new(1e-3),
            monitors: Monitors::new(),
            control: Control::default(),
            log_dir: PathBuf::new(),
            execution: crate::world::Execution::OneDevice,
            signals: false,
            seed: None,
            stop: Default::default(),
            pass: None,
        },
        Holds::default(),
    );
    let start = std::time::Instant::now();
    for _ in 0..events {
        run.deliver(std::hint::black_box(Event::TriggerStep)).map_err(|halt| run.settled(halt))?;
    }
    Ok(start.elapsed())
}

/// Time `iterations` of the step's gradient exchange in `world` for `model`'s gradients (every
/// gradient 1), as the trainer runs it: the chief's weights first, then each exchange with its
/// control words. Each timed exchange follows an untimed one, so that the ranks enter it together
/// and the time is the exchange's, not a wait for a slower rank. Returns the total time of the
/// timed exchanges (the all-reduce benchmark); every rank of the world must call it.
pub fn time_exchanges<M: Module + 'static>(
    world: crate::world::World,
    model: M,
    iterations: usize,
) -> Result<std::time::Duration> {
    use burn::module::{ModuleVisitor, Param};
    use burn::optim::GradientsParams;
    use burn::tensor::Tensor;

    struct Sum(Option<Tensor<1>>);
    impl ModuleVisitor for Sum {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let sum = param.val().sum();
            self.0 = Some(match self.0.take() {
                Some(total) => total + sum,
                None => sum,
            });
        }
    }
    let grads = |model: &M| {
        let mut sum = Sum(None);
        model.visit(&mut sum);
        let loss = sum.0.expect("a model with parameters");
        GradientsParams::from_grads(loss.backward(), model)
    };
    let hyper = HyperParams::new(1e-3);
    let mut agreement = crate::world::agree::Agreement::new(world, &hyper);
    let model = agreement.start(model, &hyper, None)?;
    let mut total = std::time::Duration::ZERO;
    for _ in 0..iterations {
        let (first, second) = (grads(&model), grads(&model));
        agreement.exchange_step(&model, first)?;
        let start = std::time::Instant::now();
        agreement.exchange_step(&model, second)?;
        total += start.elapsed();
    }
    agreement.world.settled = true;
    Ok(total)
}

/// The time of `rounds` replica checksums of `model` (what every rank computes at each epoch's
/// end, see `World::check_replicas`), and the last checksum.
pub fn time_replica_checksum<M: Module>(model: &M, rounds: usize) -> (std::time::Duration, u64) {
    let start = std::time::Instant::now();
    let mut sum = 0;
    for _ in 0..rounds {
        sum = crate::world::flat::checksum(model);
    }
    (start.elapsed(), sum)
}

/// One checkpoint of the monitors after `steps` steps, one scalar put at each (and a row of
/// `stats.json` each, an epoch every 1000 steps), the checkpoint before it `since` steps
/// earlier: the bytes it writes (the monitors' file, plus what it appends to the journal when
/// `journal` names one; without, the histories whole in the file, as every checkpoint held them
/// before the journal) and the time it takes (the state built and serialized, the journal appended
/// and synced). For the history benchmark; not a public API.
pub fn time_monitors_checkpoint(
    steps: u64,
    since: u64,
    journal: Option<PathBuf>,
) -> Result<(u64, std::time::Duration)> {
    let mut monitors = Monitors::new();
    let journal_len =
        |path: &Option<PathBuf>| path.as_ref().and_then(|p| std::fs::metadata(p).ok()).map_or(0, |m| m.len());
    if let Some(path) = &journal {
        monitors.keep_history_in(path.clone());
    }
    let put = |monitors: &mut Monitors, from: u64, to: u64| {
        for step in from..to {
            monitors.at(step + 1, step / 1000 + 1).put_scalar("loss", 1.0 / (step + 1) as f64);
            monitors.end_row();
            if (step + 1) % 1000 == 0 {
                monitors.end_epoch();
            }
        }
    };
    let before = steps.saturating_sub(since);
    put(&mut monitors, 0, before);
    // The checkpoint before: its journal holds the history up to here.
    serde_json::to_vec(&monitors.save_state()?).map_err(crate::error::Error::other)?;
    put(&mut monitors, before, steps);
    let appended_from = journal_len(&journal);
    let start = std::time::Instant::now();
    let file = serde_json::to_vec(&monitors.save_state()?).map_err(crate::error::Error::other)?;
    let elapsed = start.elapsed();
    let appended = journal_len(&journal).saturating_sub(appended_from);
    Ok((file.len() as u64 + appended, elapsed))
}

/// The `f32`s this process has given to MPI's element-wise sums since it started: its share of
/// what the world's exchanges sent (for the tests of what an exchange carries; not a public API).
#[cfg(feature = "mpi")]
pub fn mpi_floats_reduced() -> u64 {
    crate::world::mpi::floats_reduced()
}
