//! The MPI transport (feature `mpi`): one process per rank, started by `mpirun`; each step's
//! gradients flattened into one host buffer (`flat.rs`) and summed with one `MPI_Allreduce`, the
//! words beside it in an overlapped `MPI_Iallreduce` of `f64`s (`mpi/comm.rs`, the engine over
//! rsmpi).

mod comm;

use std::time::Duration;

use burn::module::Module;
use burn::optim::GradientsParams;
use burn::tensor::Device;

use comm::MpiComm;
pub(crate) use comm::floats_reduced;

use super::transport::{Seat, Transport};
use super::{Link, World, buffers, flat, words};
use crate::error::Result;

impl World {
    /// This process's rank in the MPI world started by `mpirun` (`mpirun -n 4 my_training`),
    /// training on `device`. MPI is initialized here, once per process, and finalized when the
    /// trainer that received this world is done. Run without `mpirun`, the world has one rank.
    ///
    /// Every step's gradients go through host memory: burn 0.22 has no reduction across
    /// processes on the GPU.
    pub fn mpi(device: Device) -> Result<World> {
        let comm = MpiComm::init()?;
        let (rank, size) = (comm.rank(), comm.size());
        let link = MpiLink { comm, send: Vec::new(), recv: Vec::new(), words: Vec::new() };
        Ok(World::new(rank, size, device, Link::Mpi(link)))
    }
}

/// One rank's end of the MPI transport.
pub(crate) struct MpiLink {
    comm: MpiComm,
    /// The step's buffers, kept from step to step: the gradients sent and received, the words
    /// sent (they come back in place).
    send: Vec<f32>,
    recv: Vec<f32>,
    words: Vec<f64>,
}

impl Transport for MpiLink {
    fn name(&self) -> &'static str {
        "mpi"
    }

    /// A process per rank: each has burn's state of its own.
    fn shares_burn_state(&self) -> bool {
        false
    }

    fn exchange<M: Module>(
        &mut self,
        seat: &Seat,
        model: &M,
        grads: Option<GradientsParams>,
        words: &mut [f64],
        buffers: Option<&mut [f32]>,
    ) -> Option<GradientsParams> {
        let MpiLink { comm, send, recv, words: sent } = self;
        let payload = (grads, buffers.map(|values| (values, seat.rank == 0)));
        mpi_exchange(comm, (send, recv, sent), model, payload, words, &seat.device, seat.size)
    }

    fn sum_words<M: Module>(&mut self, _seat: &Seat, _model: &M, words: &mut [f64]) {
        let sent = words.to_vec();
        self.comm.all_reduce_words(&sent, words);
    }

    /// The chief's parameters, flattened, summed with the others' zeros.
    fn broadcast_model<M: Module + 'static>(
        &mut self,
        seat: &Seat,
        model: M,
        words: &mut [f64],
        seed: Option<u64>,
    ) -> M {
        let len = flat::param_len(&model);
        let mut send = vec![0.0f32; len];
        if seat.rank == 0 {
            if let Some(seed) = seed {
                seat.device.seed(seed);
            }
            flat::write_params(&model, &mut send);
        }
        let mut recv = vec![0.0f32; len];
        let sent = words.to_vec();
        self.comm.all_reduce_sums((&send, &mut recv), (&sent, words));
        flat::read_params(model, &recv)
    }

    fn abort(&self, message: &str) {
        self.comm.abort(1, message)
    }

    fn kill_grace(&self) -> Option<Duration> {
        super::launcher::kill_grace()
    }
}

/// One MPI exchange. A rank with gradients sends them with the words, in one round trip. A rank
/// without (an epoch's end, the end of training, a callback's sum, a failure) sends its words
/// first, and then only what the others' words ask for ([`words::GRADS`], [`words::BUFFERS`]):
/// zeros of the gradients' length when some rank sent gradients (a failing rank meeting the
/// others at a step), else the buffers when some rank carries them (an epoch's end: the chief's
/// values, -0.0 from the other ranks, which adds to any value without changing its bits, where
/// +0.0 would turn a -0.0 into a +0.0), else nothing: an exchange of words alone sends the words.
fn mpi_exchange<M: Module>(
    comm: &MpiComm,
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
fn mpi_words_asked<M: Module>(
    comm: &MpiComm,
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
