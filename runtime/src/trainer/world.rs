//! A run inside a data-parallel world: the agreement every exchange carries (stop, skip, signal,
//! failure, the chief's hyper-parameters, averaged values), and where the loop exchanges: once
//! at the start (the chief's weights), once per step (inside the step's gradient reduction),
//! once per epoch end, and once at the end (or once more on a failure, so that no rank waits).

use burn::module::Module;
use burn::optim::GradientsParams;

use super::run::Run;
use crate::callback::Callbacks;
use crate::error::{Error, Result};
use crate::world::words::{self, Kind};

impl<M: Module, K, C: Callbacks<M, K>> Run<M, C, K> {
    /// Whether training stops at this boundary: in a world, only once every rank agreed.
    #[inline]
    pub(super) fn stopping(&self) -> bool {
        match &self.state.world {
            None => self.state.control.stop.is_some(),
            Some(agreement) => agreement.stop.is_some(),
        }
    }

    /// Whether the rest of the epoch is skipped: in a world, only once every rank agreed.
    #[inline]
    pub(super) fn skipping(&self) -> bool {
        match &self.state.world {
            None => self.state.control.skip_epoch,
            Some(agreement) => agreement.skip,
        }
    }

    /// `World::mean_of` names a value some callback fetches only as a device tensor: an error
    /// (only host values are averaged), the same on every rank.
    pub(super) fn check_means(&self) -> Result<()> {
        let Some(agreement) = &self.state.world else { return Ok(()) };
        for name in &agreement.world.means {
            if self.plan.host_bit(name).is_none() && self.plan.declares(name) {
                return Err(Error::Fetch(format!(
                    "World::mean_of(\"{name}\"): the callbacks fetch `{name}` only as a device tensor or a deferred value, and only the step's own host values are averaged over the ranks; fetch it as a host value (f32, f64) without `deferred`, or leave it out of mean_of"
                )));
            }
        }
        Ok(())
    }

    pub(super) fn is_chief(&self) -> bool {
        self.state.rank == 0
    }

    /// The step's exchange: this rank's gradients for the average over ranks, with the words.
    #[cold]
    pub(super) fn agree_step(&mut self, grads: GradientsParams) -> Result<Option<GradientsParams>> {
        self.fill_words(true);
        if self.mean_mask != 0 {
            // The averaged values are read before the exchange (with this step's other fetches,
            // in the same transfer) and travel in it.
            self.plan.fill(
                &self.outputs,
                self.fetch_mask | self.mean_mask,
                self.state.counters.global_step,
            )?;
            self.prefilled = true;
            let agreement = self.state.world.as_mut().expect("in a world");
            for (k, &bit) in self.mean_slots.iter().enumerate() {
                if bit & self.mean_mask != 0 {
                    let value = self.plan.host_scalar(bit, "World::mean_of")?;
                    let slot = agreement.layout.mean(k);
                    agreement.words[slot] = f64::from(value);
                    agreement.words[slot + 1] = 1.0;
                }
            }
        }
        let state = &mut self.state;
        let agreement = state.world.as_mut().expect("in a world");
        let model = state.model.as_ref().expect("the model is present between steps");
        let grads = agreement.exchange(model, Some(grads))?;
        self.read_words(true)?;
        if self.mean_mask != 0 {
            // The mean over the ranks that read the value (every rank, unless some callback's
            // `wants_fetch` answers differently on different ranks).
            let agreement = self.state.world.as_ref().expect("in a world");
            for (k, &bit) in self.mean_slots.iter().enumerate() {
                let slot = agreement.layout.mean(k);
                if bit & self.mean_mask != 0 && agreement.words[slot + 1] > 0.0 {
                    let mean = agreement.words[slot] / agreement.words[slot + 1];
                    self.plan.set_host_scalar(bit, mean as f32);
                }
            }
        }
        Ok(grads)
    }

    /// The exchange at the end of an epoch (and at the end of training): the words only.
    #[cold]
    pub(super) fn agree_boundary(&mut self) -> Result<()> {
        self.fill_words(false);
        let state = &mut self.state;
        let agreement = state.world.as_mut().expect("in a world");
        let model = state.model.as_ref().expect("the model is present between steps");
        agreement.exchange(model, None)?;
        self.read_words(false)
    }

    /// The last exchange of a run that ended well on this rank, or this rank's failure told to
    /// the others; a run that ended well becomes [`Error::RankFailed`] when another rank failed.
    pub(super) fn agree_end(&mut self, result: Result<()>) -> Result<()> {
        let Some(agreement) = self.state.world.as_mut() else { return result };
        match result {
            Ok(()) if agreement.failed.is_none() => {
                let result = self.agree_boundary();
                if result.is_ok()
                    && let Some(agreement) = self.state.world.as_mut()
                {
                    // The final exchange: nothing more is expected of this rank.
                    agreement.world.settled = true;
                }
                result
            }
            Ok(()) => Err(Error::RankFailed { rank: agreement.failed.unwrap_or(0) }),
            Err(error) => {
                agreement.fail(self.state.model.as_ref());
                Err(error)
            }
        }
    }

    /// This rank's words: what it asks of all, its steps per epoch, and (the chief) the
    /// hyper-parameters.
    fn fill_words(&mut self, step: bool) {
        let rank = self.state.rank;
        let state = &mut self.state;
        let agreement = state.world.as_mut().expect("in a world");
        let (layout, words) = (agreement.layout, &mut agreement.words);
        words.fill(0.0);
        layout.mark(words, if step { Kind::Step } else { Kind::Boundary });
        if state.control.stop.is_some() && agreement.stop.is_none() {
            words[layout.stop(rank)] = 1.0;
        }
        if state.control.skip_epoch && !agreement.skip {
            words[words::SKIP] = 1.0;
        }
        match agreement.signal {
            Some(signal) if signal == SIGINT => words[words::SIGINT] = 1.0,
            Some(_) => words[words::SIGTERM] = 1.0,
            None => {}
        }
        if step {
            words[words::STEPS_PER_EPOCH] = state.counters.steps_per_epoch as f64;
            words[words::GLOBAL_STEP] = state.counters.global_step as f64;
        }
        if rank == 0 {
            // At most the hyper-parameters registered when training started (one registered later,
            // through `Context::hyper_mut`, is an error at the reading, on every rank).
            for (i, name) in state.hyper.names().take(layout.hypers).enumerate() {
                words[layout.hyper(i)] = state.hyper.get(name).unwrap_or(0.0);
            }
        }
    }

    /// Act on the summed words: a failure ends this rank's run; a signal, a stop or a skip asked
    /// anywhere applies here; the chief's hyper-parameters are adopted.
    fn read_words(&mut self, step: bool) -> Result<()> {
        let rank = self.state.rank;
        let size;
        {
            let agreement = self.state.world.as_mut().expect("in a world");
            size = agreement.layout.size;
            agreement.check(if step { Kind::Step } else { Kind::Boundary })?;
        }
        let agreement = self.state.world.as_ref().expect("in a world");
        let (layout, words) = (agreement.layout, &agreement.words);
        let interrupted = words[words::SIGINT] + words[words::SIGTERM] > 0.0;
        let sigint = words[words::SIGINT] > 0.0;
        let stop_rank = layout.first_stop(words);
        let skip = words[words::SKIP] > 0.0;
        let steps_sum = words[words::STEPS_PER_EPOCH];
        let global_sum = words[words::GLOBAL_STEP];
        if interrupted && self.interrupted.is_none() {
            self.on_signal(if sigint { SIGINT } else { SIGTERM });
        }
        if let Some(stop_rank) = stop_rank
            && self.state.control.stop.is_none()
        {
            self.state.control.stop = Some(format!("rank {stop_rank} asked every rank to stop"));
        }
        if stop_rank.is_some() || interrupted {
            let reason = self.state.control.stop.clone().unwrap_or_else(|| "stopped".into());
            self.state.world.as_mut().expect("in a world").stop = Some(reason);
        }
        if skip {
            self.state.control.skip_epoch = true;
            self.state.world.as_mut().expect("in a world").skip = true;
        }
        let own = self.state.counters.steps_per_epoch as f64;
        if step && steps_sum != own * size as f64 {
            return Err(Error::data(format!(
                "the ranks take different numbers of steps per epoch ({own} here, {steps_sum} over {size} ranks): give every rank a shard with the same number of batches (World::shard) or set Trainer::steps_per_epoch"
            )));
        }
        let own_step = self.state.counters.global_step as f64;
        if step && global_sum != own_step * size as f64 {
            return Err(Error::checkpoint(format!(
                "the ranks are at different global steps ({own_step} here, {global_sum} summed over {size} ranks): every rank must resume from the same checkpoint (a filesystem the ranks share), or none"
            )));
        }
        if self.state.hyper.names().count() != layout.hypers {
            return Err(Error::HyperParam(format!(
                "a hyper-parameter was registered during data-parallel training ({} now, {} at the start): register every hyper-parameter with the trainer's builder, so that every rank agrees on them",
                self.state.hyper.names().count(),
                layout.hypers
            )));
        }
        if rank != 0 {
            // The chief's values; nothing is collected (nor allocated) unless one changed.
            let agreement = self.state.world.as_ref().expect("in a world");
            let (layout, words) = (agreement.layout, &agreement.words);
            let hyper = &self.state.hyper;
            let changed: Vec<(String, f64)> = hyper
                .names()
                .enumerate()
                .map(|(i, name)| (name, words[layout.hyper(i)]))
                .filter(|&(name, value)| hyper.get(name) != Some(value))
                .map(|(name, value)| (name.to_owned(), value))
                .collect();
            for (name, value) in changed {
                self.state.hyper.set(&name, value)?;
            }
        }
        Ok(())
    }
}

const SIGINT: i32 = 2;
const SIGTERM: i32 = 15;
