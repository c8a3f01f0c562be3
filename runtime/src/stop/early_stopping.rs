//! Keras's [`EarlyStopping`]: patience, `min_delta`, baseline, warm-up, the best weights restored.

use std::any::Any;
use std::borrow::Cow;
use std::cell::Cell;
use std::path::{Path, PathBuf};

use burn::module::Module;
use burn::store::ModuleRecord;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value as Json, json};

use super::rule::{FunctionRule, StopRule};
use super::{file_safe, state_f64, state_u64};
use crate::callback::{Callback, Context};
use crate::error::{Error, Result};
use crate::state::Direction;
use crate::state::{TRAINER, Watched, json_f64, write_atomic};

/// The best weights kept in memory: a clone of the model (burn's tensors are reference-counted
/// and the optimizer makes new ones at every step, so the clone keeps the weights it was taken
/// with, on the device, without a copy).
struct BestWeights {
    model: Box<dyn Any + Send>,
    global_step: u64,
}

impl BestWeights {
    /// The model's weights now, at the context's global step.
    fn now<M: Module + 'static>(ctx: &Context<'_, M>) -> Self {
        BestWeights { model: Box::new(ctx.model().clone()), global_step: ctx.global_step() }
    }
}

/// Stops training when a monitored statistic has stopped improving: Keras's `EarlyStopping`,
/// with the same arguments, defaults and arithmetic.
///
/// At each trigger (every epoch by default; wrap it in
/// [`PeriodicTrigger`](crate::trigger::PeriodicTrigger) to match a producer that runs less often), with
/// `current` the statistic's latest value:
///
/// 1. If no value was put since the last trigger, nothing happens (Keras skips an epoch whose
///    logs lack the statistic); if the statistic was never put at all, training fails with an
///    error naming the scalars there are (a misspelt name, or an order mistake).
/// 2. Epochs `1..=start_from_epoch` are a warm-up: nothing happens.
/// 3. With `restore_best_weights`, the first evaluated epoch's weights are kept as the best.
/// 4. `wait += 1`. If `current` improves on the best by more than `min_delta` (`current -
///    min_delta > best` for `Max`, `current + min_delta < best` for `Min`; the first evaluated
///    value always does), it becomes the best (its weights are kept), and `wait` returns to 0
///    only if `current` also improves on `baseline` (when one is set).
/// 5. Otherwise, when `wait >= patience` and this is not the first evaluation, training stops
///    ([`Context::request_stop`]; the run ends with [`Outcome::Stopped`](crate::callback::Outcome)).
///    Keras's guard is "not the first epoch" (`epoch > 0`): the same when every epoch is
///    evaluated, but a check every k steps (a `PeriodicTrigger`, Lightning's
///    `val_check_interval`) can stop within the first epoch, at its second evaluation, as
///    Lightning's does.
///
/// So `patience = 0` stops at the first epoch that does not improve; with a `baseline`, a run
/// that keeps improving without beating it still runs until the first epoch without improvement
/// after `patience` evaluations. With `restore_best_weights`, the model is put back to the best
/// epoch's weights in `after_train` whether training stopped early or ran to `max_epoch`, as
/// Keras 3 does (Keras 2 restored only on an early stop), so [`TrainReport::model`] is the best
/// model. The weights are restored whatever ended the run (the checkpoint a SIGINT writes is
/// taken before, and holds the latest weights, so resuming continues where training was).
///
/// **State.** `wait`, the best value, its epoch and the stopped epoch are callback state, saved
/// in every checkpoint: a resumed run stops at the epoch an uninterrupted run would. With
/// `restore_best_weights`, each checkpoint also saves the best weights (when they changed since
/// the previous one) to `<log dir>/early-stopping-<monitor>/best-step-<global step>.bpk`
/// (burnpack), and a resumed run reads them back. A file is kept while a checkpoint names it
/// (in the log directory, its `checkpoints/` or a saver's own folder, the checkpoints set aside
/// by a rollback included) and for the last two checkpoints written: a run resumed from any
/// checkpoint still there, however old, restores the best weights that checkpoint knew.
///
/// **Deliberate differences from Keras**: a NaN value is never an improvement (Keras would take
/// a first NaN as the best and then never improve on it); the monitor has no default name
/// ([`EarlyStopping::default`] watches Keras's `val_loss`); `Direction::Auto` reads the statistic's
/// name (see [`Direction::resolve`]) and fails at setup when it cannot tell; `verbose` says Keras's
/// two messages, with 1-based epochs as stoker counts them, as `log` records at `Info` (on
/// stderr, after `stoker: `, when no logger is installed: see [`logging`](crate::logging)).
///
/// [`TrainReport::model`]: crate::trainer::TrainReport::model
///
/// ```
/// use burn_stoker::prelude::*;
/// use burn_stoker::state::Direction;
/// use burn_stoker::stop::EarlyStopping;
///
/// // Stop when `validation_error` has not improved by 0.001 for 5 epochs; keep the best model.
/// let stop = EarlyStopping::new("validation_error")
///     .patience(5)
///     .min_delta(1e-3)
///     .restore_best_weights(true);
/// // Wait 10 epochs before watching the accuracy, which must beat 0.9 to reset the patience.
/// let warm = EarlyStopping::new("validation_accuracy")
///     .mode(Direction::Max)
///     .baseline(0.9)
///     .start_from_epoch(10)
///     .patience(3);
/// # let _ = (stop, warm);
/// ```
#[doc(alias = "MetricEarlyStoppingStrategy")]
pub struct EarlyStopping {
    watched: Watched,
    mode: Direction,
    min_delta: f64,
    patience: u64,
    baseline: Option<f64>,
    start_from_epoch: u64,
    restore_best_weights: bool,
    verbose: bool,
    wait: u64,
    best: Option<f64>,
    best_epoch: u64,
    stopped_epoch: u64,
    best_weights: Option<BestWeights>,
    log_dir: PathBuf,
    /// The weights file a resumed state names, read in `before_train`.
    pending_weights: Option<String>,
    /// The global steps of the best weights written by the last two checkpoints.
    written: Cell<[Option<u64>; 2]>,
    /// The folders whose checkpoints may name a best weights file (the log directory, its
    /// `checkpoints/`, every saver's own folder): a file one of them names is kept.
    checkpoint_folders: Vec<PathBuf>,
    /// The program's own rule, [`stop_when`](Self::stop_when), in place of the patience rule.
    rule: Option<Box<dyn StopRule>>,
}
crate::kind::kind!(EarlyStopping);

impl std::fmt::Debug for EarlyStopping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EarlyStopping")
            .field("monitor", &self.watched.name)
            .field("mode", &self.mode)
            .field("min_delta", &self.min_delta)
            .field("patience", &self.patience)
            .field("baseline", &self.baseline)
            .field("start_from_epoch", &self.start_from_epoch)
            .field("restore_best_weights", &self.restore_best_weights)
            .field("wait", &self.wait)
            .field("best", &self.best)
            .field("best_epoch", &self.best_epoch)
            .field("stopped_epoch", &self.stopped_epoch)
            .field("rule", &self.rule.as_ref().map_or("patience", |_| "a function of the program's own"))
            .finish_non_exhaustive()
    }
}

impl Default for EarlyStopping {
    /// Keras's defaults: monitor `val_loss`, `Direction::Auto`, `min_delta` 0, `patience` 0, no
    /// baseline, no warm-up, weights not restored, quiet.
    fn default() -> Self {
        EarlyStopping::new("val_loss")
    }
}

impl EarlyStopping {
    /// Watch the monitored scalar `monitor`, with Keras's defaults for everything else.
    pub fn new(monitor: impl Into<String>) -> Self {
        EarlyStopping {
            watched: Watched::new(monitor),
            mode: Direction::Auto,
            min_delta: 0.0,
            patience: 0,
            baseline: None,
            start_from_epoch: 0,
            restore_best_weights: false,
            verbose: false,
            wait: 0,
            best: None,
            best_epoch: 0,
            stopped_epoch: 0,
            best_weights: None,
            log_dir: PathBuf::new(),
            pending_weights: None,
            written: Cell::new([None, None]),
            checkpoint_folders: Vec::new(),
            rule: None,
        }
    }
    /// Whether the statistic should go down or up (`Direction::Auto` by default).
    pub fn mode(mut self, mode: Direction) -> Self {
        self.mode = mode;
        self
    }
    /// The smallest change that counts as an improvement (its absolute value is used; 0 by default).
    pub fn min_delta(mut self, min_delta: f64) -> Self {
        self.min_delta = min_delta.abs();
        self
    }
    /// Evaluations without improvement after which training stops (0 by default).
    pub fn patience(mut self, patience: u64) -> Self {
        self.patience = patience;
        self
    }
    /// A value the statistic must improve on for the patience to start over (none by default).
    pub fn baseline(mut self, baseline: f64) -> Self {
        self.baseline = Some(baseline);
        self
    }
    /// Epochs of warm-up before the statistic is watched (0 by default): epochs `1..=epochs` are
    /// not evaluated.
    pub fn start_from_epoch(mut self, epochs: u64) -> Self {
        self.start_from_epoch = epochs;
        self
    }
    /// Whether the model gets the best epoch's weights back when training ends (off by default).
    pub fn restore_best_weights(mut self, restore: bool) -> Self {
        self.restore_best_weights = restore;
        self
    }
    /// Whether to say when training stops and when the weights are restored (off by default; a
    /// `log` record at `Info`, see [`logging`](crate::logging)).
    pub fn verbose(mut self, verbose: bool) -> Self {
        self.verbose = verbose;
        self
    }
    /// Stop when `function(state, value)` says so, in place of the patience rule: neon's
    /// `EarlyStopCallback` and its `stop_func(state, value) -> (state, stop)`.
    ///
    /// At each trigger where the statistic has a new value, the function receives its state and
    /// the value, and returns the new state and whether to stop. The state starts as
    /// `S::default()` (neon's `None`; [`stop_when_from`](Self::stop_when_from) gives another)
    /// and is callback state: saved in checkpoints, so it must be serializable, and restored on
    /// resume ([`rule_state`](Self::rule_state) reads it). `start_from_epoch` still applies, and
    /// so does `restore_best_weights`, which reads `mode` to tell the best epoch; `patience`,
    /// `min_delta` and `baseline` belong to the patience rule and go unused. A trigger where the
    /// statistic has no new value does not call the function, as neon skips the epochs its
    /// `LossCallback` did not evaluate (`--eval_freq 2`: epoch 1), and a statistic never put in
    /// the whole run is a warning at its end, not an error, as in neon. The stop reason (in
    /// [`Outcome::Stopped`](crate::callback::Outcome)) gives the value that triggered it.
    ///
    /// ```
    /// use burn_stoker::stop::EarlyStopping;
    ///
    /// // Stop once the validation cost has risen twice in a row; the state is (previous, rises).
    /// let rising = EarlyStopping::new("validation_cost").stop_when(
    ///     |(previous, rises): (Option<f64>, u32), cost: f64| {
    ///         let rises = if previous.is_some_and(|p| cost > p) { rises + 1 } else { 0 };
    ///         ((Some(cost), rises), rises >= 2)
    ///     },
    /// );
    /// // Stop as soon as the error is under 5% (Lightning's `stopping_threshold`).
    /// let target = EarlyStopping::new("validation_error").stop_when(|(), error: f64| ((), error < 0.05));
    /// # let _ = (rising, target);
    /// ```
    #[doc(alias = "EarlyStopCallback")]
    #[doc(alias = "stop_func")]
    #[doc(alias = "stopping_threshold")]
    #[doc(alias = "divergence_threshold")]
    pub fn stop_when<S, F>(self, function: F) -> Self
    where
        S: Default + Serialize + DeserializeOwned + Send + 'static,
        F: FnMut(S, f64) -> (S, bool) + Send + 'static,
    {
        self.stop_when_from(S::default(), function)
    }
    /// [`stop_when`](Self::stop_when), the function's state starting as `state`.
    pub fn stop_when_from<S, F>(mut self, state: S, function: F) -> Self
    where
        S: Serialize + DeserializeOwned + Send + 'static,
        F: FnMut(S, f64) -> (S, bool) + Send + 'static,
    {
        self.rule = Some(Box::new(FunctionRule { state: Some(state), function }));
        self
    }
    /// The state of the function [`stop_when`](Self::stop_when) gave, when it is an `S`; `None`
    /// without one, or for another type.
    pub fn rule_state<S: 'static>(&self) -> Option<&S> {
        self.rule.as_ref()?.state()?.downcast_ref()
    }
    /// The watched statistic.
    pub fn monitor(&self) -> &str {
        &self.watched.name
    }
    /// Evaluations since the last improvement (Keras's `wait`).
    pub fn wait(&self) -> u64 {
        self.wait
    }
    /// The best value so far.
    pub fn best(&self) -> Option<f64> {
        self.best
    }
    /// The epoch of the best value (or of the weights kept first), 0 before any.
    pub fn best_epoch(&self) -> u64 {
        self.best_epoch
    }
    /// The epoch at which training was stopped, 0 if it was not.
    pub fn stopped_epoch(&self) -> u64 {
        self.stopped_epoch
    }

    fn label(&self) -> String {
        crate::kind::detailed::<Self>(&self.watched.name).into_owned()
    }

    fn improves(&self, value: f64, reference: Option<f64>) -> bool {
        let Some(reference) = reference else {
            return !value.is_nan();
        };
        if self.watched.maximize() {
            value - self.min_delta > reference
        } else {
            value + self.min_delta < reference
        }
    }

    /// The program's rule at an evaluated trigger: the best weights kept when asked, then the
    /// function's decision.
    fn apply_rule<M: Module + 'static>(
        &mut self,
        ctx: &mut Context<'_, M>,
        current: f64,
        owner: &str,
    ) -> Result<()> {
        // Without the best weights to keep, the rule has no direction: no best either.
        if self.restore_best_weights && self.improves(current, self.best) {
            self.record_best(ctx, current);
        }
        let Some(rule) = self.rule.as_mut() else { return Ok(()) };
        if rule.decide(current, owner)? {
            self.stopped_epoch = ctx.epoch_num();
            let name = &self.watched.name;
            ctx.request_stop(format!("{owner}: the stop function triggered at {name} = {current}"));
        }
        Ok(())
    }

    /// `current` is the new best, of this epoch; its weights are kept when they are restored.
    fn record_best<M: Module + 'static>(&mut self, ctx: &Context<'_, M>, current: f64) {
        self.best = Some(current);
        self.best_epoch = ctx.epoch_num();
        if self.restore_best_weights {
            self.best_weights = Some(BestWeights::now(ctx));
        }
    }

    fn weights_dir(&self) -> PathBuf {
        self.log_dir.join(format!("early-stopping-{}", file_safe(&self.watched.name)))
    }

    fn weights_file(global_step: u64) -> String {
        format!("best-step-{global_step}.bpk")
    }

    /// Write the best weights (when they changed since the last checkpoint), keeping the files
    /// of this checkpoint and of the previous one.
    fn write_best_weights<M: Module + 'static>(&self, weights: &BestWeights) -> Result<()> {
        let [last, _] = self.written.get();
        if last == Some(weights.global_step) {
            return Ok(());
        }
        let model = weights.model.downcast_ref::<M>().ok_or_else(|| {
            Error::msg(format!("{}: the kept weights are not of the model's type", self.label()))
        })?;
        let bytes = model.clone().into_record().into_bytes().map_err(|e| {
            Error::checkpoint_write(format!("{}: serializing the best weights: {e}", self.label()), e)
        })?;
        let dir = self.weights_dir();
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let path = dir.join(Self::weights_file(weights.global_step));
        write_atomic(&path, &bytes).map_err(|e| Error::io(&path, e))?;
        self.written.set([Some(weights.global_step), last]);
        let mut keep = named_by_checkpoints(&self.checkpoint_folders, &self.label());
        keep.extend([Some(weights.global_step), last]);
        remove_other_weights(&dir, &keep);
        Ok(())
    }
}

/// The steps of the best weights files that the checkpoints in `folders` (each a folder holding
/// checkpoints, `step-N`, copies, set-aside ones) name in the state of the callback `owner`: a
/// run resumed from any of them finds its best weights.
fn named_by_checkpoints(folders: &[PathBuf], owner: &str) -> Vec<Option<u64>> {
    let mut steps = Vec::new();
    for folder in folders {
        let Ok(entries) = std::fs::read_dir(folder) else { continue };
        for entry in entries.flatten() {
            let Ok(bytes) = std::fs::read(entry.path().join(TRAINER)) else {
                continue;
            };
            let Ok(trainer) = serde_json::from_slice::<Json>(&bytes) else { continue };
            let file =
                trainer.get("callbacks").and_then(|c| c.get(owner)).and_then(|s| s.get("best_weights"));
            steps.push(file.and_then(Json::as_str).and_then(step_of_file));
        }
    }
    steps
}

/// The global step in a best weights file's name, `best-step-<N>.bpk`.
fn step_of_file(name: &str) -> Option<u64> {
    name.strip_prefix("best-step-")?.strip_suffix(".bpk")?.parse().ok()
}

/// Remove the `best-step-N.bpk` files of `dir` other than those of the steps in `keep`.
fn remove_other_weights(dir: &Path, keep: &[Option<u64>]) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let Some(step) = entry.file_name().to_str().and_then(step_of_file) else { continue };
        if !keep.contains(&Some(step)) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

impl<M: Module + 'static> Callback<M> for EarlyStopping {
    fn name(&self) -> Cow<'static, str> {
        Cow::Owned(self.label())
    }

    fn save_state(&self) -> Result<Option<Json>> {
        let weights = match (&self.best_weights, self.restore_best_weights) {
            (Some(weights), true) => {
                self.write_best_weights::<M>(weights)?;
                Json::from(Self::weights_file(weights.global_step))
            }
            _ => Json::Null,
        };
        let mut state = json!({
            "wait": self.wait,
            "best": self.best.map(json_f64),
            "best_epoch": self.best_epoch,
            "stopped_epoch": self.stopped_epoch,
            "seen": self.watched.seen,
            "best_weights": weights,
        });
        if let Some(rule) = &self.rule {
            state["rule"] = rule.save(&self.label())?;
        }
        Ok(Some(state))
    }

    fn load_state(&mut self, state: Json) -> Result<()> {
        let owner = self.label();
        self.wait = state_u64(&state, "wait", &owner)?;
        self.best = state_f64(&state, "best", &owner)?;
        self.best_epoch = state_u64(&state, "best_epoch", &owner)?;
        self.stopped_epoch = state_u64(&state, "stopped_epoch", &owner)?;
        self.watched.seen = state_u64(&state, "seen", &owner)? as usize;
        self.pending_weights = state.get("best_weights").and_then(Json::as_str).map(str::to_string);
        if let (Some(rule), Some(saved)) = (self.rule.as_mut(), state.get("rule")) {
            rule.load(saved.clone(), &owner)?;
        }
        Ok(())
    }

    fn setup(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let owner = self.label();
        // The program's rule needs no direction, unless the best weights are kept.
        if self.rule.is_none() || self.restore_best_weights {
            self.watched.declare(self.mode.better(&self.watched.name, &owner)?, ctx.monitors());
        }
        if self.min_delta.is_nan() {
            return Err(Error::invalid(format!("{owner}: min_delta is NaN")));
        }
        if self.baseline.is_some_and(f64::is_nan) {
            return Err(Error::invalid(format!("{owner}: the baseline is NaN")));
        }
        self.log_dir = ctx.log_dir().to_path_buf();
        Ok(())
    }

    fn before_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.checkpoint_folders = ctx.checkpoint_folders();
        let Some(file) = self.pending_weights.take() else { return Ok(()) };
        if !self.restore_best_weights {
            return Ok(());
        }
        let path = self.weights_dir().join(&file);
        let step = step_of_file(&file);
        let loaded = ModuleRecord::load(&path)
            .and_then(|record| ctx.model().clone().try_load_record(record))
            .map_err(|e| format!("{e:?}"));
        match (loaded, step) {
            (Ok(model), Some(global_step)) => {
                self.best_weights = Some(BestWeights { model: Box::new(model), global_step });
                self.written.set([Some(global_step), None]);
            }
            (Err(error), _) => crate::logging::warn!(
                "{}: cannot read the best weights {}: {error}; the weights of the next evaluated epoch take their place",
                self.label(),
                path.display()
            ),
            (Ok(_), None) => crate::logging::warn!(
                "{}: the saved best weights' name `{file}` is malformed; the weights of the next evaluated epoch take their place",
                self.label()
            ),
        }
        Ok(())
    }

    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let owner = self.label();
        let fresh = match self.rule {
            // neon's rule: a statistic not put yet is an epoch without an evaluation.
            Some(_) => self.watched.fresh_if_put(ctx.monitors_ref()),
            None => self.watched.fresh(ctx.monitors_ref(), &owner)?,
        };
        let Some(current) = fresh else { return Ok(()) };
        let epoch = ctx.epoch_num();
        if epoch <= self.start_from_epoch {
            return Ok(());
        }
        if self.rule.is_some() {
            return self.apply_rule(ctx, current, &owner);
        }
        if self.restore_best_weights && self.best_weights.is_none() {
            self.best_weights = Some(BestWeights::now(ctx));
            self.best_epoch = epoch;
        }
        self.wait += 1;
        if self.improves(current, self.best) {
            self.record_best(ctx, current);
            if self.baseline.is_none() || self.improves(current, self.baseline) {
                self.wait = 0;
            }
            return Ok(());
        }
        // The first evaluation never stops: its value, unless NaN, is the first best (and a NaN
        // leaves `best` empty with `wait` at 1).
        let first_evaluation = self.best.is_none() && self.wait == 1;
        if self.wait >= self.patience && !first_evaluation {
            self.stopped_epoch = epoch;
            let best = self.best.map_or_else(|| "none".to_string(), |b| b.to_string());
            ctx.request_stop(format!(
                "{owner}: no improvement for {} evaluations (patience {}); best {best} at epoch {}",
                self.wait, self.patience, self.best_epoch
            ));
        }
        Ok(())
    }

    fn after_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if self.rule.is_some() {
            self.watched.warn_if_never_put(ctx.monitors_ref(), &self.label());
        }
        if self.stopped_epoch > 0 && self.verbose {
            crate::logging::info!("Epoch {}: early stopping", self.stopped_epoch);
        }
        if !self.restore_best_weights {
            return Ok(());
        }
        let (Some(weights), Some(model)) = (&self.best_weights, ctx.state.model.as_mut()) else {
            return Ok(());
        };
        let best = weights.model.downcast_ref::<M>().ok_or_else(|| {
            Error::msg(format!("{}: the kept weights are not of the model's type", self.label()))
        })?;
        if self.verbose {
            crate::logging::info!(
                "Restoring model weights from the end of the best epoch: {}.",
                self.best_epoch
            );
        }
        *model = best.clone();
        Ok(())
    }
}
