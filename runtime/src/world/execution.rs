//! How a run executes, chosen once when training starts: on one device, or as one rank of a
//! data-parallel world (over the [`World`]'s transport, `transport.rs`). The
//! trainer's loop calls it at its few points (the start, each step's gradients, an epoch's end,
//! the end, a failure) and never asks which it is.

use burn::module::Module;
use burn::optim::GradientsParams;

use super::World;
use super::agree::{Agreed, Agreement, Asks};
use crate::error::{Error, Result, WorldError};
use crate::state::HyperParams;

/// One device, or one rank of a data-parallel world.
pub(crate) enum Execution {
    /// Training on one device: every call below is a no-op the compiler folds away.
    OneDevice,
    /// One rank of a data-parallel world, agreeing with the others at every exchange.
    DataParallel(Box<Agreement>),
}

impl Execution {
    /// The execution for `world` (`None`: one device); in a world, the first exchange gives
    /// every replica the chief's weights (before a checkpoint is read: with threads the
    /// replicas take the chief's parameter ids too). With a `seed`, the chief's lazily
    /// initialized parameters are drawn from it, once every rank has arrived.
    pub(crate) fn start<M: Module + 'static>(
        world: Option<World>,
        hyper: &HyperParams,
        model: M,
        seed: Option<u64>,
    ) -> Result<(Execution, M)> {
        match world {
            None => Ok((Execution::OneDevice, model)),
            Some(world) => {
                let mut agreement = Agreement::new(world, hyper);
                let model = agreement.start(model, hyper, seed)?;
                Ok((Execution::DataParallel(Box::new(agreement)), model))
            }
        }
    }

    /// This rank (0: the chief, and the one device).
    #[inline]
    pub(crate) fn rank(&self) -> usize {
        match self {
            Execution::OneDevice => 0,
            Execution::DataParallel(agreement) => agreement.rank(),
        }
    }

    /// The number of ranks (1 on one device).
    #[inline]
    pub(crate) fn size(&self) -> usize {
        match self {
            Execution::OneDevice => 1,
            Execution::DataParallel(agreement) => agreement.world.size(),
        }
    }

    /// Whether this rank writes the run's files.
    #[inline]
    pub(crate) fn is_chief(&self) -> bool {
        self.rank() == 0
    }

    /// The names `World::mean_of` averages over the ranks (none on one device).
    pub(crate) fn means(&self) -> &[&'static str] {
        match self {
            Execution::OneDevice => &[],
            Execution::DataParallel(agreement) => &agreement.world.means,
        }
    }

    /// Whether training stops at this boundary: on one device when a callback asked
    /// (`asked`), in a world once every rank agreed.
    #[inline]
    pub(crate) fn stopping(&self, asked: bool) -> bool {
        match self {
            Execution::OneDevice => asked,
            Execution::DataParallel(agreement) => agreement.stopping(),
        }
    }

    /// Whether the rest of the epoch is skipped: on one device when a callback asked, in a
    /// world once every rank agreed.
    #[inline]
    pub(crate) fn skipping(&self, asked: bool) -> bool {
        match self {
            Execution::OneDevice => asked,
            Execution::DataParallel(agreement) => agreement.skipping(),
        }
    }

    /// A signal (or a stop asked through the trainer's handle) noticed at a boundary: `true`
    /// when this rank acts on it now (one device); in a world it is noted and every rank acts
    /// on it together, after the next exchange.
    #[inline]
    pub(crate) fn act_on_signal_now(&mut self, signal: i32) -> bool {
        match self {
            Execution::OneDevice => true,
            Execution::DataParallel(agreement) => {
                agreement.note_signal(signal);
                false
            }
        }
    }

    /// The step's gradients, averaged over the ranks in a world (with the words: `asks`, the
    /// hyper-parameters, `means`); on one device, `grads` unchanged.
    #[inline]
    pub(crate) fn step<M: Module>(
        &mut self,
        model: &M,
        grads: GradientsParams,
        asks: &Asks,
        hyper: &mut HyperParams,
        means: &mut [Option<f64>],
    ) -> Result<(Option<GradientsParams>, Agreed)> {
        match self {
            Execution::OneDevice => Ok((Some(grads), Agreed::default())),
            Execution::DataParallel(agreement) => {
                agreement.exchange_words(model, Some(grads), asks, hyper, means)
            }
        }
    }

    /// An epoch's end: in a world, the words exchanged (no gradients).
    #[inline]
    pub(crate) fn boundary<M: Module>(
        &mut self,
        model: &M,
        asks: &Asks,
        hyper: &mut HyperParams,
    ) -> Result<Agreed> {
        match self {
            Execution::OneDevice => Ok(Agreed::default()),
            Execution::DataParallel(agreement) => agreement.epoch_end(model, asks, hyper),
        }
    }

    /// The end of an epoch, after its boundary: a skip agreed for it is over.
    #[inline]
    pub(crate) fn epoch_ended(&mut self) {
        if let Execution::DataParallel(agreement) = self {
            agreement.end_skip();
        }
    }

    /// A run that ended well on this rank meets the others once more (the last exchange);
    /// one that failed tells them (`fail`). A run that ended well becomes
    /// [`WorldError::RankFailed`](crate::WorldError::RankFailed) when another rank failed.
    pub(crate) fn end<M: Module>(
        &mut self,
        result: Result<()>,
        model: Option<&M>,
        asks: &Asks,
        hyper: &mut HyperParams,
    ) -> Result<Option<Agreed>> {
        let Execution::DataParallel(agreement) = self else { return result.map(|()| None) };
        match (result, model) {
            (Ok(()), Some(model)) if agreement.failed().is_none() => {
                let (_, agreed) = agreement.exchange_words(model, None, asks, hyper, &mut [])?;
                // The final exchange: nothing more is expected of this rank.
                agreement.world.settled = true;
                Ok(Some(agreed))
            }
            (Ok(()), None) => {
                agreement.fail::<M>(None);
                Err(Error::msg("the model was lost"))
            }
            (Ok(()), Some(_)) => Err(WorldError::RankFailed { rank: agreement.failed().unwrap_or(0) }.into()),
            (Err(error), model) => {
                // Where the others may wait out of an exchange's reach (NCCL: inside backward),
                // this rank's wait for them is bounded.
                let _bounded = agreement.world.failing(&error);
                agreement.fail(model);
                Err(error)
            }
        }
    }

    /// A failure on this rank before the loop (`error`, a refused log directory): told to the
    /// others at the exchange they wait in. Where they may wait out of its reach instead (NCCL:
    /// inside their first backward), this rank's wait is bounded, as at the end.
    pub(crate) fn fail<M: Module>(&mut self, model: Option<&M>, error: &crate::error::Error) {
        if let Execution::DataParallel(agreement) = self {
            let _bounded = agreement.world.failing(error);
            agreement.fail(model);
        }
    }

    /// Sum `values` over the ranks, in place (nothing to do on one device).
    pub(crate) fn sum<M: Module>(&mut self, model: &M, values: &mut [f64]) -> Result<()> {
        match self {
            Execution::OneDevice => Ok(()),
            Execution::DataParallel(agreement) => agreement.sum(model, values),
        }
    }

    /// Whether this run acts on a signal by itself, at once (one device), rather than with
    /// every rank after the next exchange.
    #[inline]
    pub(crate) fn acts_alone(&self) -> bool {
        matches!(self, Execution::OneDevice)
    }

    /// The chief wrote a checkpoint in `took` (a warning when `mpirun` would cut one that slow
    /// short on an interrupt).
    pub(crate) fn checkpoint_written(&mut self, took: std::time::Duration) {
        if let Execution::DataParallel(agreement) = self {
            agreement.checkpoint_written(took);
        }
    }

    /// Whether a callback may cancel (fastai's `Cancel*`): not in a world, where every rank
    /// must agree on the steps it runs.
    pub(crate) fn cancels_allowed(&self) -> bool {
        matches!(self, Execution::OneDevice)
    }

    /// Whether the world's transport prepares the replica before each step's forward (NCCL):
    /// on one device `false`, in a world a `match` on the transport per step.
    #[inline]
    pub(crate) fn prepares_replica(&self) -> bool {
        match self {
            Execution::OneDevice => false,
            Execution::DataParallel(agreement) => agreement.world.prepares_replica(),
        }
    }

    /// The replica made ready for a step's forward by the world's transport (NCCL: its
    /// parameters marked distributed, so that its backward returns them averaged).
    pub(crate) fn prepare_replica<M: Module>(&self, model: M) -> M {
        match self {
            Execution::OneDevice => model,
            Execution::DataParallel(agreement) => agreement.world.prepare_replica(model),
        }
    }
}
