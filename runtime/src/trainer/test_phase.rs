//! The test phase: a test set evaluated once, after training (Lightning's `trainer.test`, Keras's
//! `evaluate`), by a runner the trainer was given ([`Trainer::test`]), with the weights training
//! left (the best ones after `EarlyStopping`'s `restore_best_weights`) or those of a best copy
//! ([`Trainer::test_weights`]); its results go to the monitors and the report.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use burn::module::Module;
use burn::store::ModuleRecord;

use super::Trainer;
use super::run::Run;
use crate::callback::{Callback, Callbacks, Context, Outcome, Phase};
use crate::error::{Break, Cancel, Error, Result};
#[cfg(doc)]
use crate::inference::InferenceRunner;
use crate::saver::checkpoint::MODEL_FILE;

/// The runner of the test set, taken by [`Trainer::test`].
pub(super) struct TestPhase<M> {
    runner: Box<dyn Callback<M>>,
}

impl<M> TestPhase<M> {
    /// Whether the runner runs on the chief alone (not `data_parallel`).
    pub(super) fn chief_only(&self) -> bool {
        self.runner.chief_only()
    }
}

impl<M, D, C, K> Trainer<M, D, C, K> {
    /// Evaluate a test set once training ends (Lightning's `trainer.test`, Keras's `evaluate`):
    /// `runner`, an [`InferenceRunner`] over the test set whose inferencers name their results
    /// `test_...` (`.prefix("test")`: `test_accuracy`, `test_cost`), runs one pass after every
    /// callback's `after_train`, and its results go to the monitors: `stats.json` (a last row),
    /// TensorBoard and the other writers, the end-of-training summary, and
    /// [`TrainReport::test`](super::TrainReport::test) /
    /// [`TrainReport::latest`](super::TrainReport::latest).
    ///
    /// - **Weights.** The model as training leaves it: the best weights when an
    ///   [`EarlyStopping`](crate::stop::EarlyStopping) with `restore_best_weights` put them back
    ///   in its `after_train`, the final ones otherwise; or those of a best copy, with
    ///   [`test_weights`](Self::test_weights). The report's model stays the one training left.
    /// - **When.** After a run that ended without an error and was not interrupted
    ///   ([`Outcome::Finished`] or [`Outcome::Stopped`], an early stop included); after a
    ///   failure, a signal, a [`StopHandle`](crate::trainer::StopHandle) stop or non-finite
    ///   weights the test set is not evaluated (the log says so). An error of the pass fails the
    ///   run, with its report.
    /// - **Where.** On the chief, over the whole test set, the other ranks of a world doing
    ///   nothing: the runner must not be [`data_parallel`](InferenceRunner::data_parallel)
    ///   (refused before training starts). The runner is not one of the run's callbacks: it
    ///   takes no other event, and no callback receives the test set's batch events.
    ///
    /// ```no_run
    /// # use burn_stoker::prelude::*;
    /// # use burn::nn::{Linear, LinearConfig};
    /// # use burn::optim::SgdConfig;
    /// # use burn::tensor::{Device, Tensor};
    /// # use burn_stoker::inference::MulticlassStats;
    /// # let device = Device::default().autodiff();
    /// # let (train, valid, test): (Vec<(Tensor<2>, Tensor<1>)>, Vec<(Tensor<2>, Tensor<1>)>, Vec<(Tensor<2>, Tensor<1>)>) = (Vec::new(), Vec::new(), Vec::new());
    /// fn forward(model: &Linear, (x, label): (Tensor<2>, Tensor<1>), out: &mut Outputs) {
    ///     out.put("logits", model.forward(x));
    ///     out.put("label", label);
    /// }
    /// let model: Linear = LinearConfig::new(8, 3).init(&device);
    /// let report = Trainer::new(model, SgdConfig::new().init(), train)
    ///     .max_epoch(20)
    ///     .callbacks((
    ///         InferenceRunner::new(valid, forward).with(MulticlassStats::new("logits", "label", 3)),
    ///         EarlyStopping::new("val_accuracy").patience(3).restore_best_weights(true),
    ///     ))
    ///     .test(InferenceRunner::new(test, forward).with(MulticlassStats::new("logits", "label", 3).prefix("test")))
    ///     .train(|model: &Linear, (x, label): (Tensor<2>, Tensor<1>), _: &mut Step<'_>| {
    ///         let n = x.dims()[0];
    ///         burn::nn::loss::CrossEntropyLossConfig::new()
    ///             .init(&model.weight.device())
    ///             .forward(model.forward(x), label.int().reshape([n]))
    ///     })?;
    /// println!("test accuracy {:?}", report.latest("test_accuracy"));
    /// # Ok::<(), burn_stoker::Error>(())
    /// ```
    pub fn test(mut self, runner: impl Callback<M> + 'static) -> Self {
        self.test = Some(TestPhase { runner: Box::new(runner) });
        self
    }
    /// The weights the test set is evaluated with ([`test`](Self::test)): those of a burnpack
    /// or a checkpoint folder (its `model.bpk`), such as a `MinSaver` / `MaxSaver` best copy
    /// (`"checkpoints/min-val_loss"`) or a [`SaveBestState`](crate::saver::SaveBestState) file.
    /// A relative path is taken from the log directory. When the file does not exist (no best
    /// copy was written), the log says so and the weights training left are evaluated; one
    /// that is not a model of this architecture fails the run.
    pub fn test_weights(mut self, path: impl Into<PathBuf>) -> Self {
        self.settings.test_weights = Some(path.into());
        self
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
        let before = counts(&self.state.monitors);
        let trained = match weights {
            Some(path) => self.load_test_weights(path)?,
            None => None,
        };
        let pass = self.test_pass(&mut *test.runner);
        if let Some(trained) = trained {
            self.state.model = Some(trained);
        }
        match pass {
            Ok(()) | Err(Error::Break(Break::Cancel(Cancel::Valid))) => {}
            Err(error) => return Err(Error::context("the test phase", error)),
        }
        let monitors = &self.state.monitors;
        Ok(monitors
            .scalar_names()
            .filter(|name| monitors.history(name).len() > before.get(*name).copied().unwrap_or(0))
            .filter_map(|name| Some((name.to_string(), monitors.latest(name)?)))
            .collect())
    }

    /// The runner's setup and its one pass, with [`Context::training`] `false`.
    fn test_pass(&mut self, runner: &mut dyn Callback<M>) -> Result<()> {
        runner.setup(&mut Context::new(&mut self.state, Phase::Once))?;
        self.state.control.validating = true;
        let pass = runner.validate(&mut Context::new(&mut self.state, Phase::Around));
        self.state.control.validating = false;
        pass
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
