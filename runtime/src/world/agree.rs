//! One rank's side of the agreement: the words of each exchange, the failure protocol (a rank
//! that fails meets the others once more, at the exchange they wait in, with its failure word
//! set), and sums over ranks for callbacks.

use burn::module::Module;
use burn::optim::GradientsParams;

use super::World;
use super::words::{self, Kind, Layout};
use crate::error::{Error, Result};
use crate::state::HyperParams;

/// One rank's side of the agreement.
pub(crate) struct Agreement {
    pub(crate) world: World,
    pub(crate) layout: Layout,
    pub(crate) words: Vec<f64>,
    /// The rank whose failure every rank has seen; no exchange follows one.
    pub(crate) failed: Option<usize>,
    /// An exchange did not return (a panic inside the transport): the others cannot be met.
    broken: bool,
    /// A signal this rank received, not yet agreed on.
    pub(crate) signal: Option<i32>,
    /// The stop every rank agreed on.
    pub(crate) stop: Option<String>,
    /// Whether every rank skips the rest of this epoch.
    pub(crate) skip: bool,
}

impl Agreement {
    pub(crate) fn new(world: World, hyper: &HyperParams) -> Agreement {
        let layout = Layout { size: world.size(), hypers: hyper.names().count(), means: world.means.len() };
        Agreement {
            world,
            layout,
            words: vec![0.0; layout.len()],
            failed: None,
            broken: false,
            signal: None,
            stop: None,
            skip: false,
        }
    }

    /// One exchange of the words (as the caller filled them) and `grads`; until it returns the
    /// agreement is marked broken, so that a panic inside the transport is not followed by an
    /// attempt to meet the other ranks again.
    pub(crate) fn exchange<M: Module>(
        &mut self,
        model: &M,
        grads: Option<GradientsParams>,
    ) -> Result<Option<GradientsParams>> {
        self.broken = true;
        let averaged = self.world.exchange(model, grads, &mut self.words)?;
        self.broken = false;
        Ok(averaged)
    }

    /// A step's exchange with nothing asked (the all-reduce benchmark).
    pub(crate) fn exchange_step<M: Module>(&mut self, model: &M, grads: GradientsParams) -> Result<()> {
        self.words.fill(0.0);
        self.layout.mark(&mut self.words, Kind::Step);
        self.exchange(model, Some(grads)).map(drop)
    }

    pub(crate) fn rank(&self) -> usize {
        self.world.rank()
    }

    /// The first exchange: every replica takes the chief's weights. Fails when a rank is gone.
    pub(crate) fn start<M: Module + 'static>(&mut self, model: M) -> Result<M> {
        self.words.fill(0.0);
        self.layout.mark(&mut self.words, Kind::Start);
        self.broken = true;
        let model = self.world.broadcast_model(model, &mut self.words);
        self.broken = false;
        self.check(Kind::Start)?;
        Ok(model)
    }

    /// After a failure on this rank: tell the others at the exchange they are waiting in (the
    /// words carry no gradients), unless a failure was already agreed.
    pub(crate) fn fail<M: Module>(&mut self, model: Option<&M>) {
        if self.failed.is_some() {
            return;
        }
        let rank = self.rank();
        if self.broken {
            self.world.abort(&format!("rank {rank} failed inside the world's exchange"));
            return;
        }
        let Some(model) = model else {
            self.world.abort(&format!("rank {rank} failed and lost its model"));
            return;
        };
        self.words.fill(0.0);
        self.words[self.layout.failed(rank)] = 1.0;
        let _ = self.world.exchange(model, None, &mut self.words);
        self.failed = Some(self.layout.first_failed(&self.words).unwrap_or(rank));
        self.world.settled = true;
    }

    /// After an exchange: a failure anywhere ends this rank's run; ranks at different kinds of
    /// exchange are an error on every rank.
    pub(crate) fn check(&mut self, kind: Kind) -> Result<()> {
        if let Some(rank) = self.layout.first_failed(&self.words) {
            self.failed = Some(rank);
            self.world.settled = true;
            return Err(Error::RankFailed { rank });
        }
        let (k, size) = (f64::from(kind as u8), self.layout.size as f64);
        if self.words[words::LEN] != self.layout.len() as f64 * size {
            // Every rank fails here, each naming itself; none exchanges again.
            self.failed = Some(self.world.rank());
            self.world.settled = true;
            return Err(Error::msg(format!(
                "the ranks of the data-parallel world exchange different numbers of values ({} here): every rank must register the same hyper-parameters and give its world the same `mean_of` names",
                self.layout.len()
            )));
        }
        if self.words[words::KIND] != k * size || self.words[words::KIND_SQUARED] != k * k * size {
            // Not every rank is at this kind of exchange: the world cannot go on. The ranks that
            // are elsewhere may wait for this one: under MPI the job ends (the world is not
            // settled, and its drop aborts).
            self.failed = Some(self.world.rank());
            return Err(Error::msg(format!(
                "the ranks of the data-parallel world are at different points: this rank (rank {}) is at {}; a callback that sums over ranks (Context::sum_over_ranks) must run on every rank (chief_only = false) at the same events",
                self.world.rank(),
                Kind::name(f64::from(kind as u8)),
            )));
        }
        Ok(())
    }

    /// Sum `values` over the ranks, in place (callbacks, through
    /// [`Context::sum_over_ranks`](crate::callback::Context::sum_over_ranks)).
    pub(crate) fn sum<M: Module>(&mut self, model: &M, values: &mut [f64]) -> Result<()> {
        if let Some(rank) = self.failed {
            return Err(Error::RankFailed { rank });
        }
        for chunk in values.chunks_mut(words::USER) {
            self.words.fill(0.0);
            self.layout.mark(&mut self.words, Kind::Sum);
            for (i, value) in chunk.iter().enumerate() {
                self.words[self.layout.user(i)] = *value;
            }
            self.exchange(model, None)?;
            self.check(Kind::Sum)?;
            for (i, value) in chunk.iter_mut().enumerate() {
                *value = self.words[self.layout.user(i)];
            }
        }
        Ok(())
    }
}
