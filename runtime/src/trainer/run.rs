//! One run: its owned parts ([`Run`]) and how a resumed run's state is restored into them. Its
//! methods live by concept: the loop in `main_loop`, one step in `run_step`, checkpoints in
//! `save`, the data-parallel exchanges in `data_parallel`; `train` sets a run up and ends it.

use std::fs;
use std::path::{Path, PathBuf};

use burn::module::Module;

use super::dispatch::{Activity, Dispatcher, Flowing, Halt};
use super::fetches::StepFetches;
use super::lock::LogDirLock;
use super::log_dir::LogDirPolicy;
use super::restore::{DataPosition, Restored};
use crate::callback::{Callbacks, Event, TrainState};
use crate::error::{Error, Result};
use crate::saver::checkpoint::{self, CHECKPOINT_DIR};
use crate::signal::SignalGuard;

/// One run: the callbacks and how events reach them, the state they see, the step's fetches,
/// where the run is in its data, and what it holds until it ends.
pub(crate) struct Run<M, C, K> {
    pub(super) dispatch: Dispatcher<C, M, K>,
    pub(super) state: TrainState<M>,
    pub(super) fetches: StepFetches,
    /// Passes started over the training data, batches taken from the current one.
    pub(super) position: DataPosition,
    /// What a resumed run still has to restore or replay once the callbacks are set up.
    pub(super) resumed: Option<Restored>,
    /// The local step the first epoch starts at (a run resumed in the middle of an epoch).
    pub(super) first_local_step: u64,
    /// The run's hold on the SIGINT / SIGTERM handler (`None`: signals are not handled).
    pub(super) signals: Option<SignalGuard>,
    /// The chief's hold on the log directory, released when the run ends.
    pub(super) lock: Option<LogDirLock>,
    /// The chief's hold on each saver folder outside the log directory (`saver_dirs.rs`), and
    /// the policy applied to them as to the log directory.
    pub(super) saver_locks: Vec<LogDirLock>,
    pub(super) log_dir_policy: LogDirPolicy,
    /// The run its checkpoints record: a fresh run's own, or the resumed checkpoint's.
    pub(super) run_id: String,
    /// A signal the world agreed on only at its final exchange, after training had ended.
    pub(super) late_world_signal: Option<i32>,
    /// The last complete checkpoint written or resumed from.
    pub(super) last_checkpoint: Option<PathBuf>,
    /// When the run started (seconds since the Unix epoch): where a checkpoint's
    /// `keep_every_n_hours` counts from when no `ModelSaver` says otherwise.
    pub(super) started_at: f64,
    /// The batches in each pass over this rank's data, when the data says (recorded in
    /// checkpoints: a resume over data of another length is refused).
    pub(super) pass_len: Option<u64>,
    /// With a seed, what seeds the devices before each step (`draws.rs`).
    pub(super) step_seeds: Option<super::draws::StepSeeds>,
    /// In a seeded threads world, this rank's turn at burn's process-wide state, held but in
    /// exchanges (`world/turns.rs`).
    pub(super) turns: Option<crate::world::turns::Turns>,
}

/// A run's callbacks resolved, before the run is: names, order and fetches (off the chief,
/// without the chief-only callbacks), each callback's misuse refused.
pub(crate) struct Resolved<C, M, K> {
    dispatch: Dispatcher<C, M, K>,
    fetches: StepFetches,
}

impl<M, K, C: Callbacks<M, K>> Resolved<C, M, K> {
    /// `callbacks` for one rank of `world_size` (the chief, or another rank).
    pub(crate) fn new(callbacks: C, chief: bool, world_size: usize) -> Result<Self> {
        let mut fetches = StepFetches::new();
        let dispatch = Dispatcher::new(callbacks, chief, |i, info, active| {
            super::misuse::refuse_chief_only_step_events(info, world_size)?;
            super::misuse::refuse_fetches_outside_training(info)?;
            fetches.declare(i, info, active)
        })?;
        Ok(Resolved { dispatch, fetches })
    }

    /// Whether some callback takes the loss before backward.
    pub(super) fn takes_loss(&self) -> bool {
        self.dispatch.takes_loss()
    }

    /// The error for callbacks that take the loss under a step that runs backward itself.
    pub(super) fn own_backward_refused(&self) -> Error {
        self.dispatch.own_backward_refused()
    }

    /// The deferred reads' interval and byte budget (`Trainer::deferred_read_interval`,
    /// `deferred_read_budget`).
    pub(super) fn deferred_reads(mut self, interval: std::time::Duration, budget: u64) -> Self {
        self.fetches.plan.set_read_interval(interval);
        self.fetches.plan.set_read_budget(budget);
        self
    }
}

/// What a run holds until it ends, besides its state: the signal handler, the log directory's
/// lock, the policy that chose the directory, and with a seed what seeds the devices.
#[derive(Default)]
pub(crate) struct Holds {
    pub(super) signals: Option<SignalGuard>,
    pub(super) lock: Option<LogDirLock>,
    pub(super) log_dir_policy: LogDirPolicy,
    pub(super) step_seeds: Option<super::draws::StepSeeds>,
}

impl<M: Module, K, C: Callbacks<M, K>> Run<M, C, K> {
    /// The run of the resolved callbacks over `state`, with what it holds: built once, every
    /// part in place (a resumed run's checkpoint is then restored into it, `restore`).
    pub(crate) fn new(resolved: Resolved<C, M, K>, state: TrainState<M>, holds: Holds) -> Self {
        let Resolved { dispatch, fetches } = resolved;
        let Holds { signals, lock, log_dir_policy, step_seeds } = holds;
        Run {
            dispatch,
            state,
            fetches,
            position: DataPosition::default(),
            resumed: None,
            first_local_step: 0,
            signals,
            lock,
            saver_locks: Vec::new(),
            log_dir_policy,
            run_id: checkpoint::new_run_id(),
            late_world_signal: None,
            last_checkpoint: None,
            started_at: checkpoint::now(),
            pass_len: None,
            step_seeds,
            turns: None,
        }
    }

    /// Deliver `event` to every callback in order.
    #[inline]
    pub(crate) fn deliver(&mut self, event: Event<'_>) -> Flowing {
        self.dispatch.deliver(&mut self.state, event)
    }

    /// What a halt is where no level of the loop acts on it: an error (a cancel's names the
    /// callback and the event, and says where it applies).
    #[cold]
    pub(crate) fn settled(&self, halt: Halt) -> Error {
        match halt {
            Halt::Failed(error) => error,
            Halt::Cancel(cancel) => self.dispatch.misplaced_cancel(&self.state, cancel),
        }
    }

    /// Whether this rank writes the run's files.
    pub(super) fn is_chief(&self) -> bool {
        self.state.execution.is_chief()
    }

    /// Run `work` as `activity`, the culprit a panic in it is blamed on, then give the trainer's
    /// previous activity back, however `work` returns (a delivery of an event does the same).
    #[inline(always)]
    pub(super) fn during<T>(&mut self, activity: Activity, work: impl FnOnce(&mut Self) -> T) -> T {
        let resume = self.dispatch.activity();
        self.dispatch.set_activity(activity);
        let done = work(self);
        self.dispatch.set_activity(resume);
        done
    }

    /// Restore the monitors, remember the rest for after setup, and set aside checkpoints newer
    /// than the one resumed from.
    pub(super) fn restore(&mut self, mut restored: Restored) -> Result<()> {
        restored.refuse_other_world(self.state.execution.size())?;
        // The journal of the monitors' histories, read when the checkpoint was.
        self.state.monitors().load_state(&restored.monitors, restored.journal.take())?;
        self.first_local_step = restored.local_step;
        let root = self.state.log_dir.join(CHECKPOINT_DIR);
        // The checkpoint may be named through a symlink, `./`, `..`, or relative where the log
        // directory is absolute: the same folder is the same canonical path.
        let same_folder = |a: &Path, b: &Path| match (fs::canonicalize(a), fs::canonicalize(b)) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        };
        let in_root = restored.dir.parent().is_some_and(|parent| same_folder(parent, &root));
        if self.is_chief() && (in_root || (restored.continues && root.is_dir())) {
            checkpoint::abandon_newer(&root, restored.global_step)?;
        }
        if let Some(run) = &restored.run {
            self.run_id.clone_from(run);
        }
        self.last_checkpoint = Some(restored.dir.clone());
        self.resumed = Some(restored);
        Ok(())
    }

    /// Give each stateful callback its saved state (right after setup).
    pub(super) fn load_callback_states(&mut self) -> Result<()> {
        let Some(restored) = self.resumed.as_mut() else { return Ok(()) };
        let saved = std::mem::take(&mut restored.callbacks);
        self.dispatch.load_states(saved)
    }
}
