//! What a callback asks of the loop at once: a cancel ([`Context::cancel`], what fastai's
//! `Cancel*Exception`s do) or a validation pass ([`Context::request_validation`]). Both are
//! values the context records while the event is delivered, never an error: the callback
//! returns `Ok(())`, the trainer reads them when it returns. And the validation pass a callback
//! hands the trainer with its request (`ValidationPass`, beside the state in `context.rs`), which
//! the trainer runs batch by batch as a phase of its loop, delivering fastai's batch events to
//! every callback that takes them.

use super::context::{Context, Raised, ValidationPass};
use crate::error::{Cancel, Result};

impl<M> Context<'_, M> {
    /// Cancel at once, as fastai's `Cancel*Exception`s do (what returning a [`Flow`] cancel
    /// does): the callbacks after this one do not receive the event, and the loop acts on the
    /// cancel where it applies (see [`Flow::CancelBatch`] and the others). Returns `Ok(())`: a
    /// cancel is recorded here, never an error, so code that wraps every error it sees does not
    /// change it. The first cancel of an event counts.
    ///
    /// ```
    /// use burn_stoker::callback::{Callback, Cancel, Context};
    ///
    /// struct SkipFirst;
    ///
    /// impl<M> Callback<M> for SkipFirst {
    ///     fn before_step(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
    ///         if ctx.local_step() == 0 { ctx.cancel(Cancel::Batch) } else { Ok(()) }
    ///     }
    /// }
    /// ```
    ///
    /// [`Flow`]: crate::callback::Flow
    /// [`Flow::CancelBatch`]: crate::callback::Flow::CancelBatch
    pub fn cancel(&mut self, cancel: Cancel) -> Result<()> {
        self.raise(Raised::Cancel(cancel));
        Ok(())
    }
    /// Ask for a validation pass, from a callback's trigger (or any event between steps). When
    /// this callback returns, the trainer delivers `before_validate` to every callback, runs the
    /// pass, delivers `after_validate` to every callback, then goes on delivering the event to
    /// the callbacks after this one. Returns `Ok(())`: the request is recorded, never an error.
    ///
    /// [`InferenceRunner`](crate::inference::InferenceRunner) asks from its `trigger` and hands
    /// the trainer its data, forward function and inferencers: the trainer runs the batches
    /// itself, with fastai's batch events (`before_batch`, `after_pred`, `after_loss`, their
    /// cancels) to every callback that takes them. A callback of one's own runs its pass in
    /// [`validate`](crate::callback::Callback::validate), delivered to it alone between
    /// `before_validate` and `after_validate`.
    ///
    /// Asked from where no pass can run (`setup`, `after_train`, inside a step, during another
    /// pass), it ends training with an error saying so.
    ///
    /// ```
    /// use burn_stoker::callback::{Callback, Context};
    ///
    /// struct Validator { passes: u32 }
    ///
    /// impl<M> Callback<M> for Validator {
    ///     fn trigger(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
    ///         ctx.request_validation()
    ///     }
    ///     fn validate(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
    ///         assert!(!ctx.training());
    ///         self.passes += 1; // run the model over the validation data here
    ///         Ok(())
    ///     }
    /// }
    /// ```
    pub fn request_validation(&mut self) -> Result<()> {
        self.raise(Raised::Validate);
        Ok(())
    }
    /// Ask for a validation pass that the trainer runs from `pass`, handed back in `validate`.
    pub(crate) fn request_validation_pass(&mut self, pass: Box<dyn ValidationPass<M>>) {
        self.state.pass = Some(pass);
        self.raise(Raised::Validate);
    }
    /// The pass handed to the trainer, back after it ran (in `validate`).
    pub(crate) fn take_validation_pass(&mut self) -> Option<Box<dyn ValidationPass<M>>> {
        self.state.pass.take()
    }
    /// Record what the callback asks of the loop; the first request of an event counts.
    #[inline]
    fn raise(&mut self, raised: Raised) {
        self.state.control.raised.get_or_insert(raised);
    }
    /// Whether a callback asked something of the loop at once, not yet taken: the callbacks
    /// after it are skipped.
    #[inline(always)]
    pub(crate) fn raised(&self) -> bool {
        self.state.control.raised.is_some()
    }
    /// Ask the trainer to cancel this validation pass after the batch whose 0-based index
    /// reaches `pct` of the pass (fastai's `ShortEpochCallback` with `short_valid`), from
    /// `before_validate`.
    pub(crate) fn shorten_validation(&mut self, pct: f64) {
        self.state.control.short_validation = Some(pct);
    }
}
