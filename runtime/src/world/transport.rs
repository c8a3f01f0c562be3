//! What a transport is: how the ranks of a world meet. A [`World`](super::World) holds one,
//! chosen once when the world is made (by [`Threads::run`](super::Threads::run) or
//! `World::mpi`); the agreement above it (`agree.rs`) and the trainer's loop call the
//! [`Transport`] methods and never ask which transport it is.
//!
//! The transports, a file each:
//! - `threads.rs`: one process, a thread per device; gradients moved to the chief's device as
//!   burn tensors, summed there and sent back.
//! - `nccl.rs` (feature `cuda`): one process, a thread per CUDA device; burn averages the
//!   gradients inside `backward` (NCCL), and the exchanges carry the words alone.
//! - `mpi.rs` (feature `mpi`): a process per rank under `mpirun`; the gradients flattened into one
//!   host buffer and summed with `MPI_Allreduce`.
//! - `tests.rs`: a transport the tests define over shared memory, which trains a world to the
//!   threads transport's weights bit for bit: what a transport must do is this trait.
//!
//! A fourth (burn's own collective, when it returns) is a file implementing [`Transport`], a
//! variant of `Link` (`world/mod.rs`, the one list of them) naming it, and a constructor that
//! returns a `World` over it (`World::new`); nothing above `world` changes.

use std::any::Any;
use std::time::Duration;

use burn::module::Module;
use burn::optim::GradientsParams;
use burn::tensor::Device;

use crate::error::Error;

/// Where a rank sits in its world: what every call of its transport is given.
#[derive(Debug, Clone)]
pub(crate) struct Seat {
    /// This rank (0 is the chief).
    pub(crate) rank: usize,
    /// The number of ranks.
    pub(crate) size: usize,
    /// The device this rank trains on.
    pub(crate) device: Device,
}

/// How the ranks of a world meet. Every rank calls the same methods in the same order, with
/// words of the same length; a rank that fails meets the others once more, at the exchange they
/// wait in, with its failure word set (`agree.rs`). What each exchange must return is written on
/// its method; the words (`words.rs`) are summed as `f64`s, element-wise, in rank order.
pub(crate) trait Transport {
    /// The transport's name, in a world's `Debug` output.
    fn name(&self) -> &'static str;

    /// Whether the ranks are threads of this process that compute on burn's process-wide state
    /// (its generator, its autodiff bookkeeping) at the same time: the ranks of a seeded run then
    /// take turns at it (`turns.rs`), and the transport lets its turn go while it waits
    /// (`turns::away`).
    fn shares_burn_state(&self) -> bool;

    /// One exchange: `grads` (this rank's, or none) summed with the other ranks' and divided by
    /// the size, returned to every rank when every rank gave some (else `None`); `words` summed
    /// in place. An exchange without gradients may carry the chief's `buffers`: every other
    /// rank's become the chief's, bit for bit.
    fn exchange<M: Module>(
        &mut self,
        seat: &Seat,
        model: &M,
        grads: Option<GradientsParams>,
        words: &mut [f64],
        buffers: Option<&mut [f32]>,
    ) -> Option<GradientsParams>;

    /// `words` summed over the ranks, in place, with nothing else.
    fn sum_words<M: Module>(&mut self, seat: &Seat, model: &M, words: &mut [f64]);

    /// The chief's `model` to every rank, on its own device (each replica's parameters in
    /// buffers of its own), with `words` summed as in [`exchange`](Self::exchange). With a
    /// `seed`, the chief's lazily initialized parameters are drawn from it once every rank has
    /// arrived.
    fn broadcast_model<M: Module + 'static>(
        &mut self,
        seat: &Seat,
        model: M,
        words: &mut [f64],
        seed: Option<u64>,
    ) -> M;

    /// End every rank now, after a failure inside the transport itself, where the others would
    /// wait for this rank forever (MPI's processes). Ranks that see this one leave (threads, whose
    /// channels close) need nothing.
    fn abort(&self, message: &str) {
        let _ = message;
    }

    /// How long the launcher leaves a rank to finish after it passes on an interrupt (`mpirun`),
    /// when there is such a limit: the chief warns once when its checkpoints take longer.
    fn kill_grace(&self) -> Option<Duration> {
        None
    }

    /// Whether each step's forward needs [`prepare_replica`](Self::prepare_replica) first
    /// (a constant of the transport: the step tests it with one `match` on the world's transport).
    fn prepares_replica(&self) -> bool {
        false
    }

    /// The replica made ready for a step's forward (NCCL: its parameters marked distributed, so
    /// that its backward returns them averaged).
    fn prepare_replica<M: Module>(&self, model: M) -> M {
        model
    }

    /// This rank failed and is about to tell the others (`error`): what bounds its wait for
    /// them, held until it has told them, where they may wait out of any exchange's reach (NCCL:
    /// inside their backward).
    fn failing(&self, seat: &Seat, error: &Error) -> Option<Box<dyn Any>> {
        let _ = (seat, error);
        None
    }
}
