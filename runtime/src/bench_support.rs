//! Hooks for stoker's own benchmarks (`bench/`): entry points into the trainer's internals that
//! the benchmarks time. Not a public API: nothing here is covered by semver.

use std::path::PathBuf;

use burn::module::Module;
use burn::optim::ModuleOptimizer;

use crate::Result;
use crate::callback::{Callbacks, Control, Counters, Event, TrainState};
use crate::state::HyperParams;
use crate::state::KeepPolicy;
use crate::state::Monitors;
use crate::trainer::Run;

/// Time `events` deliveries of `trigger_step` to every callback of `callbacks`, exactly as the
/// trainer delivers events between steps (for the dispatch benchmark; not a public API).
pub fn time_event_delivery<M: Module, K, C: Callbacks<M, K>>(
    callbacks: C,
    model: M,
    optimizer: impl Into<ModuleOptimizer>,
    events: u64,
) -> Result<std::time::Duration> {
    let mut run = Run::new(
        callbacks,
        TrainState {
            counters: Counters { epoch_num: 1, max_epoch: 1, starting_epoch: 1, ..Counters::default() },
            model: Some(model),
            optimizer: optimizer.into(),
            hyper: HyperParams::new(1e-3),
            monitors: Monitors::new(),
            control: Control::default(),
            log_dir: PathBuf::new(),
            checkpoint_policy: KeepPolicy::default(),
            rank: 0,
            world_size: 1,
            world: None,
        },
    )?;
    let start = std::time::Instant::now();
    for _ in 0..events {
        run.deliver(std::hint::black_box(Event::TriggerStep))?;
    }
    Ok(start.elapsed())
}
