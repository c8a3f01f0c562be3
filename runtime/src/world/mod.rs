//! Data-parallel training: a world of ranks, each a replica of the model with its own optimizer
//! and its own shard of the data, whose gradients are averaged at every step so that the
//! replicas stay identical (tensorpack's `SyncMultiGPUTrainerReplicated` and `HorovodTrainer`).
//!
//! The ranks meet over a transport (`transport.rs`, a file per transport), chosen once when the
//! world is made:
//! - [`Threads`]: one process, one thread per device; gradients are moved to the chief's device
//!   with burn's `GradientsParams::to_device`, summed with burn's `GradientsAccumulator`, averaged
//!   and sent back (any backend: several GPUs, or the CPU for tests). With the feature `cuda` and
//!   every device a CUDA device, burn averages the gradients itself inside `backward()` (NCCL,
//!   through its `DistributedContext`) and the exchange carries only the control words.
//! - `World::mpi` (feature `mpi`): one process per rank, started by `mpirun`; each step's
//!   gradients are flattened into one host buffer and summed with one `MPI_Allreduce`.
//!
//! The user's code is the same [`Trainer`](crate::trainer::Trainer) with one more builder call,
//! [`Trainer::world`](crate::trainer::Trainer::world). Every rank builds its model, optimizer,
//! data and callbacks as a single-device run would; the trainer then
//! - starts every replica from the chief's weights;
//! - runs `chief_only` callbacks (writers, savers, validation, progress) on rank 0 only, the others
//!   on every rank;
//! - folds a control word into each step's collective call: a stop, a skipped epoch, a signal or
//!   an error on any rank stops every rank at the same step boundary, and the chief's
//!   hyper-parameters are adopted by every rank before the optimizer runs;
//! - lets only the chief write into the log directory; every rank resumes from the chief's
//!   checkpoints (a shared filesystem) at its own position in its shard.
//!
//! ```no_run
//! # use burn_stoker::prelude::*;
//! # use burn_stoker::world::Threads;
//! # use burn::nn::{Linear, LinearConfig};
//! # use burn::optim::SgdConfig;
//! # use burn::tensor::{Device, Tensor};
//! let devices = vec![Device::default().autodiff(), Device::default().autodiff()];
//! let reports = Threads::new(devices).run(|world| {
//!     let device = world.device().clone();
//!     let model: Linear = LinearConfig::new(4, 1).init(&device);
//!     let batches: Vec<(Tensor<2>, Tensor<2>)> = (0..8)
//!         .map(|_| (Tensor::ones([8, 4], &device), Tensor::zeros([8, 1], &device)))
//!         .collect();
//!     Trainer::new(model, SgdConfig::new().init(), world.shard(batches))
//!         .world(world)
//!         .train(|model: &Linear, (x, y): (Tensor<2>, Tensor<2>), _step: &mut Step<'_>| {
//!             (model.forward(x) - y).powi_scalar(2).mean()
//!         })
//! })?;
//! let chief = &reports[0];
//! # Ok::<(), burn_stoker::Error>(())
//! ```

pub(crate) mod agree;
pub(crate) mod buffers;
mod check;
mod execution;
pub(crate) mod flat;
mod launcher;
#[cfg(feature = "mpi")]
pub(crate) mod mpi;
#[cfg(feature = "cuda")]
mod nccl;
mod shard;
#[cfg(test)]
mod tests;
mod threads;
mod transport;
pub(crate) mod turns;
#[cfg(any(feature = "cuda", test))]
mod watchdog;
mod words;

use std::any::Any;
use std::fmt;
use std::time::Duration;

use burn::module::Module;
use burn::optim::GradientsParams;
use burn::tensor::Device;

pub(crate) use execution::Execution;
pub use shard::Shard;
pub use threads::Threads;
use transport::{Seat, Transport};

use crate::error::{Error, Result};

/// One rank's place in a data-parallel world: its rank (0 is the chief), the world's size, and
/// the link to the other ranks. Given to [`Trainer::world`](crate::trainer::Trainer::world).
#[doc(alias = "DDP")]
#[doc(alias = "DistributedDataParallel")]
#[doc(alias = "MultiDeviceLearningStrategy")]
pub struct World {
    /// This rank, the size, the device.
    seat: Seat,
    /// How the ranks meet (`transport.rs`).
    link: Link,
    /// Fetched values averaged over the ranks.
    pub(crate) means: Vec<&'static str>,
    /// Whether the replicas are compared at each epoch's end (see [`check_replicas`](Self::check_replicas)).
    pub(crate) check_replicas: bool,
    /// Whether the other ranks expect nothing more of this one (its training ended with the
    /// final exchange, or a failure was agreed on).
    pub(crate) settled: bool,
}

impl fmt::Debug for World {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("World")
            .field("rank", &self.seat.rank)
            .field("size", &self.seat.size)
            .field("transport", &self.link.name())
            .field("means", &self.means)
            .finish()
    }
}

/// A world dropped while the other ranks may still wait for this one (its process leaves
/// training by a panic outside the trainer's reach, or never trains) ends them through its
/// transport (MPI: `MPI_Abort`) rather than leave them waiting.
impl Drop for World {
    fn drop(&mut self) {
        if !self.settled {
            self.abort(&format!(
                "rank {} left the data-parallel world before its training ended; ending every rank",
                self.seat.rank
            ));
        }
    }
}

impl World {
    /// Rank `rank` of a world of `size` on `device`, meeting the others over `link`.
    fn new(rank: usize, size: usize, device: Device, link: Link) -> World {
        World {
            seat: Seat { rank, size, device },
            link,
            means: Vec::new(),
            check_replicas: true,
            settled: false,
        }
    }

    /// Whether the ranks take turns at burn's process-wide state when the run is seeded
    /// (`turns.rs`): ranks that compute on it at once ([`Transport::shares_burn_state`]), two or
    /// more.
    pub(crate) fn takes_turns(&self) -> bool {
        self.link.shares_burn_state() && self.seat.size > 1
    }

    /// Whether the transport prepares the replica before each step's forward.
    #[inline]
    pub(crate) fn prepares_replica(&self) -> bool {
        self.link.prepares_replica()
    }

    /// The replica made ready for a step's forward ([`Transport::prepare_replica`]).
    pub(crate) fn prepare_replica<M: Module>(&self, model: M) -> M {
        self.link.prepare_replica(model)
    }

    /// How long the launcher leaves a rank after passing on an interrupt ([`Transport::kill_grace`]).
    pub(crate) fn kill_grace(&self) -> Option<Duration> {
        self.link.kill_grace()
    }

    /// This rank failed with `error` and is about to tell the others: what bounds its wait,
    /// held until it has ([`Transport::failing`]).
    pub(crate) fn failing(&self, error: &Error) -> Option<Box<dyn Any>> {
        self.link.failing(&self.seat, error)
    }

    /// This rank (0 is the chief).
    pub fn rank(&self) -> usize {
        self.seat.rank
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.seat.size
    }

    /// Whether this rank is the chief (rank 0): the one that runs `chief_only` callbacks and
    /// writes into the log directory.
    pub fn is_chief(&self) -> bool {
        self.seat.rank == 0
    }

    /// The device this rank trains on.
    pub fn device(&self) -> &Device {
        &self.seat.device
    }

    /// This rank's shard of `data`: disjoint from every other rank's, and the same number of
    /// batches on every rank (see [`Shard`]). The global batch is the world's size times the
    /// batch size.
    pub fn shard<D: Shard>(&self, data: D) -> D {
        data.shard(self.seat.rank, self.seat.size)
    }

    /// Compare the replicas at the end of each epoch (on by default): the chief sends a checksum
    /// of its parameters' bits in the epoch's last exchange, and every rank compares its own;
    /// replicas that drifted apart (a parameter updated on some ranks only, a callback that
    /// changed the weights on one rank) end the run with an error on the rank that differs,
    /// which every other rank then sees as that rank's failure. The cost, once per epoch, is
    /// reading the parameters to the host and hashing them (see BENCHMARKS.md). Every rank
    /// must give the same setting.
    pub fn check_replicas(mut self, enable: bool) -> Self {
        self.check_replicas = enable;
        self
    }

    /// Average these fetched values over the ranks: a callback that fetches `"loss"` after
    /// `.mean_of(["loss"])` sees the loss over the global batch, on every rank. The values travel
    /// in the step's own collective call; each is read from the device on every rank at every
    /// step where some callback (on any rank) fetches it.
    pub fn mean_of(mut self, names: impl IntoIterator<Item = &'static str>) -> Self {
        for name in names {
            if !self.means.contains(&name) {
                self.means.push(name);
            }
        }
        self
    }

    /// One exchange over the transport ([`Transport::exchange`]): `grads` averaged over the
    /// ranks, `words` summed in place, the chief's `buffers` to every rank at an epoch's end.
    pub(crate) fn exchange<M: Module>(
        &mut self,
        model: &M,
        grads: Option<GradientsParams>,
        words: &mut [f64],
        buffers: Option<&mut [f32]>,
    ) -> Result<Option<GradientsParams>> {
        Ok(self.link.exchange(&self.seat, model, grads, words, buffers))
    }

    /// `words` summed element-wise over the ranks, in place, with nothing else: the small
    /// exchanges of a length every rank knows (the layout check before the first large one).
    pub(crate) fn sum_words<M: Module>(&mut self, model: &M, words: &mut [f64]) {
        self.link.sum_words(&self.seat, model, words);
    }

    /// Start every replica from the chief's weights ([`Transport::broadcast_model`]).
    pub(crate) fn broadcast_model<M: Module + 'static>(
        &mut self,
        model: M,
        words: &mut [f64],
        seed: Option<u64>,
    ) -> M {
        self.link.broadcast_model(&self.seat, model, words, seed)
    }

    /// End every rank now, after a failure inside the transport itself ([`Transport::abort`]).
    pub(crate) fn abort(&self, message: &str) {
        self.link.abort(message);
    }
}

/// A world's transport: one variant per transport, the only list of them. Its methods pass each
/// call to the variant's, a `match` the compiler resolves per variant (no dynamic dispatch).
pub(crate) enum Link {
    /// `threads.rs`.
    Threads(threads::ThreadLink),
    /// `nccl.rs`: its words through the threads transport's channels.
    #[cfg(feature = "cuda")]
    Nccl(nccl::NcclLink<threads::ThreadLink>),
    /// `mpi.rs`.
    #[cfg(feature = "mpi")]
    Mpi(mpi::MpiLink),
    /// `tests.rs`.
    #[cfg(test)]
    Loopback(tests::Loopback),
}

/// `$body` with `$link` bound to the variant's transport.
macro_rules! each {
    ($self:expr, $link:ident => $body:expr) => {
        match $self {
            Link::Threads($link) => $body,
            #[cfg(feature = "cuda")]
            Link::Nccl($link) => $body,
            #[cfg(feature = "mpi")]
            Link::Mpi($link) => $body,
            #[cfg(test)]
            Link::Loopback($link) => $body,
        }
    };
}

impl Transport for Link {
    fn name(&self) -> &'static str {
        each!(self, link => link.name())
    }

    fn shares_burn_state(&self) -> bool {
        each!(self, link => link.shares_burn_state())
    }

    #[inline]
    fn exchange<M: Module>(
        &mut self,
        seat: &Seat,
        model: &M,
        grads: Option<GradientsParams>,
        words: &mut [f64],
        buffers: Option<&mut [f32]>,
    ) -> Option<GradientsParams> {
        each!(self, link => link.exchange(seat, model, grads, words, buffers))
    }

    fn sum_words<M: Module>(&mut self, seat: &Seat, model: &M, words: &mut [f64]) {
        each!(self, link => link.sum_words(seat, model, words))
    }

    fn broadcast_model<M: Module + 'static>(
        &mut self,
        seat: &Seat,
        model: M,
        words: &mut [f64],
        seed: Option<u64>,
    ) -> M {
        each!(self, link => link.broadcast_model(seat, model, words, seed))
    }

    fn abort(&self, message: &str) {
        each!(self, link => link.abort(message))
    }

    fn kill_grace(&self) -> Option<Duration> {
        each!(self, link => link.kill_grace())
    }

    #[inline]
    fn prepares_replica(&self) -> bool {
        each!(self, link => link.prepares_replica())
    }

    fn prepare_replica<M: Module>(&self, model: M) -> M {
        each!(self, link => link.prepare_replica(model))
    }

    fn failing(&self, seat: &Seat, error: &Error) -> Option<Box<dyn Any>> {
        each!(self, link => link.failing(seat, error))
    }
}
