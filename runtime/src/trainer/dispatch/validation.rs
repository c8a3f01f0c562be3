//! A validation pass, a phase of the loop the trainer owns (fastai's `_do_epoch_validate` inside
//! `_with_events(..., 'validate', CancelValidException)`): asked for by a callback
//! ([`Context::request_validation`](crate::callback::Context::request_validation)), run right
//! after that callback returns: `before_validate` to every callback, the pass, `after_validate`
//! to every callback. A pass handed over with the request
//! ([`InferenceRunner`](crate::inference::InferenceRunner)'s) runs here batch by batch, each
//! batch's events (`before_batch`, `after_pred`, `after_loss` to every callback that takes them,
//! `after_batch` to every callback), with fastai's cancels from any of them: `CancelBatch` skips
//! the rest of that batch (`after_cancel_batch`, then `after_batch`), `CancelValid` ends the pass
//! (`after_cancel_validate`). No callback runs while another's event is being delivered: nothing
//! is lent.

use std::cell::RefCell;

use super::halt::{Flowing, Halt, cancel_halt, misplaced_cancel, validation_misplaced};
use super::takers::deliver_in_batch;
use super::{Activity, Delivery, wrap};
use crate::callback::{
    Callbacks, Context, Event, PassEnd, Phase, StepLoss, ValidationBatches, ValidationPass,
};
use crate::error::{Cancel, Error};

impl<C, M> Delivery<'_, '_, C, M> {
    /// The validation pass callback `i` asked for during `event`, with fastai's events around it:
    /// a `CancelValid` from `before_validate` or the pass is followed by `after_cancel_validate`,
    /// then `after_validate` as always.
    pub(super) fn validation_pass<K>(mut self, i: usize, event: Event<'_>) -> Flowing
    where
        C: Callbacks<M, K>,
    {
        let pass = self.state.pass.take();
        let ran = match (self.again().all(Event::BeforeValidate), pass) {
            (Ok(()), Some(pass)) => self.again().run_pass(i, event, pass),
            (Ok(()), None) => self.again().own_pass(i, event),
            (Err(halt), Some(pass)) => self.again().hand_back(i, event, pass).and(Err(halt)),
            (Err(halt), None) => Err(halt),
        };
        match ran {
            Ok(()) => {}
            Err(Halt::Cancel(Cancel::Valid)) => self.again().all(Event::AfterCancelValidate)?,
            Err(halt) => {
                // fastai's epoch catches a `CancelEpoch` from its validation (no `after_validate`).
                self.state.control.epoch_cancelled_in_pass = matches!(halt, Halt::Cancel(Cancel::Epoch));
                return Err(halt);
            }
        }
        self.all(Event::AfterValidate)
    }

    /// A pass asked for in an epoch a `CancelEpoch` ended: it does not run (fastai's cancelled
    /// epoch skips its validation), no event is delivered, and a pass handed over goes back to
    /// callback `i` in `validate` untouched.
    #[cold]
    pub(super) fn skipped_pass<K>(self, i: usize, event: Event<'_>) -> Flowing
    where
        C: Callbacks<M, K>,
    {
        match self.state.pass.take() {
            Some(pass) => self.hand_back(i, event, pass),
            None => Ok(()),
        }
    }

    /// The pass of a callback that runs it itself, in its `validate`.
    fn own_pass<K>(self, i: usize, event: Event<'_>) -> Flowing
    where
        C: Callbacks<M, K>,
    {
        self.at.activity = Activity::Callback(i, event.name());
        let mut ctx = Context::new(&mut *self.state, Phase::Around);
        let names = &self.table.names;
        self.callbacks
            .dispatch(i, Event::Validate, &mut ctx)
            .map_err(|e| wrap(&names[i], event.name(), e))?;
        match self.state.control.raised.take() {
            None => Ok(()),
            Some(crate::callback::Raised::Cancel(cancel)) => {
                Err(cancel_halt(self.state, names, i, event.name(), cancel))
            }
            Some(crate::callback::Raised::Validate) => {
                Err(validation_misplaced(&names[i], event.name()).into())
            }
        }
    }

    /// The pass callback `i` handed over: its batches, its end (the results to the monitors),
    /// and the pass handed back to the callback in `validate`. A short validation (fastai's
    /// `ShortEpochCallback`) ends it as a `CancelValid` after its share of the batches.
    fn run_pass<K>(mut self, i: usize, event: Event<'_>, mut pass: Box<dyn ValidationPass<M>>) -> Flowing
    where
        C: Callbacks<M, K>,
    {
        let short = if pass.may_be_short() { self.state.control.short_validation } else { None };
        let mut end = PassEnd { batches: 0, cut_short: None, cancelled: false };
        let ran = self.again().batches(i, event, &mut *pass, short, &mut end);
        let ended = match ran {
            Ok(()) | Err(Halt::Cancel(Cancel::Valid)) => {
                end.cancelled = ran.is_err();
                self.at.activity = Activity::Callback(i, event.name());
                let mut ctx = Context::new(&mut *self.state, Phase::Around);
                pass.end(&mut ctx, end).map_err(|e| wrap(&self.table.names[i], event.name(), e))
            }
            Err(_) => Ok(()),
        };
        self.hand_back(i, event, pass)?;
        ended?;
        ran
    }

    /// The pass handed back to callback `i`, in its `validate`.
    fn hand_back<K>(self, i: usize, event: Event<'_>, pass: Box<dyn ValidationPass<M>>) -> Flowing
    where
        C: Callbacks<M, K>,
    {
        self.at.activity = Activity::Callback(i, event.name());
        self.state.pass = Some(pass);
        let back =
            self.callbacks.dispatch(i, Event::Validate, &mut Context::new(&mut *self.state, Phase::Around));
        self.state.pass = None;
        self.state.control.raised = None;
        back.map_err(|e| wrap(&self.table.names[i], event.name(), e).into())
    }

    /// Every batch of the pass, each with its events; a signal stops the pass before the next
    /// batch.
    fn batches<K>(
        mut self,
        i: usize,
        event: Event<'_>,
        pass: &mut dyn ValidationPass<M>,
        short: Option<f64>,
        end: &mut PassEnd,
    ) -> Flowing
    where
        C: Callbacks<M, K>,
    {
        let name = &self.table.names[i];
        self.at.activity = Activity::Callback(i, event.name());
        let mut batches = pass.batches(&mut Context::new(&mut *self.state, Phase::Around));
        // fastai's `iter`: every batch taken, a cancelled one included.
        let mut index = 0u64;
        loop {
            if let Some(signal) = Context::new(&mut *self.state, Phase::Around).signal_received() {
                end.cut_short = Some(signal);
                return Ok(());
            }
            self.at.activity = Activity::Callback(i, event.name());
            match batches.next() {
                None => return Ok(()),
                Some(batch) => batch.map_err(|e| wrap(name, event.name(), e))?,
            }
            // A cancelled batch is not one of the pass's: the inferencers did not see it.
            match self.again().batch_events(i, event, &mut *batches) {
                Ok(()) => end.batches += 1,
                Err(Halt::Cancel(Cancel::Batch)) => {
                    self.in_validation_batches().all(Event::AfterCancelBatch)?
                }
                Err(halt) => return Err(halt),
            }
            // fastai's `after_batch`, after the batch level, cancelled or not: the batch is over,
            // a `CancelBatch` there is an error (it would otherwise reach the enclosing event).
            match self.in_validation_batches().all(Event::AfterBatch) {
                Err(Halt::Cancel(Cancel::Batch)) => {
                    return Err(misplaced_cancel(self.state, &self.table.names, Cancel::Batch).into());
                }
                other => other?,
            }
            index += 1;
            if let Some(pct) = short
                && crate::stop::short_epoch_ends(pct, index - 1, batches.length())
            {
                return Err(Halt::Cancel(Cancel::Valid));
            }
        }
    }

    /// One validation batch: `before_batch` to the callbacks that take the batch, the model's
    /// output and `after_pred` (a forward function in two parts), the outputs, `after_loss`
    /// (`before_backward`) to the callbacks that take the loss when the outputs hold one named
    /// `loss`, then the inferencers.
    fn batch_events<K>(self, i: usize, event: Event<'_>, batches: &mut dyn ValidationBatches) -> Flowing
    where
        C: Callbacks<M, K>,
    {
        let Delivery { callbacks, table, at, state, .. } = self;
        let (names, takers) = (&table.names, &table.valid.batch);
        if takers.batch() {
            let batch = batches.batch();
            deliver_in_batch(callbacks, names, at, state, &takers.batch, Event::BeforeBatch(&batch))?;
        }
        at.activity = Activity::Callback(i, event.name());
        if let Some(pred) = batches.predict()
            && takers.pred()
        {
            deliver_in_batch(callbacks, names, at, state, &takers.pred, Event::AfterPred(&pred))?;
        }
        at.activity = Activity::Callback(i, event.name());
        batches.score().map_err(|e| wrap(&names[i], event.name(), e))?;
        let loss = batches.outputs().get("loss").map(crate::fetch::OutputTensor::flat);
        if let Some(loss) = loss
            && !table.valid.loss.is_empty()
        {
            let slot = StepLoss { loss: RefCell::new(Some(loss)), outputs: &*batches.outputs() };
            deliver_in_batch(callbacks, names, at, state, &table.valid.loss, Event::BeforeBackward(&slot))?;
            let loss = slot
                .loss
                .into_inner()
                .ok_or_else(|| Error::misuse("an after_loss callback removed the loss"));
            batches.outputs().put("loss", loss.map_err(|e| wrap(&names[i], event.name(), e))?);
        }
        at.activity = Activity::Callback(i, event.name());
        batches.infer().map_err(|e| wrap(&names[i], event.name(), e).into())
    }
}
