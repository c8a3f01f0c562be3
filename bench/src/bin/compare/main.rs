//! Steps per second of one model on one data set and backend (CPU, flex), trained by:
//! (a) a hand-written burn loop; (b) stoker without callbacks; (c) stoker with the default
//! callbacks; (d) the defaults plus twenty DSL callbacks on various events and periods; (e) the
//! same plus a fetch of two scalars every 10 steps; (f) burn-train's `Learner` with its default
//! metrics and no renderer (built with `--features learner`). Cases run interleaved, round after
//! round, in one process; medians. Models: the digits MLP and a small convolutional net.
//!
//! (a) to (e) are timed inside the run, after `WARMUP` steps, from one step boundary to another
//! with the device synchronized at both ends: the steady cost of a step. (f) cannot be timed
//! from inside, so it runs twice, `steps` and `steps / 5`, and the rate is the difference of
//! steps over the difference of times: its start-up and shutdown cancel out.
//!
//! `cargo run --release -p stoker-bench --bin compare [--features learner] -- [rounds] [mlp steps] [conv steps] [--denormals]`
//! (0 steps skips a model)
//!
//! Every case starts from the same model (seeded) and trains on the same batches in the same
//! order. Subnormal floats are flushed to zero on every thread of the computation unless
//! `--denormals` is given: the models drift into subnormals as they fit, which slows a CPU step by
//! up to a third at a different point of every run (see `stoker_bench::flush_denormals`). A
//! control case times the hand loop a second time: its ratio to (a) is the bench's own spread.
//!
//! `compare --chunks <runs> <steps> <chunk> [--denormals]` prints the hand loop's rate over
//! each `chunk` steps of a few MLP runs: where subnormals slow the steps down.
//!
//! `compare --one <a|b|c|d|e|f|g|h|i> <mlp|conv> <steps>` runs one case once and prints nothing: for
//! counting instructions under valgrind (`bench/tools/instructions.py`), which does not depend on
//! what else the machine is doing, and for timing whole processes of different builds.
//!
//! `compare --hand <mlp|conv> <steps> <rounds>` prints the median steps/s of the hand loop alone:
//! for comparing builds (burn's `simd` and `rayon` features) process against process.
//!
//! `--device NAME` (anywhere; `cpu` by default) runs every case on that device (`wgpu`:
//! Mesa's llvmpipe where there is no GPU). `--every-step` adds three cases: (g) (d) plus a
//! synchronous fetch of two scalars at every step, (h) the same fetch deferred
//! (`Fetch::deferred`), which never makes a step wait for the device, its reads at least
//! `deferred_read_interval` (100 ms, the default) apart on a GPU, and (i) (h) with an interval of
//! zero: a read whenever none is in flight. Each (h) and (i) run prints on stderr how many reads
//! it made and how many of them the training thread had to wait for.
//!
//! `--cases LETTERS` (e.g. `--cases c`) runs only those cases, with (a) and the control: with
//! fewer cases a round is shorter and each ratio pairs runs closer in time.
//!
//! `--cpu-time` times (a)-(e), (g) and (h) by the training thread's CPU time instead of the wall
//! clock (`CLOCK_THREAD_CPUTIME_ID`): time the thread spent descheduled is left out. Meaningful on
//! the CPU backend without `rayon`, where the training thread does all the arithmetic.
//!
//! `compare --validation <rounds> <passes>` times a validation pass over the digits' validation
//! split (batch 64, the last one short): an `InferenceRunner` with `ScalarStats` and
//! `ClassificationError` against a hand-written loop that adds the same sums on the device and
//! reads them once per pass.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use burn::optim::AdamConfig;
use burn::tensor::Device;
use burn_stoker::prelude::*;
use stoker_bench::generated::{Users20, Watch};
use stoker_bench::{Classifier, ConvNet, EveryStep, batches, fresh, hand_step, median, step};
use stoker_examples::{DigitBatch, Mlp};

/// Steps run before the clock starts.
const WARMUP: u64 = 100;

/// Whether the clock is the training thread's CPU time (`--cpu-time`) rather than the wall's.
static CPU_TIME: AtomicBool = AtomicBool::new(false);

/// The time now, by the clock `--cpu-time` chose: a duration from an arbitrary origin, to subtract.
fn now() -> Duration {
    if CPU_TIME.load(Ordering::Relaxed) {
        thread_cpu_time()
    } else {
        static ORIGIN: OnceLock<Instant> = OnceLock::new();
        ORIGIN.get_or_init(Instant::now).elapsed()
    }
}

/// The calling thread's CPU time.
#[cfg(unix)]
fn thread_cpu_time() -> Duration {
    let mut time = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `time` is a valid timespec for the call to write.
    let done = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut time) };
    assert_eq!(done, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID): {}", std::io::Error::last_os_error());
    Duration::new(time.tv_sec as u64, time.tv_nsec as u32)
}

#[cfg(not(unix))]
fn thread_cpu_time() -> Duration {
    panic!("--cpu-time needs a Unix thread clock")
}

/// Wait until the device has finished what was queued for `model`.
fn sync<M: Classifier>(model: &M, data: &[DigitBatch]) {
    let _ = model.logits(data[0].images.clone()).into_data();
}

fn hand_loop<M: Classifier>(data: &[DigitBatch], steps: u64, device: &Device) -> f64 {
    hand_rates::<M>(data, steps, steps, device)[0]
}

/// The hand loop's steps/s over each `chunk` steps after the warm-up, the device synchronized at
/// both ends of each chunk (a tail shorter than a chunk is not timed).
fn hand_rates<M: Classifier>(data: &[DigitBatch], steps: u64, chunk: u64, device: &Device) -> Vec<f64> {
    let mut model = fresh::<M>(device);
    let mut optimizer = AdamConfig::new().init();
    let mut outputs = Outputs::new();
    let mut rates = Vec::new();
    let mut start = now();
    for i in 0..=WARMUP + steps {
        if i >= WARMUP && (i - WARMUP).is_multiple_of(chunk) {
            sync(&model, data);
            if i > WARMUP {
                rates.push(chunk as f64 / (now() - start).as_secs_f64());
            }
            start = now();
        }
        if i == WARMUP + steps {
            break;
        }
        model = hand_step(model, &mut optimizer, data[i as usize % data.len()].clone(), &mut outputs);
    }
    rates
}

/// The hand loop's steps/s over each `chunk` steps of `runs` runs of `steps` steps after the
/// warm-up (`--chunks`): shows where in a run the steps slow down.
fn chunks(mut args: impl Iterator<Item = String>) {
    let usage = "usage: compare --chunks <runs> <steps> <chunk> [--denormals]";
    let mut number = || -> u64 { args.next().and_then(|a| a.parse().ok()).expect(usage) };
    let (runs, steps, chunk) = (number(), number(), number().max(1));
    let device = burn_stoker::device::cpu();
    let data = batches(&device);
    println!("hand loop, steps/s over each {chunk} steps after {WARMUP} warm-up steps:");
    for _ in 0..runs {
        let rates = hand_rates::<Mlp>(&data, steps, chunk, &device);
        println!("  {}", rates.iter().map(|r| format!("{r:.0}")).collect::<Vec<_>>().join(" "));
    }
}

/// Times the steps between global step `WARMUP` and `WARMUP + steps`, syncing at both ends.
struct Clock<'d> {
    steps: u64,
    data: &'d [DigitBatch],
    start: Option<Duration>,
    elapsed: Duration,
}

impl<M: Classifier> Callback<M> for Clock<'_> {
    fn trigger_step(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        if ctx.global_step() == WARMUP {
            sync(ctx.model(), self.data);
            self.start = Some(now());
        } else if ctx.global_step() == WARMUP + self.steps {
            sync(ctx.model(), self.data);
            self.elapsed = self.start.map_or(Duration::ZERO, |s| now() - s);
        }
        Ok(())
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Case {
    Bare,
    Defaults,
    Users,
    UsersFetch,
    /// (d) and a synchronous fetch of two scalars at every step.
    UsersEveryStep,
    /// (d) and a deferred fetch of two scalars at every step.
    UsersDeferred,
    /// (h) with `deferred_read_interval(Duration::ZERO)`: a read whenever none is in flight.
    UsersDeferredEager,
    /// (c) with the terminal dashboard instead of the progress bar and the printer (drawing only
    /// when stderr is a terminal: `instructions.py` runs it under `script`).
    Dashboard,
    /// (b) with `Trainer::seed`: the devices seeded before every step.
    Seeded,
}

fn stoker_loop<M: Classifier>(data: &[DigitBatch], steps: u64, case: Case, device: &Device) -> f64 {
    let dir = std::env::temp_dir().join(format!("stoker-bench-{}", std::process::id()));
    let defaults = match case {
        Case::Bare | Case::Seeded => DefaultCallbacks::none(),
        Case::Dashboard => DefaultCallbacks { progress: None, printer: None, ..DefaultCallbacks::default() },
        _ => DefaultCallbacks::default(),
    };
    let dashboard = (case == Case::Dashboard).then(burn_stoker::monitor::Dashboard::new);
    let users = (!matches!(case, Case::Bare | Case::Seeded | Case::Defaults | Case::Dashboard))
        .then(Users20::default);
    let watch = (case == Case::UsersFetch).then(Watch::default);
    let deferred = matches!(case, Case::UsersDeferred | Case::UsersDeferredEager);
    let every = (case == Case::UsersEveryStep || deferred).then(|| EveryStep::new(deferred));
    let interval = if case == Case::UsersDeferredEager {
        Duration::ZERO
    } else {
        burn_stoker::trainer::DEFERRED_READ_INTERVAL
    };
    let mut clock = Clock { steps, data, start: None, elapsed: Duration::ZERO };
    let trainer = Trainer::new(fresh::<M>(device), AdamConfig::new().init(), data.to_vec());
    let trainer = if case == Case::Seeded { trainer.seed(7) } else { trainer };
    let report = trainer
        .max_epoch(1)
        .steps_per_epoch(WARMUP + steps)
        .log_dir(&dir)
        // One scratch directory for every measured run of this process: each starts afresh.
        .log_dir_policy(burn_stoker::trainer::LogDirPolicy::Delete)
        .default_callbacks(defaults)
        .deferred_read_interval(interval)
        .callbacks((users, watch, every, dashboard, &mut clock))
        .train(|model: &M, batch: DigitBatch, s: &mut Step<'_>| step(model, batch, s.outputs()))
        .expect("training succeeds");
    match case {
        Case::UsersFetch => {
            assert_eq!(report.fetch_transfers, (WARMUP + steps) / 10, "one transfer every 10 steps")
        }
        Case::UsersEveryStep => assert_eq!(report.fetch_transfers, WARMUP + steps, "one transfer every step"),
        Case::UsersDeferred | Case::UsersDeferredEager => {
            assert_eq!(report.fetch_transfers, 0, "no blocking transfer with deferred fetches");
            assert!(report.deferred_reads <= WARMUP + steps, "at most one deferred read every step");
            eprintln!(
                "compare: ({}) {} deferred reads for {} steps, the training thread waited for {} of them",
                if case == Case::UsersDeferred { 'h' } else { 'i' },
                report.deferred_reads,
                WARMUP + steps,
                report.deferred_waits
            );
        }
        _ => assert_eq!(report.fetch_transfers, 0, "no transfer when nobody fetches"),
    }
    let _ = std::fs::remove_dir_all(&dir);
    steps as f64 / clock.elapsed.as_secs_f64()
}

#[cfg(feature = "learner")]
mod learner;
mod validation;

/// Each case's letter, in the order of `run_model`'s names.
const LETTERS: [char; 10] = ['a', 'b', 'c', 'd', 'e', 'f', 'a', 'g', 'h', 'i'];

fn run_model<M: Classifier>(
    rounds: usize,
    steps: u64,
    every_step: bool,
    only: Option<&str>,
    device: &Device,
) -> Vec<(&'static str, Rates)> {
    let data = batches(device);
    let names = [
        "(a) hand-written burn loop",
        "(b) stoker, no callbacks",
        "(c) stoker, default callbacks",
        "(d) (c) + 20 DSL callbacks",
        "(e) (d) + fetch of 2 scalars every 10 steps",
        "(f) burn-train Learner, default metrics, no renderer",
        "control: (a) again, the bench's own spread",
        "(g) (d) + fetch of 2 scalars every step",
        "(h) (d) + deferred fetch of 2 scalars every step",
        "(i) (h), a read whenever none is in flight",
    ];
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    // The control, a second hand loop, is the last case.
    let mut order: Vec<usize> =
        if cfg!(feature = "learner") { vec![0, 1, 2, 3, 4, 5] } else { vec![0, 1, 2, 3, 4] };
    if every_step {
        order.extend([7, 8, 9]);
    }
    if let Some(only) = only {
        if only.contains(['g', 'h', 'i']) && !every_step {
            order.extend([7, 8, 9]);
        }
        order.retain(|&case| case == 0 || only.contains(LETTERS[case]));
    }
    order.push(6);
    let cases = order.len();
    let measure = |case: usize| -> f64 {
        match case {
            0 | 6 => hand_loop::<M>(&data, steps, device),
            1 => stoker_loop::<M>(&data, steps, Case::Bare, device),
            2 => stoker_loop::<M>(&data, steps, Case::Defaults, device),
            3 => stoker_loop::<M>(&data, steps, Case::Users, device),
            4 => stoker_loop::<M>(&data, steps, Case::UsersFetch, device),
            7 => stoker_loop::<M>(&data, steps, Case::UsersEveryStep, device),
            8 => stoker_loop::<M>(&data, steps, Case::UsersDeferred, device),
            9 => stoker_loop::<M>(&data, steps, Case::UsersDeferredEager, device),
            #[cfg(feature = "learner")]
            5 => learner::rate::<M>(&data, steps, device),
            _ => unreachable!(),
        }
    };
    hand_loop::<M>(&data, steps / 4, device);
    for round in 0..rounds {
        // Each round starts with another case, so that no case always runs first or last.
        for k in 0..cases {
            let case = order[(round + k) % cases];
            samples[case].push(measure(case));
        }
    }
    let hand = samples[0].clone();
    let defaults = samples[2].clone();
    names
        .into_iter()
        .zip(samples)
        .filter(|(_, s)| !s.is_empty())
        .map(|(n, s)| {
            // Each round's rate over the same round's hand loop (or default callbacks over the
            // Learner): pairing cancels the machine's slow drifts.
            let ratios: Vec<f64> = s.iter().zip(&hand).map(|(x, h)| x / h).collect();
            let over_learner: Vec<f64> = defaults.iter().zip(&s).map(|(d, x)| d / x).collect();
            let rates = Rates {
                median: median(s.clone()),
                ratio: median(ratios.clone()),
                low: quantile(&ratios, 0.25),
                high: quantile(&ratios, 0.75),
                // NaN when (c) did not run (`--cases` without c).
                defaults_over: if over_learner.is_empty() { f64::NAN } else { median(over_learner) },
            };
            (n, rates)
        })
        .collect()
}

/// A case's rates over the rounds.
#[derive(Debug, Clone, Copy)]
struct Rates {
    /// Median steps per second.
    median: f64,
    /// Median of the per-round ratios to (a), and their quartiles.
    ratio: f64,
    low: f64,
    high: f64,
    /// Median of the per-round ratios of (c) to this case.
    defaults_over: f64,
}

/// The `q` quantile of `values` (nearest rank).
fn quantile(values: &[f64], q: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn report(model: &str, floats: &str, device: &str, steps: u64, rounds: usize, rates: &[(&str, Rates)]) {
    println!("\n{model}, batch 64, Adam, device {device}, {floats}; {steps} steps x {rounds} rounds:");
    println!("  {:<52} {:>9}  {:>8}  {:>13}", "case", "steps/s", "/ (a)", "quartiles");
    for (name, r) in rates {
        println!("  {name:<52} {:9.0}  {:8.3}  {:>6.3}-{:<6.3}", r.median, r.ratio, r.low, r.high);
    }
    match rates.iter().find(|(name, _)| name.starts_with("(f)")) {
        Some((_, learner)) => {
            println!("  (c) / (f), median of the rounds' ratios: {:.3}", learner.defaults_over)
        }
        None => println!("  (f) not measured: build with --features learner"),
    }
}

/// Run one case once (`--one case model steps`).
fn one(mut args: impl Iterator<Item = String>, device: &Device) {
    let usage = "usage: compare --one <a|b|c|d|e|f|g|h|i|j|k> <mlp|conv> <steps>";
    let case = args.next().expect(usage);
    let model = args.next().expect(usage);
    let steps: u64 = args.next().and_then(|a| a.parse().ok()).expect(usage);
    fn run<M: Classifier>(case: &str, steps: u64, device: &Device) {
        let data = batches(device);
        match case {
            "a" => drop(hand_loop::<M>(&data, steps, device)),
            "b" => drop(stoker_loop::<M>(&data, steps, Case::Bare, device)),
            "c" => drop(stoker_loop::<M>(&data, steps, Case::Defaults, device)),
            "d" => drop(stoker_loop::<M>(&data, steps, Case::Users, device)),
            "e" => drop(stoker_loop::<M>(&data, steps, Case::UsersFetch, device)),
            "g" => drop(stoker_loop::<M>(&data, steps, Case::UsersEveryStep, device)),
            "h" => drop(stoker_loop::<M>(&data, steps, Case::UsersDeferred, device)),
            "i" => drop(stoker_loop::<M>(&data, steps, Case::UsersDeferredEager, device)),
            "j" => drop(stoker_loop::<M>(&data, steps, Case::Dashboard, device)),
            "k" => drop(stoker_loop::<M>(&data, steps, Case::Seeded, device)),
            #[cfg(feature = "learner")]
            "f" => drop(learner::run::<M>(&data, steps, device)),
            other => panic!("unknown case `{other}` (f needs --features learner)"),
        }
    }
    match model.as_str() {
        "mlp" => run::<Mlp>(&case, steps, device),
        "conv" => run::<ConvNet>(&case, steps, device),
        other => panic!("unknown model `{other}`: mlp or conv"),
    }
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let device_name = match args.iter().position(|a| a == "--device") {
        Some(i) => {
            args.remove(i);
            args.remove(i)
        }
        None => "cpu".to_string(),
    };
    let device = burn_stoker::device::by_name(&device_name).unwrap_or_else(|e| panic!("{e}"));
    if args.iter().any(|a| a == "--cpu-time") {
        CPU_TIME.store(true, Ordering::Relaxed);
    }
    args.retain(|a| a != "--cpu-time");
    let every_step = args.iter().any(|a| a == "--every-step");
    args.retain(|a| a != "--every-step");
    let only = match args.iter().position(|a| a == "--cases") {
        Some(i) => {
            args.remove(i);
            Some(args.remove(i))
        }
        None => None,
    };
    // Subnormals flushed unless `--denormals` (see `stoker_bench::flush_denormals`).
    let denormals = args.iter().any(|a| a == "--denormals");
    args.retain(|a| a != "--denormals");
    if !denormals && let Err(e) = stoker_bench::flush_denormals_everywhere() {
        eprintln!("compare: {e}; running with subnormals");
    }
    let mut args = args.into_iter().peekable();
    if args.peek().map(String::as_str) == Some("--one") {
        args.next();
        return one(args, &device);
    }
    if args.peek().map(String::as_str) == Some("--validation") {
        args.next();
        return validation::compare(args, &device, &device_name);
    }
    if args.peek().map(String::as_str) == Some("--hand") {
        args.next();
        let usage = "usage: compare --hand <mlp|conv> <steps> <rounds>";
        let model = args.next().expect(usage);
        let steps: u64 = args.next().and_then(|a| a.parse().ok()).expect(usage);
        let rounds: usize = args.next().and_then(|a| a.parse().ok()).expect(usage);
        let data = batches(&device);
        let rates: Vec<f64> = (0..rounds)
            .map(|_| match model.as_str() {
                "mlp" => hand_loop::<Mlp>(&data, steps, &device),
                "conv" => hand_loop::<ConvNet>(&data, steps, &device),
                other => panic!("unknown model `{other}`: mlp or conv"),
            })
            .collect();
        println!("{model} hand loop on {device_name}: {:.1} steps/s (median of {rounds})", median(rates));
        return;
    }
    if args.peek().map(String::as_str) == Some("--chunks") {
        args.next();
        return chunks(args);
    }
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(7);
    let mlp_steps: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(3000);
    let conv_steps: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(300);
    let floats = if denormals { "subnormals kept" } else { "subnormals flushed" };
    if mlp_steps > 0 {
        let mlp = run_model::<Mlp>(rounds, mlp_steps, every_step, only.as_deref(), &device);
        report(Mlp::NAME, floats, &device_name, mlp_steps, rounds, &mlp);
    }
    if conv_steps > 0 {
        let conv = run_model::<ConvNet>(rounds, conv_steps, every_step, only.as_deref(), &device);
        report(ConvNet::NAME, floats, &device_name, conv_steps, rounds, &conv);
    }
}
