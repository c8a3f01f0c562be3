//! One rank's side of the agreement: the words of each exchange, the failure protocol (a rank
//! that fails meets the others once more, at the exchange they wait in, with its failure word
//! set), and sums over ranks for callbacks.

use burn::module::Module;
use burn::optim::GradientsParams;

use super::World;
use super::buffers;
use super::check::{Facts, check};
use super::flat;
use super::words::{self, Kind, Layout};
use crate::error::{Error, Result, WorldError};
use crate::signal::STOP_REQUEST;
use crate::state::HyperParams;

/// What one rank brings to an exchange besides its gradients: what it asks of every rank, and
/// where it is.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Asks {
    /// A callback on this rank asked to stop.
    pub(crate) stop: bool,
    /// A callback on this rank asked to skip the rest of the epoch.
    pub(crate) skip: bool,
    pub(crate) steps_per_epoch: u64,
    pub(crate) global_step: u64,
}

/// What the ranks agreed at an exchange, for each rank's trainer to act on.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Agreed {
    /// A signal some rank received (SIGINT when any rank had one, else SIGTERM): every rank
    /// acts on it as on its own.
    pub(crate) signal: Option<i32>,
    /// The first rank whose callbacks asked to stop.
    pub(crate) stop_rank: Option<usize>,
    /// Some rank asked to skip the rest of the epoch.
    pub(crate) skip: bool,
}

/// One rank's side of the agreement.
pub(crate) struct Agreement {
    pub(crate) world: World,
    layout: Layout,
    words: Vec<f64>,
    /// The rank whose failure every rank has seen; no exchange follows one.
    failed: Option<usize>,
    /// An exchange did not return (a panic inside the transport): the others cannot be met.
    broken: bool,
    /// A signal this rank received, not yet agreed on.
    signal: Option<i32>,
    /// Whether every rank agreed to stop.
    stopping: bool,
    /// Whether every rank skips the rest of this epoch.
    skip: bool,
    /// The chief's checksum, for the next exchange to carry (an epoch's end).
    replica: Option<u64>,
    /// The number of elements of the model's buffers (`buffers`: BatchNorm's statistics).
    buffer_len: usize,
    /// The buffers an epoch's last exchange carries: the chief's, sent; the others', received.
    buffers: Vec<f32>,
    /// Whether the next exchange carries the buffers (an epoch's end).
    carry_buffers: bool,
    /// Whether the chief has said that its checkpoints take longer than `mpirun` allows.
    warned_slow_checkpoint: bool,
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
            stopping: false,
            skip: false,
            replica: None,
            buffer_len: 0,
            buffers: Vec::new(),
            carry_buffers: false,
            warned_slow_checkpoint: false,
        }
    }

    /// The chief wrote a checkpoint in `took`: once, a warning when the launcher would kill the
    /// ranks before a checkpoint that slow is written on an interrupt.
    pub(crate) fn checkpoint_written(&mut self, took: std::time::Duration) {
        if self.warned_slow_checkpoint {
            return;
        }
        if let Some(warning) =
            self.world.kill_grace().and_then(|grace| super::launcher::slow_checkpoint(took, grace))
        {
            self.warned_slow_checkpoint = true;
            crate::logging::warn!("{warning}");
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
        let buffers =
            (std::mem::take(&mut self.carry_buffers) && grads.is_none()).then_some(&mut self.buffers[..]);
        let averaged = self.world.exchange(model, grads, &mut self.words, buffers)?;
        self.broken = false;
        Ok(averaged)
    }

    /// A step's exchange with nothing asked (the all-reduce benchmark).
    pub(crate) fn exchange_step<M: Module>(&mut self, model: &M, grads: GradientsParams) -> Result<()> {
        self.words.fill(0.0);
        self.layout.mark(&mut self.words, Kind::Step, self.world.rank());
        self.exchange(model, Some(grads)).map(drop)
    }

    pub(crate) fn rank(&self) -> usize {
        self.world.rank()
    }

    /// The rank whose failure every rank has seen.
    pub(crate) fn failed(&self) -> Option<usize> {
        self.failed
    }

    /// Whether every rank agreed to stop.
    pub(crate) fn stopping(&self) -> bool {
        self.stopping
    }

    /// Whether every rank agreed to skip the rest of this epoch.
    pub(crate) fn skipping(&self) -> bool {
        self.skip
    }

    /// The epoch ended: a skip agreed for it is over.
    pub(crate) fn end_skip(&mut self) {
        self.skip = false;
    }

    /// A signal this rank received, told to the others at the next exchange.
    pub(crate) fn note_signal(&mut self, signal: i32) {
        self.signal.get_or_insert(signal);
    }

    /// The first exchanges: every rank checks it has the chief's layout (the model's
    /// parameters, the names registered), then every replica takes the chief's weights. Fails
    /// when a rank is gone or differs. `seed`: see [`World::broadcast_model`].
    pub(crate) fn start<M: Module + 'static>(
        &mut self,
        model: M,
        hyper: &HyperParams,
        seed: Option<u64>,
    ) -> Result<M> {
        let facts = Facts::of(&model, hyper, &self.world.means, self.layout.len());
        if let Err(error) = check(&mut self.world, &model, &facts) {
            self.failed = Some(self.world.rank());
            return Err(error);
        }
        self.words.fill(0.0);
        self.layout.mark(&mut self.words, Kind::Start, self.world.rank());
        self.broken = true;
        let model = self.world.broadcast_model(model, &mut self.words, seed);
        self.broken = false;
        self.check(Kind::Start)?;
        self.buffer_len = buffers::len(&model);
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
        let _ = self.world.exchange(model, None, &mut self.words, None);
        self.failed = Some(self.layout.first_failed(&self.words).unwrap_or(rank));
        self.world.settled = true;
    }

    /// After an exchange: a failure anywhere ends this rank's run; ranks at different kinds of
    /// exchange are an error on every rank.
    fn check(&mut self, kind: Kind) -> Result<()> {
        if let Some(rank) = self.layout.first_failed(&self.words) {
            self.failed = Some(rank);
            self.world.settled = true;
            return Err(WorldError::RankFailed { rank }.into());
        }
        if !self.layout.same_len(&self.words) {
            // Every rank fails here, each naming itself; none exchanges again.
            self.failed = Some(self.world.rank());
            self.world.settled = true;
            return Err(Error::ranks_differ(format!(
                "the ranks of the data-parallel world exchange different numbers of values ({} here): every rank must register the same hyper-parameters and give its world the same `mean_of` names",
                self.layout.len()
            )));
        }
        if !self.layout.same_kind(&self.words, kind) {
            // Not every rank is at this kind of exchange: the world cannot go on. The ranks that
            // are elsewhere may wait for this one: under MPI the job ends (the world is not
            // settled, and its drop aborts).
            self.failed = Some(self.world.rank());
            return Err(Error::ranks_differ(format!(
                "the ranks of the data-parallel world are at different points: this rank (rank {}) is at {}; a callback that sums over ranks (Context::sum_over_ranks) must run on every rank (chief_only = false) at the same events",
                self.world.rank(),
                Kind::name(f64::from(kind as u8)),
            )));
        }
        Ok(())
    }

    /// A step's exchange (with `grads`, averaged over the ranks) or a boundary's (`None`):
    /// this rank's `asks` and, from the chief, the hyper-parameters go out; `means` holds this
    /// rank's value of each `World::mean_of` name (`None`: not read at this step) and comes
    /// back with the mean over the ranks that read it. The chief's hyper-parameters are
    /// adopted; what every rank asked comes back as [`Agreed`].
    pub(crate) fn exchange_words<M: Module>(
        &mut self,
        model: &M,
        grads: Option<GradientsParams>,
        asks: &Asks,
        hyper: &mut HyperParams,
        means: &mut [Option<f64>],
    ) -> Result<(Option<GradientsParams>, Agreed)> {
        let kind = if grads.is_some() { Kind::Step } else { Kind::Boundary };
        self.fill(kind, asks, hyper);
        if let Some(sum) = self.replica.take()
            && self.world.rank() == 0
        {
            words::put_reference(&mut self.words, words::REPLICA, sum);
            self.words[words::REPLICA_SET] = 1.0;
        }
        for (k, mean) in means.iter().enumerate() {
            if let Some(value) = *mean {
                let slot = self.layout.mean(k);
                self.words[slot] = value;
                self.words[slot + 1] = 1.0;
            }
        }
        let grads = self.exchange(model, grads)?;
        self.check(kind)?;
        for (k, mean) in means.iter_mut().enumerate() {
            let slot = self.layout.mean(k);
            if mean.is_some() && self.words[slot + 1] > 0.0 {
                *mean = Some(self.words[slot] / self.words[slot + 1]);
            }
        }
        let agreed = self.read(kind, asks, hyper)?;
        Ok((grads, agreed))
    }

    /// The exchange at an epoch's end: as [`exchange_words`](Self::exchange_words) with no
    /// gradients, carrying the chief's buffers to every rank (see `buffers`), then the replicas
    /// compared with the chief's, buffers included (unless the world does not check them).
    pub(crate) fn epoch_end<M: Module>(
        &mut self,
        model: &M,
        asks: &Asks,
        hyper: &mut HyperParams,
    ) -> Result<Agreed> {
        let chief = self.world.rank() == 0;
        if self.buffer_len > 0 {
            buffers::sync(model);
            match chief {
                true => buffers::read(model, &mut self.buffers),
                false => self.buffers.resize(self.buffer_len, 0.0),
            }
            self.carry_buffers = true;
        }
        if self.world.check_replicas && chief {
            self.replica = Some(flat::checksum(model));
        }
        let exchanged = self.exchange_words(model, None, asks, hyper, &mut []);
        self.carry_buffers = false;
        let agreed = exchanged?.1;
        if !chief && self.buffer_len > 0 {
            buffers::write(model, &self.buffers);
        }
        if self.world.check_replicas && !chief {
            self.check_replica(flat::checksum(model))?;
        }
        Ok(agreed)
    }

    /// This replica's checksum against the chief's (when the chief sent one).
    fn check_replica(&self, own: u64) -> Result<()> {
        if self.words[words::REPLICA_SET] != 1.0 {
            return Ok(());
        }
        match words::reference(&self.words, words::REPLICA) {
            Some(chief) if chief == own => Ok(()),
            chief => Err(Error::ranks_differ(format!(
                "the replicas have drifted apart: rank {}'s parameters differ from rank 0's at the end of the epoch (checksums {own:016x} here, {} on rank 0). Something updated the weights on some ranks only: a parameter with a gradient on some ranks only, or a callback changing the model on one rank",
                self.world.rank(),
                chief.map_or_else(|| "unreadable".to_owned(), |c| format!("{c:016x}"))
            ))),
        }
    }

    /// This rank's words: what it asks of all, where it is, and (the chief) the
    /// hyper-parameters.
    fn fill(&mut self, kind: Kind, asks: &Asks, hyper: &HyperParams) {
        let (layout, words, rank) = (self.layout, &mut self.words, self.world.rank());
        words.fill(0.0);
        layout.mark(words, kind, rank);
        if asks.stop && !self.stopping {
            words[layout.stop(rank)] = 1.0;
        }
        if asks.skip && !self.skip {
            words[words::SKIP] = 1.0;
        }
        match self.signal {
            Some(signal) if signal == SIGINT => words[words::SIGINT] = 1.0,
            Some(_) => words[words::SIGTERM] = 1.0,
            None => {}
        }
        if kind == Kind::Step {
            words::put_counters(words, rank, asks.steps_per_epoch, asks.global_step);
        }
        if rank == 0 {
            // At most the hyper-parameters registered when training started (one registered later,
            // through `Context::hyper_mut`, is an error at the reading, on every rank).
            for (i, name) in hyper.names().take(layout.hypers).enumerate() {
                words[layout.hyper(i)] = hyper.get(name).unwrap_or(0.0);
            }
        }
    }

    /// The summed words, read: the ranks must be at the same step with the same number of
    /// steps per epoch and the same hyper-parameters; the chief's values are adopted.
    fn read(&mut self, kind: Kind, asks: &Asks, hyper: &mut HyperParams) -> Result<Agreed> {
        let (layout, words) = (self.layout, &self.words);
        let interrupted = words[words::SIGINT] + words[words::SIGTERM] > 0.0;
        let agreed = Agreed {
            // A stop asked through this rank's StopHandle travels as a SIGTERM; the rank that
            // asked reports it as what it was.
            signal: interrupted.then_some(match (words[words::SIGINT] > 0.0, self.signal) {
                (true, _) => SIGINT,
                (false, Some(STOP_REQUEST)) => STOP_REQUEST,
                (false, _) => SIGTERM,
            }),
            stop_rank: layout.first_stop(words),
            skip: words[words::SKIP] > 0.0,
        };
        if kind == Kind::Step {
            check_counters(asks, words::chief_counters(words))?;
        }
        if hyper.names().count() != layout.hypers {
            return Err(Error::hyper_param(format!(
                "a hyper-parameter was registered during data-parallel training ({} now, {} at the start): register every hyper-parameter with the trainer's builder, so that every rank agrees on them",
                hyper.names().count(),
                layout.hypers
            )));
        }
        if self.world.rank() != 0 {
            // The chief's values; nothing is collected (nor allocated) unless one changed.
            let changed: Vec<(String, f64)> = hyper
                .names()
                .enumerate()
                .map(|(i, name)| (name, words[layout.hyper(i)]))
                .filter(|&(name, value)| hyper.get(name) != Some(value))
                .map(|(name, value)| (name.to_owned(), value))
                .collect();
            for (name, value) in changed {
                hyper.set(&name, value)?;
            }
        }
        if agreed.stop_rank.is_some() || interrupted {
            self.stopping = true;
        }
        if agreed.skip {
            self.skip = true;
        }
        Ok(agreed)
    }

    /// Sum `values` over the ranks, in place (callbacks, through
    /// [`Context::sum_over_ranks`](crate::callback::Context::sum_over_ranks)).
    pub(crate) fn sum<M: Module>(&mut self, model: &M, values: &mut [f64]) -> Result<()> {
        if let Some(rank) = self.failed {
            return Err(WorldError::RankFailed { rank }.into());
        }
        let (rank, len) = (self.world.rank(), values.len());
        for chunk in values.chunks_mut(words::USER) {
            self.words.fill(0.0);
            self.layout.mark(&mut self.words, Kind::Sum, rank);
            if rank == 0 {
                words::put_reference(&mut self.words, words::SUM_LEN, len as u64);
            }
            for (i, value) in chunk.iter().enumerate() {
                self.words[self.layout.user(i)] = *value;
            }
            self.exchange(model, None)?;
            self.check(Kind::Sum)?;
            let chief = words::reference(&self.words, words::SUM_LEN);
            if chief != Some(len as u64) {
                return Err(Error::ranks_differ(format!(
                    "a sum over ranks of {len} values here met one of {} on rank 0: Context::sum_over_ranks must be called with the same number of values on every rank",
                    chief.map_or_else(|| "an unreadable number".to_owned(), |n| n.to_string())
                )));
            }
            for (i, value) in chunk.iter_mut().enumerate() {
                *value = self.words[self.layout.user(i)];
            }
        }
        Ok(())
    }
}

/// This rank's counters against the chief's: the same steps per epoch, the same global step.
fn check_counters(asks: &Asks, (steps, step): (Option<u64>, Option<u64>)) -> Result<()> {
    let shown = |value: Option<u64>| value.map_or_else(|| "unreadable".to_owned(), |v| v.to_string());
    if steps != Some(asks.steps_per_epoch) {
        return Err(Error::data(format!(
            "the ranks take different numbers of steps per epoch ({} here, {} on rank 0): give every rank a shard with the same number of batches (World::shard) or set Trainer::steps_per_epoch",
            asks.steps_per_epoch,
            shown(steps)
        )));
    }
    if step != Some(asks.global_step) {
        return Err(Error::ranks_differ(format!(
            "the ranks are at different global steps ({} here, {} on rank 0): every rank must resume from the same checkpoint (a filesystem the ranks share), or none",
            asks.global_step,
            shown(step)
        )));
    }
    Ok(())
}

const SIGINT: i32 = 2;
const SIGTERM: i32 = 15;
