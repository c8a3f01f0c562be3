//! The end-of-training summary: how the run ended, how long it took, each scalar's last and best
//! value, where the logs and the latest checkpoint are ([`TrainSummary`]), and the default
//! callback that prints it ([`TrainSummaryPrinter`]).

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

#[cfg(doc)]
use super::{DefaultCallbacks, TrainReport};
use crate::callback::Outcome;
use crate::callback::{Callback, Counters};
use crate::monitor::printer::positional;
use crate::state::Direction;
use crate::state::{Better, Monitors};
use crate::track::humanize_duration;

/// Where a scalar was at its best.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BestValue {
    /// The best value.
    pub value: f64,
    /// The global step it was put at.
    pub global_step: u64,
    /// The epoch it belongs to: the first epoch that ended at or after that step (the epoch
    /// running then, for a value of an epoch that did not end).
    pub epoch_num: u64,
    /// Which way the scalar improves (see [`TrainSummary`] for the rule).
    pub better: Better,
}

/// One monitored scalar at the end of training.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalarSummary {
    /// The scalar's name.
    pub name: String,
    /// Its last value.
    pub last: f64,
    /// The global step its last value was put at.
    pub last_step: u64,
    /// Its best value and where, or `None` when the direction is unknown (see
    /// [`TrainSummary`]) or no value is a number.
    pub best: Option<BestValue>,
}

/// What a run did, in a few lines (burn-train's `LearnerSummary`, always on): how it ended, its wall time, its steps and steps per second,
/// each monitored scalar's last value and best value with the step and epoch it was reached at,
/// the log directory and the latest checkpoint. It is [`TrainReport::summary`]; its `Display` is
/// what the [`TrainSummaryPrinter`] prints at the end of training:
///
/// ```text
/// stoker: training finished after epoch 3 (global step 12): 12 steps in 1.62 seconds, 7.41 steps/s
///   scalar    last  best
///   accuracy  0.7   0.9 (step 8, epoch 2)
///   lr_seen   0.3   -
///   val_loss  2     1 (step 8, epoch 2)
///   logs: train_log/mnist
///   latest checkpoint: train_log/mnist/checkpoints/step-12
/// ```
///
/// Which way a scalar improves: the way a callback watching it declared
/// ([`Monitors::declare_better`]: `MinSaver` / `MaxSaver`, `SaveBestState`, `EarlyStopping` and
/// `ReduceLrOnPlateau` declare theirs), otherwise what its name tells by the rule of
/// [`Direction::resolve`] (a word such as `loss`, `cost`, `error`, `wrong`: lower; `accuracy`,
/// `precision`, `f1`, `auc`: higher). A scalar neither tells (a learning rate, a throughput, a
/// time) has no best: the summary shows only its last value. Of equal best values, the first
/// counts; values that are not numbers (NaN) are never the best.
///
/// The scalars are those of the whole history: a resumed run includes what the runs it continues
/// put. `steps`, `wall_time` and `steps_per_second` are this run's own.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainSummary {
    /// How the run ended.
    pub outcome: Outcome,
    /// The wall time of the run, from the callbacks' setup to the end of `after_train` and the
    /// monitors' last flush.
    pub wall_time: Duration,
    /// The steps this run made (a resumed run counts only its own).
    pub steps: u64,
    /// The global step at the end.
    pub global_step: u64,
    /// The epoch at the end.
    pub epoch_num: u64,
    /// Every scalar put (the monitors' history), by name.
    pub scalars: Vec<ScalarSummary>,
    /// The log directory.
    pub log_dir: PathBuf,
    /// The latest complete checkpoint written or resumed from in this run, if any.
    pub checkpoint: Option<PathBuf>,
}

impl TrainSummary {
    /// The summary of a run that ended with `outcome`, from the monitors' history.
    pub(super) fn new(
        outcome: Outcome,
        wall_time: Duration,
        steps: u64,
        counters: &Counters,
        monitors: &Monitors,
        log_dir: PathBuf,
        checkpoint: Option<PathBuf>,
    ) -> TrainSummary {
        let epochs = monitors.epoch_stats();
        let epoch_of = |step: u64| {
            epochs.iter().find(|e| e.global_step >= step).map_or(counters.epoch_num, |e| e.epoch_num)
        };
        let scalars = monitors
            .scalar_names()
            .filter_map(|name| {
                let history = monitors.history(name);
                let &(last_step, last) = history.last()?;
                let better = monitors.better(name).or_else(|| Direction::Auto.resolve_better(name));
                let best = better.and_then(|better| {
                    let improves = |value: f64, best: f64| match better {
                        Better::Lower => value < best,
                        Better::Higher => value > best,
                    };
                    let mut best: Option<(u64, f64)> = None;
                    for &(step, value) in history.iter().filter(|(_, v)| !v.is_nan()) {
                        if best.is_none_or(|(_, b)| improves(value, b)) {
                            best = Some((step, value));
                        }
                    }
                    best.map(|(step, value)| BestValue {
                        value,
                        global_step: step,
                        epoch_num: epoch_of(step),
                        better,
                    })
                });
                Some(ScalarSummary { name: name.to_string(), last, last_step, best })
            })
            .collect();
        TrainSummary {
            outcome,
            wall_time,
            steps,
            global_step: counters.global_step,
            epoch_num: counters.epoch_num,
            scalars,
            log_dir,
            checkpoint,
        }
    }

    /// This run's steps per second of wall time (0 when no time passed).
    pub fn steps_per_second(&self) -> f64 {
        let seconds = self.wall_time.as_secs_f64();
        if seconds > 0.0 { self.steps as f64 / seconds } else { 0.0 }
    }
}

/// `value` with at most 6 significant digits, no trailing zeros (`2`, `0.7`, `0.123457`), or in
/// scientific notation when it is very large or small (`1.5e-7`).
fn number(value: f64) -> String {
    positional(value, 6).unwrap_or_else(|| {
        let text = format!("{value:.5e}");
        let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
        format!("{}e{exponent}", mantissa.trim_end_matches('0').trim_end_matches('.'))
    })
}

impl fmt::Display for TrainSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let how = match &self.outcome {
            Outcome::Finished => "finished".to_string(),
            Outcome::Stopped(reason) => format!("stopped ({reason})"),
            Outcome::Interrupted { signal, .. } => format!("interrupted by {signal}"),
            Outcome::NonFinite { reason, .. } => format!("stopped: {reason}"),
            Outcome::Failed => "failed".to_string(),
        };
        writeln!(
            f,
            "stoker: training {how} after epoch {} (global step {}): {} step{} in {}, {} steps/s",
            self.epoch_num,
            self.global_step,
            self.steps,
            if self.steps == 1 { "" } else { "s" },
            humanize_duration(self.wall_time),
            number(self.steps_per_second()),
        )?;
        if !self.scalars.is_empty() {
            let rows: Vec<(&str, String, String)> = self
                .scalars
                .iter()
                .map(|s| {
                    let best = match s.best {
                        Some(b) => {
                            format!("{} (step {}, epoch {})", number(b.value), b.global_step, b.epoch_num)
                        }
                        None => "-".to_string(),
                    };
                    (s.name.as_str(), number(s.last), best)
                })
                .collect();
            let name_width = rows.iter().map(|r| r.0.len()).chain(["scalar".len()]).max().unwrap_or(0);
            let last_width = rows.iter().map(|r| r.1.len()).chain(["last".len()]).max().unwrap_or(0);
            writeln!(f, "  {:<name_width$}  {:<last_width$}  best", "scalar", "last")?;
            for (name, last, best) in rows {
                writeln!(f, "  {name:<name_width$}  {last:<last_width$}  {best}")?;
            }
        }
        writeln!(f, "  logs: {}", self.log_dir.display())?;
        match &self.checkpoint {
            Some(path) => writeln!(f, "  latest checkpoint: {}", path.display()),
            None => writeln!(f, "  latest checkpoint: none"),
        }
    }
}

/// Prints the [`TrainSummary`] on stdout when training ends, whatever the outcome (finished,
/// stopped, interrupted, non-finite, failed), on the chief only. One of the
/// [`DefaultCallbacks`] (`train_summary`; `None` turns the printing off, and the summary is still
/// in [`TrainReport::summary`]).
///
/// Only the trainer knows how a run ended, and only after every callback's `after_train`: so
/// this callback takes no event (it costs nothing at any step); the trainer prints the summary
/// when the one in its default callbacks is `Some`. Among a run's own callbacks it prints nothing.
#[derive(Debug, Clone, Default)]
pub struct TrainSummaryPrinter {
    _private: (),
}
crate::kind::kind!(TrainSummaryPrinter);

impl TrainSummaryPrinter {
    /// Print the summary at the end of training.
    pub fn new() -> Self {
        TrainSummaryPrinter { _private: () }
    }

    /// Print `summary` on stdout.
    pub(super) fn print(&self, summary: &TrainSummary) {
        print!("{summary}");
    }
}

impl<M> Callback<M> for TrainSummaryPrinter {
    fn takes_after_batch(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::number;

    #[test]
    fn numbers_have_six_significant_digits_at_most() {
        assert_eq!(number(2.0), "2");
        assert_eq!(number(0.7), "0.7");
        assert_eq!(number(0.1 + 0.2), "0.3");
        assert_eq!(number(0.123456789), "0.123457");
        assert_eq!(number(123456.7), "123457");
        assert_eq!(number(-3.25), "-3.25");
        assert_eq!(number(1.5e-7), "1.5e-7");
        assert_eq!(number(2e9), "2e9");
        assert_eq!(number(1.23456789e-7), "1.23457e-7");
        assert_eq!(number(0.0), "0");
    }
}
