//! [`Trainer::train`]: a run prepared (the execution chosen, the log directory held, a
//! checkpoint read back, the callbacks resolved), looped, and finished (`after_train` for every
//! callback that was set up, whatever happened, then the report).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::module::Module;
use burn::optim::ModuleOptimizer;
use burn::tensor::Tensor;

use super::builder::{Resume, Settings};
use super::lock::LogDirLock;
use super::log_dir::{self, LogDirPolicy, is_within};
use super::restore::Restored;
use super::run::{Holds, Resolved, Run};
use super::test_phase::TestPhase;
use super::versions::VersionsHold;
use super::{LossFn, Step, TrainData, TrainError, TrainReport, TrainSummary, Trainer, TrainingStep};
use crate::callback::{Callbacks, Control, Counters, Outcome, TrainState};
use crate::error::{CheckpointError, Error, Result, panic_message};
use crate::saver::Checkpoint;
use crate::saver::checkpoint::{self, CHECKPOINT_DIR};
use crate::signal::{SignalGuard, signal_name};
use crate::state::{JOURNAL_DIR, Monitors, ReadJournal, journal_name};
use crate::world::{Execution, World};

impl<M: Module, D: TrainData, K, C: Callbacks<M, K>> Trainer<M, D, C, K> {
    /// Train: run the callbacks' lifecycle around `step`, which computes the loss of one batch
    /// (and may put named outputs). Returns the trained model with how the run ended, or the
    /// first error together with that report whenever the model is still there
    /// ([`TrainError`]); `after_train` runs for every callback whose setup ran, and the monitors
    /// are flushed, in every case.
    ///
    /// A monitor writer that fails does not fail the run: it is disabled and listed in
    /// [`TrainReport::writer_failures`]. A NaN or infinite loss or weights stop it cleanly with
    /// [`Outcome::NonFinite`], without a checkpoint of them.
    #[doc(alias = "fit")]
    #[doc(alias = "launch")]
    #[doc(alias = "training_step")]
    pub fn train<F>(self, step: F) -> Result<TrainReport<M>, TrainError<M>>
    where
        M: 'static,
        F: FnMut(&M, D::Batch, &mut Step<'_>) -> Tensor<1>,
    {
        self.train_with(LossFn(step))
    }

    /// [`train`](Trainer::train) with any [`TrainingStep`]: a step that computes its own gradients
    /// or applies them in its own way, such as a model's burn-train `TrainStep` through
    /// [`burn_train::LearnerStep`](crate::burn_train::LearnerStep) (feature `burn-train`). Statically
    /// dispatched like a closure.
    pub fn train_with<S>(self, step: S) -> Result<TrainReport<M>, TrainError<M>>
    where
        M: 'static,
        S: TrainingStep<M, D::Batch>,
    {
        let Trainer { model, optimizer, data, callbacks, mut settings, test, marker: _ } = self;
        super::misuse::require_autodiff(&model)?;
        if test.as_ref().is_some_and(|test| !test.chief_only()) {
            return Err(Error::misuse(
                "Trainer::test: the test set's runner runs on the chief after training, over the whole set: it cannot be data_parallel",
            )
            .into());
        }
        // The ranks of a seeded threads world take turns at burn's process-wide state, from
        // before the first exchange (world/turns.rs).
        let turns = (settings.seed.is_some() && settings.world.as_ref().is_some_and(World::takes_turns))
            .then(crate::world::turns::take);
        let (execution, model) =
            Execution::start(settings.world.take(), &settings.hyper, model, settings.seed)?;
        let printer = settings.defaults.train_summary.clone();
        let defaults = std::mem::take(&mut settings.defaults);
        let test = (test, settings.test_weights.take());
        let mut run = prepare(model, optimizer, (defaults, callbacks), settings, execution, S::OWN_BACKWARD)?;
        run.turns = turns;
        run.train(&data, step, printer.as_ref(), test)
    }
}

/// What a run starts from: its log directory (held by the chief), its counters, and the
/// checkpoint it resumes from, read back into the model, the optimizer and the hyper-parameters.
struct Opened {
    log_dir: PathBuf,
    lock: Option<LogDirLock>,
    counters: Counters,
    restored: Option<Restored>,
}

/// The run, ready to loop: on an error, the other ranks of a world are told.
fn prepare<M: Module, K, C: Callbacks<M, K>>(
    mut model: M,
    mut optimizer: ModuleOptimizer,
    callbacks: C,
    mut settings: Settings,
    mut execution: Execution,
    own_backward: bool,
) -> Result<Run<M, C, K>> {
    let chief = execution.is_chief();
    // What can fail before the run exists: the log directory and the checkpoint, the signal
    // handler, the callbacks' names, order and misuse. A failure here is the execution's too.
    let resolved = open(&mut settings, &mut execution, &mut model, &mut optimizer).and_then(|opened| {
        let signals = match settings.handle_signals {
            true => {
                Some(SignalGuard::install().map_err(|e| Error::context("handling SIGINT and SIGTERM", e))?)
            }
            false => None,
        };
        let resolved = Resolved::new(callbacks, chief, execution.size())?;
        Ok((opened, signals, resolved))
    });
    let (mut opened, signals, resolved) = match resolved {
        Ok(resolved) => resolved,
        Err(error) => {
            execution.fail(Some(&model), &error);
            return Err(error);
        }
    };
    let step_seeds = settings.seed.map(|seed| {
        let devices = model.devices();
        for device in &devices {
            device.seed(seed.wrapping_add(execution.rank() as u64));
        }
        super::draws::StepSeeds::new(seed, execution.rank(), devices)
    });
    let refused = (own_backward && resolved.takes_loss()).then(|| resolved.own_backward_refused());
    let means = execution.means().to_vec();
    let (lock, restored) = (opened.lock.take(), opened.restored.take());
    let state = TrainState {
        counters: opened.counters,
        model: Some(model),
        optimizer,
        hyper: settings.hyper,
        monitors: Monitors::new(),
        control: Control::default(),
        log_dir: opened.log_dir,
        execution,
        signals: settings.handle_signals,
        seed: settings.seed,
        stop: settings.stop.clone(),
        pass: None,
    };
    let resolved = resolved.deferred_reads(settings.deferred_read_interval, settings.deferred_read_budget);
    let holds = Holds { signals, lock, log_dir_policy: settings.log_dir_policy, step_seeds };
    let mut run = Run::new(resolved, state, holds);
    let ready = match refused {
        Some(error) => Err(error),
        None => run.fetches.average(&means).and_then(|()| restored.map_or(Ok(()), |r| run.restore(r))),
    };
    match ready {
        Ok(()) => Ok(run),
        Err(error) => Err(run.end_execution(Err(error)).expect_err("an error stays an error")),
    }
}

/// The log directory (a `version_N` folder of it under `LogDirPolicy::NewVersion`, the chief's
/// choice for every rank), held by the chief for the whole run (other ranks never write there);
/// the checkpoint to resume from, read back; the log-directory policy applied to an earlier run
/// by a run that resumes nothing there.
fn open<M: Module>(
    settings: &mut Settings,
    execution: &mut Execution,
    model: &mut M,
    optimizer: &mut ModuleOptimizer,
) -> Result<Opened> {
    let chief = execution.is_chief();
    let resume_auto = matches!(settings.resume, Resume::Auto);
    let locks = super::lock::locking(settings.lock_log_dir);
    let (versions, choosing) = version_holds(settings, chief, locks)?;
    let (log_dir, found) = match settings.log_dir_policy {
        LogDirPolicy::NewVersion => versioned(&settings.log_dir, resume_auto, execution, model)?,
        _ => (settings.log_dir.clone(), None),
    };
    let mut lock = match chief {
        true => Some(LogDirLock::acquire(&log_dir, locks)?.with_versions(versions)),
        false => None,
    };
    drop(choosing);
    let checkpoint = match &settings.resume {
        Resume::Fresh => None,
        Resume::Auto if found.is_some() => found,
        Resume::Auto => Checkpoint::latest(&log_dir)?,
        Resume::From(path) => Some(
            Checkpoint::latest(path)?.ok_or_else(|| CheckpointError::NotFound { dir: path.to_path_buf() })?,
        ),
    };
    let (starting_epoch, max_epoch) = (settings.starting_epoch, settings.max_epoch);
    // Checked before any arithmetic on it (`starting_epoch - 1` below); a resumed run takes its
    // epoch from the checkpoint instead. Before the log directory policy touches anything.
    if checkpoint.is_none() && (starting_epoch == 0 || starting_epoch > max_epoch.max(1)) {
        return Err(Error::invalid(format!(
            "starting_epoch must be between 1 and max_epoch ({max_epoch}), not {starting_epoch}"
        )));
    }
    // Everything the resume reads is read before the policy below may move or remove it: the
    // monitors' journal, in the log directory that wrote the checkpoint.
    let journal = checkpoint.as_ref().map(|c| ReadJournal::of(&c.monitors, &journal_dirs(&log_dir, c.dir())));
    let journal = journal.transpose()?.flatten();
    // A run that resumes nothing from its log directory is a fresh run there: the chief,
    // holding the lock, applies the policy to an earlier run it finds. `auto_resume` says the
    // directory is this run's, checkpoint or not (a run killed before its first checkpoint
    // starts again with `--resume`); so does a checkpoint in it, or one of the run the directory
    // holds (resumed from a saver's own folder: the run goes back to it, as from one of its
    // checkpoints).
    let continues = checkpoint.as_ref().is_some_and(|c| holds_run(&log_dir, c.run()));
    let resumes_here =
        resume_auto || continues || checkpoint.as_ref().is_some_and(|c| is_within(c.dir(), &log_dir));
    if let Some(held) = lock.take() {
        lock = Some(if resumes_here {
            held
        } else {
            log_dir::prepare(&log_dir, settings.log_dir_policy, held)?
        });
        // What a run that died between a write and its rename left (`write_atomic`'s
        // temporaries): nobody else writes here while the lock is held.
        crate::state::remove_leftover_temporaries(&log_dir);
    }
    let mut counters = Counters {
        epoch_num: starting_epoch.saturating_sub(1),
        global_step: 0,
        local_step: 0,
        starting_epoch,
        max_epoch,
        steps_per_epoch: settings.steps_per_epoch.unwrap_or(0),
    };
    let restored = match checkpoint {
        Some(checkpoint) => {
            let restored = Restored::read(checkpoint, model, optimizer, &mut settings.hyper, &mut counters)?;
            Some(Restored { inexact: settings.resume_inexact, journal, continues, ..restored })
        }
        None => None,
    };
    Ok(Opened { log_dir, lock, counters, restored })
}

/// The holds a `NewVersion` chief takes on the base log directory (versions.rs): shared, against
/// a Delete or a Backup of the base, from before it chooses its folder until it ends; and
/// exclusive while it chooses its folder and locks it, so that the two are one act.
fn version_holds(settings: &Settings, chief: bool, locks: bool) -> Result<(VersionsHold, VersionsHold)> {
    match settings.log_dir_policy {
        LogDirPolicy::NewVersion if chief => Ok((
            VersionsHold::shared(&settings.log_dir, locks)?,
            VersionsHold::choosing(&settings.log_dir, locks)?,
        )),
        _ => Ok(Default::default()),
    }
}

/// Where a checkpoint's journal is looked for, before where it was written: this run's log
/// directory, the checkpoint's own folder (a saver folder holds a copy) and the log directory of
/// `<log dir>/checkpoints/step-N`, moved or copied with it.
fn journal_dirs(log_dir: &Path, checkpoint: &Path) -> Vec<PathBuf> {
    let folder = checkpoint.parent();
    std::iter::once(log_dir)
        .chain(folder)
        .chain(folder.and_then(Path::parent))
        .map(|dir| dir.join(JOURNAL_DIR))
        .collect()
}

/// Whether the log directory `dir` holds the run `run` (the run a checkpoint continues): its
/// checkpoints' index records it, or its `history/` holds that run's journal.
fn holds_run(dir: &Path, run: Option<&str>) -> bool {
    let Some(run) = run else { return false };
    checkpoint::run_of(&dir.join(CHECKPOINT_DIR)).as_deref() == Some(run)
        || dir.join(JOURNAL_DIR).join(journal_name(run)).is_file()
}

/// The `version_N` folder of `base` this run trains in: the chief chooses it (and, resuming,
/// finds its checkpoint) and tells the other ranks its N, so that every rank of a world reads the
/// same folder's checkpoints.
fn versioned<M: Module>(
    base: &std::path::Path,
    resume: bool,
    execution: &mut Execution,
    model: &M,
) -> Result<(PathBuf, Option<Checkpoint>)> {
    let (dir, number, found) = match execution.is_chief() {
        true => log_dir::versioned_dir(base, resume)?,
        false => (PathBuf::new(), 0, None),
    };
    if execution.size() == 1 {
        return Ok((dir, found));
    }
    // N, the chief's alone in the sum (exact in an f64 below 2^53).
    let mut chosen = [if execution.is_chief() { number as f64 } else { 0.0 }];
    execution.sum(model, &mut chosen)?;
    match execution.is_chief() {
        true => Ok((dir, found)),
        false => Ok((log_dir::version_dir(base, chosen[0] as u64), None)),
    }
}

impl<M: Module, K, C: Callbacks<M, K>> Run<M, C, K> {
    /// The loop, then the end: the deferred reads still in flight delivered, the other ranks
    /// met once more, `after_train` for every callback that was set up, the report.
    fn train<D, S>(
        mut self,
        data: &D,
        mut step: S,
        printer: Option<&super::TrainSummaryPrinter>,
        (test, test_weights): (Option<TestPhase<M>>, Option<PathBuf>),
    ) -> Result<TrainReport<M>, TrainError<M>>
    where
        D: TrainData,
        S: TrainingStep<M, D::Batch>,
    {
        // What the end-of-training summary measures: this run's steps and wall time.
        let (first_step, started) = (self.state.counters.global_step, Instant::now());
        let result = self.guarded(|run| run.main_loop(data, &mut step));
        // The deferred reads still in flight (a stop between epochs' ends): delivered before
        // `after_train`; after an error, nobody waits for them.
        let result = match result {
            Ok(()) if self.fetches.plan.has_pending() => {
                self.guarded(|run| run.deliver_deferred(u64::MAX, true).map_err(|halt| run.settled(halt)))
            }
            other => other,
        };
        self.fetches.plan.drop_pending();
        let result = self.end_execution(result);
        let outcome = self.outcome(&result);
        self.state.control.outcome = Some(outcome.clone());
        if let Err(error) = &result {
            self.state.control.failure = Some(error.to_string());
        }
        let after = self.dispatch.after_train(&mut self.state);
        let ok = result.is_ok() && after.is_ok();
        let tested = self.test_phase(test, &outcome, ok, test_weights.as_deref());
        self.state.monitors().publish();
        self.state.monitors().close();
        let (result, test) = match tested {
            Ok(test) => (result.and(after), test),
            Err(error) => (result.and(after).and(Err(error)), Vec::new()),
        };
        let late_signal = self.late_signal(&outcome);
        let summary = TrainSummary::new(
            outcome.clone(),
            started.elapsed(),
            self.state.counters.global_step.saturating_sub(first_step),
            &self.state.counters,
            self.state.monitors_ref(),
            self.state.log_dir.clone(),
            self.last_checkpoint.clone(),
        );
        if self.is_chief()
            && let Some(printer) = printer
        {
            printer.print(&summary);
        }
        self.report(result, outcome, late_signal, summary).map(|report| TrainReport { test, ..report })
    }

    /// `f`, with a panic inside it caught and named after where it happened.
    fn guarded(&mut self, f: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        catch_unwind(AssertUnwindSafe(|| f(self))).unwrap_or_else(|payload| {
            Err(Error::Panic { location: self.dispatch.location(), message: panic_message(&*payload) })
        })
    }

    /// How the training loop ended; an error after it (in `after_train`) keeps that outcome.
    fn outcome(&mut self, result: &Result<()>) -> Outcome {
        match result {
            Err(_) => Outcome::Failed,
            Ok(()) => self.state.control.stop.outcome(self.last_checkpoint.clone()),
        }
    }

    /// A signal that came after the loop's last boundary (during `after_train`, the final flush;
    /// in a world, after the last exchange) did not stop anything: reported, not dropped. The
    /// handlers are put back first, so nothing can come in between unseen.
    fn late_signal(&mut self, outcome: &Outcome) -> Option<String> {
        let world = self.late_world_signal.take();
        let handled = self.signals.take().is_some();
        let received = if handled { crate::signal::received() } else { None };
        let stopped_by_it = matches!(outcome, Outcome::Interrupted { .. });
        world.or(received).filter(|_| !stopped_by_it).map(|signal| {
            let name = signal_name(signal);
            crate::logging::warn!(bare:
                "{name} received after the last step boundary (during after_train or the monitors' final flush; in a world, after the last exchange): training had already ended; the run is reported as it ended, with the signal in TrainReport::late_signal"
            );
            name
        })
    }

    /// The report, with the error when the run ended with one.
    fn report(
        &mut self,
        result: Result<()>,
        outcome: Outcome,
        late_signal: Option<String>,
        summary: TrainSummary,
    ) -> Result<TrainReport<M>, TrainError<M>> {
        let plan = &self.fetches.plan;
        let report = self.state.model.take().inspect(crate::world::buffers::sync).map(|model| TrainReport {
            model,
            outcome,
            counters: self.state.counters,
            fetch_transfers: plan.transfers(),
            deferred_reads: plan.deferred_counts().0,
            deferred_waits: plan.deferred_counts().1,
            writer_failures: self.state.monitors_ref().writer_failures(),
            dropped: self.state.monitors_ref().dropped(),
            late_signal,
            summary,
            test: Vec::new(),
        });
        match (result, report) {
            (Ok(()), Some(report)) => Ok(report),
            (Ok(()), None) => Err(Error::msg("the model was lost").into()),
            (Err(error), report) => Err(TrainError { error, report: report.map(Box::new) }),
        }
    }
}
