//! The cost of delivering one event to N no-op callbacks (N = 1, 10, 100), as the trainer
//! delivers it between steps: callbacks declared with `#[callback]` and composed with
//! `#[derive(Callbacks)]`, and, for comparison, a `Vec` of one callback type and the same
//! composition with an order constraint (which takes the indexed path).
//!
//! `cargo run --release -p stoker-bench --bin dispatch -- [events] [rounds]`

use std::hint::black_box;

use burn::nn::{Linear, LinearConfig};
use burn::optim::AdamConfig;
use burn_stoker::prelude::*;
use stoker_bench::generated::{Noops1, Noops10, Noops100, Users20};
use stoker_bench::median;

/// A no-op callback written by hand, for the `Vec` case (numbered: names are unique in a run).
#[derive(Debug, Default, Clone)]
struct Noop(usize);

impl<M> Callback<M> for Noop {
    fn name(&self) -> std::borrow::Cow<'static, str> {
        format!("Noop({})", self.0).into()
    }
}

fn noops(n: usize) -> Vec<Noop> {
    (0..n).map(Noop).collect()
}

/// A no-op callback that must run after `Noop`: forces the indexed delivery path.
#[derive(Debug, Default)]
struct Last;

impl<M> Callback<M> for Last {
    fn order(&self) -> Order {
        Order::none().before("Noop")
    }
}

fn per_event<K, C: Callbacks<Linear, K>>(make: impl Fn() -> C, events: u64, rounds: usize) -> f64 {
    let device = burn_stoker::device::cpu();
    let samples: Vec<f64> = (0..rounds)
        .map(|_| {
            let model = LinearConfig::new(2, 1).init(&device);
            let elapsed = burn_stoker::bench_support::time_event_delivery(
                black_box(make()),
                model,
                AdamConfig::new().init(),
                events,
            )
            .expect("delivery succeeds");
            elapsed.as_secs_f64() * 1e9 / events as f64
        })
        .collect();
    median(samples)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let events: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(9);
    println!(
        "one trigger_step event delivered to N no-op callbacks; ns per event, median of {rounds} x {events} events"
    );
    println!("{:<46} {:>8} {:>8} {:>8}", "set", "N=1", "N=10", "N=100");
    let derive = [
        per_event(Noops1::default, events, rounds),
        per_event(Noops10::default, events, rounds),
        per_event(Noops100::default, events, rounds),
    ];
    let vec = [1, 10, 100].map(|n| per_event(|| noops(n), events, rounds));
    let ordered = [1usize, 10, 100].map(|n| per_event(|| (noops(n), Last), events, rounds));
    let users = per_event(Users20::default, events, rounds);
    println!("the benchmark's 20 DSL callbacks (case d, trigger_step): {users:.1} ns per event");
    for (name, row) in [
        ("#[callback] fns in a #[derive(Callbacks)] struct", derive),
        ("Vec of one Callback type", vec),
        ("Vec + one order constraint (indexed path)", ordered),
    ] {
        println!("{name:<46} {:>8.1} {:>8.1} {:>8.1}", row[0], row[1], row[2]);
    }
}
