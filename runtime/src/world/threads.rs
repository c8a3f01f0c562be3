//! The threads transport: one process, one thread per device. Each step every rank sends its
//! gradients to the chief, which moves them to its device (burn's `GradientsParams::to_device`),
//! sums them in rank order (burn's `GradientsAccumulator`), divides by the size and sends the
//! same averaged tensors back; every rank then moves them to its own device.
//!
//! With the feature `cuda` and every device a CUDA device, burn averages the gradients inside
//! `backward()` instead (see `cuda.rs`), and the exchanges carry only the words.

use std::any::Any;
use std::sync::mpsc::{Receiver, Sender, channel};

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::{GradientsAccumulator, GradientsParams};
use burn::tensor::{Device, Tensor};

use super::World;
use super::words::failed;
use crate::error::{Error, Result};

/// Data-parallel training on several devices of one process, one thread each.
///
/// [`run`](Self::run) calls the closure once per device, each on its own thread, with that
/// rank's [`World`]; the closure builds and runs its trainer as a single-device run would, plus
/// [`Trainer::world`](crate::trainer::Trainer::world). Every device may be a different GPU of one
/// backend, or the same CPU device several times (each rank then computes on its own thread).
#[derive(Debug, Clone)]
pub struct Threads {
    devices: Vec<Device>,
}

impl Threads {
    /// A world of one rank per device, in order (the first is the chief's).
    pub fn new(devices: impl IntoIterator<Item = Device>) -> Self {
        Threads { devices: devices.into_iter().collect() }
    }

    /// Run `rank` on every device, each on its own thread, and wait for all of them. Returns
    /// every rank's result in rank order, or the first failure: the error of the rank that
    /// failed (wrapped in [`Error::Rank`] naming it), not the others' reports that it did.
    ///
    /// A rank that returns an error or panics, inside training or around it, ends the others'
    /// training at their next step boundary with [`Error::RankFailed`].
    ///
    /// With the feature `cuda`, when there are two devices or more and every one is a CUDA device
    /// with autodiff, the gradients are averaged by burn inside `backward()` (NCCL, burn's
    /// `DistributedContext`, set up here for the duration of the run), every rank marking its
    /// replica's parameters distributed before each step. Each rank's backward then waits for
    /// every other rank's: a rank that fails between two exchanges, while the others are already
    /// in a step's backward, leaves them waiting there.
    ///
    /// The closure may return any error that converts into [`Error`]: a
    /// [`TrainError`](crate::trainer::TrainError) (what [`Trainer::train`](crate::trainer::Trainer::train)
    /// returns) becomes its error, and the report it carries is dropped; a rank that needs its
    /// model after an error takes it from the `TrainError` inside the closure.
    pub fn run<R: Send, E: Into<Error>>(
        self,
        rank: impl Fn(World) -> std::result::Result<R, E> + Sync,
    ) -> Result<Vec<R>> {
        let size = self.devices.len();
        if size == 0 {
            return Err(Error::msg("Threads::new: a world needs at least one device"));
        }
        let mut links = Vec::with_capacity(size);
        let mut peers = Vec::with_capacity(size - 1);
        for _ in 1..size {
            let (up_tx, up_rx) = channel();
            let (down_tx, down_rx) = channel();
            peers.push((up_rx, down_tx));
            links.push(ThreadLink::Peer { up: up_tx, down: down_rx });
        }
        links.insert(0, ThreadLink::Chief { peers });
        #[cfg(feature = "cuda")]
        let reduced_by_backend = super::cuda::reduced_by_backend(&self.devices);
        #[cfg(not(feature = "cuda"))]
        let reduced_by_backend = false;
        // burn's sync server, from before any rank's backward to after the last.
        #[cfg(feature = "cuda")]
        let _reduction = reduced_by_backend.then(|| super::cuda::reduction(&self.devices));
        let rank = &rank;
        let outcomes: Vec<std::thread::Result<Result<R>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = links
                .into_iter()
                .zip(self.devices)
                .enumerate()
                .map(|(r, (link, device))| {
                    std::thread::Builder::new()
                        .name(format!("stoker-rank-{r}"))
                        .spawn_scoped(scope, move || {
                            let result =
                                rank(World::threads(r, size, device.clone(), link, reduced_by_backend))
                                    .map_err(Into::into);
                            // What the rank returns (its trained model) is read on another thread:
                            // its last operations must have run (see `handoff`).
                            handoff(&device);
                            result
                        })
                        .expect("spawning a rank's thread")
                })
                .collect();
            handles.into_iter().map(|h| h.join()).collect()
        });
        let mut results = Vec::with_capacity(size);
        let mut origin: Option<Error> = None;
        let mut reported: Option<Error> = None;
        for (r, outcome) in outcomes.into_iter().enumerate() {
            match outcome {
                Ok(Ok(value)) => results.push(value),
                Ok(Err(error @ Error::RankFailed { .. })) => {
                    reported.get_or_insert(error);
                }
                Ok(Err(error)) => {
                    origin.get_or_insert(Error::Rank { rank: r, source: Box::new(error) });
                }
                Err(payload) => {
                    let message = crate::error::panic_message(&*payload);
                    origin.get_or_insert(Error::Rank {
                        rank: r,
                        source: Box::new(Error::Panic { location: format!("rank {r}'s thread"), message }),
                    });
                }
            }
        }
        match origin.or(reported) {
            Some(error) => Err(error),
            None => Ok(results),
        }
    }
}

/// What a peer sends the chief at an exchange.
pub(crate) struct Up {
    grads: Option<GradientsParams>,
    words: Vec<f64>,
}

/// What the chief sends back: the averaged gradients, the summed words, or the model.
pub(crate) struct Down {
    grads: Option<GradientsParams>,
    words: Vec<f64>,
    model: Option<Box<dyn Any + Send>>,
}

/// One rank's end of the channels: the chief holds one pair per peer (rank 1, 2, ...).
pub(crate) enum ThreadLink {
    Chief { peers: Vec<(Receiver<Up>, Sender<Down>)> },
    Peer { up: Sender<Up>, down: Receiver<Down> },
}

impl ThreadLink {
    pub(crate) fn exchange<M: Module>(
        &mut self,
        model: &M,
        grads: Option<GradientsParams>,
        words: &mut [f64],
        device: &Device,
        size: usize,
    ) -> Option<GradientsParams> {
        match self {
            ThreadLink::Peer { up, down } => {
                if grads.is_some() {
                    handoff(device);
                }
                let sent = up.send(Up { grads, words: words.to_vec() });
                let reply = sent.ok().and_then(|()| down.recv().ok());
                match reply {
                    Some(reply) => {
                        words.copy_from_slice(&reply.words);
                        reply.grads.map(|grads| grads.to_device(device, model))
                    }
                    None => {
                        // The chief is gone: it failed.
                        words[failed(0)] = 1.0;
                        None
                    }
                }
            }
            ThreadLink::Chief { peers } => {
                let mut complete = grads.is_some();
                let mut sum = GradientsAccumulator::<M>::new();
                if let Some(grads) = grads {
                    sum.accumulate(model, grads);
                }
                let mut alive = vec![true; peers.len()];
                for (i, (up, _)) in peers.iter().enumerate() {
                    match up.recv() {
                        Ok(message) => {
                            for (word, theirs) in words.iter_mut().zip(&message.words) {
                                *word += theirs;
                            }
                            match message.grads {
                                Some(grads) if complete => {
                                    sum.accumulate(model, grads.to_device(device, model))
                                }
                                _ => complete = false,
                            }
                        }
                        Err(_) => {
                            alive[i] = false;
                            complete = false;
                            words[failed(i + 1)] = 1.0;
                        }
                    }
                }
                let mut averaged =
                    if complete { average(model, sum.grads(), size, peers.len() + 1) } else { Vec::new() };
                if complete {
                    handoff(device);
                }
                let mine = averaged.pop();
                for ((_, down), alive) in peers.iter().zip(alive) {
                    if alive {
                        let grads = averaged.pop();
                        // A peer that left after sending is seen at the next exchange.
                        let _ = down.send(Down { grads, words: words.to_vec(), model: None });
                    }
                }
                mine
            }
        }
    }

    /// The chief's model to every rank, moved to each rank's device with its parameter ids.
    pub(crate) fn broadcast_model<M: Module + 'static>(
        &mut self,
        model: M,
        words: &mut [f64],
        device: &Device,
    ) -> M {
        match self {
            ThreadLink::Peer { up, down } => {
                let sent = up.send(Up { grads: None, words: words.to_vec() });
                let reply = sent.ok().and_then(|()| down.recv().ok());
                match reply {
                    Some(Down { words: summed, model: Some(chief), .. }) => {
                        words.copy_from_slice(&summed);
                        match chief.downcast::<M>() {
                            Ok(chief) => chief.fork(device),
                            Err(_) => unreachable!("every rank trains the same model type"),
                        }
                    }
                    _ => {
                        words[failed(0)] = 1.0;
                        model
                    }
                }
            }
            ThreadLink::Chief { peers } => {
                // burn initializes parameters lazily, and a lazy parameter forked onto another
                // device initializes there on its own (other random values): initialize first.
                initialize(&model);
                for (i, (up, _)) in peers.iter().enumerate() {
                    match up.recv() {
                        Ok(message) => {
                            for (word, theirs) in words.iter_mut().zip(&message.words) {
                                *word += theirs;
                            }
                        }
                        Err(_) => words[failed(i + 1)] = 1.0,
                    }
                }
                let copies: Vec<M> = peers.iter().map(|_| super::flat::copy_params(&model)).collect();
                handoff(device);
                for ((_, down), copy) in peers.iter().zip(copies) {
                    // Each peer's replica in buffers of its own (see `flat::copy_params`).
                    let chief: Box<dyn Any + Send> = Box::new(copy);
                    let _ = down.send(Down { grads: None, words: words.to_vec(), model: Some(chief) });
                }
                model
            }
        }
    }
}

/// `sum / size`, as `copies` sets of tensors (one for each rank), each in its own buffer: a
/// rank's optimizer may update its gradients in place (burn does when a tensor's buffer is held
/// once), and on an asynchronous device (wgpu) that write could reach a buffer another rank has
/// not read yet. Every copy is the same division of the same sum, so the ranks' gradients are
/// equal bit for bit.
fn average<M: Module>(model: &M, sum: GradientsParams, size: usize, copies: usize) -> Vec<GradientsParams> {
    struct Average {
        sum: GradientsParams,
        size: f64,
        out: Vec<GradientsParams>,
    }
    impl ModuleVisitor for Average {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            if let Some(sum) = self.sum.remove::<D>(param.id) {
                let last = self.out.len() - 1;
                for out in &mut self.out[..last] {
                    out.register::<D>(param.id, sum.clone().div_scalar(self.size));
                }
                self.out[last].register::<D>(param.id, sum.div_scalar(self.size));
            }
        }
    }
    let mut visitor =
        Average { sum, size: size as f64, out: (0..copies).map(|_| GradientsParams::new()).collect() };
    model.visit(&mut visitor);
    visitor.out
}

/// Initialize every lazily initialized parameter of `model` (reading a parameter does).
fn initialize<M: Module>(model: &M) {
    struct Touch;
    impl ModuleVisitor for Touch {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let _ = param.val();
        }
    }
    model.visit(&mut Touch);
}

/// Before tensors made on this thread go to another: wait until this thread's work on `device`
/// is done. On an asynchronous device (wgpu, CUDA) each thread queues its operations on a stream
/// of its own, and another thread's stream does not wait for them: it would read the buffers
/// before they are written. Nothing to wait for on the CPU.
fn handoff(device: &Device) {
    if let Err(error) = device.sync() {
        panic!("stoker: the device failed while handing tensors to another rank: {error:?}");
    }
}
