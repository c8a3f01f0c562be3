//! A run of the trainer: [`Trainer::train`], the state of one run ([`Run`]), setting it up and
//! tearing it down (`after_train` for every callback that was set up, whatever happened).

use std::borrow::Cow;
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;

use burn::module::Module;
use burn::tensor::Tensor;

use super::builder::{Resume, Settings};
use super::interrupt::{SignalGuard, signal_name};
use super::lock::LogDirLock;
use super::log_dir::{self, LogDirPolicy, is_within};
use super::resume::{DataPosition, Restored};
use super::{LossFn, Outcome, Step, TrainData, TrainError, TrainReport, TrainSummary, Trainer, TrainingStep};
use crate::callback::{Callbacks, Context, Control, Counters, Event, TrainState, resolve_order};
use crate::error::{Error, Result, panic_message};
use crate::fetch::{FetchPlan, Outputs};
use crate::saver::Checkpoint;
use crate::state::Monitors;
use crate::world::agree::Agreement;

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
        let Trainer { model, optimizer, data, callbacks, mut settings, marker: _ } = self;
        let Some(world) = settings.world.take() else {
            return Self::train_in(model, optimizer, data, callbacks, settings, None, step);
        };
        // In a world: every replica starts from the chief's weights (before a checkpoint is
        // read: with threads the replicas take the chief's parameter ids too).
        let mut agreement = Agreement::new(world, &settings.hyper);
        let model = agreement.start(model)?;
        Self::train_in(model, optimizer, data, callbacks, settings, Some(agreement), step)
    }

    fn train_in<S>(
        mut model: M,
        mut optimizer: burn::optim::ModuleOptimizer,
        data: D,
        callbacks: C,
        settings: Settings,
        mut world: Option<Agreement>,
        step: S,
    ) -> Result<TrainReport<M>, TrainError<M>>
    where
        S: TrainingStep<M, D::Batch>,
    {
        // A failure before the loop runs is told to the other ranks at the exchange they wait in.
        macro_rules! early {
            ($result:expr) => {
                match $result {
                    Ok(value) => value,
                    Err(error) => {
                        if let Some(agreement) = world.as_mut() {
                            agreement.fail(Some(&model));
                        }
                        return Err(error.into());
                    }
                }
            };
        }
        let Settings {
            defaults,
            max_epoch,
            starting_epoch,
            steps_per_epoch,
            log_dir,
            log_dir_policy,
            mut hyper,
            resume,
            handle_signals,
            world: _,
            seed,
            deferred_read_interval,
            stop,
        } = settings;
        // The chief holds the log directory for the whole run (other ranks never write there).
        let chief = world.as_ref().is_none_or(|a| a.rank() == 0);
        let log_dir = if chief && log_dir_policy == LogDirPolicy::NewVersion {
            early!(log_dir::versioned_dir(&log_dir, matches!(resume, Resume::Auto)))
        } else {
            log_dir
        };
        let mut lock = if chief { Some(early!(LogDirLock::acquire(&log_dir))) } else { None };
        let checkpoint = early!(match &resume {
            Resume::Fresh => Ok(None),
            Resume::Auto => Checkpoint::latest(&log_dir),
            Resume::From(path) => Checkpoint::latest(path).and_then(|latest| {
                latest.map(Some).ok_or_else(|| {
                    Error::checkpoint(format!("no checkpoint to resume from in {}", path.display()))
                })
            }),
        });
        // Checked before any arithmetic on it (`starting_epoch - 1` below); a resumed run takes its
        // epoch from the checkpoint instead. Before the log directory policy touches anything.
        if checkpoint.is_none() && (starting_epoch == 0 || starting_epoch > max_epoch.max(1)) {
            early!(Err(Error::msg(format!(
                "starting_epoch must be between 1 and max_epoch ({max_epoch}), not {starting_epoch}"
            ))));
        }
        // A run that resumes nothing from its log directory is a fresh run there: the chief,
        // holding the lock, applies the policy to an earlier run it finds. `auto_resume` says the
        // directory is this run's, checkpoint or not (a run killed before its first checkpoint
        // starts again with `--resume`).
        let resumes_here = matches!(resume, Resume::Auto)
            || checkpoint.as_ref().is_some_and(|c| is_within(c.dir(), &log_dir));
        if let Some(held) = lock.take() {
            lock = Some(if resumes_here {
                held
            } else {
                early!(log_dir::prepare(&log_dir, log_dir_policy, held))
            });
        }
        let mut counters = Counters {
            epoch_num: starting_epoch.saturating_sub(1),
            global_step: 0,
            local_step: 0,
            starting_epoch,
            max_epoch,
            steps_per_epoch: steps_per_epoch.unwrap_or(0),
        };
        let mut restored = None;
        if let Some(checkpoint) = checkpoint {
            let r = early!(Restored::read(checkpoint, &mut model, &mut optimizer, &mut hyper, &mut counters));
            restored = Some(r);
        }
        if let Some(seed) = seed {
            let rank = world.as_ref().map_or(0, |a| a.rank()) as u64;
            for device in model.devices() {
                device.seed(seed.wrapping_add(rank));
            }
        }
        let signals = if handle_signals {
            Some(early!(SignalGuard::install().map_err(|e| Error::context("handling SIGINT and SIGTERM", e))))
        } else {
            None
        };
        let (rank, world_size) = world.as_ref().map_or((0, 1), |a| (a.rank(), a.world.size()));
        let run = Run::new(
            (defaults, callbacks),
            TrainState {
                counters,
                model: None,
                optimizer,
                hyper,
                monitors: Monitors::new(),
                control: Control::default(),
                log_dir,
                rank,
                world_size,
                world: None,
                signals: handle_signals,
                stop: stop.clone(),
            },
        );
        let mut run = early!(run);
        if S::OWN_BACKWARD && !run.loss_hooks.is_empty() {
            early!(Err(run.own_backward_refused()));
        }
        run.plan.set_read_interval(deferred_read_interval);
        run.state.model = Some(model);
        run.signals = signals;
        run.stop = stop;
        run.lock = lock;
        if let Some(agreement) = &world {
            run.mean_slots =
                agreement.world.means.iter().map(|name| run.plan.host_bit(name).unwrap_or(0)).collect();
            let averaged = run.mean_slots.iter().fold(0, |all, bit| all | bit);
            run.mean_fetchers = run
                .all_fetchers
                .iter()
                .filter(|&&(_, slots)| slots & averaged != 0)
                .map(|&(i, slots)| (i, slots & averaged))
                .collect();
        }
        run.state.world = world;
        if let Err(error) = run.check_means() {
            let result = run.agree_end(Err(error));
            return Err(result.expect_err("an error stays an error").into());
        }
        if let Some(restored) = restored
            && let Err(error) = run.restore(restored)
        {
            let result = run.agree_end(Err(error));
            return Err(result.expect_err("an error stays an error").into());
        }
        // What the end-of-training summary measures: this run's steps and wall time.
        let first_step = run.state.counters.global_step;
        let started = std::time::Instant::now();
        let outcome = {
            let mut step = step;
            catch_unwind(AssertUnwindSafe(|| run.main_loop(&data, &mut step)))
        };
        let result = match outcome {
            Ok(result) => result,
            Err(payload) => Err(Error::Panic { location: run.location(), message: panic_message(&*payload) }),
        };
        // The deferred reads still in flight (a stop between epochs' ends): delivered before
        // `after_train`; after an error, nobody waits for them.
        let result = match result {
            Ok(()) if run.plan.has_pending() => {
                catch_unwind(AssertUnwindSafe(|| run.deliver_deferred(u64::MAX, true))).unwrap_or_else(
                    |payload| {
                        Err(Error::Panic { location: run.location(), message: panic_message(&*payload) })
                    },
                )
            }
            other => other,
        };
        run.plan.drop_pending();
        let result = run.agree_end(result);
        // How the training loop ended; an error after it (in after_train) keeps that outcome.
        let outcome = match (&result, run.state.control.non_finite.take(), run.interrupted.take()) {
            (Err(_), _, _) => Outcome::Failed,
            (Ok(()), Some((reason, global_step)), _) => {
                Outcome::NonFinite { reason, global_step, checkpoint: run.last_checkpoint.clone() }
            }
            (Ok(()), None, Some(signal)) => {
                Outcome::Interrupted { signal, checkpoint: run.last_checkpoint.clone() }
            }
            // Cloned, not taken: `Context::stop_requested` still answers in `after_train`.
            (Ok(()), None, None) => match run.state.control.stop.clone() {
                Some(reason) => Outcome::Stopped(reason),
                None => Outcome::Finished,
            },
        };
        run.state.control.outcome = Some(outcome.clone());
        if let Err(error) = &result {
            run.state.control.failure = Some(error.to_string());
        }
        let after = run.after_train();
        run.state.monitors.close();
        let result = result.and(after);
        // A signal that came after the loop's last boundary (during `after_train`, the final
        // flush) did not stop anything: reported, not dropped. The handlers are put back first,
        // so nothing can come in between unseen.
        let late_signal = match run.signals.take() {
            Some(guard) => {
                drop(guard);
                let stopped_by_it = matches!(outcome, Outcome::Interrupted { .. });
                crate::trainer::interrupt::received().filter(|_| !stopped_by_it).map(|signal| {
                    let name = signal_name(signal);
                    crate::logging::warn!(bare:
                        "{name} received after the last step boundary (during after_train or the monitors' final flush): training had already ended; the run is reported as it ended, with the signal in TrainReport::late_signal"
                    );
                    name
                })
            }
            None => None,
        };
        let summary = TrainSummary::new(
            outcome.clone(),
            started.elapsed(),
            run.state.counters.global_step.saturating_sub(first_step),
            &run.state.counters,
            &run.state.monitors,
            run.state.log_dir.clone(),
            run.last_checkpoint.clone(),
        );
        if chief && let Some(printer) = &run.callbacks.0.train_summary {
            printer.print(&summary);
        }
        let report = run.state.model.take().map(|model| TrainReport {
            model,
            outcome,
            counters: run.state.counters,
            fetch_transfers: run.plan.transfers(),
            deferred_reads: run.plan.deferred_counts().0,
            deferred_waits: run.plan.deferred_counts().1,
            writer_failures: run.state.monitors.writer_failures(),
            dropped: run.state.monitors.dropped(),
            late_signal,
            summary,
        });
        match (result, report) {
            (Ok(()), Some(report)) => Ok(report),
            (Ok(()), None) => Err(Error::msg("the model was lost").into()),
            (Err(error), report) => Err(TrainError { error, report: report.map(Box::new) }),
        }
    }
}

/// Where the trainer is, to name the culprit of a panic.
#[derive(Debug, Clone, Copy)]
pub(super) enum Phase {
    Trainer,
    Callback(usize, &'static str),
    /// Delivering an event to every callback in one pass; the run's `cursor` names the callback.
    Delivering(&'static str),
    Step,
    Data,
}

/// One run: the callbacks, the state they see, and what the trainer resolved at setup (names,
/// order, fetch slots, step hooks). Its methods live by concept: setup and teardown here, the loop
/// in `main_loop`, one step in `step`, checkpoints in `resume`.
pub(crate) struct Run<M, C, K> {
    pub(super) callbacks: C,
    pub(super) state: TrainState<M>,
    pub(super) names: Vec<Cow<'static, str>>,
    pub(super) order: Vec<usize>,
    /// Callbacks that declare fetches, with their slots.
    pub(super) fetchers: Vec<(usize, u64)>,
    /// In a world: every callback (on any rank) that fetches a value averaged over the ranks,
    /// with those slots; each averaged value's slot, in `World::mean_of` order (0 when no
    /// callback fetches it); the slots to average at this step, and whether the step's values
    /// were read before the exchange.
    pub(super) mean_fetchers: Vec<(usize, u64)>,
    /// Every callback that declares fetches, chief-only ones included, with its slots.
    pub(super) all_fetchers: Vec<(usize, u64)>,
    pub(super) mean_slots: Vec<u64>,
    pub(super) mean_mask: u64,
    /// This step's own fetch mask, when the values are read before the exchange.
    pub(super) fetch_mask: u64,
    pub(super) prefilled: bool,
    /// Callbacks that take the loss before backward, and the gradients after it, in run order.
    pub(super) loss_hooks: Vec<usize>,
    pub(super) grad_hooks: Vec<usize>,
    pub(super) plan: FetchPlan,
    /// The slots of deferred fetches (0 when no callback defers).
    pub(super) deferred_bits: u64,
    /// The callbacks that asked for this step's deferred values, and those that receive the
    /// values being delivered in run order: buffers kept from step to step.
    pub(super) deferred_askers: Vec<usize>,
    pub(super) deferred_order: Vec<usize>,
    pub(super) outputs: Outputs,
    pub(super) phase: Phase,
    /// Whether the resolved order is the registration order (events then go in one pass).
    pub(super) in_order: bool,
    /// The flat index of the callback running during a one-pass delivery.
    pub(super) cursor: usize,
    /// How many callbacks (in `order`) had their setup attempted.
    pub(super) set_up: usize,
    /// Passes started over the training data, batches taken from the current one.
    pub(super) data_position: DataPosition,
    /// What a resumed run still has to restore or replay once the callbacks are set up.
    pub(super) resumed: Option<Restored>,
    /// The local step the first epoch starts at (a run resumed in the middle of an epoch).
    pub(super) first_local_step: u64,
    pub(super) signals: Option<SignalGuard>,
    /// The trainer's [`StopHandle`](super::StopHandle): a stop asked through it is acted on as
    /// a signal is.
    pub(super) stop: super::StopHandle,
    /// The chief's hold on the log directory, released when the run ends.
    pub(super) lock: Option<LogDirLock>,
    /// The signal that stopped training.
    pub(super) interrupted: Option<String>,
    /// The last complete checkpoint written or resumed from.
    pub(super) last_checkpoint: Option<PathBuf>,
    /// When the run started (seconds since the Unix epoch): where a checkpoint's
    /// `keep_every_n_hours` counts from when no `ModelSaver` says otherwise.
    pub(super) started_at: f64,
    pub(super) marker: PhantomData<fn() -> K>,
}

impl<M: Module, K, C: Callbacks<M, K>> Run<M, C, K> {
    pub(crate) fn new(callbacks: C, state: TrainState<M>) -> Result<Self> {
        let count = callbacks.len();
        let mut names = Vec::with_capacity(count);
        let mut orders = Vec::with_capacity(count);
        let mut plan = FetchPlan::default();
        let mut fetchers = Vec::new();
        let mut all_fetchers = Vec::new();
        let mut hooks = Vec::with_capacity(count);
        // In a world, a chief-only callback is not set up, nor sent any event, off the chief.
        let mut active = Vec::with_capacity(count);
        for i in 0..count {
            let info = callbacks.info(i);
            active.push(state.rank == 0 || !info.chief_only);
            hooks.push(info.step_hooks);
            let mut mask = 0;
            let mut bits = Vec::with_capacity(info.fetches.len());
            for fetch in info.fetches {
                let bit = plan.declare(fetch, &info.name)?;
                bits.push(bit);
                mask |= bit;
            }
            plan.own(i, &bits);
            if mask != 0 {
                all_fetchers.push((i, mask));
            }
            if mask != 0 && active[i] {
                fetchers.push((i, mask));
            }
            names.push(info.name);
            orders.push(info.order);
        }
        for (i, name) in names.iter().enumerate() {
            if names[..i].contains(name) {
                return Err(Error::Order(format!(
                    "two callbacks are named `{name}`; give one another name with `.named(\"...\")` (`{}(...)`: burn_stoker::callback::Named) so that checkpointed state, order constraints and errors can tell them apart",
                    crate::callback::type_part(name)
                )));
            }
        }
        let mut order = resolve_order(&names, &orders)?;
        order.retain(|&i| active[i]);
        let in_order = order.len() == count && order.iter().enumerate().all(|(position, &i)| position == i);
        let loss_hooks = order.iter().copied().filter(|&i| hooks[i].loss).collect();
        let grad_hooks = order.iter().copied().filter(|&i| hooks[i].gradients).collect();
        Ok(Run {
            loss_hooks,
            grad_hooks,
            callbacks,
            state,
            names,
            order,
            fetchers,
            mean_fetchers: Vec::new(),
            all_fetchers,
            mean_slots: Vec::new(),
            mean_mask: 0,
            fetch_mask: 0,
            prefilled: false,
            deferred_bits: plan.deferred_bits(),
            deferred_askers: Vec::new(),
            deferred_order: Vec::new(),
            plan,
            outputs: Outputs::new(),
            phase: Phase::Trainer,
            in_order,
            cursor: 0,
            set_up: 0,
            data_position: DataPosition::default(),
            resumed: None,
            first_local_step: 0,
            signals: None,
            stop: super::StopHandle::default(),
            lock: None,
            interrupted: None,
            last_checkpoint: None,
            started_at: crate::saver::checkpoint::now(),
            marker: PhantomData,
        })
    }

    fn location(&self) -> String {
        match self.phase {
            Phase::Trainer => "the trainer".into(),
            Phase::Callback(i, event) => format!("callback `{}` in {event}", self.names[i]),
            Phase::Delivering(event) => format!("callback `{}` in {event}", self.names[self.cursor]),
            Phase::Step => "the training step".into(),
            Phase::Data => "the data loader".into(),
        }
    }

    /// `after_train` for every callback whose setup ran, each shielded from the others' panics.
    fn after_train(&mut self) -> Result<()> {
        let mut first_error = None;
        for position in 0..self.set_up {
            let i = self.order[position];
            self.phase = Phase::Callback(i, "after_train");
            let callbacks = &mut self.callbacks;
            let state = &mut self.state;
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                let mut ctx = Context { state };
                callbacks.dispatch(i, Event::AfterTrain, &mut ctx)
            }));
            let error = match outcome {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(wrap(&self.names[i], "after_train", e)),
                Err(payload) => Some(Error::Panic {
                    location: format!("callback `{}` in after_train", self.names[i]),
                    message: panic_message(&*payload),
                }),
            };
            if let Some(error) = error {
                if first_error.is_none() {
                    first_error = Some(error);
                } else {
                    crate::logging::error!("{error}");
                }
            }
        }
        self.phase = Phase::Trainer;
        self.state.monitors.publish();
        first_error.map_or(Ok(()), Err)
    }
}

pub(super) fn wrap(name: &str, event: &'static str, error: Error) -> Error {
    Error::Callback { callback: name.to_string(), event, source: Box::new(error) }
}
