//! Deferred fetches (`Fetch::deferred`, `#[fetch(..., deferred)]`): a step's values are read back
//! without the step waiting for them, and reach the callbacks that asked in the `fetched` event
//! of a later step, with the step they belong to; every read of an epoch is delivered before the
//! epoch's `after_epoch`. On the CPU backend a read is done when it starts: no step waits.

use std::sync::{Arc, Mutex};

use burn::module::Module;
use burn::nn::Linear;
use burn_stoker::prelude::*;
use stoker_tests::{mse, scratch_dir, tiny_data, tiny_model};

/// What the callbacks saw, in the order they saw it.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    /// `after_step` of a synchronous fetch: the step and the loss.
    Sync {
        step: u64,
        loss: f32,
    },
    /// `fetched`: the step the values belong to, the global step when they arrived, the loss.
    Deferred {
        of: u64,
        at: u64,
        loss: f32,
    },
    AfterEpoch {
        at: u64,
    },
}

type Log = Arc<Mutex<Vec<Seen>>>;

/// A callback by hand: the loss of every step, deferred; logs `after_epoch` too.
struct DeferredLoss(Log);

static DEFERRED: [Fetch; 1] = [Fetch::deferred("loss")];

impl Callback<Linear> for DeferredLoss {
    fn fetches(&self) -> &[Fetch] {
        &DEFERRED
    }
    fn fetched(&mut self, ctx: &mut Context<'_, Linear>, values: &Fetched<'_>) -> burn_stoker::Result<()> {
        assert!(values.is_deferred());
        let loss = values.get::<f32>("loss")?;
        self.0.lock().unwrap().push(Seen::Deferred { of: values.step(), at: ctx.global_step(), loss });
        Ok(())
    }
    fn after_epoch(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.0.lock().unwrap().push(Seen::AfterEpoch { at: ctx.global_step() });
        Ok(())
    }
}

/// The same loss, fetched synchronously at every step.
struct SyncLoss(Log);

static SYNC: [Fetch; 1] = [Fetch::host("loss")];

impl Callback<Linear> for SyncLoss {
    fn fetches(&self) -> &[Fetch] {
        &SYNC
    }
    fn after_step(&mut self, ctx: &mut Context<'_, Linear>, values: &Fetched<'_>) -> burn_stoker::Result<()> {
        assert_eq!(values.step(), ctx.global_step(), "a synchronous fetch belongs to its own step");
        let loss = values.get::<f32>("loss")?;
        self.0.lock().unwrap().push(Seen::Sync { step: ctx.global_step(), loss });
        Ok(())
    }
}

fn train<C: Callbacks<Linear, K>, K>(name: &str, callbacks: C) -> TrainReport<Linear> {
    let device = burn_stoker::device::cpu();
    Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(5, &device))
        .max_epoch(2)
        .log_dir(scratch_dir(name))
        .handle_signals(false)
        .default_callbacks(DefaultCallbacks::none())
        .callbacks(callbacks)
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .unwrap()
}

#[test]
fn deferred_values_arrive_after_the_next_step_with_their_step_and_equal_the_synchronous_ones() {
    let log = Log::default();
    let report = train("deferred-order", (SyncLoss(log.clone()), DeferredLoss(log.clone())));
    let log = log.lock().unwrap().clone();
    let sync: Vec<(u64, f32)> = log
        .iter()
        .filter_map(|s| if let Seen::Sync { step, loss } = s { Some((*step, *loss)) } else { None })
        .collect();
    let deferred: Vec<(u64, u64, f32)> = log
        .iter()
        .filter_map(|s| if let Seen::Deferred { of, at, loss } = s { Some((*of, *at, *loss)) } else { None })
        .collect();
    assert_eq!(sync.len(), 10);
    // Every step once, in order, with the very values the synchronous fetch read.
    let of: Vec<u64> = deferred.iter().map(|d| d.0).collect();
    assert_eq!(of, (1..=10).collect::<Vec<u64>>());
    for ((step, loss), (of, _, deferred_loss)) in sync.iter().zip(&deferred) {
        assert_eq!((step, loss.to_bits()), (of, deferred_loss.to_bits()));
    }
    // Each arrives at the next step, except an epoch's last, which arrives before its
    // after_epoch (steps 5 and 10: the epochs have 5 steps).
    let at: Vec<u64> = deferred.iter().map(|d| d.1).collect();
    assert_eq!(at, [2, 3, 4, 5, 5, 7, 8, 9, 10, 10]);
    let order: Vec<String> = log
        .iter()
        .filter(|s| !matches!(s, Seen::Sync { .. }))
        .map(|s| match s {
            Seen::Deferred { of, .. } => format!("fetched {of}"),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(order[4..6], ["fetched 5".to_string(), "AfterEpoch { at: 5 }".to_string()]);
    assert_eq!(order[10..], ["fetched 10".to_string(), "AfterEpoch { at: 10 }".to_string()]);
    // One synchronous transfer per step, one deferred read per step, none waited for (CPU).
    assert_eq!((report.fetch_transfers, report.deferred_reads, report.deferred_waits), (10, 10, 0));
}

#[test]
fn a_deferred_fetch_every_step_makes_no_blocking_read() {
    let log = Log::default();
    let (report, reads) =
        stoker_tests::reads::count_reads(|| train("deferred-reads", DeferredLoss(log.clone())));
    // Measured where burn blocks (cubecl's block_on), not where the trainer says it reads.
    assert_eq!(reads, 0, "blocking device-to-host reads with a deferred fetch at every step");
    assert_eq!((report.fetch_transfers, report.deferred_reads, report.deferred_waits), (0, 10, 0));
    assert_eq!(log.lock().unwrap().iter().filter(|s| matches!(s, Seen::Deferred { .. })).count(), 10);
}

/// The DSL: a hook of an impl with a period, its values deferred.
#[derive(Default)]
struct EveryOther {
    seen: Arc<Mutex<Vec<(u64, f32)>>>,
}

#[callback]
impl EveryOther {
    #[on(after_step, every_k_steps = 2)]
    #[fetch("loss", deferred)]
    fn got(&mut self, loss: f32, ctx: &mut Context<'_, impl Module>) {
        self.seen.lock().unwrap().push((ctx.global_step(), loss));
    }
}

#[test]
fn a_dsl_hook_with_a_deferred_fetch_receives_the_steps_its_period_asked_at_one_step_later() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Log::default();
    let report = train("deferred-dsl", (EveryOther { seen: seen.clone() }, SyncLoss(log.clone())));
    // Asked at steps 2, 4, 6, 8, 10; arrived at the next step (6's at 7), 10's at the end of
    // the epoch, before after_epoch.
    let seen = seen.lock().unwrap().clone();
    let at: Vec<u64> = seen.iter().map(|s| s.0).collect();
    assert_eq!(at, [3, 5, 7, 9, 10]);
    let sync = log.lock().unwrap().clone();
    let losses: Vec<u32> = seen.iter().map(|s| s.1.to_bits()).collect();
    let expected: Vec<u32> = sync
        .iter()
        .filter_map(|s| match s {
            Seen::Sync { step, loss } if step % 2 == 0 => Some(loss.to_bits()),
            _ => None,
        })
        .collect();
    assert_eq!(losses, expected, "the values of steps 2, 4, 6, 8, 10");
    assert_eq!(report.deferred_reads, 5);
}

/// A stop between epochs' ends: the read of the last step is delivered before `after_train`.
struct StopAtThree;

impl Callback<Linear> for StopAtThree {
    fn trigger_step(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        if ctx.global_step() == 3 {
            ctx.request_stop("test");
        }
        Ok(())
    }
}

#[test]
fn a_stop_in_the_middle_of_an_epoch_still_delivers_every_deferred_read() {
    let log = Log::default();
    let report = train("deferred-stop", (DeferredLoss(log.clone()), StopAtThree));
    assert_eq!(report.counters.global_step(), 3);
    let of: Vec<u64> = log
        .lock()
        .unwrap()
        .iter()
        .filter_map(|s| if let Seen::Deferred { of, .. } = s { Some(*of) } else { None })
        .collect();
    assert_eq!(of, [1, 2, 3]);
}
