//! The callbacks that take fastai's batch events (`before_batch`, `after_pred`), resolved at
//! setup, and how a validation pass reaches them: the training step delivers them itself
//! (`run_step`); a validation pass runs inside one callback's `validate`, which reaches the
//! others through [`Context::before_batch`] and [`Context::after_pred`], the dispatcher lending
//! them to it for the pass.

use std::borrow::Cow;

use super::{Activity, Roster, Whereabouts, wrap};
use crate::callback::{
    BatchHooks, Callback, Callbacks, Context, Event, Phase, StepHooks, TrainState, deliver,
};
use crate::error::{Break, Error, Result};

/// The callbacks that take the batch (`before_batch`) and the model's output (`after_pred`),
/// in run order.
#[derive(Debug, Default)]
pub(in crate::trainer) struct BatchTakers {
    pub(super) batch: Vec<usize>,
    pub(super) pred: Vec<usize>,
    /// Either is not empty: the one flag a step reads.
    any: bool,
}

impl BatchTakers {
    /// From the run order and every callback's hooks.
    pub(super) fn new(order: &[usize], hooks: &[StepHooks]) -> Self {
        let batch: Vec<usize> = order.iter().copied().filter(|&i| hooks[i].batch).collect();
        let pred: Vec<usize> = order.iter().copied().filter(|&i| hooks[i].pred).collect();
        BatchTakers { any: !batch.is_empty() || !pred.is_empty(), batch, pred }
    }

    /// Whether some callback takes the batch or the model's output: the step then goes the cold
    /// way, which delivers them.
    #[inline]
    pub(in crate::trainer) fn any(&self) -> bool {
        self.any
    }

    /// Whether some callback takes the batch.
    pub(in crate::trainer) fn batch(&self) -> bool {
        !self.batch.is_empty()
    }

    /// Whether some callback takes the model's output.
    pub(in crate::trainer) fn pred(&self) -> bool {
        !self.pred.is_empty()
    }

    /// Whether a validation pass run by callback `runner` has other callbacks to lend it.
    pub(super) fn lend_to(&self, runner: usize) -> bool {
        self.batch.iter().chain(&self.pred).any(|&i| i != runner)
    }
}

/// Callback `runner`'s `validate`, with the callbacks that take the batch events lent to it
/// through its context.
pub(super) fn validate<M, K, C: Callbacks<M, K>>(
    callbacks: &mut C,
    runner: usize,
    state: &mut TrainState<M>,
    roster: &Roster,
    at: &mut Whereabouts,
) -> Result<()> {
    let mut members = Vec::with_capacity(callbacks.len());
    callbacks.members(&mut members);
    let (before, rest) = members.split_at_mut(runner);
    let (running, after) = rest.split_first_mut().expect("the runner is a member of the set");
    let mut lent = Lent { before, after, runner, takers: &roster.batch_takers, names: &roster.names, at };
    running.validate(&mut Context { state, phase: Phase::Around, batch_hooks: Some(&mut lent) })
}

/// The callbacks of the set but the one running the pass (`before` it and `after` it in flat
/// index), lent to it.
struct Lent<'a, 'c, M> {
    before: &'a mut [&'c mut (dyn Callback<M> + 'c)],
    after: &'a mut [&'c mut (dyn Callback<M> + 'c)],
    runner: usize,
    takers: &'a BatchTakers,
    names: &'a [Cow<'static, str>],
    at: &'a mut Whereabouts,
}

impl<M> BatchHooks<M> for Lent<'_, '_, M> {
    fn deliver(&mut self, state: &mut TrainState<M>, event: Event<'_>) -> Result<()> {
        let takers = match event {
            Event::BeforeBatch(_) => &self.takers.batch,
            _ => &self.takers.pred,
        };
        let running = self.at.activity;
        for &i in takers.iter().filter(|&&i| i != self.runner) {
            let callback = match i < self.runner {
                true => &mut *self.before[i],
                false => &mut *self.after[i - self.runner - 1],
            };
            self.at.activity = Activity::Callback(i, event.name());
            if let Err(error) = deliver(callback, event, &mut Context::new(&mut *state, Phase::Around)) {
                return Err(wrap(&self.names[i], event.name(), uncancellable(error)));
            }
        }
        self.at.activity = running;
        Ok(())
    }
}

/// A cancel returned from a batch event of a validation pass: an error saying why (fastai's
/// `CancelBatchException` has no validation counterpart here; the pass runs every batch).
fn uncancellable(error: Error) -> Error {
    match error {
        Error::Break(Break::Cancel(cancel)) => Error::msg(format!(
            "{} during a validation pass: a validation batch cannot be cancelled (test `ctx.training()` and cancel training batches only)",
            cancel.flow_name()
        )),
        other => other,
    }
}

impl<C, M, K> super::Dispatcher<C, M, K> {
    /// The error for callbacks that take the model's output under a step function that did not
    /// hand it over with `Step::pred`.
    #[cold]
    pub(in crate::trainer) fn pred_not_handed_over(&self) -> Error {
        let roster = &self.roster;
        let takers: Vec<String> =
            roster.batch_takers.pred.iter().map(|&i| format!("`{}`", roster.names[i])).collect();
        Error::msg(format!(
            "callbacks {} take the model's output in after_pred, but the training step did not hand it over: call `step.pred(output)` on the model's output in the step function, before the loss",
            takers.join(", ")
        ))
    }
}
