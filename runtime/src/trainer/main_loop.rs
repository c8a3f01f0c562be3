//! The loop: setup, the epochs and their steps, the events between them, and the step
//! boundaries where signals are noticed and checkpoints written.

use std::borrow::Cow;

use burn::module::Module;

use super::resume::{Boundary, DataPosition};
use super::run::{Phase, Run, wrap};
use super::{BatchIter, TrainData, TrainingStep};
use crate::callback::{Callbacks, CheckpointRequest, Context, Event, TrainState};
use crate::error::{Cancel, Error, Result};
use crate::signal::{STOP_REQUEST, SignalGuard, signal_name};
use crate::state::KeepPolicy;

impl<M: Module, K, C: Callbacks<M, K>> Run<M, C, K> {
    /// Deliver `event` to every callback in order.
    #[inline]
    pub(crate) fn deliver(&mut self, event: Event<'_>) -> Result<()> {
        deliver_in_order(
            &mut self.callbacks,
            &self.order,
            self.in_order,
            &mut self.state,
            (&mut self.phase, &mut self.cursor),
            &self.names,
            event,
        )
    }

    pub(super) fn main_loop<D, S>(&mut self, data: &D, step: &mut S) -> Result<()>
    where
        D: TrainData,
        S: TrainingStep<M, D::Batch>,
    {
        if self.is_chief() {
            crate::state::create_dir_all_synced(&self.state.log_dir)
                .map_err(|e| Error::io(&self.state.log_dir, e))?;
        }
        // Setup, remembering how far it got so that after_train reaches exactly those callbacks.
        for position in 0..self.order.len() {
            self.set_up = position + 1;
            let i = self.order[position];
            self.phase = Phase::Callback(i, "setup");
            let mut ctx = Context { state: &mut self.state };
            self.callbacks
                .dispatch(i, Event::Setup, &mut ctx)
                .map_err(|e| wrap(&self.names[i], "setup", e))?;
        }
        self.phase = Phase::Trainer;
        self.load_callback_states()?;
        self.state.monitors.publish();

        // The first pass starts now (a resumed run replays the passes and batches it had taken):
        // its first batch tells the number of steps per epoch.
        self.phase = Phase::Data;
        let target = self.resumed.take().map(|r| r.data_position);
        let mut pass = data.pass();
        self.data_position = DataPosition { passes: 1, batches: 0 };
        if let Some(target) = target {
            // A signal ends the replay (alone: in a world every rank replays to the same step
            // and the signal is acted on together at the first boundary).
            let alone = self.state.world.is_none();
            for _ in 1..target.passes {
                if alone && let Some(signal) = self.stop_asked() {
                    self.interrupted_in_replay(signal, target);
                    return Ok(());
                }
                pass = data.pass();
                self.data_position.passes += 1;
            }
            while self.data_position.batches < target.batches {
                if alone && let Some(signal) = self.stop_asked() {
                    self.interrupted_in_replay(signal, target);
                    return Ok(());
                }
                match pass.next_batch() {
                    Some(batch) => drop(batch?),
                    None => break,
                }
                self.data_position.batches += 1;
            }
            if alone && let Some(signal) = self.stop_asked() {
                self.interrupted_in_replay(signal, target);
                return Ok(());
            }
        }
        let mut first = pass.next_batch().transpose()?;
        if first.is_none() && self.data_position.batches > 0 {
            pass = data.pass();
            self.data_position = DataPosition { passes: self.data_position.passes + 1, batches: 0 };
            first = pass.next_batch().transpose()?;
        }
        if first.is_none() {
            return Err(Error::data("the training data produced no batch"));
        }
        self.data_position.batches += 1;
        if self.state.counters.steps_per_epoch == 0 {
            self.state.counters.steps_per_epoch = pass.batches_hint().unwrap_or(0);
        }
        if self.state.counters.steps_per_epoch == 0 {
            return Err(Error::data(
                "the number of steps per epoch is unknown: set it with Trainer::steps_per_epoch",
            ));
        }
        self.phase = Phase::Trainer;

        // fastai's `fit` level: a CancelFit from any event below ends up here.
        match self.epochs(data, step, pass, first) {
            Err(Error::Cancel(Cancel::Fit)) => self.cancelled_fit(),
            Err(Error::Cancel(cancel)) => Err(self.misplaced_cancel(cancel)),
            other => other,
        }
    }

    /// `before_train`, then the epochs and their steps.
    fn epochs<'d, D, S>(
        &mut self,
        data: &'d D,
        step: &mut S,
        mut pass: D::Iter<'d>,
        mut first: Option<D::Batch>,
    ) -> Result<()>
    where
        D: TrainData,
        S: TrainingStep<M, D::Batch>,
    {
        // What setup and before_train put is one row of stats.json at the epoch before the
        // first (tensorpack's JSONWriter writes it in its before_train).
        self.state.monitors.epoch_num = self.state.counters.epoch_num;
        self.deliver(Event::BeforeTrain)?;
        self.state.monitors.end_row();
        self.boundary(Boundary::BeforeTrain)?;
        let mut names_checked = false;
        let max_epoch = self.state.counters.max_epoch;
        let mut epoch = self.state.counters.starting_epoch;
        let mut local_step = self.first_local_step;
        while epoch <= max_epoch && !self.stopping() {
            let counters = &mut self.state.counters;
            counters.epoch_num = epoch;
            counters.local_step = std::mem::take(&mut local_step);
            self.state.monitors.epoch_num = epoch;
            // fastai's epoch level: a CancelEpoch from before_epoch or a step ends up here.
            match self.epoch_steps(data, step, &mut pass, &mut first, &mut names_checked) {
                Ok(()) => {}
                Err(Error::Cancel(Cancel::Epoch)) => self.cancelled_epoch()?,
                Err(error) => return Err(error),
            }
            self.state.control.skip_epoch = false;
            if let Some(agreement) = self.state.world.as_mut() {
                agreement.skip = false;
            }
            if self.stopping() {
                break;
            }
            if self.plan.has_pending() {
                self.deliver_deferred(u64::MAX, true)?;
            }
            self.deliver(Event::AfterEpoch)?;
            self.deliver(Event::TriggerEpoch)?;
            self.state.monitors.end_row();
            self.state.monitors.end_epoch();
            if self.state.world.is_some() {
                self.agree_boundary()?;
            }
            self.boundary(Boundary::EpochEnd)?;
            epoch += 1;
        }
        Ok(())
    }

    /// One epoch's `before_epoch` and steps.
    #[inline]
    fn epoch_steps<'d, D, S>(
        &mut self,
        data: &'d D,
        step: &mut S,
        pass: &mut D::Iter<'d>,
        first: &mut Option<D::Batch>,
        names_checked: &mut bool,
    ) -> Result<()>
    where
        D: TrainData,
        S: TrainingStep<M, D::Batch>,
    {
        self.deliver(Event::BeforeEpoch)?;
        let steps = self.state.counters.steps_per_epoch;
        while self.state.counters.local_step < steps && !self.stopping() && !self.skipping() {
            self.phase = Phase::Data;
            let batch = match first.take() {
                Some(batch) => batch,
                None => {
                    let next = match pass.next_batch() {
                        Some(batch) => batch?,
                        None => {
                            *pass = data.pass();
                            self.data_position =
                                DataPosition { passes: self.data_position.passes + 1, batches: 0 };
                            pass.next_batch().ok_or_else(|| {
                                Error::data("the training data produced no batch in a new pass")
                            })??
                        }
                    };
                    self.data_position.batches += 1;
                    next
                }
            };
            self.phase = Phase::Trainer;
            let mut mask = 0;
            self.deferred_askers.clear();
            for &(i, slots) in &self.fetchers {
                if self.callbacks.wants_fetch(i, &self.state.counters) {
                    mask |= slots;
                    if slots & self.deferred_bits != 0 {
                        self.deferred_askers.push(i);
                    }
                }
            }
            if !self.mean_fetchers.is_empty() {
                self.mean_mask = 0;
                for &(i, slots) in &self.mean_fetchers {
                    if self.callbacks.wants_fetch(i, &self.state.counters) {
                        self.mean_mask |= slots;
                    }
                }
                self.fetch_mask = mask;
            }
            // fastai's batch level: a CancelBatch from before_step or inside the step.
            let ran = match self.deliver(Event::BeforeStep) {
                Ok(()) => self.run_step(batch, step),
                Err(error) => Err(error),
            };
            match ran {
                Ok(()) => {
                    if !*names_checked && !self.fetchers.is_empty() {
                        let owners: Vec<(String, u64)> =
                            self.fetchers.iter().map(|&(i, m)| (self.names[i].to_string(), m)).collect();
                        self.plan.check_names(&self.outputs, &owners, "the training step")?;
                        *names_checked = true;
                    }
                    let global_step = self.state.counters.global_step;
                    if !std::mem::take(&mut self.prefilled) {
                        self.plan.fill(&self.outputs, mask, global_step)?;
                    }
                    let values = if mask == 0 { crate::fetch::Fetched::none() } else { self.plan.view() };
                    deliver_in_order(
                        &mut self.callbacks,
                        &self.order,
                        self.in_order,
                        &mut self.state,
                        (&mut self.phase, &mut self.cursor),
                        &self.names,
                        Event::AfterStep(values),
                    )?;
                    // This step's deferred values join the next read, started behind its work
                    // when due; the values of earlier steps that arrived are delivered.
                    if mask & self.deferred_bits != 0 {
                        self.plan.start_deferred(&self.outputs, mask, global_step, &self.deferred_askers)?;
                    }
                    if self.plan.has_pending() {
                        self.deliver_deferred(global_step, false)?;
                    }
                }
                Err(Error::Cancel(Cancel::Batch)) => self.cancelled_batch()?,
                Err(error) => return Err(error),
            }
            self.deliver(Event::TriggerStep)?;
            // A row of stats.json at every step where scalars were put; the last step's
            // scalars join the epoch's row (tensorpack's JSONWriter). The event's records
            // go with it, in one batch.
            if self.state.monitors.has_row() && self.state.counters.local_step != steps {
                self.state.monitors.end_row();
            } else if self.state.monitors.has_pending() {
                self.state.monitors.publish();
            }
            self.boundary(Boundary::Step)?;
        }
        Ok(())
    }

    /// A callback returned `Flow::CancelBatch` while the batch ran: the step counts, every
    /// callback receives `after_cancel_batch`, then the callbacks that fetch nothing receive
    /// `after_step` (the step has no values); `trigger_step` follows as at any step.
    #[cold]
    fn cancelled_batch(&mut self) -> Result<()> {
        self.phase = Phase::Trainer;
        let counters = &mut self.state.counters;
        counters.global_step += 1;
        counters.local_step += 1;
        self.state.monitors.global_step = counters.global_step;
        self.deliver(Event::AfterCancelBatch)?;
        let fetching: Vec<usize> = self.all_fetchers.iter().map(|&(i, _)| i).collect();
        let order: Vec<usize> = self.order.iter().copied().filter(|i| !fetching.contains(i)).collect();
        deliver_in_order(
            &mut self.callbacks,
            &order,
            false,
            &mut self.state,
            (&mut self.phase, &mut self.cursor),
            &self.names,
            Event::AfterStep(crate::fetch::Fetched::none()),
        )
    }

    /// A callback returned `Flow::CancelEpoch` from `before_epoch` or a step: every callback
    /// receives `after_cancel_epoch`; the epoch then ends as any other.
    #[cold]
    fn cancelled_epoch(&mut self) -> Result<()> {
        self.phase = Phase::Trainer;
        self.deliver(Event::AfterCancelEpoch)
    }

    /// A callback returned `Flow::CancelFit`: training stops (the reason names the callback and
    /// the event), every callback receives `after_cancel_fit`, then (in `train`) `after_train`.
    #[cold]
    fn cancelled_fit(&mut self) -> Result<()> {
        self.phase = Phase::Trainer;
        if self.state.control.stop.is_none() {
            let reason = match self.state.control.cancelled_at {
                Some((i, event)) => format!("cancelled by `{}` in {event} (Flow::CancelFit)", self.names[i]),
                None => "cancelled (Flow::CancelFit)".to_string(),
            };
            self.state.control.stop = Some(reason);
        }
        match self.deliver(Event::AfterCancelFit) {
            Err(Error::Cancel(cancel)) => Err(self.misplaced_cancel(cancel)),
            other => other,
        }
    }

    /// A cancel returned where it does not apply (`CancelBatch` from `after_step`, ...): the
    /// error names the callback and the event, and says where it applies.
    #[cold]
    fn misplaced_cancel(&self, cancel: Cancel) -> Error {
        match self.state.control.cancelled_at {
            Some((i, event)) => wrap(&self.names[i], event, Error::Cancel(cancel)),
            None => Error::Cancel(cancel),
        }
    }

    /// The signal received, or a stop asked through the trainer's `StopHandle` (as
    /// [`STOP_REQUEST`]): two relaxed loads.
    #[inline]
    fn stop_asked(&self) -> Option<i32> {
        match self.signals.as_ref().and_then(SignalGuard::received) {
            Some(signal) => Some(signal),
            None if self.stop.is_stopped() => Some(STOP_REQUEST),
            None => None,
        }
    }

    /// Between steps: notice a signal, and write the checkpoint some callback asked for. Costs a
    /// relaxed atomic load and two tests when there is nothing to do.
    #[inline]
    fn boundary(&mut self, at: Boundary) -> Result<()> {
        if let Some(signal) = self.stop_asked()
            && self.interrupted.is_none()
        {
            match self.state.world.as_mut() {
                // In a world every rank acts on it at the same step: after the next exchange.
                Some(agreement) => {
                    agreement.signal.get_or_insert(signal);
                }
                None => self.on_signal(signal),
            }
        }
        if !self.state.control.checkpoints.is_empty() || !self.state.control.copies.is_empty() {
            // What the checkpoint's callbacks save includes every deferred value read so far:
            // a resumed run receives none of them twice and loses none.
            if self.plan.has_pending() {
                self.deliver_deferred(u64::MAX, true)?;
            }
            self.write_checkpoint(at)?;
        }
        Ok(())
    }

    /// Deliver `fetched` for the deferred values of the steps before `before` that arrived,
    /// each step's to the callbacks that asked at that step, in run order; with `flush`, read
    /// and wait for every step's.
    pub(super) fn deliver_deferred(&mut self, before: u64, flush: bool) -> Result<()> {
        let phase = self.phase;
        self.phase = Phase::Trainer;
        while self.plan.next_arrived(before, flush)? {
            let receivers = self.plan.deferred_receivers();
            self.deferred_order.clear();
            self.deferred_order.extend(self.order.iter().copied().filter(|i| receivers.contains(i)));
            deliver_in_order(
                &mut self.callbacks,
                &self.deferred_order,
                false,
                &mut self.state,
                (&mut self.phase, &mut self.cursor),
                &self.names,
                Event::Fetched(self.plan.deferred_view()),
            )?;
        }
        self.phase = phase;
        Ok(())
    }

    /// A signal while a resumed run replays its data: the run ends before its first step, as
    /// interrupted, without writing a checkpoint (the one resumed from stays the latest).
    #[cold]
    fn interrupted_in_replay(&mut self, signal: i32, target: DataPosition) {
        let name = signal_name(signal);
        let resumed = match &self.last_checkpoint {
            Some(dir) => format!("the checkpoint resumed from, {}, stays the latest", dir.display()),
            None => "no checkpoint is written".into(),
        };
        crate::logging::info!(
            "{name} received while replaying the data to the resumed position (pass {} batch {} of pass {} batch {}): the run ends before its first step; {resumed}",
            self.data_position.passes,
            self.data_position.batches,
            target.passes,
            target.batches
        );
        self.state.control.stop.get_or_insert_with(|| format!("interrupted by {name}"));
        self.interrupted = Some(name);
    }

    #[cold]
    pub(super) fn on_signal(&mut self, signal: i32) {
        let name = signal_name(signal);
        if signal == STOP_REQUEST {
            crate::logging::info!(
                "stop asked through the trainer's StopHandle: stopping at this step boundary after writing a checkpoint"
            );
        } else {
            crate::logging::info!(
                "{name} received: stopping at this step boundary after writing a checkpoint; {name} again exits at once"
            );
        }
        // Into every saver's folder, as it keeps them (the default folder without a saver); a
        // request already made for a folder at this boundary stands.
        let control = &mut self.state.control;
        let savers = if control.savers.is_empty() {
            vec![CheckpointRequest { root: None, policy: KeepPolicy::default(), time: None, run_start: None }]
        } else {
            control.savers.clone()
        };
        for saver in savers {
            if !control.checkpoints.iter().any(|r| r.root == saver.root) {
                control.checkpoints.push(saver);
            }
        }
        if self.state.control.stop.is_none() {
            self.state.control.stop = Some(format!("interrupted by {name}"));
        }
        self.interrupted = Some(name);
    }
}

#[inline]
fn deliver_in_order<M, K, C: Callbacks<M, K>>(
    callbacks: &mut C,
    order: &[usize],
    in_order: bool,
    state: &mut TrainState<M>,
    (phase, cursor): (&mut Phase, &mut usize),
    names: &[Cow<'static, str>],
    event: Event<'_>,
) -> Result<()> {
    let mut ctx = Context { state };
    if in_order {
        *phase = Phase::Delivering(event.name());
        if let Err(e) = callbacks.dispatch_all(0, event, &mut ctx, cursor) {
            let at = *cursor;
            return interrupted(
                callbacks,
                (order, in_order),
                ctx.state,
                (phase, cursor),
                names,
                event,
                at,
                e,
            );
        }
    } else {
        return deliver_each(callbacks, (order, in_order), ctx.state, (phase, cursor), names, event, 0);
    }
    delivered(&mut ctx, phase, &event);
    Ok(())
}

/// Deliver `event` to the callbacks of `order` from position `from` on, one by one (an error
/// goes to [`interrupted`]), then end the event as [`delivered`] does.
#[inline]
fn deliver_each<M, K, C: Callbacks<M, K>>(
    callbacks: &mut C,
    (order, in_order): (&[usize], bool),
    state: &mut TrainState<M>,
    (phase, cursor): (&mut Phase, &mut usize),
    names: &[Cow<'static, str>],
    event: Event<'_>,
    from: usize,
) -> Result<()> {
    let mut ctx = Context { state };
    for &i in &order[from..] {
        *phase = Phase::Callback(i, event.name());
        if let Err(e) = callbacks.dispatch(i, event.for_callback(i), &mut ctx) {
            return interrupted(callbacks, (order, in_order), ctx.state, (phase, cursor), names, event, i, e);
        }
    }
    delivered(&mut ctx, phase, &event);
    Ok(())
}

/// Every callback received `event`: back to the trainer, and the event's records go to the
/// writers, except after the three events that the trainer may follow with a row of stats.json,
/// sent with the event's records in one batch (`Monitors::end_row`).
#[inline]
fn delivered<M>(ctx: &mut Context<'_, M>, phase: &mut Phase, event: &Event<'_>) {
    *phase = Phase::Trainer;
    if !row_may_follow(event) && ctx.state.monitors.has_pending() {
        ctx.state.monitors.publish();
    }
}

/// Whether the trainer may make a row of stats.json after `event` (then the event's records
/// wait to go with the row, in one batch).
fn row_may_follow(event: &Event<'_>) -> bool {
    matches!(event, Event::BeforeTrain | Event::TriggerStep | Event::TriggerEpoch)
}

/// Callback `i` returned `error` from `event`: a cancel goes up to the level of the loop that
/// acts on it (remembering who cancelled, and where); a request for a validation pass is
/// served (`before_validate` to every callback, `validate` to `i`, `after_validate` to every
/// callback), then the event goes on with the callbacks after `i`; any other error is wrapped
/// with the callback's name and the event.
#[cold]
#[allow(clippy::too_many_arguments)]
fn interrupted<M, K, C: Callbacks<M, K>>(
    callbacks: &mut C,
    (order, in_order): (&[usize], bool),
    state: &mut TrainState<M>,
    (phase, cursor): (&mut Phase, &mut usize),
    names: &[Cow<'static, str>],
    event: Event<'_>,
    i: usize,
    error: Error,
) -> Result<()> {
    match error {
        Error::ValidationRequested if !state.control.validating => {
            state.control.validating = true;
            let pass = validation_pass(
                callbacks,
                (order, in_order),
                state,
                (&mut *phase, &mut *cursor),
                names,
                (i, event),
            );
            state.control.validating = false;
            pass?;
            let next = order.iter().position(|&j| j == i).map_or(order.len(), |position| position + 1);
            deliver_each(callbacks, (order, in_order), state, (phase, cursor), names, event, next)
        }
        error => Err(callback_error(state, names, i, event.name(), error)),
    }
}

/// The validation pass callback `i` asked for during `event`, with fastai's events around it.
/// An error or a panic of the pass itself is reported in `event` (the one the callback was
/// triggered by: `trigger_epoch`, `trigger_step`...), where the pass runs for the user.
fn validation_pass<M, K, C: Callbacks<M, K>>(
    callbacks: &mut C,
    (order, in_order): (&[usize], bool),
    state: &mut TrainState<M>,
    (phase, cursor): (&mut Phase, &mut usize),
    names: &[Cow<'static, str>],
    (i, event): (usize, Event<'_>),
) -> Result<()> {
    deliver_in_order(
        callbacks,
        order,
        in_order,
        state,
        (&mut *phase, &mut *cursor),
        names,
        Event::BeforeValidate,
    )?;
    *phase = Phase::Callback(i, event.name());
    let mut ctx = Context { state };
    if let Err(e) = callbacks.dispatch(i, Event::Validate, &mut ctx) {
        return Err(callback_error(ctx.state, names, i, event.name(), e));
    }
    deliver_in_order(callbacks, order, in_order, ctx.state, (phase, cursor), names, Event::AfterValidate)
}

/// The error callback `i`'s `error` from `event` travels up as. A cancel: the cancel itself,
/// with who returned it and where remembered; in a data-parallel world (where every rank would
/// have to agree), an error saying so. Any other error: wrapped with the callback's name and the
/// event.
#[cold]
pub(super) fn callback_error<M>(
    state: &mut TrainState<M>,
    names: &[Cow<'static, str>],
    i: usize,
    event: &'static str,
    error: Error,
) -> Error {
    let Error::Cancel(cancel) = error else {
        return wrap(&names[i], event, error);
    };
    if state.world.is_some() {
        return wrap(
            &names[i],
            event,
            Error::msg(format!(
                "{} is not supported in data-parallel training, where every rank must agree on the steps it runs: return Flow::Stop or Flow::SkipEpoch, which the ranks agree on at the next step boundary",
                cancel.flow_name()
            )),
        );
    }
    state.control.cancelled_at = Some((i, event));
    Error::Cancel(cancel)
}
