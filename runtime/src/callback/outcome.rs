//! How a run ended: [`Outcome`], which the trainer reports and `after_train`'s callbacks read
//! from their [`Context`](super::Context); and why training stops ([`StopReason`], recorded in
//! the run's [`Stop`]), from which the outcome follows.

use std::path::PathBuf;

/// Why training ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Every epoch up to `max_epoch` ran.
    Finished,
    /// A callback asked to stop (tensorpack's `StopTraining`), for this reason.
    Stopped(String),
    /// SIGINT or SIGTERM, or a [`StopHandle`](crate::trainer::StopHandle), stopped training at a step
    /// boundary; a checkpoint was written there (resume from it with [`Trainer::auto_resume`](crate::trainer::Trainer::auto_resume)).
    Interrupted {
        /// `"SIGINT"`, `"SIGTERM"`, or `"StopHandle"`.
        signal: String,
        /// The checkpoint written when the signal was handled.
        checkpoint: Option<PathBuf>,
    },
    /// The loss or the weights stopped being finite numbers, and training stopped at that step
    /// boundary without writing a checkpoint of them (Keras's and fastai's `TerminateOnNaN` stop
    /// the same way): [`TerminateOnNaN`](crate::debug::TerminateOnNaN) saw a NaN or infinite
    /// loss, or the trainer's check before writing a checkpoint saw a non-finite loss or weights.
    /// The last good checkpoint stays the latest: [`Trainer::auto_resume`](crate::trainer::Trainer::auto_resume) continues from it.
    ///
    /// In data-parallel training the rank that saw it ends with this outcome, the others stop at
    /// the same step with [`Outcome::Stopped`].
    NonFinite {
        /// What was not finite, and where: `"the loss is NaN at global step 7 (epoch 2)"`,
        /// `"3 weights are not finite at global step 12 (epoch 3)"`.
        reason: String,
        /// The global step whose loss or weights were not finite.
        global_step: u64,
        /// The latest complete checkpoint (written or resumed from earlier in the run), if any.
        checkpoint: Option<PathBuf>,
    },
    /// An error ended training before it finished; it comes with this report in a
    /// [`TrainError`](crate::trainer::TrainError).
    Failed,
}

/// Why training stops, once something stopped it: the one record the run's [`Outcome`] follows
/// from ([`Stop::outcome`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum StopReason {
    /// A callback asked ([`Flow::Stop`](super::Flow::Stop),
    /// [`Context::request_stop`](super::Context::request_stop)), a callback cancelled the fit
    /// ([`Flow::CancelFit`](super::Flow::CancelFit): the text names it and the event), or
    /// another rank of a world asked every rank to stop.
    Asked(String),
    /// A signal, or the trainer's [`StopHandle`](crate::trainer::StopHandle).
    Interrupted {
        /// Its name: `"SIGINT"`, `"SIGTERM"`, `"StopHandle"`.
        signal: String,
        /// `"interrupted by <name>"`.
        reason: String,
    },
    /// The loss or the weights were not finite at this global step: no checkpoint is written
    /// from then on.
    NonFinite {
        /// What was not finite, and where.
        reason: String,
        /// The global step whose loss or weights were not finite.
        global_step: u64,
    },
}

impl StopReason {
    /// Which reason stands when two come: the higher, or the first of equals. A non-finite
    /// loss or weights outrank a signal (no checkpoint may be written of them), a signal
    /// outranks a request (its checkpoint was written).
    fn rank(&self) -> u8 {
        match self {
            StopReason::Asked(_) => 0,
            StopReason::Interrupted { .. } => 1,
            StopReason::NonFinite { .. } => 2,
        }
    }

    /// The reason in words (what [`Context::stop_requested`](super::Context::stop_requested)
    /// answers).
    pub(crate) fn text(&self) -> &str {
        match self {
            StopReason::Asked(reason)
            | StopReason::Interrupted { reason, .. }
            | StopReason::NonFinite { reason, .. } => reason,
        }
    }

    /// A signal (or the stop handle) of this name.
    pub(crate) fn interrupted(signal: &str) -> Self {
        StopReason::Interrupted { signal: signal.to_string(), reason: format!("interrupted by {signal}") }
    }
}

/// The run's stop: nothing yet, or the [`StopReason`] that stands. Every part of the trainer
/// that stops training records its reason here ([`record`](Self::record)), and the outcome is
/// read from it once the loop is over.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Stop(Option<StopReason>);

impl Stop {
    /// Record `reason`: it stands unless the reason already recorded ranks as high or higher
    /// (the first of equals wins; see [`StopReason`]'s ranks).
    pub(crate) fn record(&mut self, reason: StopReason) {
        if self.0.as_ref().is_none_or(|standing| reason.rank() > standing.rank()) {
            self.0 = Some(reason);
        }
    }

    /// Whether training stops.
    #[inline]
    pub(crate) fn is_stopping(&self) -> bool {
        self.0.is_some()
    }

    /// The reason that stands.
    pub(crate) fn reason(&self) -> Option<&StopReason> {
        self.0.as_ref()
    }

    /// Whether the loss or the weights were not finite (no checkpoint is written then).
    pub(crate) fn non_finite(&self) -> Option<&str> {
        match &self.0 {
            Some(StopReason::NonFinite { reason, .. }) => Some(reason),
            _ => None,
        }
    }

    /// Whether a signal or the stop handle stopped training, or something that outranks it
    /// (then a signal is not acted on: the run already stops without a checkpoint).
    pub(crate) fn interrupted(&self) -> bool {
        self.0.as_ref().is_some_and(|reason| reason.rank() >= 1)
    }

    /// How a training loop that returned without an error ended; `checkpoint` is the latest
    /// complete checkpoint.
    pub(crate) fn outcome(&self, checkpoint: Option<PathBuf>) -> Outcome {
        match self.0.clone() {
            None => Outcome::Finished,
            Some(StopReason::Asked(reason)) => Outcome::Stopped(reason),
            Some(StopReason::Interrupted { signal, .. }) => Outcome::Interrupted { signal, checkpoint },
            Some(StopReason::NonFinite { reason, global_step }) => {
                Outcome::NonFinite { reason, global_step, checkpoint }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Outcome, Stop, StopReason};

    fn asked(text: &str) -> StopReason {
        StopReason::Asked(text.into())
    }

    #[test]
    fn the_first_request_stands_and_the_outcome_follows_from_it() {
        let mut stop = Stop::default();
        assert_eq!(stop.outcome(None), Outcome::Finished);
        stop.record(asked("first"));
        stop.record(asked("second"));
        assert_eq!(stop.outcome(None), Outcome::Stopped("first".into()));
        assert_eq!(stop.reason().map(|r| r.text().to_string()), Some("first".into()));
        assert!(!stop.interrupted());
    }

    #[test]
    fn a_signal_outranks_a_request_and_a_non_finite_value_outranks_both() {
        let mut stop = Stop::default();
        stop.record(asked("asked"));
        stop.record(StopReason::interrupted("SIGINT"));
        stop.record(StopReason::interrupted("SIGTERM"));
        assert_eq!(stop.outcome(None), Outcome::Interrupted { signal: "SIGINT".into(), checkpoint: None });
        assert_eq!(stop.reason().map(|r| r.text().to_string()), Some("interrupted by SIGINT".into()));
        stop.record(StopReason::NonFinite { reason: "the loss is NaN".into(), global_step: 7 });
        stop.record(asked("later"));
        stop.record(StopReason::interrupted("SIGINT"));
        assert_eq!(stop.non_finite(), Some("the loss is NaN"));
        assert_eq!(
            stop.outcome(None),
            Outcome::NonFinite { reason: "the loss is NaN".into(), global_step: 7, checkpoint: None }
        );
    }
}
