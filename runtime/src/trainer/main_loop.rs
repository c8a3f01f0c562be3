//! The loop: setup, the epochs and their steps, the events between them, and the step
//! boundaries where signals are noticed and checkpoints written.

use burn::module::Module;

use super::dispatch::{Activity, Flowing, Halt};
use super::restore::DataPosition;
use super::run::Run;
use super::save::Boundary;
use super::{BatchIter, TrainData, TrainingStep};
use crate::callback::{Callbacks, CheckpointRequest, Event, StopReason};
use crate::error::{Cancel, Error, Result};
use crate::signal::{STOP_REQUEST, SignalGuard, signal_name};
use crate::state::{JOURNAL_DIR, KeepPolicy};

impl<M: Module, K, C: Callbacks<M, K>> Run<M, C, K> {
    pub(super) fn main_loop<D, S>(&mut self, data: &D, step: &mut S) -> Result<()>
    where
        D: TrainData,
        S: TrainingStep<M, D::Batch>,
    {
        if self.is_chief() {
            crate::state::create_dir_all_synced(&self.state.log_dir)
                .map_err(|e| Error::io(&self.state.log_dir, e))?;
            // The monitors' long histories go beside the checkpoints, in the run's journal.
            let journal = crate::state::journal_name(&self.run_id);
            let path = self.state.log_dir.join(JOURNAL_DIR).join(journal);
            self.state.monitors().keep_history_in(path);
        }
        self.dispatch.setup(&mut self.state)?;
        self.load_callback_states()?;
        if self.is_chief() {
            self.hold_saver_folders()?;
        }
        self.state.monitors().publish();

        // The first pass starts now: its first batch tells the number of steps per epoch.
        let Some((pass, first)) = self.during(Activity::Data, |run| run.first_pass(data))? else {
            return Ok(()); // a signal ended a resumed run's replay
        };

        // fastai's `fit` level: a CancelFit from any event below ends up here.
        match self.epochs(data, step, pass, Some(first)) {
            Ok(()) => Ok(()),
            Err(Halt::Cancel(Cancel::Fit)) => self.cancelled_fit(),
            Err(halt) => Err(self.settled(halt)),
        }
    }

    /// `before_train`, then the epochs and their steps.
    fn epochs<'d, D, S>(
        &mut self,
        data: &'d D,
        step: &mut S,
        mut pass: D::Iter<'d>,
        mut first: Option<D::Batch>,
    ) -> Flowing
    where
        D: TrainData,
        S: TrainingStep<M, D::Batch>,
    {
        // What setup and before_train put is one row of stats.json at the epoch before the
        // first (tensorpack's JSONWriter writes it in its before_train).
        self.deliver(Event::BeforeTrain)?;
        self.state.monitors().end_row();
        self.boundary(Boundary::BeforeTrain)?;
        let max_epoch = self.state.counters.max_epoch;
        let mut epoch = self.state.counters.starting_epoch;
        let mut local_step = self.first_local_step;
        while epoch <= max_epoch && !self.stopping() {
            let counters = &mut self.state.counters;
            counters.epoch_num = epoch;
            counters.local_step = std::mem::take(&mut local_step);
            self.state.control.epoch_cancelled = false;
            // fastai's epoch and train levels: a CancelEpoch or a CancelTrain from before_epoch
            // or a step ends up here.
            match self.epoch_steps(data, step, &mut pass, &mut first) {
                Ok(()) => {}
                Err(Halt::Cancel(Cancel::Epoch)) => self.cancelled_epoch()?,
                Err(Halt::Cancel(Cancel::Train)) => self.cancelled_train()?,
                Err(halt) => return Err(halt),
            }
            self.state.control.skip_epoch = false;
            self.state.execution.epoch_ended();
            if self.stopping() {
                break;
            }
            if self.fetches.plan.has_pending() {
                self.deliver_deferred(u64::MAX, true)?;
            }
            // The epoch's validation runs from here: a CancelEpoch from it ends the epoch.
            for event in [Event::AfterEpoch, Event::TriggerEpoch] {
                match self.deliver(event) {
                    Err(Halt::Cancel(Cancel::Epoch)) if self.state.control.epoch_cancelled_in_pass => {
                        self.cancelled_epoch()?
                    }
                    other => other?,
                }
            }
            self.state.monitors().end_row();
            self.state.monitors().end_epoch();
            self.agree_at_boundary()?;
            self.boundary(Boundary::EpochEnd)?;
            // `max_epoch(u64::MAX)` (train until stopped) ends after its last epoch.
            let Some(next) = epoch.checked_add(1) else { break };
            epoch = next;
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
    ) -> Flowing
    where
        D: TrainData,
        S: TrainingStep<M, D::Batch>,
    {
        self.deliver(Event::BeforeEpoch)?;
        // fastai's `before_train`: the epoch's training starts.
        self.state.control.training = true;
        let steps = self.state.counters.steps_per_epoch;
        while self.state.counters.local_step < steps && !self.stopping() && !self.skipping() {
            let batch = self.during(Activity::Data, |run| run.next_batch(data, pass, first))?;
            let (dispatch, counters) = (&self.dispatch, &self.state.counters);
            self.fetches.select(|i| dispatch.wants_fetch(i, counters));
            // fastai's batch level: a CancelBatch from before_step or inside the step.
            let ran = match self.dispatch.deliver_in_training(&mut self.state, Event::BeforeStep) {
                Ok(()) => self.run_step(batch, step),
                Err(error) => Err(error),
            };
            match ran {
                // fastai's `after_step` is inside the batch level: a CancelBatch there is the
                // batch's (its optimizer step already ran).
                Ok(()) => match self.after_step() {
                    Err(Halt::Cancel(Cancel::Batch)) => {
                        self.dispatch.deliver_in_training(&mut self.state, Event::AfterCancelBatch)?
                    }
                    other => other?,
                },
                Err(Halt::Cancel(Cancel::Batch)) => self.cancelled_batch()?,
                Err(halt) => return Err(halt),
            }
            // fastai's `after_batch`, after the batch level, cancelled or not.
            self.dispatch.deliver_after_batch(&mut self.state)?;
            self.deliver(Event::TriggerStep)?;
            // A row of stats.json at every step where scalars were put; the last step's
            // scalars join the epoch's row (tensorpack's JSONWriter). The event's records
            // go with it, in one batch.
            if self.state.monitors_ref().has_row() && self.state.counters.local_step != steps {
                self.state.monitors().end_row();
            } else if self.state.monitors_ref().has_pending() {
                self.state.monitors().publish();
            }
            self.boundary(Boundary::Step)?;
        }
        Ok(())
    }

    /// A callback returned `Flow::CancelBatch` while the batch ran: the step counts, every
    /// callback receives `after_cancel_batch`, then the callbacks that fetch nothing receive
    /// `after_step` (the step has no values); `trigger_step` follows as at any step.
    #[cold]
    fn cancelled_batch(&mut self) -> Flowing {
        let counters = &mut self.state.counters;
        counters.global_step += 1;
        counters.local_step += 1;
        self.dispatch.deliver_in_training(&mut self.state, Event::AfterCancelBatch)?;
        let fetches = &self.fetches;
        self.dispatch.deliver_in_training_to(
            &mut self.state,
            Event::AfterStep(crate::fetch::Fetched::none()),
            |i| !fetches.fetches(i),
        )
    }

    /// The first pass over the data (a resumed run replays the passes and batches it had taken)
    /// and its first batch, which tells the number of steps per epoch; `None` when a signal
    /// ended the replay.
    fn first_pass<'d, D: TrainData>(&mut self, data: &'d D) -> Result<Option<(D::Iter<'d>, D::Batch)>> {
        let mut pass = data.pass();
        self.pass_len = pass.batches_hint();
        if let Some(resumed) = &self.resumed {
            resumed.refuse_other_data(self.pass_len)?;
        }
        let target = self.resumed.take().map(|r| r.data_position);
        self.position = DataPosition { passes: 1, batches: 0 };
        if let Some(target) = target
            && self.replay(data, &mut pass, target)?
        {
            return Ok(None);
        }
        let mut first = pass.next_batch().transpose()?;
        if first.is_none() && self.position.batches > 0 {
            pass = data.pass();
            self.position = DataPosition { passes: self.position.passes + 1, batches: 0 };
            first = pass.next_batch().transpose()?;
        }
        let Some(first) = first else {
            return Err(Error::data("the training data produced no batch"));
        };
        self.position.batches += 1;
        if self.state.counters.steps_per_epoch == 0 {
            self.state.counters.steps_per_epoch = pass.batches_hint().unwrap_or(0);
        }
        if self.state.counters.steps_per_epoch == 0 {
            return Err(Error::data(
                "the number of steps per epoch is unknown: set it with Trainer::steps_per_epoch",
            ));
        }
        Ok(Some((pass, first)))
    }

    /// The epoch's next batch: the first pass's first, or the next of the pass, a new pass
    /// started when one ends.
    #[inline]
    fn next_batch<'d, D: TrainData>(
        &mut self,
        data: &'d D,
        pass: &mut D::Iter<'d>,
        first: &mut Option<D::Batch>,
    ) -> Result<D::Batch> {
        if let Some(batch) = first.take() {
            return Ok(batch);
        }
        let next = match pass.next_batch() {
            Some(batch) => batch?,
            None => {
                *pass = data.pass();
                self.position = DataPosition { passes: self.position.passes + 1, batches: 0 };
                pass.next_batch()
                    .ok_or_else(|| Error::data("the training data produced no batch in a new pass"))??
            }
        };
        self.position.batches += 1;
        Ok(next)
    }

    /// A callback returned `Flow::CancelEpoch` from `before_epoch`, a step or the epoch's
    /// validation: every callback receives `after_cancel_epoch`; the epoch then ends as any
    /// other, but a validation pass asked for in it does not run (fastai's cancelled epoch is
    /// not validated).
    #[cold]
    fn cancelled_epoch(&mut self) -> Flowing {
        self.state.control.epoch_cancelled = true;
        self.state.control.epoch_cancelled_in_pass = false;
        self.deliver(Event::AfterCancelEpoch)
    }

    /// A callback returned `Flow::CancelTrain` from `before_epoch` or a step: every callback
    /// receives `after_cancel_train`; the epoch then ends as any other (its validation runs from
    /// `trigger_epoch`). A `CancelEpoch` from `after_cancel_train` cancels the epoch, as fastai's
    /// `after_cancel_train` runs inside the epoch.
    #[cold]
    fn cancelled_train(&mut self) -> Flowing {
        match self.deliver(Event::AfterCancelTrain) {
            Err(Halt::Cancel(Cancel::Epoch)) => self.cancelled_epoch(),
            other => other,
        }
    }

    /// A callback returned `Flow::CancelFit`: training stops (the reason names the callback and
    /// the event), every callback receives `after_cancel_fit`, then (in `train`) `after_train`.
    #[cold]
    fn cancelled_fit(&mut self) -> Result<()> {
        let reason = self.dispatch.cancelled_fit_reason(&self.state);
        self.state.control.stop.record(StopReason::Asked(reason));
        self.deliver(Event::AfterCancelFit).map_err(|halt| self.settled(halt))
    }

    /// The signal received, or a stop asked through the trainer's `StopHandle` (as
    /// [`STOP_REQUEST`]): two relaxed loads.
    #[inline]
    fn stop_asked(&self) -> Option<i32> {
        match self.signals.as_ref().and_then(SignalGuard::received) {
            Some(signal) => Some(signal),
            None if self.state.stop.is_stopped() => Some(STOP_REQUEST),
            None => None,
        }
    }

    /// Between steps: notice a signal, and write the checkpoint some callback asked for. Costs a
    /// relaxed atomic load and two tests when there is nothing to do.
    #[inline]
    fn boundary(&mut self, at: Boundary) -> Flowing {
        // In a world every rank acts on a signal at the same step: after the next exchange.
        if let Some(signal) = self.stop_asked()
            && !self.state.control.stop.interrupted()
            && self.state.execution.act_on_signal_now(signal)
        {
            self.on_signal(signal);
        }
        if !self.state.control.checkpoints.is_empty() || !self.state.control.copies.is_empty() {
            // What the checkpoint's callbacks save includes every deferred value read so far:
            // a resumed run receives none of them twice and loses none.
            if self.fetches.plan.has_pending() {
                self.deliver_deferred(u64::MAX, true)?;
            }
            self.write_checkpoint(at)?;
        }
        Ok(())
    }

    /// Deliver `fetched` for the deferred values of the steps before `before` that arrived,
    /// each step's to the callbacks that asked at that step, in run order; with `flush`, read
    /// and wait for every step's.
    pub(super) fn deliver_deferred(&mut self, before: u64, flush: bool) -> Flowing {
        self.during(Activity::Trainer, |run| {
            while run.fetches.plan.next_arrived(before, flush)? {
                let plan = &run.fetches.plan;
                let receivers = plan.deferred_receivers();
                run.dispatch.deliver_in_training_to(
                    &mut run.state,
                    Event::Fetched(plan.deferred_view()),
                    |i| receivers.contains(&i),
                )?;
            }
            Ok(())
        })
    }

    /// A resumed run's data replayed to the position it had; `true` when a signal ended the
    /// replay (alone: in a world every rank replays to the same step and the signal is acted on
    /// together at the first boundary).
    fn replay<'d, D: TrainData>(
        &mut self,
        data: &'d D,
        pass: &mut D::Iter<'d>,
        target: DataPosition,
    ) -> Result<bool> {
        let alone = self.state.execution.acts_alone();
        for _ in 1..target.passes {
            if alone && let Some(signal) = self.stop_asked() {
                self.signalled_in_replay(signal, target);
                return Ok(true);
            }
            *pass = data.pass();
            self.position.passes += 1;
        }
        while self.position.batches < target.batches {
            if alone && let Some(signal) = self.stop_asked() {
                self.signalled_in_replay(signal, target);
                return Ok(true);
            }
            match pass.next_batch() {
                Some(batch) => drop(batch?),
                None => break,
            }
            self.position.batches += 1;
        }
        if alone && let Some(signal) = self.stop_asked() {
            self.signalled_in_replay(signal, target);
            return Ok(true);
        }
        Ok(false)
    }

    /// A signal while a resumed run replays its data: the run ends before its first step, as
    /// interrupted, without writing a checkpoint (the one resumed from stays the latest).
    #[cold]
    fn signalled_in_replay(&mut self, signal: i32, target: DataPosition) {
        let name = signal_name(signal);
        let resumed = match &self.last_checkpoint {
            Some(dir) => format!("the checkpoint resumed from, {}, stays the latest", dir.display()),
            None => "no checkpoint is written".into(),
        };
        crate::logging::info!(
            "{name} received while replaying the data to the resumed position (pass {} batch {} of pass {} batch {}): the run ends before its first step; {resumed}",
            self.position.passes,
            self.position.batches,
            target.passes,
            target.batches
        );
        self.state.control.stop.record(StopReason::interrupted(&name));
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
                "{name} received: stopping at this step boundary after writing a checkpoint; {name} again (a second later) exits at once"
            );
        }
        // Into every saver's folder, as it keeps them (the default folder without a saver); a
        // request already made for a folder at this boundary stands.
        let control = &mut self.state.control;
        let savers = if control.savers.is_empty() {
            vec![CheckpointRequest {
                root: None,
                policy: KeepPolicy::default(),
                time: None,
                run_start: None,
                keep_going: false,
            }]
        } else {
            control.savers.clone()
        };
        for saver in savers {
            if !control.checkpoints.iter().any(|r| r.root == saver.root) {
                control.checkpoints.push(saver);
            }
        }
        self.state.control.stop.record(StopReason::interrupted(&name));
    }
}
