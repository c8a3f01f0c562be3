//! A monitored scalar that a callback watches for its best value: the savers of the best model
//! (`MinSaver` / `MaxSaver`, `SaveBestState`) and the early stop (`EarlyStopping`).

use super::monitors::{Better, Monitors};
use crate::error::{Error, Result};

/// A monitored scalar read at each evaluation: its name, which way it improves (declared to the
/// [`Monitors`] at setup, so that the run's summary agrees with the callback), and how much of its
/// history the last evaluation read.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Watched {
    pub(crate) name: String,
    /// The length of the statistic's history at the last evaluation ([`fresh`](Self::fresh)).
    pub(crate) seen: usize,
    /// Which way it improves: lower until [`declare`](Self::declare) says otherwise.
    better: Better,
}

impl Watched {
    pub(crate) fn new(name: impl Into<String>) -> Self {
        Watched { name: name.into(), seen: 0, better: Better::Lower }
    }

    /// At setup: the scalar improves the `better` way, which the monitors are told.
    pub(crate) fn declare(&mut self, better: Better, monitors: &mut Monitors) {
        self.better = better;
        monitors.declare_better(&self.name, better);
    }

    /// Whether higher values are better.
    pub(crate) fn maximize(&self) -> bool {
        self.better == Better::Higher
    }

    /// Whether `value` is a new best after `best` (none yet: any value is): strictly better, and
    /// never NaN.
    pub(crate) fn beats(&self, value: f64, best: Option<f64>) -> bool {
        !value.is_nan() && best.is_none_or(|best| if self.maximize() { value > best } else { value < best })
    }

    /// The statistic's latest value, if it was ever put.
    pub(crate) fn latest(&self, monitors: &Monitors) -> Option<f64> {
        monitors.history(&self.name).last().map(|&(_, value)| value)
    }

    /// The statistic's latest value when one was put since the last call; `None` when none was
    /// (its producer runs less often: Keras skips such epochs too); an error naming the scalars
    /// the monitors hold when the statistic was never put.
    pub(crate) fn fresh(&mut self, monitors: &Monitors, owner: &str) -> Result<Option<f64>> {
        if monitors.history(&self.name).is_empty() {
            return Err(Error::invalid(self.never_put(monitors, owner)));
        }
        Ok(self.fresh_if_put(monitors))
    }

    /// The statistic's latest value when one was put since the last call; `None` when none was,
    /// including when it was never put (neon's `_get_cached_epoch_loss`: an epoch without an
    /// evaluation is skipped, as `--eval_freq 2` leaves epoch 1).
    pub(crate) fn fresh_if_put(&mut self, monitors: &Monitors) -> Option<f64> {
        let history = monitors.history(&self.name);
        let &(_, value) = history.last()?;
        if history.len() == self.seen {
            return None;
        }
        self.seen = history.len();
        Some(value)
    }

    /// Warns (at the end of a run) when the statistic was never put, naming the scalars the
    /// monitors hold: a misspelt name, or a run too short for its evaluation.
    pub(crate) fn warn_if_never_put(&self, monitors: &Monitors, owner: &str) {
        if monitors.history(&self.name).is_empty() {
            crate::logging::warn!("{} (it was never evaluated in this run)", self.never_put(monitors, owner));
        }
    }

    /// "no scalar named ... has been put", with the scalars the monitors hold.
    fn never_put(&self, monitors: &Monitors, owner: &str) -> String {
        let names: Vec<String> = monitors.scalar_names().map(|n| format!("`{n}`")).collect();
        let held = if names.is_empty() {
            "no scalar has been put yet".to_string()
        } else {
            format!("the monitors hold {}", names.join(", "))
        };
        format!(
            "{owner}: no scalar named `{}` has been put; {held}. Watch one of those, or order this \
             callback after the one that puts `{}` (`#[order(after = InferenceRunner)]`, or later in the tuple)",
            self.name, self.name
        )
    }
}
