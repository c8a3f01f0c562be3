//! What a callback sees at an event: [`Context`] over the trainer's state.

use std::any::Any;
use std::path::Path;

use burn::optim::ModuleOptimizer;

use super::Outcome;
use super::counters::Counters;
use super::event::Phase;
use super::outcome::{Stop, StopReason};
use super::step::{StepBatch, StepPred};
use crate::error::{Cancel, CheckpointError, Result};
use crate::fetch::Outputs;
use crate::signal::StopHandle;
use crate::state::{HyperParams, KeepPolicy, Monitors, check_copy_name};
use crate::world::Execution;

/// Why [`Context::model`] finds no model.
const MODEL_ABSENT: &str = "the model is not in the context: the training step's after_pred (the step function holds the model), or a panic inside the training step lost it";

/// What callbacks asked the trainer to do at the next step boundary.
#[derive(Debug, Default)]
pub(crate) struct Control {
    /// Why training stops, once something stopped it (the run's outcome follows from it).
    pub(crate) stop: Stop,
    pub(crate) skip_epoch: bool,
    /// The checkpoints to write at the next boundary: where, with what to keep.
    pub(crate) checkpoints: Vec<CheckpointRequest>,
    /// Where each [`ModelSaver`](crate::saver::ModelSaver) of the run writes, registered at its
    /// setup: a checkpoint written without a saver asking (on an interrupt) goes to each.
    pub(crate) savers: Vec<CheckpointRequest>,
    /// Copies of that checkpoint to write: the folder they go into (`None`: `<log
    /// dir>/checkpoints`, MinSaver / MaxSaver) and their name (`SaveBestState`'s path elsewhere).
    pub(crate) copies: Vec<(Option<std::path::PathBuf>, String)>,
    /// How training ended, set when the loop is over (what `after_train` sees).
    pub(crate) outcome: Option<Outcome>,
    /// The error that ended training, as text, with [`Outcome::Failed`].
    pub(crate) failure: Option<String>,
    /// What a callback asked of the loop at once, while the event is delivered: a cancel or a
    /// validation pass (the trainer takes it after the callback returns).
    pub(crate) raised: Option<Raised>,
    /// Where the last [`Cancel`](crate::callback::Cancel) came from: the callback's flat index
    /// and the event (set only when a callback cancels).
    pub(crate) cancelled_at: Option<(usize, &'static str)>,
    /// Between `before_validate` and `after_validate`: [`Context::training`] is `false`.
    pub(crate) validating: bool,
    /// fastai's `training`: set when an epoch's training starts (after `before_epoch`), cleared
    /// by a validation pass asked for outside the epoch's steps; `false` before the first epoch.
    pub(crate) training: bool,
    /// The epoch was cancelled (`CancelEpoch`): its validation does not run (fastai's
    /// `_do_epoch` ends before `_do_epoch_validate`). Cleared when the next epoch starts.
    pub(crate) epoch_cancelled: bool,
    /// A `CancelEpoch` ended a validation pass: the epoch that pass belongs to catches it, also
    /// when the pass ran from `after_epoch` or `trigger_epoch`.
    pub(crate) epoch_cancelled_in_pass: bool,
    /// The gradients of a batch a `CancelBatch` ended after backward (fastai skips `step` and
    /// `zero_grad`): added into the next backward's.
    pub(crate) kept_grads: Option<burn::optim::GradientsParams>,
    /// fastai's `ShortEpochCallback(pct, short_valid=True)` during a validation pass: the share
    /// of the pass after which the validating callback cancels it (reset after each pass).
    pub(crate) short_validation: Option<f64>,
    /// A callback draws on the terminal (the dashboard, from its setup): the progress bar and
    /// the scalar printer step aside.
    pub(crate) terminal_held: bool,
}

/// What a callback asked of the loop at once, recorded until the callback returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Raised {
    /// fastai's cancels.
    Cancel(Cancel),
    /// A validation pass, run by the trainer right after the callback returns.
    Validate,
}

/// How a validation pass ended: its batches, whether a signal or a cancel cut it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PassEnd {
    /// The batches run.
    pub(crate) batches: u64,
    /// The signal that cut the pass short.
    pub(crate) cut_short: Option<&'static str>,
    /// A `CancelValid` (a callback's, or fastai's `ShortEpochCallback`'s) ended it.
    pub(crate) cancelled: bool,
}

/// A validation pass a callback hands the trainer with its request
/// ([`InferenceRunner`](crate::inference::InferenceRunner)'s data, forward function and
/// inferencers): the trainer takes its batches one by one and delivers the batch events around
/// each, then ends it and hands it back to the callback in `validate`.
pub(crate) trait ValidationPass<M> {
    /// A pass's batches, over the model in evaluation mode.
    fn batches<'a>(&'a mut self, ctx: &mut Context<'_, M>) -> Box<dyn ValidationBatches + 'a>
    where
        M: 'a;
    /// After the pass: its results to the monitors (or combined over the ranks, or dropped after
    /// a signal).
    fn end(&mut self, ctx: &mut Context<'_, M>, end: PassEnd) -> Result<()>;
    /// Whether fastai's `ShortEpochCallback` may cut the pass (not a data-parallel one, where
    /// every rank runs its whole shard).
    fn may_be_short(&self) -> bool;
    /// The pass itself, for its callback to take back (by its type).
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
}

/// The batches of one validation pass, each taken through the stages the trainer delivers
/// events between: the batch (`before_batch`), the model's output (`after_pred`), the outputs
/// (`after_loss`: the output named `loss`), the inferencers.
pub(crate) trait ValidationBatches {
    /// Take the next batch; `None` at the end of the pass.
    fn next(&mut self) -> Option<Result<()>>;
    /// The batch taken, for `before_batch`.
    fn batch(&self) -> StepBatch<'_>;
    /// Compute the model's output, for `after_pred`: `None` when the forward function computes
    /// the outputs in one call (nothing runs then).
    fn predict(&mut self) -> Option<StepPred<'_>>;
    /// The batch's outputs (from the forward function, or the scoring one on the model's output).
    fn score(&mut self) -> Result<()>;
    /// The batch's outputs.
    fn outputs(&mut self) -> &mut Outputs;
    /// The inferencers take the batch's outputs.
    fn infer(&mut self) -> Result<()>;
    /// The number of batches in the pass, when known (asked after the first batch).
    fn length(&self) -> Option<u64>;
}

/// A checkpoint to write: into which folder of checkpoints, keeping what, written when.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CheckpointRequest {
    /// The folder of checkpoints; `None`: `<log dir>/checkpoints`.
    pub(crate) root: Option<std::path::PathBuf>,
    pub(crate) policy: KeepPolicy,
    /// The time it is written, in seconds since the Unix epoch, from the saver's clock;
    /// `None`: the system's time when written.
    pub(crate) time: Option<f64>,
    /// When the saver's run started (seconds since the Unix epoch), from which
    /// `keep_every_n_hours` counts; `None`: the trainer's start.
    pub(crate) run_start: Option<f64>,
    /// Whether a write that fails is logged and training goes on (a `ModelSaver`'s
    /// `OnWriteError::Log`, tensorpack's); `false`: the run fails.
    pub(crate) keep_going: bool,
}

/// Everything the trainer holds that a callback may read or change.
pub(crate) struct TrainState<M> {
    pub(crate) counters: Counters,
    pub(crate) model: Option<M>,
    pub(crate) optimizer: ModuleOptimizer,
    pub(crate) hyper: HyperParams,
    /// Reached through [`monitors`](Self::monitors), which stamps what is put with the counters
    /// (or [`monitors_ref`](Self::monitors_ref), to read).
    pub(crate) monitors: Monitors,
    pub(crate) control: Control,
    pub(crate) log_dir: std::path::PathBuf,
    /// One device, or one rank of a data-parallel world and its agreement with the others.
    pub(crate) execution: Execution,
    /// Whether this run handles SIGINT and SIGTERM (`Trainer::handle_signals`).
    pub(crate) signals: bool,
    /// The run's seed ([`Trainer::seed`](crate::trainer::Trainer::seed)), for what a callback draws.
    pub(crate) seed: Option<u64>,
    /// The trainer's stop handle, for [`Context::stop_handle`].
    pub(crate) stop: StopHandle,
    /// The validation pass a callback handed the trainer with its request, and, when the pass
    /// is over, handed back to it in `validate`.
    pub(crate) pass: Option<Box<dyn ValidationPass<M>>>,
}

impl<M> TrainState<M> {
    /// The monitors, what is put there stamped with the run's counters: the counters are kept
    /// here alone, and the monitors read them at each access.
    #[inline]
    pub(crate) fn monitors(&mut self) -> &mut Monitors {
        self.monitors.at(self.counters.global_step, self.counters.epoch_num)
    }

    /// The monitors, to read.
    #[inline]
    pub(crate) fn monitors_ref(&self) -> &Monitors {
        &self.monitors
    }
}

/// What a callback sees at an event: the counters, the model, the optimizer, the hyper-parameters,
/// the monitors, and the controls to stop training or skip the rest of an epoch.
///
/// Every event runs between steps, so changing the model (WGAN clipping, EMA) or a hyper-parameter
/// is always safe and takes effect at the next step.
pub struct Context<'a, M> {
    pub(crate) state: &'a mut TrainState<M>,
    /// Where the event being delivered falls in the loop: whether the step in progress is
    /// counted yet, for the seeds' counters ([`latest_step_index`](Self::latest_step_index),
    /// [`step_index`](Self::step_index)). Set by the trainer at each delivery.
    pub(crate) phase: Phase,
}

impl<'a, M> Context<'a, M> {
    /// The context of an event, without batch hooks.
    #[inline(always)]
    pub(crate) fn new(state: &'a mut TrainState<M>, phase: Phase) -> Self {
        Context { state, phase }
    }
}

impl<M> Context<'_, M> {
    /// This rank in data-parallel training (0, the chief, otherwise).
    pub fn rank(&self) -> usize {
        self.state.execution.rank()
    }
    /// The number of ranks in data-parallel training (1 otherwise).
    pub fn world_size(&self) -> usize {
        self.state.execution.size()
    }
    /// Whether this is the chief (rank 0), the rank that writes into the log directory.
    pub fn is_chief(&self) -> bool {
        self.state.execution.is_chief()
    }
    /// The trainer's counters.
    pub fn counters(&self) -> &Counters {
        &self.state.counters
    }
    /// Shortcut for `counters().epoch_num()`.
    pub fn epoch_num(&self) -> u64 {
        self.state.counters.epoch_num
    }
    /// Shortcut for `counters().global_step()`.
    pub fn global_step(&self) -> u64 {
        self.state.counters.global_step
    }
    /// Shortcut for `counters().local_step()`.
    pub fn local_step(&self) -> u64 {
        self.state.counters.local_step
    }
    /// Whether the counters already count the step in progress: from `after_step` on (and
    /// between steps), not in `before_step` nor inside the step (`before_backward`,
    /// `after_backward`).
    fn step_counted(&self) -> bool {
        !matches!(self.phase, Phase::BeforeStep | Phase::InStep)
    }
    /// The index of the latest step the loop began in this epoch, as tensorpack's `local_step`
    /// (`trainer.loop.local_step`) counts it, the index of its loop over the steps of an epoch:
    /// 0-based, and the same from `before_step` to `trigger_step` (stoker's
    /// [`local_step`](Self::local_step) counts the step from `after_step` on, so a predicate
    /// ported as written would fire one step late there).
    ///
    /// At each event: the step's index (0 for an epoch's first step) from `before_step` to
    /// `trigger_step`, inside the step, and in `after_cancel_batch`; the last step's index
    /// (`steps_per_epoch - 1`) in `after_epoch`, `trigger_epoch` and `after_train` after a whole
    /// epoch; -1 in `setup`, `before_train` and the run's first `before_epoch` (tensorpack starts
    /// its loop variable at -1), and `steps_per_epoch - 1` in a later epoch's `before_epoch`
    /// (tensorpack's loop variable keeps the previous epoch's last value until the first step).
    /// A run resumed mid-epoch sees the index of the last step run before the checkpoint in its
    /// first `before_epoch`. Computed from the counters when asked; nothing is kept per step.
    #[doc(alias = "tensorpack_local_step")]
    pub fn latest_step_index(&self) -> i64 {
        let c = &self.state.counters;
        if !self.step_counted() {
            return c.local_step as i64;
        }
        if c.local_step == 0 && c.epoch_num > c.starting_epoch {
            return c.steps_per_epoch as i64 - 1;
        }
        c.local_step as i64 - 1
    }
    /// The 0-based index of the step in its epoch, as neon's `minibatch` (the argument of
    /// `on_minibatch_begin` and `on_minibatch_end`) counts it, the same at both (stoker's
    /// [`local_step`](Self::local_step) is that index in `before_step` and one more from
    /// `after_step` on). fastai's `iter`, Keras's `batch` and Lightning's `batch_idx` are this
    /// number too.
    ///
    /// From `before_step` to `trigger_step`, inside the step and in `after_cancel_batch`: the
    /// step's index. neon passes it to no other event; elsewhere this is the index of the last
    /// step run in the current epoch (`steps_per_epoch - 1` at an epoch's end), 0 before its
    /// first. Computed from the counters when asked.
    #[doc(alias = "neon_minibatch")]
    #[doc(alias = "minibatch")]
    #[doc(alias = "batch_idx")]
    #[doc(alias = "iter")]
    pub fn step_index(&self) -> u64 {
        let local = self.state.counters.local_step;
        if self.step_counted() { local.saturating_sub(1) } else { local }
    }
    /// The 0-based index of the epoch, as neon's `epoch` (the argument of `on_epoch_begin`,
    /// `on_epoch_end` and the minibatch events) counts it (`epoch_num() - 1`; stoker's
    /// [`epoch_num`](Self::epoch_num) is 1-based, as tensorpack's). fastai's `epoch` and Keras's
    /// `epoch` are this number too. 0 before the first epoch.
    #[doc(alias = "neon_epoch")]
    pub fn epoch_index(&self) -> u64 {
        self.state.counters.epoch_num.saturating_sub(1)
    }
    /// The model being trained.
    ///
    /// # Panics
    /// If a panic inside the optimizer's step lost the model (then only `after_train` runs).
    /// In `after_pred`, where the step function holds the model, too.
    pub fn model(&self) -> &M {
        self.state.model.as_ref().expect(MODEL_ABSENT)
    }
    /// The model, to change its weights between steps.
    ///
    /// # Panics
    /// As [`model`](Self::model).
    pub fn model_mut(&mut self) -> &mut M {
        self.state.model.as_mut().expect(MODEL_ABSENT)
    }
    /// The optimizer (its state is saved in checkpoints).
    pub fn optimizer(&self) -> &ModuleOptimizer {
        &self.state.optimizer
    }
    /// The hyper-parameters: the learning rate and the ones registered by name.
    pub fn hyper(&self) -> &HyperParams {
        &self.state.hyper
    }
    /// The hyper-parameters, to change them; the change applies from the next step.
    pub fn hyper_mut(&mut self) -> &mut HyperParams {
        &mut self.state.hyper
    }
    /// The current learning rate.
    pub fn learning_rate(&self) -> f64 {
        self.state.hyper.learning_rate()
    }
    /// Set the learning rate from the next step on.
    pub fn set_learning_rate(&mut self, value: f64) {
        self.state.hyper.set_learning_rate(value);
    }
    /// The monitors: put scalars, images, histograms and texts; read the history.
    pub fn monitors(&mut self) -> &mut Monitors {
        self.state.monitors()
    }
    /// The monitors, to read the history.
    pub fn monitors_ref(&self) -> &Monitors {
        self.state.monitors_ref()
    }
    /// The log directory (checkpoints, stats.json, event files).
    pub fn log_dir(&self) -> &Path {
        &self.state.log_dir
    }
    /// The folders holding this run's checkpoints, once the callbacks are set up: the log
    /// directory (a best state's folder), its `checkpoints/`, and each saver's own folder.
    pub(crate) fn checkpoint_folders(&self) -> Vec<std::path::PathBuf> {
        let log_dir = &self.state.log_dir;
        let savers = self.state.control.savers.iter().filter_map(|saver| saver.root.clone());
        [log_dir.clone(), log_dir.join(crate::state::CHECKPOINTS)].into_iter().chain(savers).collect()
    }
    /// Stop training at the next step boundary (tensorpack's `StopTraining`); `after_train`
    /// still runs for every callback, and the run ends with
    /// [`Outcome::Stopped`](crate::callback::Outcome::Stopped) and this reason (the first one
    /// asked for wins; a signal or a non-finite loss stopping the run too decides the outcome
    /// instead: [`Outcome::Interrupted`](crate::callback::Outcome::Interrupted),
    /// [`Outcome::NonFinite`](crate::callback::Outcome::NonFinite)).
    ///
    /// What still runs after the request:
    /// - the rest of the current event, for every callback after this one: a stop is a request,
    ///   not an exception, so a writer or a saver ordered later still sees the event;
    /// - the rest of the current step: asked in `before_step`, the step runs, with its
    ///   `after_step` and `trigger_step`; the loop ends after `trigger_step`;
    /// - an epoch that was finishing: asked in `after_epoch`, its `trigger_epoch` runs; asked in
    ///   `before_epoch`, none of its steps runs.
    ///
    /// An epoch whose steps were cut short ends without its `after_epoch` and `trigger_epoch`,
    /// so nothing is saved from a state the stop was meant to avoid.
    ///
    /// This differs from tensorpack, where `StopTraining` is raised: the callbacks after the
    /// raiser in that event, and every later event but `after_train`, do not run. Here every
    /// callback sees each event it was handed in full, and in data-parallel training every rank
    /// can stop at the same boundary (a stop asked on one rank is agreed at the next exchange).
    pub fn request_stop(&mut self, reason: impl Into<String>) {
        self.state.control.stop.record(StopReason::Asked(reason.into()));
    }
    /// Stop training at the next step boundary because the loss or the weights are not finite
    /// (`reason` says which, and where): as [`request_stop`](Self::request_stop), and no
    /// checkpoint is written from now on; the run ends with
    /// [`Outcome::NonFinite`](crate::callback::Outcome::NonFinite).
    pub(crate) fn stop_non_finite(&mut self, reason: String) {
        let global_step = self.state.counters.global_step;
        self.state.control.stop.record(StopReason::NonFinite { reason, global_step });
    }
    /// Whether training stops, and why (the reason the outcome follows from: a callback's
    /// request, `"interrupted by SIGINT"`, a non-finite loss...); in `after_train` too, so that
    /// a callback can tell a stopped run from one that an error ended early.
    pub fn stop_requested(&self) -> Option<&str> {
        self.state.control.stop.reason().map(StopReason::text)
    }
    /// How training ended: `Some` in `after_train` (finished, stopped and why, interrupted by a
    /// signal, stopped on a non-finite loss or weights, or failed), `None` while it is going on.
    /// An error in `after_train` itself does not change it.
    pub fn outcome(&self) -> Option<&Outcome> {
        self.state.control.outcome.as_ref()
    }
    /// With [`Outcome::Failed`] in `after_train`: the message of the error that ended training
    /// (the error itself, with its sources, comes back from `train`).
    pub fn failure(&self) -> Option<&str> {
        self.state.control.failure.as_deref()
    }
    /// The signal (`"SIGINT"` or `"SIGTERM"`) received since training started, when the trainer
    /// handles signals ([`Trainer::handle_signals`](crate::trainer::Trainer::handle_signals)):
    /// the trainer stops at the next step boundary. A callback that loops for long within one
    /// event (a validation pass, a prompt) checks it between iterations and returns early, so
    /// that the first Ctrl-C is seen at once. One atomic load.
    pub fn signal_received(&self) -> Option<&'static str> {
        if !self.state.signals {
            return None;
        }
        crate::signal::received().map(crate::signal::static_name)
    }
    /// The run's [`StopHandle`](crate::trainer::StopHandle), the one
    /// [`Trainer::stop_handle`](crate::trainer::Trainer::stop_handle) gives: a callback hands it
    /// to a thread of its own (a key read in a terminal, a message from a service) that stops
    /// the run at its next step boundary with a checkpoint, as a Ctrl-C does.
    pub fn stop_handle(&self) -> StopHandle {
        self.state.stop.clone()
    }
    /// Whether this run handles signals, so that [`signal_received`](Self::signal_received) can answer.
    pub(crate) fn signals_handled(&self) -> bool {
        self.state.signals
    }
    /// Write a checkpoint (see [the checkpoint format](crate::saver#the-checkpoint-format)) at the next
    /// boundary: after the current step's `trigger_step`, or after the current epoch's
    /// `trigger_epoch` and statistics, or before the first step when asked during `setup` or
    /// `before_train`. Every callback has then handled the event, so the checkpoint holds their
    /// states as of that moment. [`ModelSaver`](crate::saver::ModelSaver) asks the same way, into its
    /// own folder when given a `checkpoint_dir`.
    ///
    /// The checkpoint goes to `<log dir>/checkpoints/`; a second request at one boundary for that
    /// folder replaces the first one's policy.
    pub fn request_checkpoint(&mut self, policy: KeepPolicy) {
        self.request(CheckpointRequest {
            root: None,
            policy,
            time: None,
            run_start: None,
            keep_going: false,
        });
    }
    /// Ask for a checkpoint into `request.root` (one per folder at a boundary: a second
    /// request for a folder replaces the first).
    pub(crate) fn request(&mut self, request: CheckpointRequest) {
        let pending = &mut self.state.control.checkpoints;
        match pending.iter_mut().find(|r| r.root == request.root) {
            Some(earlier) => *earlier = request,
            None => pending.push(request),
        }
    }
    /// Write the checkpoint of the next boundary also as the complete copy
    /// `checkpoints/<name>/` (replacing the previous copy of that name once complete).
    /// [`MinSaver`](crate::saver::MinSaver) calls this.
    ///
    /// `name` must be a plain folder name of its own inside `checkpoints/`: not empty, no `/`,
    /// `\\` or control character (NUL included), not starting with `.` or `step-`, not
    /// `index.json`, not ending with `.tmp`, `.old`, `.deleting` or `.abandoned` (the names of the
    /// checkpoints, of the index and of the folders stoker writes, replaces, removes or sets
    /// aside). Another name is a [`CheckpointError::CopyName`](crate::CheckpointError::CopyName) naming it, and
    /// nothing is requested.
    pub fn request_checkpoint_copy(&mut self, name: impl Into<String>) -> Result<()> {
        let name = name.into();
        check_copy_name(&name)
            .map_err(|why| CheckpointError::CopyName { name: name.clone(), why: why.to_string() })?;
        self.request_copy(None, name);
        Ok(())
    }
    /// Write the checkpoint of the next boundary also as the complete copy `dir` (its parent
    /// folder and a name that [`request_checkpoint_copy`](Self::request_checkpoint_copy)
    /// accepts, checked by the caller): [`SaveBestState`](crate::saver::SaveBestState)'s file.
    pub(crate) fn request_checkpoint_copy_at(&mut self, parent: std::path::PathBuf, name: String) {
        self.request_copy(Some(parent), name);
    }
    fn request_copy(&mut self, parent: Option<std::path::PathBuf>, name: String) {
        let copy = (parent, name);
        if !self.state.control.copies.contains(&copy) {
            self.state.control.copies.push(copy);
        }
    }
    /// End the current epoch after this step: its `after_epoch` and `trigger_epoch` still run.
    pub fn skip_rest_of_epoch(&mut self) {
        self.state.control.skip_epoch = true;
    }
    /// The run's seed, given to [`Trainer::seed`](crate::trainer::Trainer::seed); `None` for an
    /// unseeded run. A callback that draws at random (`MixUp`) seeds its draws from it, the rank
    /// and the global step, so that a resumed run draws what the uninterrupted one drew.
    pub fn seed(&self) -> Option<u64> {
        self.state.seed
    }
    /// Whether the model is being trained (fastai's `training`, which its `TrainEvalCallback`
    /// sets): `true` from the start of an epoch's training (after `before_epoch`, before its
    /// first step), `false` from `before_validate` on, until the next epoch's training starts.
    /// So `false` in `setup`, `before_train` and the first `before_epoch`; after an epoch's
    /// validation in `trigger_epoch`, `false` in the rest of that `trigger_epoch`, the next
    /// `before_epoch` and `after_train`. A pass asked for between two steps of an epoch
    /// (from `trigger_step`) gives training back to the steps that follow; an epoch never
    /// validated stays `true` to its end, as fastai's.
    pub fn training(&self) -> bool {
        self.state.control.training && !self.state.control.validating
    }
    /// Say that this callback draws on the whole terminal (from `setup`): the progress bar and
    /// the scalar printer draw nothing beside it. The dashboard's alone.
    #[cfg(feature = "dashboard")]
    pub(crate) fn hold_terminal(&mut self) {
        self.state.control.terminal_held = true;
    }
    /// Whether a callback holds the terminal ([`hold_terminal`](Self::hold_terminal)).
    pub(crate) fn terminal_held(&self) -> bool {
        self.state.control.terminal_held
    }
}

impl<M: burn::module::Module> Context<'_, M> {
    /// Sum `values` over the ranks of a data-parallel world, in place; with one rank, the values
    /// are their own sum. Every rank must call it at the same event with the same number of
    /// values, so only a callback that runs on every rank (`chief_only = false`) may: the chief
    /// alone calling it is an error on every rank, never a mix-up. The values travel in the
    /// gradients' exchange (through host memory over MPI), at most 32 per call to the transport.
    ///
    /// tensorpack's `DataParallelInferenceRunner` combines its inferencers' sums this way.
    pub fn sum_over_ranks(&mut self, values: &mut [f64]) -> Result<()> {
        let state = &mut *self.state;
        match state.model.as_ref() {
            Some(model) => state.execution.sum(model, values),
            None => Ok(()),
        }
    }
}
