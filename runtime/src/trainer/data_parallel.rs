//! The trainer's side of the execution: what this rank asks of every rank at an exchange (a
//! stop, a skip, its counters), and what it does with what the ranks agreed (a signal, a stop or
//! a skip asked anywhere applies here). On one device every call is a no-op.

use burn::module::Module;
use burn::optim::GradientsParams;

use super::run::Run;
use crate::callback::{Callbacks, StopReason};
use crate::error::{Error, Result};
use crate::world::agree::{Agreed, Asks};

impl<M: Module, K, C: Callbacks<M, K>> Run<M, C, K> {
    /// Whether training stops at this boundary: in a world, only once every rank agreed.
    #[inline]
    pub(super) fn stopping(&self) -> bool {
        self.state.execution.stopping(self.state.control.stop.is_stopping())
    }

    /// Whether the rest of the epoch is skipped: in a world, only once every rank agreed.
    #[inline]
    pub(super) fn skipping(&self) -> bool {
        self.state.execution.skipping(self.state.control.skip_epoch)
    }

    /// What this rank brings to an exchange.
    #[inline]
    fn asks(&self) -> Asks {
        let state = &self.state;
        Asks {
            stop: state.control.stop.is_stopping(),
            skip: state.control.skip_epoch,
            steps_per_epoch: state.counters.steps_per_epoch,
            global_step: state.counters.global_step,
        }
    }

    /// The step's gradients, averaged over the ranks in a world (with the values averaged at
    /// this step); `None` when this rank has none to apply.
    #[inline]
    pub(super) fn agree_step(&mut self, grads: GradientsParams) -> Result<Option<GradientsParams>> {
        let asks = self.asks();
        let means = self.fetches.means_before_exchange(asks.global_step)?;
        let state = &mut self.state;
        let model = state.model.as_ref().expect("the model is present between steps");
        let (grads, agreed) = state.execution.step(model, grads, &asks, &mut state.hyper, means)?;
        self.fetches.means_after_exchange();
        self.apply(agreed);
        Ok(grads)
    }

    /// The exchange at the end of an epoch: the words only.
    #[inline]
    pub(super) fn agree_at_boundary(&mut self) -> Result<()> {
        let asks = self.asks();
        let state = &mut self.state;
        let model = state.model.as_ref().ok_or_else(|| Error::msg("the model was lost"))?;
        let agreed = state.execution.boundary(model, &asks, &mut state.hyper)?;
        self.apply(agreed);
        Ok(())
    }

    /// The last exchange of a run that ended well on this rank, or this rank's failure told to
    /// the others; a run that ended well becomes `WorldError::RankFailed` when another rank failed.
    /// A signal agreed only there came after the last exchange of training: it stops nothing,
    /// and every rank reports it as late (as one device does a signal after its last boundary).
    pub(super) fn end_execution(&mut self, result: Result<()>) -> Result<()> {
        let asks = self.asks();
        let state = &mut self.state;
        if let Some(mut agreed) =
            state.execution.end(result, state.model.as_ref(), &asks, &mut state.hyper)?
        {
            if !matches!(self.state.control.stop.reason(), Some(StopReason::Interrupted { .. })) {
                self.late_world_signal = agreed.signal.take();
            }
            self.apply(agreed);
        }
        Ok(())
    }

    /// What the ranks agreed applies here: a signal as this rank's own, a stop asked by a rank,
    /// a skip.
    #[inline]
    fn apply(&mut self, agreed: Agreed) {
        if let Some(signal) = agreed.signal
            && !self.state.control.stop.interrupted()
        {
            self.on_signal(signal);
        }
        if let Some(rank) = agreed.stop_rank {
            self.state
                .control
                .stop
                .record(StopReason::Asked(format!("rank {rank} asked every rank to stop")));
        }
        if agreed.skip {
            self.state.control.skip_epoch = true;
        }
    }
}
