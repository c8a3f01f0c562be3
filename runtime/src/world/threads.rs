//! The threads transport: one process, one thread per device. Each step every rank sends its
//! gradients to the chief, which moves them to its device (burn's `GradientsParams::to_device`),
//! sums them in rank order (burn's `GradientsAccumulator`), divides by the size and sends the
//! same averaged tensors back; every rank then moves them to its own device. The chief's device
//! holds as few averaged sets as the ranks' safety allows ([`Share`]): one on the CPU, two when
//! the peers are on other devices, not one per rank.
//!
//! With the feature `cuda` and every device a CUDA device, [`Threads::run`] chooses the NCCL
//! transport instead (`nccl.rs`): burn averages the gradients inside `backward()`, and the
//! exchanges, made through this transport's channels, carry only the words.

use std::any::Any;
use std::sync::mpsc::{Receiver, Sender, channel};

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::optim::{GradientsAccumulator, GradientsParams};
use burn::tensor::{Device, Tensor};

use super::transport::{Seat, Transport};
use super::words::failed;
use super::{Link, World};
use crate::error::{Error, Result, WorldError};

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
    /// training at their next step boundary with [`WorldError::RankFailed`](crate::WorldError::RankFailed).
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
            return Err(Error::transport("Threads::new: a world needs at least one device"));
        }
        let mut links = Vec::with_capacity(size);
        let mut peers = Vec::with_capacity(size - 1);
        for _ in 1..size {
            let (up_tx, up_rx) = channel();
            let (down_tx, down_rx) = channel();
            peers.push((up_rx, down_tx));
            links.push(ThreadLink::Peer { up: up_tx, down: down_rx });
        }
        let shares = self.devices[1..].iter().map(|peer| share_of(&self.devices[0], peer)).collect();
        links.insert(0, ThreadLink::Chief { peers, shares });
        // With the feature `cuda`, burn's NCCL reduction over CUDA devices (`nccl.rs`), its sync
        // server from before any rank's backward to after the last.
        #[cfg(feature = "cuda")]
        let reduction = super::nccl::reduction(&self.devices);
        let transport = |link: ThreadLink| -> Link {
            #[cfg(feature = "cuda")]
            if reduction.is_some() {
                return Link::Nccl(super::nccl::NcclLink::new(link));
            }
            Link::Threads(link)
        };
        let rank = &rank;
        let outcomes: Vec<std::thread::Result<Result<R>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = links
                .into_iter()
                .zip(self.devices)
                .enumerate()
                .map(|(r, (link, device))| {
                    let world = World::new(r, size, device.clone(), transport(link));
                    std::thread::Builder::new()
                        .name(format!("stoker-rank-{r}"))
                        .spawn_scoped(scope, move || {
                            let result = rank(world).map_err(Into::into);
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
                Ok(Err(error @ Error::World(WorldError::RankFailed { .. }))) => {
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
    /// The chief's buffers, at an epoch's end (`World::exchange_buffers`).
    buffers: Option<Vec<f32>>,
}

/// Which averaged gradients a peer receives from the chief.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Share {
    /// The chief's own tensors: the peer is on the chief's device, which computes synchronously
    /// (the CPU), where a rank writes a tensor in place only once every other rank has dropped it,
    /// its reads done.
    Chief,
    /// One set for every peer on another device: each moves it to its own device (a new buffer
    /// there), and nobody writes into it.
    Moved,
    /// A set of its own: the peer is on the chief's device and that device is asynchronous (a
    /// GPU), where one rank's write in place (an optimizer may update a gradient it alone holds)
    /// could reach a buffer another rank has not read yet.
    Own,
}

/// What a peer on `peer` receives from a chief on `chief`.
fn share_of(chief: &Device, peer: &Device) -> Share {
    share_by(chief == peer, crate::device::is_synchronous(chief))
}

/// [`share_of`] for a peer on the chief's device (`same`) or not, the chief's device computing
/// synchronously or not.
fn share_by(same: bool, synchronous: bool) -> Share {
    match (same, synchronous) {
        (false, _) => Share::Moved,
        (true, true) => Share::Chief,
        (true, false) => Share::Own,
    }
}

/// One rank's end of the channels: the chief holds one pair per peer (rank 1, 2, ...), and what
/// each peer receives.
pub(crate) enum ThreadLink {
    Chief { peers: Vec<(Receiver<Up>, Sender<Down>)>, shares: Vec<Share> },
    Peer { up: Sender<Up>, down: Receiver<Down> },
}

impl Transport for ThreadLink {
    fn name(&self) -> &'static str {
        "threads"
    }

    fn shares_burn_state(&self) -> bool {
        true
    }

    fn exchange<M: Module>(
        &mut self,
        seat: &Seat,
        model: &M,
        grads: Option<GradientsParams>,
        words: &mut [f64],
        buffers: Option<&mut [f32]>,
    ) -> Option<GradientsParams> {
        let (device, size) = (&seat.device, seat.size);
        let _away = super::turns::away();
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
                        if let (Some(mine), Some(chief)) = (buffers, &reply.buffers) {
                            mine.copy_from_slice(chief);
                        }
                        reply.grads.map(|grads| grads.to_device(device, model))
                    }
                    None => {
                        // The chief is gone: it failed.
                        words[failed(0)] = 1.0;
                        None
                    }
                }
            }
            ThreadLink::Chief { peers, shares } => {
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
                let (mine, mut theirs) = match complete {
                    true => average(model, sum.grads(), size, shares),
                    false => (None, Vec::new()),
                };
                if complete {
                    handoff(device);
                }
                for (i, ((_, down), alive)) in peers.iter().zip(alive).enumerate() {
                    if alive {
                        let grads = theirs.get_mut(i).and_then(Option::take);
                        // A peer that left after sending is seen at the next exchange.
                        let buffers = buffers.as_deref().map(<[f32]>::to_vec);
                        let _ = down.send(Down { grads, words: words.to_vec(), model: None, buffers });
                    }
                }
                mine
            }
        }
    }

    fn sum_words<M: Module>(&mut self, seat: &Seat, model: &M, words: &mut [f64]) {
        self.exchange(seat, model, None, words, None);
    }

    /// The chief's model to every rank, moved to each rank's device with its parameter ids.
    fn broadcast_model<M: Module + 'static>(
        &mut self,
        seat: &Seat,
        model: M,
        words: &mut [f64],
        seed: Option<u64>,
    ) -> M {
        let device = &seat.device;
        let away = super::turns::away();
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
            ThreadLink::Chief { peers, .. } => {
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
                // Every peer waits: the chief takes its turn back (`turns.rs`) and draws alone.
                drop(away);
                // burn initializes parameters lazily, and a lazy parameter forked onto another
                // device initializes there on its own (other random values): initialize first.
                if let Some(seed) = seed {
                    device.seed(seed);
                }
                initialize(&model);
                let copies: Vec<M> = peers.iter().map(|_| copy_params(&model)).collect();
                handoff(device);
                for ((_, down), copy) in peers.iter().zip(copies) {
                    // Each peer's replica in buffers of its own (see `copy_params`).
                    let chief: Box<dyn Any + Send> = Box::new(copy);
                    let _ = down.send(Down {
                        grads: None,
                        words: words.to_vec(),
                        model: Some(chief),
                        buffers: None,
                    });
                }
                model
            }
        }
    }
}

/// A copy of `model` whose float parameters are in buffers of their own (same ids, values,
/// devices, `require_grad`, distributed marks), made by device operations on the calling thread.
///
/// Two replicas in one process that shared parameter buffers (a clone, or a fork onto the same
/// device) would race on an asynchronous device: burn updates a parameter in place when its
/// buffer is held once, and one replica's in-place update could reach the buffer before the
/// other replica's pending read of it. Its running states are its own too: a clone shares burn's
/// `RunningState`s, which `valid` and `train` make anew (see `buffers`).
pub(crate) fn copy_params<M: Module>(model: &M) -> M {
    struct Copy;
    impl ModuleMapper for Copy {
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
            let (id, old, mapper) = param.consume();
            // `x * 1` is `x` bit for bit (negative zeros and NaNs included), in a new buffer,
            // computed outside autodiff so that the copy is a leaf.
            let copy = old.clone().without_autodiff().mul_scalar(1.0);
            let new = if old.is_autodiff() { copy.autodiff() } else { copy };
            Param::from_mapped_value(id, super::flat::like(&old, new, id), mapper)
        }
    }
    model.valid().train().map(&mut Copy)
}

/// `sum / size` for the chief, and for each peer as `shares` says ([`Share`]): the chief's own
/// tensors, the one set moved to other devices, or a set of its own. One set for the chief, one
/// for the peers on other devices if any, one for each peer that needs its own are computed on
/// the chief's device, each the same division of the same sum, so every rank's
/// gradients are equal bit for bit.
fn average<M: Module>(
    model: &M,
    sum: GradientsParams,
    size: usize,
    shares: &[Share],
) -> (Option<GradientsParams>, Vec<Option<GradientsParams>>) {
    struct Average<'s> {
        sum: GradientsParams,
        size: f64,
        shares: &'s [Share],
        mine: GradientsParams,
        theirs: Vec<GradientsParams>,
    }
    impl ModuleVisitor for Average<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            if let Some(sum) = self.sum.remove::<D>(param.id) {
                let mut moved: Option<Tensor<D>> = None;
                for (share, out) in self.shares.iter().zip(&mut self.theirs) {
                    let grad = match share {
                        Share::Own => sum.clone().div_scalar(self.size),
                        Share::Moved => {
                            moved.get_or_insert_with(|| sum.clone().div_scalar(self.size)).clone()
                        }
                        // Registered below, once the chief's is made.
                        Share::Chief => continue,
                    };
                    out.register::<D>(param.id, grad);
                }
                let mine = sum.div_scalar(self.size);
                for (share, out) in self.shares.iter().zip(&mut self.theirs) {
                    if *share == Share::Chief {
                        out.register::<D>(param.id, mine.clone());
                    }
                }
                self.mine.register::<D>(param.id, mine);
            }
        }
    }
    let theirs = shares.iter().map(|_| GradientsParams::new()).collect();
    let mut visitor = Average { sum, size: size as f64, shares, mine: GradientsParams::new(), theirs };
    model.visit(&mut visitor);
    (Some(visitor.mine), visitor.theirs.into_iter().map(Some).collect())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// How many averaged sets `average` makes on the chief's device for peers receiving `shares`.
    fn sets_made(shares: &[Share]) -> usize {
        let moved = shares.contains(&Share::Moved);
        1 + usize::from(moved) + shares.iter().filter(|&&s| s == Share::Own).count()
    }

    /// The chief's device holds one averaged set for a world on the CPU, two for peers on other
    /// devices, one per rank only where the ranks share an asynchronous device.
    #[test]
    fn the_chief_holds_one_averaged_set_unless_ranks_share_an_asynchronous_device() {
        let world = |same: &[bool], synchronous: bool| -> Vec<Share> {
            same.iter().map(|&same| share_by(same, synchronous)).collect()
        };
        // Four ranks on the CPU: the chief's set, shared.
        assert_eq!(world(&[true, true, true], true), [Share::Chief; 3]);
        assert_eq!(sets_made(&world(&[true, true, true], true)), 1);
        // Four GPUs: the chief's, and one set every peer moves to its own device.
        assert_eq!(sets_made(&world(&[false, false, false], false)), 2);
        // Four ranks on one GPU: a set each.
        assert_eq!(sets_made(&world(&[true, true, true], false)), 4);
        assert_eq!(share_of(&crate::device::cpu(), &crate::device::cpu()), Share::Chief);
    }

    /// What the peers receive is the chief's average, bit for bit, the same tensors on the CPU.
    #[test]
    fn every_share_is_the_same_average() {
        use burn::module::Module;
        let device = crate::device::cpu();
        let model = burn::nn::LinearConfig::new(3, 2).init(&device);
        let grads = || {
            let loss = model.forward(Tensor::<2>::ones([4, 3], &device)).sum();
            GradientsParams::from_grads(loss.backward(), &model)
        };
        let mut sum = GradientsAccumulator::new();
        sum.accumulate(&model, grads());
        sum.accumulate(&model, grads());
        let shares = [Share::Chief, Share::Moved, Share::Own, Share::Moved];
        let (mine, theirs) = average(&model, sum.grads(), 2, &shares);
        let weights = |grads: &GradientsParams| {
            grads
                .get::<2>(model.weight.id)
                .expect("the weight's gradient")
                .into_data()
                .try_to_vec::<f32>()
                .unwrap()
        };
        let mine = weights(&mine.expect("the chief's"));
        assert_eq!(mine, weights(&grads()), "(g + g) / 2 = g");
        for share in &theirs {
            assert_eq!(weights(share.as_ref().expect("a peer's")), mine);
        }
        let _ = model.devices();
    }
}
