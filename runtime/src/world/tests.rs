//! A transport the tests define, to show that [`Transport`] is all a transport needs: `Loopback`,
//! the ranks of one process meeting at a table in shared memory, every rank reading every
//! rank's offer and summing them itself, in rank order, on the host (as MPI would). A world over
//! it trains a model with BatchNorm and dropout, seeded, to the threads transport's weights bit
//! for bit, and a stop asked on one rank stops every rank at the same step.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use burn::module::{Module, ModuleVisitor, Param};
use burn::nn::{BatchNorm, BatchNormConfig, Dropout, DropoutConfig, Linear, LinearConfig};
use burn::optim::{GradientsParams, SgdConfig};
use burn::tensor::{Device, Tensor, TensorData};

use super::transport::{Seat, Transport};
use super::{Link, Threads, World, flat};
use crate::callback::{Callback, CallbackExt, Context};
use crate::trainer::{DefaultCallbacks, Step, Trainer};

/// What one rank brings to the table.
struct Offer {
    words: Vec<f64>,
    /// Its gradients, flattened (`flat.rs`), or the chief's parameters at the start.
    floats: Option<Vec<f32>>,
    /// The chief's buffers, at an epoch's end.
    buffers: Option<Vec<f32>>,
}

/// The table the ranks meet at: the offers of the round under way, and the last round's.
struct Round {
    offers: Vec<Option<Offer>>,
    arrived: usize,
    round: u64,
    gathered: Arc<Vec<Offer>>,
}

/// One rank's end of the table.
pub(crate) struct Loopback {
    table: Arc<(Mutex<Round>, Condvar)>,
}

impl Loopback {
    /// A world of one rank per device over one table.
    fn worlds(devices: &[Device]) -> Vec<World> {
        let size = devices.len();
        let round = Round {
            offers: (0..size).map(|_| None).collect(),
            arrived: 0,
            round: 0,
            gathered: Arc::default(),
        };
        let table = Arc::new((Mutex::new(round), Condvar::new()));
        let link = || Link::Loopback(Loopback { table: Arc::clone(&table) });
        devices
            .iter()
            .enumerate()
            .map(|(rank, device)| World::new(rank, size, device.clone(), link()))
            .collect()
    }

    /// Every rank's offer, once every rank has made its own (the turn let go meanwhile).
    fn gather(&self, seat: &Seat, offer: Offer) -> Arc<Vec<Offer>> {
        let _away = super::turns::away();
        let (lock, arrived) = &*self.table;
        let mut round = lock.lock().unwrap_or_else(PoisonError::into_inner);
        let this = round.round;
        round.offers[seat.rank] = Some(offer);
        round.arrived += 1;
        if round.arrived == seat.size {
            round.gathered = Arc::new(round.offers.iter_mut().map(|o| o.take().expect("an offer")).collect());
            round.arrived = 0;
            round.round += 1;
            arrived.notify_all();
        }
        while round.round == this {
            let (next, wait) =
                arrived.wait_timeout(round, Duration::from_secs(60)).unwrap_or_else(PoisonError::into_inner);
            assert!(!wait.timed_out(), "rank {} waited a minute for the others", seat.rank);
            round = next;
        }
        Arc::clone(&round.gathered)
    }

    /// `words` summed over the offers, in rank order.
    fn sum_into(words: &mut [f64], offers: &[Offer]) {
        for (i, word) in words.iter_mut().enumerate() {
            *word = offers[1..].iter().fold(offers[0].words[i], |sum, offer| sum + offer.words[i]);
        }
    }
}

impl Transport for Loopback {
    fn name(&self) -> &'static str {
        "loopback"
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
        let floats = grads.as_ref().map(|grads| {
            let mut flat = vec![0.0; flat::grad_len(model)];
            flat::write_grads(model, grads, &mut flat);
            flat
        });
        let chief = buffers.as_deref().filter(|_| seat.rank == 0).map(<[f32]>::to_vec);
        let offers = self.gather(seat, Offer { words: words.to_vec(), floats, buffers: chief });
        Self::sum_into(words, &offers);
        if let (Some(mine), Some(chief)) = (buffers, &offers[0].buffers) {
            mine.copy_from_slice(chief);
        }
        let local = grads?;
        let mut sum = offers[0].floats.clone()?;
        for offer in &offers[1..] {
            for (sum, value) in sum.iter_mut().zip(offer.floats.as_ref()?) {
                *sum += value;
            }
        }
        for value in &mut sum {
            *value /= seat.size as f32;
        }
        Some(flat::read_grads(model, &sum, &local, &seat.device))
    }

    fn sum_words<M: Module>(&mut self, seat: &Seat, _model: &M, words: &mut [f64]) {
        let offers = self.gather(seat, Offer { words: words.to_vec(), floats: None, buffers: None });
        Self::sum_into(words, &offers);
    }

    fn broadcast_model<M: Module + 'static>(
        &mut self,
        seat: &Seat,
        model: M,
        words: &mut [f64],
        seed: Option<u64>,
    ) -> M {
        // The chief draws its lazily initialized parameters once every rank has arrived.
        let arrived = self.gather(seat, Offer { words: vec![], floats: None, buffers: None });
        drop(arrived);
        let params = (seat.rank == 0).then(|| {
            if let Some(seed) = seed {
                seat.device.seed(seed);
            }
            let mut params = vec![0.0; flat::param_len(&model)];
            flat::write_params(&model, &mut params);
            params
        });
        let offers = self.gather(seat, Offer { words: words.to_vec(), floats: params, buffers: None });
        Self::sum_into(words, &offers);
        flat::read_params(model, offers[0].floats.as_ref().expect("the chief's parameters"))
    }
}

/// A linear layer, BatchNorm over its 3 features, dropout, a linear head.
#[derive(Module, Debug)]
struct Net {
    input: Linear,
    norm: BatchNorm,
    dropout: Dropout,
    head: Linear,
}

impl Net {
    fn new(device: &Device) -> Net {
        Net {
            input: LinearConfig::new(4, 3).init(device),
            norm: BatchNormConfig::new(3).init(device),
            dropout: DropoutConfig::new(0.2).init(),
            head: LinearConfig::new(3, 1).init(device),
        }
    }

    fn step(&self, (x, y): (Tensor<2>, Tensor<2>), _step: &mut Step<'_>) -> Tensor<1> {
        let [n, _] = x.dims();
        let hidden = self.norm.forward(self.input.forward(x).reshape([n, 3, 1])).reshape([n, 3]);
        let out = self.head.forward(self.dropout.forward(burn::tensor::activation::relu(hidden)));
        (out - y).powi_scalar(2).mean()
    }
}

/// 16 batches of 4 examples, the same on every call.
fn data(device: &Device) -> Vec<(Tensor<2>, Tensor<2>)> {
    (0..16)
        .map(|b| {
            let x: Vec<f32> = (0..16).map(|i| ((b * 16 + i) as f32 * 0.37).sin()).collect();
            let y: Vec<f32> = (0..4).map(|i| ((b * 4 + i) as f32 * 0.91).cos()).collect();
            (
                Tensor::from_data(TensorData::new(x, [4, 4]), device),
                Tensor::from_data(TensorData::new(y, [4, 1]), device),
            )
        })
        .collect()
}

/// Asks to stop at global step `at`, on the rank it is given to.
struct StopAt(u64);

impl Callback<Net> for StopAt {
    fn after_step(
        &mut self,
        ctx: &mut Context<'_, Net>,
        _values: &crate::fetch::Fetched<'_>,
    ) -> crate::Result<()> {
        if ctx.global_step() == self.0 {
            ctx.request_stop("asked by the test on one rank");
        }
        Ok(())
    }
}

/// One rank's training, seeded, 3 epochs; `stop_at`: a stop asked on rank 1 at that step.
/// Returns its global step and every float tensor's bits.
fn train(world: World, stop_at: Option<u64>) -> (u64, Vec<Vec<u32>>) {
    let device = world.device().clone();
    let stop = stop_at.filter(|_| world.rank() == 1).map(StopAt);
    let dir =
        std::env::temp_dir().join(format!("stoker-lib-loopback-{}-{}", std::process::id(), world.rank()));
    let report = Trainer::new(Net::new(&device), SgdConfig::new().init(), world.shard(data(&device)))
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .log_dir(&dir)
        .seed(7)
        .max_epoch(3)
        .callbacks(stop.map(|stop| stop.set_chief_only(false)))
        .world(world)
        .train(Net::step)
        .map_err(|e| e.error.to_string())
        .expect("the rank trains");
    let _ = std::fs::remove_dir_all(&dir);
    (report.counters.global_step(), bits(&report.model))
}

/// Every float tensor of `model`, as bits, its pending BatchNorm update folded in.
fn bits<M: Module>(model: &M) -> Vec<Vec<u32>> {
    struct Bits(Vec<Vec<u32>>);
    impl ModuleVisitor for Bits {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            self.0.push(param.val().into_data().iter::<f32>().map(f32::to_bits).collect());
        }
    }
    drop(model.valid());
    let mut bits = Bits(Vec::new());
    model.visit(&mut bits);
    bits.0
}

/// Two ranks over the loopback transport, each on a thread of its own.
fn over_loopback(stop_at: Option<u64>) -> Vec<(u64, Vec<Vec<u32>>)> {
    let cpu = crate::device::cpu().autodiff();
    let worlds = Loopback::worlds(&[cpu.clone(), cpu]);
    std::thread::scope(|scope| {
        let ranks: Vec<_> =
            worlds.into_iter().map(|world| scope.spawn(move || train(world, stop_at))).collect();
        ranks.into_iter().map(|rank| rank.join().expect("the rank's thread")).collect()
    })
}

/// Two ranks over the threads transport.
fn over_threads(stop_at: Option<u64>) -> Vec<(u64, Vec<Vec<u32>>)> {
    let cpu = crate::device::cpu().autodiff();
    Threads::new([cpu.clone(), cpu])
        .run(|world| Ok::<_, crate::Error>(train(world, stop_at)))
        .expect("the world trains")
}

/// What the trait asks of a transport is enough: a world over the tests' own transport trains
/// a model with BatchNorm (its statistics carried at each epoch's end) and dropout (seeded,
/// the ranks taking turns) to the threads transport's weights, bit for bit, on both ranks.
#[test]
fn a_world_over_a_transport_of_the_tests_trains_to_the_threads_worlds_weights() {
    let loopback = over_loopback(None);
    let threads = over_threads(None);
    assert_eq!(loopback[0].0, 3 * 8, "every step ran");
    assert_eq!(loopback[0], loopback[1], "the replicas are equal");
    assert_eq!(loopback[0], threads[0], "the loopback world trained as the threads world");
}

/// The words travel over any transport: a stop asked on rank 1 alone stops both ranks after
/// the same step, as over threads.
#[test]
fn a_stop_asked_on_one_rank_stops_every_rank_over_a_transport_of_the_tests() {
    let loopback = over_loopback(Some(5));
    assert_eq!(loopback[0].0, loopback[1].0);
    assert!(loopback[0].0 < 3 * 8, "stopped early: {}", loopback[0].0);
    assert_eq!(loopback[0], over_threads(Some(5))[0]);
}
