//! The test phase: a test set evaluated once, after training (Lightning's `trainer.test`, Keras's
//! `evaluate`), by a runner the trainer was given ([`Trainer::test`]), with the weights training
//! left (the best ones after `EarlyStopping`'s `restore_best_weights`) or those of a best copy
//! ([`Trainer::test_weights`]); its results go to the monitors and the report.

use std::collections::BTreeMap;
use std::path::Path;

use burn::module::Module;
use burn::store::ModuleRecord;

#[cfg(doc)]
use super::Trainer;
use super::run::Run;
use crate::callback::{Callback, Callbacks, Context, Outcome, PassEnd, Phase};
use crate::error::{Error, Result};
use crate::saver::checkpoint::MODEL_FILE;

/// The runner of the test set, taken by [`Trainer::test`].
pub(super) struct TestPhase<M> {
    runner: Box<dyn Callback<M> + Send>,
}

impl<M> TestPhase<M> {
    /// The test phase of `runner`.
    pub(super) fn new(runner: impl Callback<M> + Send + 'static) -> Self {
        TestPhase { runner: Box::new(runner) }
    }
    /// Whether the runner runs on the chief alone (not `data_parallel`).
    pub(super) fn chief_only(&self) -> bool {
        self.runner.chief_only()
    }
}

/// Whether a run that ended so is tested: a run that ran to its end or was stopped by a
/// callback (an early stop).
fn tested(outcome: &Outcome) -> bool {
    matches!(outcome, Outcome::Finished | Outcome::Stopped(_))
}

/// Every scalar's number of values, to tell the test phase's from what came before.
fn counts(run_monitors: &crate::state::Monitors) -> BTreeMap<String, usize> {
    run_monitors.scalar_names().map(|name| (name.to_string(), run_monitors.history(name).len())).collect()
}

impl<M: Module, K, C: Callbacks<M, K>> Run<M, C, K> {
    /// The test phase, after every `after_train` and before the monitors close: the pass, then
    /// the scalars it put. Nothing off the chief, without a runner, or after a run that
    /// [is not tested](tested).
    pub(super) fn test_phase(
        &mut self,
        test: Option<TestPhase<M>>,
        outcome: &Outcome,
        ok: bool,
        weights: Option<&Path>,
    ) -> Result<Vec<(String, f64)>> {
        let Some(mut test) = test else { return Ok(Vec::new()) };
        if !self.is_chief() || self.state.model.is_none() {
            return Ok(Vec::new());
        }
        if !ok || !tested(outcome) {
            crate::logging::info!("the test set is not evaluated: training ended {outcome:?}");
            return Ok(Vec::new());
        }
        let before = counts(self.state.monitors_ref());
        let trained = match weights {
            Some(path) => self.load_test_weights(path)?,
            None => None,
        };
        let pass = self.test_pass(&mut *test.runner);
        if let Some(trained) = trained {
            self.state.model = Some(trained);
        }
        if let Err(error) = pass {
            return Err(Error::context("the test phase", error));
        }
        let monitors = self.state.monitors_ref();
        Ok(monitors
            .scalar_names()
            .filter(|name| monitors.history(name).len() > before.get(*name).copied().unwrap_or(0))
            .filter_map(|name| Some((name.to_string(), monitors.latest(name)?)))
            .collect())
    }

    /// The runner's setup and its one pass, with [`Context::training`] `false`: the pass it
    /// asks for from its `trigger` (no other callback takes part), a cancel ending it.
    fn test_pass(&mut self, runner: &mut dyn Callback<M>) -> Result<()> {
        runner.setup(&mut Context::new(&mut self.state, Phase::Once))?;
        self.state.control.raised = None;
        self.state.control.validating = true;
        let pass = self.test_batches(runner);
        self.state.control.validating = false;
        self.state.control.raised = None;
        self.state.pass = None;
        pass
    }

    /// The test runner's pass: the one it hands over, run batch by batch, or its own.
    fn test_batches(&mut self, runner: &mut dyn Callback<M>) -> Result<()> {
        runner.trigger(&mut Context::new(&mut self.state, Phase::Around))?;
        if self.state.control.raised.take().is_none() {
            return Ok(());
        }
        let Some(mut pass) = self.state.pass.take() else {
            return runner.validate(&mut Context::new(&mut self.state, Phase::Around));
        };
        let mut end = PassEnd { batches: 0, cut_short: None, cancelled: false };
        let mut ctx = Context::new(&mut self.state, Phase::Around);
        let mut batches = pass.batches(&mut ctx);
        let ran = loop {
            if let Some(signal) = ctx.signal_received() {
                end.cut_short = Some(signal);
                break Ok(());
            }
            match batches.next() {
                None => break Ok(()),
                Some(Err(error)) => break Err(error),
                Some(Ok(())) => {}
            }
            // No callback takes a test batch's output: the prediction is made, its view let go.
            let _ = batches.predict();
            if let Err(error) = batches.score().and_then(|()| batches.infer()) {
                break Err(error);
            }
            end.batches += 1;
        };
        drop(batches);
        let ended = ran.and_then(|()| pass.end(&mut ctx, end));
        self.state.pass = Some(pass);
        runner.validate(&mut Context::new(&mut self.state, Phase::Around))?;
        ended
    }

    /// The weights at `path` (from the log directory when relative) put in the model's place;
    /// returns the weights training left, to put back. `None` when there is no such file.
    fn load_test_weights(&mut self, path: &Path) -> Result<Option<M>> {
        let path = self.state.log_dir.join(path);
        let file = if path.is_dir() { path.join(MODEL_FILE) } else { path };
        if !file.is_file() {
            crate::logging::info!(
                "the test set is evaluated with the weights training left: {} does not exist",
                file.display()
            );
            return Ok(None);
        }
        let model = self.state.model.as_ref().expect("checked by the caller");
        let loaded = ModuleRecord::load(&file)
            .map_err(|e| Error::context(format!("the test weights {}", file.display()), format!("{e:?}")))?;
        let loaded = model.clone().try_load_record(loaded).map_err(|e| {
            Error::context(
                format!("the test weights {} do not fit the model", file.display()),
                format!("{e:?}"),
            )
        })?;
        Ok(self.state.model.replace(loaded))
    }
}
