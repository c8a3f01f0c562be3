//! The trainer adds no allocation to a step: allocations per step, counted by a counting global
//! allocator (every thread), are the same for a hand-written burn loop and for stoker with no
//! callbacks, with the default callbacks, and with twenty DSL callbacks — burn's own allocations
//! (tensors, autodiff graph) are all there is. The same holds for a step that fetches two scalars,
//! synchronously or deferred, against a hand loop that reads them with the same burn calls.

use std::alloc::{GlobalAlloc, Layout, System};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context as TaskContext, Poll, Waker};

use burn::optim::{AdamConfig, GradientsParams};
use burn::tensor::{Device, Tensor, Transaction};
use burn_stoker::prelude::*;
use stoker_bench::EveryStep;
use stoker_bench::generated::Users20;
use stoker_examples::{DigitBatch, DigitBatcher, Mlp, digit_outputs, load_digits};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator, only counting.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The counter sees every thread: the tests of this file run one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Steps before measuring (caches, pools and the autodiff graph warm up), and steps measured.
const WARMUP: u64 = 100;
const MEASURED: u64 = 400;

fn batches(device: &Device) -> Vec<DigitBatch> {
    use burn::data::dataloader::batcher::Batcher;
    let split = load_digits(1, 0.2);
    split.train.chunks(64).filter(|c| c.len() == 64).map(|c| DigitBatcher.batch(c.to_vec(), device)).collect()
}

/// What the hand loop reads back at each step.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Read {
    Nothing,
    /// The cost and the accuracy, joined and read in one blocking transfer.
    Now,
    /// The cost and the accuracy, read by a transaction executed asynchronously (on the CPU
    /// backend its first poll has the values).
    Async,
}

/// Allocations per step of the hand-written loop: forward, loss, backward, optimizer step, and
/// the values `read` asks for, copied into a buffer kept from step to step.
fn hand_loop(data: &[DigitBatch], device: &Device, read: Read) -> f64 {
    let mut model = Mlp::new(128, device);
    let mut optimizer = AdamConfig::new().init();
    let mut outputs = Outputs::new();
    let mut host: Vec<f32> = Vec::new();
    let mut sum = 0.0;
    let mut start = 0;
    for i in 0..WARMUP + MEASURED {
        if i == WARMUP {
            start = ALLOCATIONS.load(Ordering::SeqCst);
        }
        outputs.clear();
        let loss = digit_outputs(&model, data[i as usize % data.len()].clone(), &mut outputs);
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optimizer.step(1e-3, model, grads);
        let flat = |name: &str| outputs.get(name).expect("the step puts it").flat();
        host.clear();
        match read {
            Read::Nothing => {}
            Read::Now => {
                let joined = Tensor::cat(vec![flat("cost"), flat("accuracy")], 0);
                let data = Transaction::default().register(joined).execute().pop().expect("one read");
                host.extend_from_slice(data.as_slice::<f32>().expect("f32 values"));
            }
            Read::Async => {
                let transaction = Transaction::default().register(flat("cost")).register(flat("accuracy"));
                let future = std::pin::pin!(transaction.execute_async());
                let Poll::Ready(Ok(datas)) = future.poll(&mut TaskContext::from_waker(Waker::noop())) else {
                    panic!("the CPU backend has the values at the first poll")
                };
                for data in &datas {
                    host.extend_from_slice(data.as_slice::<f32>().expect("f32 values"));
                }
            }
        }
        sum += host.iter().sum::<f32>();
    }
    assert!(read == Read::Nothing || sum > 0.0, "the values were read");
    (ALLOCATIONS.load(Ordering::SeqCst) - start) as f64 / MEASURED as f64
}

/// Reads the allocation counter after steps `WARMUP` and `WARMUP + MEASURED` (no allocation of
/// its own).
#[derive(Debug, Default)]
struct Meter {
    start: u64,
    end: u64,
}

impl<M> Callback<M> for Meter {
    fn trigger_step(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        if ctx.global_step() == WARMUP {
            self.start = ALLOCATIONS.load(Ordering::SeqCst);
        } else if ctx.global_step() == WARMUP + MEASURED {
            self.end = ALLOCATIONS.load(Ordering::SeqCst);
        }
        Ok(())
    }
    fn after_train(&mut self, _ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        PER_STEP.store(((self.end - self.start) as f64 / MEASURED as f64).to_bits(), Ordering::SeqCst);
        Ok(())
    }
}

static PER_STEP: AtomicU64 = AtomicU64::new(0);

/// Allocations per step of stoker's trainer with `defaults` and `users` besides the meter.
fn stoker_loop<K, C: Callbacks<Mlp, K>>(
    data: &[DigitBatch],
    device: &Device,
    defaults: DefaultCallbacks,
    users: C,
) -> f64 {
    let dir = std::env::temp_dir().join(format!("stoker-alloc-{}", std::process::id()));
    Trainer::new(Mlp::new(128, device), AdamConfig::new().init(), data.to_vec())
        .max_epoch(1)
        // One epoch longer than the measurement, so that no epoch event falls inside it.
        .steps_per_epoch(WARMUP + MEASURED + 1)
        .log_dir(&dir)
        // One scratch directory for every measured run of this process: each starts afresh.
        .log_dir_policy(burn_stoker::trainer::LogDirPolicy::Delete)
        .handle_signals(false)
        .default_callbacks(defaults)
        .callbacks((users, Meter::default()))
        .train(|model: &Mlp, batch: DigitBatch, step: &mut Step<'_>| {
            digit_outputs(model, batch, step.outputs())
        })
        .expect("training succeeds");
    let _ = std::fs::remove_dir_all(&dir);
    f64::from_bits(PER_STEP.load(Ordering::SeqCst))
}

#[test]
fn the_trainer_allocates_nothing_per_step_beyond_burn() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let device = burn_stoker::device::cpu();
    let data = batches(&device);
    // Twice each, interleaved: the smaller of two counts filters a one-off allocation of the
    // thread pool or the allocator's caches.
    let mut hand = f64::INFINITY;
    let mut bare = f64::INFINITY;
    let mut defaults = f64::INFINITY;
    let mut users = f64::INFINITY;
    for _ in 0..2 {
        hand = hand.min(hand_loop(&data, &device, Read::Nothing));
        bare = bare.min(stoker_loop(&data, &device, DefaultCallbacks::none(), ()));
        let quiet = DefaultCallbacks { printer: None, ..DefaultCallbacks::default() };
        defaults = defaults.min(stoker_loop(&data, &device, quiet, ()));
        let quiet = DefaultCallbacks { printer: None, ..DefaultCallbacks::default() };
        users = users.min(stoker_loop(&data, &device, quiet, Users20::default()));
    }
    eprintln!(
        "allocations per step: hand loop {hand:.2}, stoker bare {bare:.2}, with defaults {defaults:.2}, with defaults + 20 DSL callbacks {users:.2}"
    );
    assert!(hand > 0.0, "burn allocates in a step: the counter works");
    // The README's claim: the same count, not merely no more (fewer would mean the loops do
    // different work, and the comparison would not be like for like).
    assert_eq!(bare, hand, "the bare trainer allocates {bare} per step, the hand loop {hand}");
    assert_eq!(
        defaults, hand,
        "the trainer with the defaults allocates {defaults} per step, the hand loop {hand}"
    );
    assert_eq!(
        users, hand,
        "the trainer with 20 DSL callbacks allocates {users} per step, the hand loop {hand}"
    );
}

#[test]
fn a_fetching_step_allocates_what_burn_does_to_read_the_values() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let device = burn_stoker::device::cpu();
    let data = batches(&device);
    let (mut hand_now, mut hand_async, mut now, mut deferred) = [f64::INFINITY; 4].into();
    for _ in 0..2 {
        hand_now = hand_now.min(hand_loop(&data, &device, Read::Now));
        hand_async = hand_async.min(hand_loop(&data, &device, Read::Async));
        let mut sync = EveryStep::new(false);
        now = now.min(stoker_loop(&data, &device, DefaultCallbacks::none(), &mut sync));
        let mut later = EveryStep::new(true);
        deferred = deferred.min(stoker_loop(&data, &device, DefaultCallbacks::none(), &mut later));
        for every in [sync, later] {
            assert_eq!(every.received, WARMUP + MEASURED + 1, "every step's values arrived");
            assert!(every.sum > 0.0, "the values were read");
        }
    }
    let nothing = hand_loop(&data, &device, Read::Nothing);
    eprintln!(
        "allocations per step reading two scalars: hand loop, one transfer {hand_now:.2}, stoker's synchronous fetch {now:.2}; hand loop, asynchronous transaction {hand_async:.2}, stoker's deferred fetch {deferred:.2} (reading nothing: {nothing:.2})"
    );
    assert!(
        hand_now > nothing && hand_async > nothing,
        "reading the values allocates in burn: the counter sees it"
    );
    assert_eq!(
        now, hand_now,
        "a synchronous fetch allocates {now} per step, the hand loop's read {hand_now}"
    );
    assert_eq!(
        deferred, hand_async,
        "a deferred fetch allocates {deferred} per step, the hand loop's asynchronous read {hand_async}"
    );
}
