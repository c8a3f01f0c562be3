//! The NCCL transport (feature `cuda`), which [`Threads::run`](super::Threads::run) chooses when
//! every device given to [`Threads::new`](super::Threads::new) is a CUDA device with autodiff:
//! gradients are averaged by burn itself, inside `loss.backward()`, with NCCL (burn 0.22's
//! `DistributedContext` with `ReduceOperation::Mean`), and the step's exchange carries only the
//! control words, through the threads transport's channels (`threads.rs`).
//!
//! What burn 0.22.1 asks, read in its source:
//! - `DistributedContext::init(devices, config)` starts one sync server per backend type for the
//!   whole process; it must exist before any rank's backward and be dropped after the last
//!   (here: around the ranks' threads in [`Threads::run`](super::Threads::run)).
//! - A parameter is reduced only when its autodiff leaf carries a distributed root step
//!   (`Tensor::set_distributed(param_id)`); every backward consumes the root steps it reaches.
//!   burn's optimizers mark again the parameters they update (`ParameterContext`), but not the
//!   ones they do not (a step without an optimizer update, as under gradient accumulation), and a
//!   model whose tensors are replaced (a checkpoint loaded) loses the mark: so every rank marks
//!   its replica before each step's forward ([`mark_distributed`], the transport's
//!   `prepare_replica`).
//! - The parameters are matched across devices by id: the replicas take the chief's ids when the
//!   chief's model is broadcast at the start of training.
//! - Each rank's backward blocks until every rank has submitted its gradients.
//! - The server is one per backend type for the whole process, and every backward on that backend
//!   reports to it when it ends: while a world reduces on CUDA, no other CUDA backward may run in
//!   the process, and two such worlds run one after the other ([`reduction`]).
//!
//! Limits: one process (burn 0.22 has no reduction across processes; MPI moves gradients through
//! host memory); a rank that fails while the others are already inside a step's backward cannot
//! reach them there (burn's server waits for every device, with no timeout): its wait for them at
//! the exchange is bounded, and past `watchdog::FAILURE_WAIT` (120 s) the process ends with an
//! error naming the rank and its failure, never a silent hang; a callback that runs its own
//! backward on one rank only (a chief-only one) meets the same server.

use std::any::Any;
use std::sync::{Mutex, MutexGuard, PoisonError};

use burn::module::{Module, ModuleMapper, Param};
use burn::optim::GradientsParams;
use burn::tensor::distributed::{DistributedConfig, DistributedContext, ReduceOperation};
use burn::tensor::{Device, Tensor};

use super::transport::{Seat, Transport};
use crate::device::is_cuda;
use crate::error::Error;

/// One rank's end of the NCCL transport: the words travel through another transport, `W` (the
/// threads transport's channels), the gradients through burn's reduction inside `backward`.
pub(crate) struct NcclLink<W> {
    words: W,
}

impl<W: Transport> NcclLink<W> {
    /// The NCCL transport, its words over `words`.
    pub(crate) fn new(words: W) -> NcclLink<W> {
        NcclLink { words }
    }
}

impl<W: Transport> Transport for NcclLink<W> {
    fn name(&self) -> &'static str {
        "nccl"
    }

    /// Each rank waits for the others inside its backward: turns would deadlock there.
    fn shares_burn_state(&self) -> bool {
        false
    }

    /// The words alone travel; `grads` come back as they are, already averaged by `backward`
    /// (a failure on another rank is in the words).
    fn exchange<M: Module>(
        &mut self,
        seat: &Seat,
        model: &M,
        grads: Option<GradientsParams>,
        words: &mut [f64],
        buffers: Option<&mut [f32]>,
    ) -> Option<GradientsParams> {
        self.words.exchange(seat, model, None, words, buffers);
        grads
    }

    fn sum_words<M: Module>(&mut self, seat: &Seat, model: &M, words: &mut [f64]) {
        self.words.sum_words(seat, model, words);
    }

    /// As the words' transport (threads: the replicas take the chief's parameter ids, by which
    /// burn matches them across devices).
    fn broadcast_model<M: Module + 'static>(
        &mut self,
        seat: &Seat,
        model: M,
        words: &mut [f64],
        seed: Option<u64>,
    ) -> M {
        self.words.broadcast_model(seat, model, words, seed)
    }

    fn prepares_replica(&self) -> bool {
        true
    }

    fn prepare_replica<M: Module>(&self, model: M) -> M {
        mark_distributed(model)
    }

    /// The others may wait inside their backward, where no exchange reaches them: this rank's
    /// wait for them is bounded (`watchdog.rs`).
    fn failing(&self, seat: &Seat, error: &Error) -> Option<Box<dyn Any>> {
        Some(Box::new(super::watchdog::failure(seat.rank, error)))
    }
}

/// burn's sync server over a world's devices, for the duration of one
/// [`Threads::run`](super::Threads::run).
pub(crate) struct Reduction {
    // Dropped first: the server is closed before the next world may start one.
    _context: DistributedContext,
    _alone: MutexGuard<'static, ()>,
}

/// burn's sync server over `devices`, averaging the gradients of distributed parameters, when a
/// world on them has its gradients reduced by burn (two or more devices, every one CUDA with
/// autodiff); torn down when dropped. burn keeps one server per backend type for the whole
/// process, so worlds that reduce on CUDA run one at a time: a second waits here for the first
/// to end.
pub(crate) fn reduction(devices: &[Device]) -> Option<Reduction> {
    if devices.len() < 2 || !devices.iter().all(|device| device.is_autodiff() && is_cuda(device)) {
        return None;
    }
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let alone = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    let config = DistributedConfig { all_reduce_op: ReduceOperation::Mean };
    Some(Reduction { _context: DistributedContext::init(devices.to_vec(), config), _alone: alone })
}

/// Every trainable float parameter of `model` marked distributed under its own id, so that the
/// next backward returns its gradient averaged over the ranks.
fn mark_distributed<M: Module>(model: M) -> M {
    struct Mark;
    impl ModuleMapper for Mark {
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
            let (id, tensor, mapper) = param.consume();
            let tensor = if tensor.is_require_grad() { tensor.set_distributed(id) } else { tensor };
            Param::from_mapped_value(id, tensor, mapper)
        }
    }
    model.map(&mut Mark)
}
