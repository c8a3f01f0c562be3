//! The dispatcher: the run's callbacks with their names and order, and the delivery of events to
//! them (the one-pass delivery when the order is the registration order, the error path that
//! serves a cancel or a request for a validation pass, the name of the culprit of a panic).
//! A cancel is a value the context records ([`Raised`]) and the dispatcher sends up the loop as
//! [`Halt::Cancel`], never an [`Error`]. `takers`: who takes the batch events, and their delivery;
//! `validation`: the validation pass, a phase the trainer runs.

mod delivery;
mod halt;
mod takers;
mod validation;

use std::borrow::Cow;
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};

use serde_json::{Map, Value as Json};

use crate::callback::{
    CallbackInfo, Callbacks, Context, Counters, Event, Phase, StateOp, TrainState, resolve_order,
};
use crate::error::{Cancel, Error, Result, panic_message};
use delivery::Delivery;
use halt::raised_misplaced;
pub(crate) use halt::{Flowing, Halt};
pub(super) use takers::BatchTakers;
use takers::{AfterBatchTakers, PhaseTakers};

/// What the trainer is doing, to name the culprit of a panic.
#[derive(Debug, Clone, Copy)]
pub(super) enum Activity {
    Trainer,
    Callback(usize, &'static str),
    /// Delivering an event to every callback in one pass; `CurrentActivity::cursor` names the callback.
    Delivering(&'static str),
    Step,
    Data,
}

/// Where the trainer is: the activity, and during a one-pass delivery the flat index of the
/// callback running.
#[derive(Debug, Clone, Copy)]
struct CurrentActivity {
    activity: Activity,
    cursor: usize,
}

/// What the callbacks are, resolved at setup: names, the run order, who takes the events of a
/// training step and of a validation pass's batches.
struct CallbackTable {
    names: Vec<Cow<'static, str>>,
    order: Vec<usize>,
    /// Whether the run order is the registration order (events then go in one pass).
    in_order: bool,
    /// Who takes the events of a training step: its batch events, the loss and the gradients.
    train: PhaseTakers,
    /// Who takes the batch events of a validation pass.
    valid: PhaseTakers,
    /// Who takes `after_batch` after a training step.
    after_batch: AfterBatchTakers,
}

/// The run's callbacks and how events reach them.
pub(super) struct Dispatcher<C, M, K> {
    callbacks: C,
    table: CallbackTable,
    at: CurrentActivity,
    /// How many callbacks (in run order) had their setup attempted.
    set_up: usize,
    /// The callbacks an event goes to when not all of them do: a buffer kept from event to event.
    subset: Vec<usize>,
    marker: PhantomData<fn() -> (M, K)>,
}

impl<M, K, C: Callbacks<M, K>> Dispatcher<C, M, K> {
    /// Resolve the callbacks' names and order; `each` sees every callback's info with whether it
    /// runs on this rank (a chief-only callback is not set up, nor sent any event, off the chief).
    pub(super) fn new(
        callbacks: C,
        chief: bool,
        mut each: impl FnMut(usize, &CallbackInfo<'_>, bool) -> Result<()>,
    ) -> Result<Self> {
        let count = callbacks.len();
        let (mut names, mut orders) = (Vec::with_capacity(count), Vec::with_capacity(count));
        let (mut hooks, mut active) = (Vec::with_capacity(count), Vec::with_capacity(count));
        let (mut takes_after_batch, mut train, mut valid) =
            (Vec::with_capacity(count), Vec::with_capacity(count), Vec::with_capacity(count));
        for i in 0..count {
            let info = callbacks.info(i);
            active.push(chief || !info.chief_only);
            each(i, &info, active[i])?;
            hooks.push(info.step_events);
            takes_after_batch.push(info.takes_after_batch);
            train.push(info.takes_training_batches);
            valid.push(info.takes_validation_batches);
            names.push(info.name);
            orders.push(info.order);
        }
        for (i, name) in names.iter().enumerate() {
            if names[..i].contains(name) {
                return Err(Error::order(format!(
                    "two callbacks are named `{name}`; give one another name with `.named(\"...\")` (`{}(...)`: burn_stoker::callback::Named) so that checkpointed state, order constraints and errors can tell them apart",
                    crate::callback::type_part(name)
                )));
            }
        }
        let mut order = resolve_order(&names, &orders)?;
        order.retain(|&i| active[i]);
        let in_order = order.len() == count && order.iter().enumerate().all(|(position, &i)| position == i);
        let train = PhaseTakers::new(&order, count, &train, &hooks);
        let valid = PhaseTakers::new(&order, count, &valid, &hooks);
        let after_batch = AfterBatchTakers::new(&train.order, &takes_after_batch);
        Ok(Dispatcher {
            callbacks,
            table: CallbackTable { names, order, in_order, train, valid, after_batch },
            at: CurrentActivity { activity: Activity::Trainer, cursor: 0 },
            set_up: 0,
            subset: Vec::new(),
            marker: PhantomData,
        })
    }

    /// Callback `i`'s name.
    pub(super) fn name(&self, i: usize) -> &str {
        &self.table.names[i]
    }

    /// Set what the trainer is doing (for the message of a panic).
    #[inline]
    pub(super) fn set_activity(&mut self, activity: Activity) {
        self.at.activity = activity;
    }

    /// What the trainer is doing.
    #[inline]
    pub(super) fn activity(&self) -> Activity {
        self.at.activity
    }

    /// Where a panic happened: the callback and its event, the step, the data loader.
    pub(super) fn location(&self) -> String {
        match self.at.activity {
            Activity::Trainer => "the trainer".into(),
            Activity::Callback(i, event) => format!("callback `{}` in {event}", self.table.names[i]),
            Activity::Delivering(event) => {
                format!("callback `{}` in {event}", self.table.names[self.at.cursor])
            }
            Activity::Step => "the training step".into(),
            Activity::Data => "the data loader".into(),
        }
    }

    /// Whether callback `i` wants its fetches at the next step.
    #[inline]
    pub(super) fn wants_fetch(&self, i: usize, counters: &Counters) -> bool {
        self.callbacks.wants_fetch(i, counters)
    }

    /// Deliver `event` to every callback, in run order. Each delivery gives the trainer's
    /// activity back as it found it, however it ends (but a panic, whose culprit it names).
    #[inline]
    pub(crate) fn deliver(&mut self, state: &mut TrainState<M>, event: Event<'_>) -> Flowing {
        self.deliver_along(state, event, |table| (&table.order, table.in_order))
    }

    /// Deliver an event of a training step (`before_step`, `after_step`, `after_batch`, the
    /// cancels' events) to every callback that takes them, in run order.
    #[inline]
    pub(crate) fn deliver_in_training(&mut self, state: &mut TrainState<M>, event: Event<'_>) -> Flowing {
        self.deliver_along(state, event, |table| (&table.train.order, table.train.in_order))
    }

    /// `event` to the callbacks of the order `pick` takes from the table (with whether it is
    /// every callback in registration order), the activity given back as found.
    #[inline]
    fn deliver_along(
        &mut self,
        state: &mut TrainState<M>,
        event: Event<'_>,
        pick: fn(&CallbackTable) -> (&Vec<usize>, bool),
    ) -> Flowing {
        let (table, resume) = (&self.table, self.at.activity);
        let (order, one_pass) = pick(table);
        let delivered =
            Delivery { callbacks: &mut self.callbacks, table, order, one_pass, at: &mut self.at, state }
                .all(event);
        self.at.activity = resume;
        delivered
    }

    /// Deliver an event of a training step to the callbacks that take them and `keep` selects,
    /// in run order.
    pub(super) fn deliver_in_training_to(
        &mut self,
        state: &mut TrainState<M>,
        event: Event<'_>,
        keep: impl Fn(usize) -> bool,
    ) -> Flowing {
        let mut subset = std::mem::take(&mut self.subset);
        subset.clear();
        subset.extend(self.table.train.order.iter().copied().filter(|&i| keep(i)));
        let (table, resume) = (&self.table, self.at.activity);
        let (callbacks, at) = (&mut self.callbacks, &mut self.at);
        let result = Delivery { callbacks, table, order: &subset, one_pass: false, at, state }.each(event, 0);
        (self.subset, self.at.activity) = (subset, resume);
        result
    }

    /// Every callback's setup, in run order, remembering how far it got so that `after_train`
    /// reaches exactly those callbacks.
    pub(super) fn setup(&mut self, state: &mut TrainState<M>) -> Result<()> {
        for position in 0..self.table.order.len() {
            self.set_up = position + 1;
            let i = self.table.order[position];
            self.at.activity = Activity::Callback(i, "setup");
            self.callbacks
                .dispatch(i, Event::Setup, &mut Context::new(state, Phase::Once))
                .map_err(|e| wrap(&self.table.names[i], "setup", e))?;
            if let Some(raised) = state.control.raised.take() {
                return Err(raised_misplaced(&self.table.names[i], "setup", raised));
            }
        }
        self.at.activity = Activity::Trainer;
        Ok(())
    }

    /// `after_train` for every callback whose setup ran, each shielded from the others' panics.
    pub(super) fn after_train(&mut self, state: &mut TrainState<M>) -> Result<()> {
        let mut first_error = None;
        for position in 0..self.set_up {
            let i = self.table.order[position];
            self.at.activity = Activity::Callback(i, "after_train");
            let callbacks = &mut self.callbacks;
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                callbacks.dispatch(i, Event::AfterTrain, &mut Context::new(&mut *state, Phase::Once))
            }));
            let name = &self.table.names[i];
            let raised = state.control.raised.take();
            let error = match outcome {
                Ok(Ok(())) => raised.map(|raised| raised_misplaced(name, "after_train", raised)),
                Ok(Err(e)) => Some(wrap(name, "after_train", e)),
                Err(payload) => Some(Error::Panic {
                    location: format!("callback `{name}` in after_train"),
                    message: panic_message(&*payload),
                }),
            };
            match error {
                Some(error) if first_error.is_none() => first_error = Some(error),
                Some(error) => crate::logging::error!("{error}"),
                None => {}
            }
        }
        self.at.activity = Activity::Trainer;
        first_error.map_or(Ok(()), Err)
    }

    /// The callbacks that take the batch and the model's output.
    #[inline]
    pub(super) fn batch_takers(&self) -> &BatchTakers {
        &self.table.train.batch
    }

    /// Whether some callback takes the loss before backward.
    #[inline]
    pub(super) fn takes_loss(&self) -> bool {
        !self.table.train.loss.is_empty()
    }

    /// Whether some callback takes the gradients after backward.
    #[inline]
    pub(super) fn takes_gradients(&self) -> bool {
        !self.table.train.grads.is_empty()
    }

    /// `event` (`before_batch`, `after_pred`, `before_backward` or `after_backward`) to the
    /// callbacks that take it, in run order.
    #[cold]
    pub(super) fn deliver_hook(&mut self, state: &mut TrainState<M>, event: Event<'_>) -> Flowing {
        let takers = match event {
            Event::BeforeBatch(_) => &self.table.train.batch.batch,
            Event::AfterPred(_) => &self.table.train.batch.pred,
            Event::BeforeBackward(_) => &self.table.train.loss,
            _ => &self.table.train.grads,
        };
        let (callbacks, names, at) = (&mut self.callbacks, &self.table.names, &mut self.at);
        takers::deliver_in_batch(callbacks, names, at, state, takers, event)
    }

    /// The error for callbacks that take the loss in `before_backward` under a step that ran
    /// backward itself.
    #[cold]
    pub(super) fn own_backward_refused(&self) -> Error {
        let takers: Vec<String> =
            self.table.train.loss.iter().map(|&i| format!("`{}`", self.table.names[i])).collect();
        Error::misuse(format!(
            "{} take the loss in before_backward, but this training step runs backward itself (a burn-train TrainStep): the loss they would change is already differentiated. Compute the loss with Trainer::train, or change the gradients in after_backward instead",
            takers.join(", ")
        ))
    }

    /// A cancel returned where it does not apply (`CancelBatch` from `after_step`, ...): the
    /// error names the callback and the event, and says where it applies.
    #[cold]
    pub(super) fn misplaced_cancel(&self, state: &TrainState<M>, cancel: Cancel) -> Error {
        halt::misplaced_cancel(state, &self.table.names, cancel)
    }

    /// The reason a `Flow::CancelFit` gives the run's stop: who cancelled, and where.
    #[cold]
    pub(super) fn cancelled_fit_reason(&self, state: &TrainState<M>) -> String {
        match state.control.cancelled_at {
            Some((i, event)) => {
                format!("cancelled by `{}` in {event} (Flow::CancelFit)", self.table.names[i])
            }
            None => "cancelled (Flow::CancelFit)".to_string(),
        }
    }

    /// Every stateful callback's state, by name (for a checkpoint).
    pub(super) fn save_states(&mut self) -> Result<Map<String, Json>> {
        let mut states = Map::new();
        for (i, name) in self.table.names.iter().enumerate() {
            if let Some(state) =
                self.callbacks.state(i, StateOp::Save).map_err(|e| wrap(name, "save_state", e))?
            {
                states.insert(name.to_string(), state);
            }
        }
        Ok(states)
    }

    /// Give each stateful callback that runs here its saved state (right after setup), warning
    /// about a state saved for no callback and a stateful callback without one.
    pub(super) fn load_states(&mut self, mut saved: Map<String, Json>) -> Result<()> {
        for &i in &self.table.order {
            let name = &self.table.names[i];
            match saved.remove(name.as_ref()) {
                Some(state) => {
                    self.callbacks.state(i, StateOp::Load(state)).map_err(|e| wrap(name, "load_state", e))?;
                }
                None => {
                    let has_state =
                        self.callbacks.state(i, StateOp::Save).map_err(|e| wrap(name, "save_state", e))?;
                    if has_state.is_some() {
                        crate::logging::warn!(
                            "the checkpoint holds no state for callback `{name}`; it starts afresh"
                        );
                    }
                }
            }
        }
        // A name this run has, left over: a chief-only callback, off the chief.
        for name in saved.keys().filter(|name| !self.table.names.iter().any(|n| n == *name)) {
            crate::logging::warn!(
                "the checkpoint holds the state of callback `{name}`, which this run does not have; ignored"
            );
        }
        Ok(())
    }
}

/// A callback's error, with its name and the event.
pub(super) fn wrap(name: &str, event: &'static str, error: Error) -> Error {
    Error::Callback { callback: name.to_string(), event, source: Box::new(error) }
}
