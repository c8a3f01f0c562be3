//! One delivery of an event ([`Delivery`]): the borrows it needs together, in one pass or one by
//! one, and what it does when a callback asks something of the loop at once (a cancel sent up, a
//! validation pass run, `validation.rs`).

use super::halt::{Flowing, Halt, cancel_halt, validation_misplaced};
use super::{Activity, CallbackTable, CurrentActivity, wrap};
use crate::callback::{Callbacks, Context, Event, Raised, TrainState};
use crate::error::Error;

/// One event on its way to some callbacks: the borrows a delivery needs, together.
pub(super) struct Delivery<'a, 's, C, M> {
    pub(super) callbacks: &'a mut C,
    pub(super) table: &'a CallbackTable,
    /// The callbacks it goes to, in run order.
    pub(super) order: &'a [usize],
    /// Whether `order` is every callback in registration order: then one pass delivers it.
    pub(super) one_pass: bool,
    pub(super) at: &'a mut CurrentActivity,
    pub(super) state: &'s mut TrainState<M>,
}

impl<C, M> Delivery<'_, '_, C, M> {
    /// To every callback of `order`: in one pass when that is every callback in registration
    /// order, else one by one.
    #[inline]
    pub(super) fn all<K>(self, event: Event<'_>) -> Flowing
    where
        C: Callbacks<M, K>,
    {
        if !self.one_pass {
            return self.each(event, 0);
        }
        self.at.activity = Activity::Delivering(event.name());
        let phase = event.phase();
        if let Err(e) =
            self.callbacks.dispatch_all(0, event, &mut Context::new(self.state, phase), &mut self.at.cursor)
        {
            let at = self.at.cursor;
            return Err(self.failed(event, at, e));
        }
        if self.state.control.raised.is_some() {
            let at = self.at.cursor;
            return self.raised(event, at);
        }
        self.delivered(&event);
        Ok(())
    }

    /// To the callbacks of `order` from position `from` on, one by one.
    #[inline]
    pub(super) fn each<K>(self, event: Event<'_>, from: usize) -> Flowing
    where
        C: Callbacks<M, K>,
    {
        let phase = event.phase();
        for &i in &self.order[from..] {
            self.at.activity = Activity::Callback(i, event.name());
            if let Err(e) =
                self.callbacks.dispatch(i, event.for_callback(i), &mut Context::new(self.state, phase))
            {
                return Err(self.failed(event, i, e));
            }
            if self.state.control.raised.is_some() {
                return self.raised(event, i);
            }
        }
        self.delivered(&event);
        Ok(())
    }

    /// Every callback received `event`: the event's records go to the writers, except after the
    /// three events that the trainer may follow with a row of stats.json, sent with the event's
    /// records in one batch (`Monitors::end_row`).
    #[inline]
    fn delivered(self, event: &Event<'_>) {
        let row_may_follow = matches!(event, Event::BeforeTrain | Event::TriggerStep | Event::TriggerEpoch);
        if !row_may_follow && self.state.monitors_ref().has_pending() {
            self.state.monitors().publish();
        }
    }

    /// Callback `i` returned `error` from `event`: wrapped with the callback's name and the
    /// event.
    #[cold]
    fn failed(self, event: Event<'_>, i: usize, error: Error) -> Halt {
        Halt::Failed(wrap(&self.table.names[i], event.name(), error))
    }

    /// Callback `i` asked something of the loop at once during `event`: a request for a
    /// validation pass is served (`before_validate` to every callback, the pass, `after_validate`
    /// to every callback: `validation.rs`; none in an epoch a `CancelEpoch` ended, as fastai's
    /// cancelled epoch is not validated), then the event goes on with the callbacks after `i`;
    /// a cancel goes up to the level of the loop that acts on it.
    #[cold]
    fn raised<K>(self, event: Event<'_>, i: usize) -> Flowing
    where
        C: Callbacks<M, K>,
    {
        let raised = self.state.control.raised.take().expect("a callback asked something of the loop");
        let mut this = self;
        match raised {
            Raised::Cancel(cancel) => {
                Err(cancel_halt(this.state, &this.table.names, i, event.name(), cancel))
            }
            Raised::Validate if this.state.control.validating => {
                this.state.pass = None;
                Err(validation_misplaced(&this.table.names[i], event.name()).into())
            }
            Raised::Validate => {
                let pass = match this.state.control.epoch_cancelled {
                    true => this.again().skipped_pass(i, event),
                    false => {
                        this.state.control.validating = true;
                        let pass = this.again().validation_pass(i, event);
                        this.state.control.validating = false;
                        this.state.control.short_validation = None;
                        // fastai's `training` stays false after a pass until the next epoch's
                        // training starts; a pass between two steps gives it back to the steps.
                        this.state.control.training &= event.between_steps();
                        pass
                    }
                };
                pass?;
                let next =
                    this.order.iter().position(|&j| j == i).map_or(this.order.len(), |position| position + 1);
                this.each(event, next)
            }
        }
    }

    /// The batch events of a validation pass (`after_batch`, `after_cancel_batch`): to the
    /// callbacks that take its batches.
    pub(super) fn in_validation_batches(&mut self) -> Delivery<'_, '_, C, M> {
        let table = self.table;
        let valid = &table.valid;
        Delivery {
            callbacks: &mut *self.callbacks,
            table,
            order: &valid.order,
            one_pass: valid.in_order,
            at: &mut *self.at,
            state: &mut *self.state,
        }
    }

    /// The same delivery, borrowed again for another event.
    pub(super) fn again(&mut self) -> Delivery<'_, '_, C, M> {
        let (table, order, one_pass) = (self.table, self.order, self.one_pass);
        Delivery {
            callbacks: &mut *self.callbacks,
            table,
            order,
            one_pass,
            at: &mut *self.at,
            state: &mut *self.state,
        }
    }
}
