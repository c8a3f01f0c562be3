//! Data-parallel training: a world of ranks, each a replica of the model with its own optimizer
//! and its own shard of the data, whose gradients are averaged at every step so that the
//! replicas stay identical (tensorpack's `SyncMultiGPUTrainerReplicated` and `HorovodTrainer`).
//!
//! Two transports, one design:
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
#[cfg(feature = "cuda")]
pub(crate) mod cuda;
mod execution;
pub(crate) mod flat;
mod launcher;
#[cfg(feature = "mpi")]
pub(crate) mod mpi;
mod shard;
mod threads;
pub(crate) mod turns;
#[cfg(any(feature = "cuda", test))]
mod watchdog;
mod words;

use std::fmt;

use burn::module::Module;
use burn::optim::GradientsParams;
use burn::tensor::Device;

pub(crate) use execution::Execution;
pub use shard::Shard;
pub use threads::Threads;

use crate::error::Result;

/// One rank's place in a data-parallel world: its rank (0 is the chief), the world's size, and
/// the link to the other ranks. Given to [`Trainer::world`](crate::trainer::Trainer::world).
#[doc(alias = "DDP")]
#[doc(alias = "DistributedDataParallel")]
#[doc(alias = "MultiDeviceLearningStrategy")]
pub struct World {
    rank: usize,
    size: usize,
    device: Device,
    pub(crate) link: Link,
    /// Fetched values averaged over the ranks.
    pub(crate) means: Vec<&'static str>,
    /// Whether `backward()` already returns the gradients averaged over the ranks (burn's
    /// `DistributedContext` over CUDA devices): the exchanges then carry the words only.
    grads_reduced_by_backend: bool,
    /// Whether the replicas are compared at each epoch's end (see [`check_replicas`](Self::check_replicas)).
    pub(crate) check_replicas: bool,
    /// Whether the other ranks expect nothing more of this one (its training ended with the
    /// final exchange, or a failure was agreed on).
    pub(crate) settled: bool,
}

pub(crate) enum Link {
    Threads(threads::ThreadLink),
    #[cfg(feature = "mpi")]
    Mpi {
        comm: mpi::MpiComm,
        /// The step's buffers, kept from step to step: the gradients sent and received, the
        /// words sent (they come back in place).
        send: Vec<f32>,
        recv: Vec<f32>,
        words: Vec<f64>,
    },
}

impl fmt::Debug for World {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let transport = match self.link {
            Link::Threads(_) => "threads",
            #[cfg(feature = "mpi")]
            Link::Mpi { .. } => "mpi",
        };
        f.debug_struct("World")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("transport", &transport)
            .field("grads_reduced_by_backend", &self.grads_reduced_by_backend)
            .field("means", &self.means)
            .finish()
    }
}

/// An MPI world dropped while the other ranks may still wait for this one (its process leaves
/// training by a panic outside the trainer's reach, or never trains) ends the job (`MPI_Abort`)
/// rather than leave them waiting.
impl Drop for World {
    fn drop(&mut self) {
        if !self.settled {
            self.abort(&format!(
                "rank {} left the data-parallel world before its training ended; ending every rank",
                self.rank
            ));
        }
    }
}

impl World {
    /// This process's rank in the MPI world started by `mpirun` (`mpirun -n 4 my_training`),
    /// training on `device`. MPI is initialized here, once per process, and finalized when the
    /// trainer that received this world is done. Run without `mpirun`, the world has one rank.
    ///
    /// Every step's gradients go through host memory: burn 0.22 has no reduction across
    /// processes on the GPU.
    #[cfg(feature = "mpi")]
    pub fn mpi(device: Device) -> Result<World> {
        let comm = mpi::MpiComm::init()?;
        let (rank, size) = (comm.rank(), comm.size());
        let link = Link::Mpi { comm, send: Vec::new(), recv: Vec::new(), words: Vec::new() };
        Ok(World {
            rank,
            size,
            device,
            link,
            means: Vec::new(),
            check_replicas: true,
            grads_reduced_by_backend: false,
            settled: false,
        })
    }

    pub(crate) fn threads(
        rank: usize,
        size: usize,
        device: Device,
        link: threads::ThreadLink,
        grads_reduced_by_backend: bool,
    ) -> World {
        World {
            rank,
            size,
            device,
            link: Link::Threads(link),
            means: Vec::new(),
            check_replicas: true,
            grads_reduced_by_backend,
            settled: false,
        }
    }

    /// Whether the ranks take turns at burn's process-wide state when the run is seeded
    /// (`turns.rs`): ranks on threads of this process (a threads world of two or more), which
    /// share burn's generators and autodiff bookkeeping, unless burn averages the gradients
    /// inside `backward` (CUDA), where each rank waits for the others inside its backward.
    pub(crate) fn takes_turns(&self) -> bool {
        #[cfg(feature = "cuda")]
        if self.grads_reduced_by_backend {
            return false;
        }
        !self.under_mpi() && self.size > 1
    }

    /// Whether the ranks are processes of an MPI job.
    pub(crate) fn under_mpi(&self) -> bool {
        match self.link {
            Link::Threads(_) => false,
            #[cfg(feature = "mpi")]
            Link::Mpi { .. } => true,
        }
    }

    /// Whether `backward()` returns gradients already averaged over the ranks (burn's
    /// `DistributedContext` over CUDA devices), each replica's parameters then being marked
    /// distributed before every step.
    #[cfg(feature = "cuda")]
    pub(crate) fn grads_reduced_by_backend(&self) -> bool {
        self.grads_reduced_by_backend
    }

    /// This rank (0 is the chief).
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Whether this rank is the chief (rank 0): the one that runs `chief_only` callbacks and
    /// writes into the log directory.
    pub fn is_chief(&self) -> bool {
        self.rank == 0
    }

    /// The device this rank trains on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// This rank's shard of `data`: disjoint from every other rank's, and the same number of
    /// batches on every rank (see [`Shard`]). The global batch is the world's size times the
    /// batch size.
    pub fn shard<D: Shard>(&self, data: D) -> D {
        data.shard(self.rank, self.size)
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

    /// One exchange: `grads` (this rank's, or none) summed with the other ranks' and divided by
    /// the size; `words` summed element-wise, in place. Every rank calls it at the same points,
    /// with words of the same length. Returns the averaged gradients when every rank gave some.
    ///
    /// When the backend has already averaged `grads` (CUDA), only the words travel and `grads`
    /// come back as they are; a failure on another rank is in the words.
    ///
    /// An exchange without gradients (an epoch's end) may carry the chief's buffers (`buffers`,
    /// [`buffers::read`]'s layout): every other rank's become the chief's, bit for bit; the
    /// chief's stay as they are.
    pub(crate) fn exchange<M: Module>(
        &mut self,
        model: &M,
        grads: Option<GradientsParams>,
        words: &mut [f64],
        buffers: Option<&mut [f32]>,
    ) -> Result<Option<GradientsParams>> {
        let (grads, local) = if self.grads_reduced_by_backend { (None, Some(grads)) } else { (grads, None) };
        let averaged = match &mut self.link {
            Link::Threads(link) => link.exchange(model, grads, words, &self.device, self.size, buffers),
            #[cfg(feature = "mpi")]
            Link::Mpi { comm, send, recv, words: sent } => {
                let payload = (grads, buffers.map(|values| (values, self.rank == 0)));
                mpi_exchange(comm, (send, recv, sent), model, payload, words, &self.device, self.size)
            }
        };
        Ok(local.unwrap_or(averaged))
    }

    /// `words` summed element-wise over the ranks, in place, with nothing else: the small
    /// exchanges of a length every rank knows (the layout check before the first large one).
    pub(crate) fn sum_words<M: Module>(&mut self, model: &M, words: &mut [f64]) {
        match &mut self.link {
            Link::Threads(link) => {
                link.exchange(model, None, words, &self.device, self.size, None);
            }
            #[cfg(feature = "mpi")]
            Link::Mpi { comm, .. } => {
                let sent = words.to_vec();
                comm.all_reduce_words(&sent, words);
            }
        }
    }

    /// Start every replica from the chief's weights (and, with threads, the chief's parameter
    /// ids); `words` are summed as in [`exchange`](Self::exchange). With a `seed`, the chief's
    /// lazily initialized parameters are drawn from it, once every rank has arrived: with
    /// threads, the ranks draw from one process-wide generator, so that what they drew before
    /// reaching the exchange does not change the chief's weights.
    pub(crate) fn broadcast_model<M: Module + 'static>(
        &mut self,
        model: M,
        words: &mut [f64],
        seed: Option<u64>,
    ) -> M {
        match &mut self.link {
            Link::Threads(link) => link.broadcast_model(model, words, &self.device, seed),
            #[cfg(feature = "mpi")]
            Link::Mpi { comm, .. } => {
                let len = flat::param_len(&model);
                let mut send = vec![0.0f32; len];
                if self.rank == 0 {
                    if let Some(seed) = seed {
                        self.device.seed(seed);
                    }
                    flat::write_params(&model, &mut send);
                }
                let mut recv = vec![0.0f32; len];
                let sent = words.to_vec();
                comm.all_reduce_sums((&send, &mut recv), (&sent, words));
                flat::read_params(model, &recv)
            }
        }
    }

    /// End every rank now, after a failure inside the transport itself (MPI only; threads see
    /// the other side of their channels close).
    pub(crate) fn abort(&self, message: &str) {
        match &self.link {
            Link::Threads(_) => {
                let _ = message;
            }
            #[cfg(feature = "mpi")]
            Link::Mpi { comm, .. } => comm.abort(1, message),
        }
    }
}

/// One MPI exchange. A rank with gradients sends them with the words, in one round trip. A rank
/// without (an epoch's end, the end of training, a callback's sum, a failure) sends its words
/// first, and then only what the others' words ask for ([`words::GRADS`], [`words::BUFFERS`]):
/// zeros of the gradients' length when some rank sent gradients (a failing rank meeting the
/// others at a step), else the buffers when some rank carries them (an epoch's end: the chief's
/// values, -0.0 from the other ranks, which adds to any value without changing its bits, where
/// +0.0 would turn a -0.0 into a +0.0), else nothing: an exchange of words alone sends the words.
#[cfg(feature = "mpi")]
fn mpi_exchange<M: Module>(
    comm: &mpi::MpiComm,
    (send, recv, sent): (&mut Vec<f32>, &mut Vec<f32>, &mut Vec<f64>),
    model: &M,
    (grads, buffers): (Option<GradientsParams>, Option<(&mut [f32], bool)>),
    words: &mut [f64],
    device: &Device,
    size: usize,
) -> Option<GradientsParams> {
    sent.clear();
    sent.extend_from_slice(words);
    sent[words::GRADS] = if grads.is_some() { 1.0 } else { 0.0 };
    sent[words::BUFFERS] = if buffers.is_some() { 1.0 } else { 0.0 };
    let Some(local) = grads else {
        comm.all_reduce_words_first(sent, words);
        mpi_words_asked(comm, (send, recv), model, buffers, words);
        return None;
    };
    let len = flat::grad_len(model);
    send.resize(len, 0.0);
    recv.resize(len, 0.0);
    flat::write_grads(model, &local, send);
    comm.all_reduce_sums((send, recv), (sent, words));
    let scale = 1.0 / size as f32;
    for value in &mut recv[..flat::param_len(model)] {
        *value *= scale;
    }
    Some(flat::read_grads(model, recv, &local, device))
}

/// After a rank without gradients summed its words: the `f32`s the summed `words` ask of it (see
/// [`mpi_exchange`]), summed with the other ranks', the buffers it carries read back from them.
#[cfg(feature = "mpi")]
fn mpi_words_asked<M: Module>(
    comm: &mpi::MpiComm,
    (send, recv): (&mut Vec<f32>, &mut Vec<f32>),
    model: &M,
    buffers: Option<(&mut [f32], bool)>,
    words: &[f64],
) {
    let len = match (words[words::GRADS] > 0.0, words[words::BUFFERS] > 0.0, &buffers) {
        (true, ..) => flat::grad_len(model),
        (false, true, Some((values, _))) => values.len(),
        (false, true, None) => buffers::len(model),
        (false, false, _) => return,
    };
    send.clear();
    send.resize(len, 0.0);
    recv.resize(len, 0.0);
    if let Some((values, chief)) = &buffers {
        let n = values.len().min(len);
        match chief {
            true => send[..n].copy_from_slice(&values[..n]),
            false => send[..n].fill(-0.0),
        }
    }
    comm.all_reduce_floats(send, recv);
    if let Some((values, false)) = buffers {
        let n = values.len().min(len);
        values[..n].copy_from_slice(&recv[..n]);
    }
}
