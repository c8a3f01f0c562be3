//! SIGINT and SIGTERM, made deterministic: every signal is raised from inside the run, at a
//! known step, by `raise(3)` (delivered to the raising thread before `raise` returns), or sent to
//! a child process once it has said where it is. The child is this test executable, run on the
//! one test `signal_child` with `STOKER_SIGNAL_CHILD` naming what to do.
//!
//! Signals are process-wide: every test here holds one lock, so no two trainers of this binary
//! handle signals at once.
#![cfg(unix)]

use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use burn::nn::Linear;
use burn::optim::SgdConfig;
use burn::tensor::Tensor;
use burn_stoker::debug::InjectShell;
use burn_stoker::prelude::*;
use burn_stoker::saver::Checkpoint;
use burn_stoker::trainer::{BatchIter, TrainData};
use stoker_tests::{StopAt, mse, scratch_dir, tiny_data, tiny_model};

type Batch = (Tensor<2>, Tensor<2>);

/// One signal test at a time in this process, with SIGINT's default action: the tests raise
/// it in this process, which a shell's background job starts with SIGINT ignored (and stoker, as
/// `nohup` asks, keeps an ignored SIGINT ignored).
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    let guard = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    set_disposition(libc::SIGINT, libc::SIG_DFL);
    guard
}

fn raise(signal: i32) {
    // SAFETY: raise(3) with a valid signal number.
    assert_eq!(unsafe { libc::raise(signal) }, 0, "raise({signal})");
}

/// Raises `signal` in `trigger_step` at global step `step`, or in `trigger_epoch` when `epoch_end`.
struct RaiseAt {
    signal: i32,
    step: u64,
    epoch_end: bool,
}

impl<M> Callback<M> for RaiseAt {
    fn trigger_step(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        if !self.epoch_end && ctx.global_step() == self.step {
            raise(self.signal);
        }
        Ok(())
    }
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        if self.epoch_end && ctx.global_step() == self.step {
            raise(self.signal);
        }
        Ok(())
    }
}

/// Counts the steps that ran and whether `after_train` ran.
#[derive(Clone, Default)]
struct Seen {
    steps: Arc<AtomicU64>,
    after_train: Arc<AtomicU64>,
}

impl<M> Callback<M> for Seen {
    fn after_train(&mut self, _ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        self.after_train.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// A trainer of the tiny model: 5 steps per epoch, SGD, no default callbacks, signals handled.
fn trainer(dir: &Path, epochs: u64) -> Trainer<Linear, Vec<Batch>> {
    let device = burn_stoker::device::cpu();
    Trainer::new(tiny_model(&device), SgdConfig::new().init(), tiny_data(5, &device))
        .default_callbacks(DefaultCallbacks::none())
        .max_epoch(epochs)
        .log_dir(dir)
}

fn train<K, C: Callbacks<Linear, K>>(
    trainer: Trainer<Linear, Vec<Batch>>,
    callbacks: C,
    seen: &Seen,
) -> burn_stoker::Result<TrainReport<Linear>> {
    let steps = seen.steps.clone();
    let report =
        trainer.callbacks(callbacks).train(move |model: &Linear, batch: Batch, _step: &mut Step<'_>| {
            steps.fetch_add(1, Ordering::SeqCst);
            mse(model, batch)
        })?;
    Ok(report)
}

fn checkpoint_dir(dir: &Path, step: u64) -> PathBuf {
    dir.join("checkpoints").join(format!("step-{step}"))
}

/// The signal stops the run at the step boundary right after it: the step it was raised in is
/// the last one, a checkpoint is written there, `after_train` runs.
fn assert_stops_at(signal: i32, name: &str, step: u64, epoch_end: bool) {
    let dir = scratch_dir("signal-step");
    let seen = Seen::default();
    let report = train(trainer(&dir, 4), (RaiseAt { signal, step, epoch_end }, seen.clone()), &seen)
        .expect("an interrupted run returns its report");
    assert_eq!(
        report.outcome,
        Outcome::Interrupted { signal: name.into(), checkpoint: Some(checkpoint_dir(&dir, step)) }
    );
    assert_eq!(report.counters.global_step(), step, "the run went past the boundary after the signal");
    assert_eq!(seen.steps.load(Ordering::SeqCst), step);
    assert_eq!(seen.after_train.load(Ordering::SeqCst), 1);
    let latest = Checkpoint::latest(&dir).unwrap().expect("the interrupt's checkpoint");
    assert_eq!(latest.global_step(), step);
    // An epoch's last step: the checkpoint resumes at the next epoch; mid-epoch, within it.
    let resume_at = &latest.trainer_state()["resume_at"];
    let (epoch, local) = if epoch_end { (step / 5 + 1, 0) } else { (step / 5 + 1, step % 5) };
    assert_eq!((resume_at["epoch"].as_u64(), resume_at["local_step"].as_u64()), (Some(epoch), Some(local)));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn signal_sigint_stops_at_the_next_step_boundary() {
    let _serial = serial();
    assert_stops_at(libc::SIGINT, "SIGINT", 7, false);
    assert_stops_at(libc::SIGINT, "SIGINT", 10, true);
}

#[test]
fn signal_writes_a_checkpoint_into_every_savers_folder() {
    let _serial = serial();
    let dir = scratch_dir("signal-two-savers");
    let archive = dir.join("archive");
    let seen = Seen::default();
    let savers = (
        ModelSaver::new(3),
        PeriodicTrigger::new(ModelSaver::new(10).checkpoint_dir(&archive)).every_k_epochs(2).named("archive"),
    );
    let raise = RaiseAt { signal: libc::SIGINT, step: 7, epoch_end: false };
    let report = train(trainer(&dir, 4), (raise, savers, seen.clone()), &seen).unwrap();
    // The default folder is written last: the report names its checkpoint.
    assert_eq!(
        report.outcome,
        Outcome::Interrupted { signal: "SIGINT".into(), checkpoint: Some(checkpoint_dir(&dir, 7)) }
    );
    let steps = |root: &Path| -> Vec<u64> {
        let mut steps: Vec<u64> = std::fs::read_dir(root)
            .unwrap()
            .filter_map(|e| e.unwrap().file_name().to_str()?.strip_prefix("step-")?.parse().ok())
            .collect();
        steps.sort();
        steps
    };
    // Epoch 1's checkpoint, then the interrupt's at step 7 in both (the archive was not due yet).
    assert_eq!(steps(&dir.join("checkpoints")), [5, 7]);
    assert_eq!(steps(&archive), [7]);
    assert_eq!(Checkpoint::latest(&archive).unwrap().unwrap().global_step(), 7);
}

#[test]
fn signal_sigterm_stops_at_the_next_step_boundary() {
    let _serial = serial();
    assert_stops_at(libc::SIGTERM, "SIGTERM", 3, false);
    assert_stops_at(libc::SIGTERM, "SIGTERM", 15, true);
}

/// Records how many values of `validation_cost` the monitors hold at each `trigger_epoch`.
struct ValidationValues(Arc<Mutex<Vec<usize>>>);

impl<M> Callback<M> for ValidationValues {
    fn name(&self) -> std::borrow::Cow<'static, str> {
        "ValidationValues".into()
    }
    fn order(&self) -> Order {
        Order::none().after("InferenceRunner")
    }
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        self.0.lock().unwrap().push(ctx.monitors_ref().history("validation_cost").len());
        Ok(())
    }
}

#[test]
fn signal_during_validation_cuts_the_pass_short() {
    let _serial = serial();
    let dir = scratch_dir("signal-validation");
    let device = burn_stoker::device::cpu();
    let batches = Arc::new(AtomicU64::new(0));
    let counted = batches.clone();
    // Epoch 1 validates all 10 batches; epoch 2's pass raises SIGINT at its 3rd batch.
    let runner = InferenceRunner::new(
        tiny_data(10, &device),
        move |model: &Linear, batch: Batch, out: &mut Outputs| {
            let n = counted.fetch_add(1, Ordering::SeqCst) + 1;
            if n == 13 {
                raise(libc::SIGINT);
            }
            let size = batch.0.dims()[0];
            out.put("cost", mse(model, batch));
            size
        },
    )
    .with(ScalarStats::new(["cost"]));
    let values = Arc::new(Mutex::new(Vec::new()));
    let seen = Seen::default();
    let report = train(trainer(&dir, 4), (runner, ValidationValues(values.clone()), seen.clone()), &seen)
        .expect("an interrupted run returns its report");
    assert_eq!(batches.load(Ordering::SeqCst), 13, "the pass went on after the signal");
    // Epoch 2's partial result is not put; the run stops at the end of epoch 2.
    assert_eq!(*values.lock().unwrap(), [1, 1]);
    assert_eq!(
        report.outcome,
        Outcome::Interrupted { signal: "SIGINT".into(), checkpoint: Some(checkpoint_dir(&dir, 10)) }
    );
    assert_eq!(report.counters.global_step(), 10);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Training data that counts the batches taken and raises SIGINT when the `raise_at`-th is taken.
struct Counting {
    batches: Vec<Batch>,
    taken: Arc<AtomicUsize>,
    raise_at: usize,
}

struct CountingPass<'a> {
    data: &'a Counting,
    next: usize,
}

impl TrainData for Counting {
    type Batch = Batch;
    type Iter<'a> = CountingPass<'a>;
    fn pass(&self) -> CountingPass<'_> {
        CountingPass { data: self, next: 0 }
    }
}

impl BatchIter<Batch> for CountingPass<'_> {
    fn next_batch(&mut self) -> Option<burn_stoker::Result<Batch>> {
        let batch = self.data.batches.get(self.next)?.clone();
        self.next += 1;
        if self.data.taken.fetch_add(1, Ordering::SeqCst) + 1 == self.data.raise_at {
            raise(libc::SIGINT);
        }
        Some(Ok(batch))
    }
    fn batches_hint(&self) -> Option<u64> {
        Some(self.data.batches.len() as u64)
    }
}

/// Records the events a resumed run delivers.
#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<&'static str>>>);

impl<M> Callback<M> for Events {
    fn before_train(&mut self, _ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        self.0.lock().unwrap().push("before_train");
        Ok(())
    }
    fn after_train(&mut self, _ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        self.0.lock().unwrap().push("after_train");
        Ok(())
    }
}

fn checkpoint_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn signal_during_the_data_replay_ends_the_run_without_a_checkpoint() {
    let _serial = serial();
    let dir = scratch_dir("signal-replay");
    let device = burn_stoker::device::cpu();
    let data =
        || Counting { batches: tiny_data(5, &device), taken: Arc::new(AtomicUsize::new(0)), raise_at: 0 };
    // A run stopped after step 4 (mid-epoch), with a checkpoint at every step.
    let seen = Seen::default();
    let saver = || PeriodicTrigger::new(ModelSaver::new(100)).every_k_steps(1);
    let first = Trainer::new(tiny_model(&device), SgdConfig::new().init(), data())
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .max_epoch(3)
        .log_dir(&dir)
        .callbacks((saver(), StopAt(4), seen.clone()))
        .train(|model: &Linear, batch: Batch, _step: &mut Step<'_>| mse(model, batch))
        .unwrap();
    assert_eq!(first.counters.global_step(), 4);
    let before = checkpoint_names(&dir);

    // The resumed run replays the 4 batches of the first pass; SIGINT comes as the 2nd is taken.
    let taken = Arc::new(AtomicUsize::new(0));
    let data = Counting { batches: tiny_data(5, &device), taken: taken.clone(), raise_at: 2 };
    let events = Events::default();
    let steps = Arc::new(AtomicU64::new(0));
    let counted = steps.clone();
    let report = Trainer::new(tiny_model(&device), SgdConfig::new().init(), data)
        .default_callbacks(DefaultCallbacks::none())
        .max_epoch(3)
        .log_dir(&dir)
        .auto_resume(true)
        .callbacks((saver(), events.clone()))
        .train(move |model: &Linear, batch: Batch, _step: &mut Step<'_>| {
            counted.fetch_add(1, Ordering::SeqCst);
            mse(model, batch)
        })
        .expect("an interrupted run returns its report");
    assert_eq!(taken.load(Ordering::SeqCst), 2, "the replay went on after the signal");
    assert_eq!(steps.load(Ordering::SeqCst), 0);
    assert_eq!(
        report.outcome,
        Outcome::Interrupted { signal: "SIGINT".into(), checkpoint: Some(checkpoint_dir(&dir, 4)) }
    );
    assert_eq!(report.counters.global_step(), 4);
    // No training event but the guaranteed one; no checkpoint written or removed.
    assert_eq!(*events.0.lock().unwrap(), ["after_train"]);
    assert_eq!(checkpoint_names(&dir), before);
    assert_eq!(Checkpoint::latest(&dir).unwrap().unwrap().global_step(), 4);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Lines for the prompt; raises SIGINT while the first is being read.
struct Typing {
    reads: Arc<AtomicUsize>,
    pending: Vec<u8>,
}

impl Read for Typing {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.pending.is_empty() {
            let n = self.reads.fetch_add(1, Ordering::SeqCst);
            if n == 0 {
                raise(libc::SIGINT);
            }
            if n < 5 {
                self.pending = b"status\n".to_vec();
            }
        }
        let n = self.pending.len().min(buf.len());
        buf[..n].copy_from_slice(&self.pending[..n]);
        self.pending.drain(..n);
        Ok(n)
    }
}

#[test]
fn shell_prompt_returns_when_a_signal_comes() {
    let _serial = serial();
    let dir = scratch_dir("shell-signal");
    std::fs::write(dir.join("INJECT_SHELL.tmp"), "").unwrap();
    let reads = Arc::new(AtomicUsize::new(0));
    let input = std::io::BufReader::with_capacity(1, Typing { reads: reads.clone(), pending: Vec::new() });
    let shell = InjectShell::new().file(dir.join("INJECT_SHELL.tmp")).with_io(input, std::io::sink());
    let seen = Seen::default();
    let report = train(trainer(&dir, 3), (shell, seen.clone()), &seen).expect("the report");
    assert_eq!(reads.load(Ordering::SeqCst), 1, "the prompt read on after the signal");
    assert_eq!(
        report.outcome,
        Outcome::Interrupted { signal: "SIGINT".into(), checkpoint: Some(checkpoint_dir(&dir, 5)) }
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Raises `signal` in `after_train`.
struct RaiseAfterTrain(i32);

impl<M> Callback<M> for RaiseAfterTrain {
    fn after_train(&mut self, _ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        raise(self.0);
        Ok(())
    }
}

#[test]
fn signal_during_after_train_is_reported() {
    let _serial = serial();
    let dir = scratch_dir("signal-after-train");
    let seen = Seen::default();
    let report = train(trainer(&dir, 2), (RaiseAfterTrain(libc::SIGTERM), seen.clone()), &seen).unwrap();
    assert_eq!(report.outcome, Outcome::Finished);
    assert_eq!(report.counters.global_step(), 10);
    assert_eq!(report.late_signal.as_deref(), Some("SIGTERM"));
    // A run the signal stopped has none: the outcome says it.
    let report = train(
        trainer(&scratch_dir("signal-after-train-2"), 2),
        RaiseAt { signal: libc::SIGINT, step: 3, epoch_end: false },
        &seen,
    )
    .unwrap();
    assert!(matches!(report.outcome, Outcome::Interrupted { .. }));
    assert_eq!(report.late_signal, None);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Raises SIGTERM in the last `trigger_epoch` (at `step`) once every rank has reached it (it runs
/// on every rank): the signal is process-wide, and a rank still before its last step boundary
/// would notice it there and carry it into the epoch's exchange.
struct RaiseTogether {
    barrier: Arc<std::sync::Barrier>,
    step: u64,
}

impl<M> Callback<M> for RaiseTogether {
    fn chief_only(&self) -> bool {
        false
    }
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        if ctx.global_step() == self.step && self.barrier.wait().is_leader() {
            raise(libc::SIGTERM);
        }
        Ok(())
    }
}

/// In a world a signal is acted on at the next exchange; one noticed after the last exchange of
/// training (here in the last epoch's `trigger_epoch`, after which every step has run) stops
/// nothing: every rank finishes and reports it in `late_signal`, as one device does for a signal
/// after its last step boundary, instead of reporting an interrupt whose checkpoint was never
/// written.
#[test]
fn signal_after_a_world_s_last_exchange_is_a_late_signal_on_every_rank() {
    let _serial = serial();
    let dir = scratch_dir("signal-world-late");
    let device = burn_stoker::device::cpu();
    let barrier = Arc::new(std::sync::Barrier::new(2));
    let reports = burn_stoker::world::Threads::new([device.clone(), device])
        .run(|world| {
            let raise_at = RaiseTogether { barrier: barrier.clone(), step: 4 };
            let data = world.shard(tiny_data(4, world.device()));
            Trainer::new(tiny_model(world.device()), SgdConfig::new().init(), data)
                .default_callbacks(DefaultCallbacks::none())
                .max_epoch(2)
                .log_dir(&dir)
                .world(world)
                .callbacks(raise_at)
                .train(|model: &Linear, batch: Batch, _step: &mut Step<'_>| mse(model, batch))
        })
        .expect("the world's reports");
    for (rank, report) in reports.iter().enumerate() {
        assert_eq!(report.outcome, Outcome::Finished, "rank {rank}");
        assert_eq!(report.counters.global_step(), 4, "rank {rank}");
        assert_eq!(report.late_signal.as_deref(), Some("SIGTERM"), "rank {rank}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

static CAUGHT: AtomicUsize = AtomicUsize::new(0);

extern "C" fn count_signal(_signal: libc::c_int) {
    CAUGHT.fetch_add(1, Ordering::SeqCst);
}

/// The handler of `signal` now (`sa_sigaction`).
fn disposition(signal: i32) -> libc::sighandler_t {
    // SAFETY: a null new action only reads the current one.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        assert_eq!(libc::sigaction(signal, std::ptr::null(), &mut old), 0);
        old.sa_sigaction
    }
}

fn set_disposition(signal: i32, handler: libc::sighandler_t) {
    // SAFETY: installing SIG_DFL, SIG_IGN or `count_signal`, which only touches an atomic.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler;
        libc::sigemptyset(&mut action.sa_mask);
        assert_eq!(libc::sigaction(signal, &action, std::ptr::null_mut()), 0);
    }
}

#[test]
fn signal_handlers_of_the_program_are_restored_after_training() {
    let _serial = serial();
    let mine = count_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    for signal in [libc::SIGINT, libc::SIGTERM] {
        set_disposition(signal, mine);
    }
    CAUGHT.store(0, Ordering::SeqCst);
    // Before training: the program's handler, and nothing carried into the run.
    raise(libc::SIGINT);
    assert_eq!(CAUGHT.load(Ordering::SeqCst), 1);
    let dir = scratch_dir("signal-restore");
    let seen = Seen::default();
    let report = train(trainer(&dir, 2), seen.clone(), &seen).unwrap();
    assert_eq!(report.outcome, Outcome::Finished);
    // During training: stoker's; after it: the program's again, for both signals.
    let report = train(
        trainer(&scratch_dir("signal-restore-2"), 2),
        RaiseAt { signal: libc::SIGTERM, step: 2, epoch_end: false },
        &seen,
    )
    .unwrap();
    assert!(matches!(report.outcome, Outcome::Interrupted { .. }), "{:?}", report.outcome);
    assert_eq!(CAUGHT.load(Ordering::SeqCst), 1, "the program's handler ran during training");
    for signal in [libc::SIGINT, libc::SIGTERM] {
        assert_eq!(disposition(signal), mine, "signal {signal}'s handler was not put back");
    }
    raise(libc::SIGINT);
    raise(libc::SIGTERM);
    assert_eq!(CAUGHT.load(Ordering::SeqCst), 3);
    for signal in [libc::SIGINT, libc::SIGTERM] {
        set_disposition(signal, libc::SIG_DFL);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------------------------
// In a child process: what the signal does to the process itself.

const CHILD: &str = "STOKER_SIGNAL_CHILD";

/// This executable, running only `signal_child` in `mode`.
fn child(mode: &str) -> Command {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["signal_child", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, mode)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    stoker_tests::sigint_default(&mut command);
    command
}

/// Wait for `child` at most `limit`; its exit status, stdout and stderr.
fn finish(mut child: std::process::Child, limit: Duration) -> (std::process::ExitStatus, String, String) {
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let pid = child.id();
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(child.wait());
    });
    let status = match receiver.recv_timeout(limit) {
        Ok(status) => status.unwrap(),
        Err(_) => {
            // SAFETY: kill(2) of our own child, not yet reaped.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            let _ = receiver.recv();
            panic!("the child did not end within {limit:?}; stderr:\n{}", err.join().unwrap());
        }
    };
    (status, out.join().unwrap(), err.join().unwrap())
}

/// What the child does, by mode; prints `outcome=<Debug> step=<global step>` when training returns.
#[test]
fn signal_child() {
    let Ok(mode) = std::env::var(CHILD) else { return };
    let dir = PathBuf::from(std::env::var("STOKER_SIGNAL_DIR").unwrap());
    let seen = Seen::default();
    let report = match mode.as_str() {
        "ignored" => {
            train(trainer(&dir, 3), RaiseAt { signal: libc::SIGINT, step: 2, epoch_end: false }, &seen)
        }
        "before" => {
            raise(libc::SIGINT);
            unreachable!("SIGINT before training did not end the process");
        }
        "after-int" | "after-term" => {
            let report = train(trainer(&dir, 1), seen.clone(), &seen).unwrap();
            println!("outcome={:?}", report.outcome);
            raise(if mode == "after-int" { libc::SIGINT } else { libc::SIGTERM });
            unreachable!("a signal after training did not end the process");
        }
        "twice" => {
            struct Twice;
            impl<M> Callback<M> for Twice {
                fn after_train(&mut self, _ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
                    // Past the window in which a repeat of the first SIGINT counts as the same.
                    std::thread::sleep(Duration::from_millis(1200));
                    raise(libc::SIGINT);
                    println!("after the second SIGINT");
                    Ok(())
                }
            }
            train(
                trainer(&dir, 3),
                (RaiseAt { signal: libc::SIGINT, step: 2, epoch_end: false }, Twice),
                &seen,
            )
        }
        "repeat" => train(
            trainer(&dir, 3),
            (
                RaiseAt { signal: libc::SIGINT, step: 2, epoch_end: false },
                RaiseAt { signal: libc::SIGINT, step: 2, epoch_end: false }.named("again"),
            ),
            &seen,
        ),
        "mixed" => train(
            trainer(&dir, 3),
            (
                RaiseAt { signal: libc::SIGTERM, step: 2, epoch_end: false },
                RaiseAt { signal: libc::SIGINT, step: 2, epoch_end: false }.named("then-sigint"),
            ),
            &seen,
        ),
        "shell" => {
            std::fs::write(dir.join("INJECT_SHELL.tmp"), "").unwrap();
            train(trainer(&dir, 3), InjectShell::new().file(dir.join("INJECT_SHELL.tmp")), &seen)
        }
        // The prompt open on stdin; a thread stops the run through its StopHandle once the test
        // creates `stop-now` (after it saw the prompt). `STOKER_SIGNALS=off`: signals not handled.
        "shell-stop" => {
            std::fs::write(dir.join("INJECT_SHELL.tmp"), "").unwrap();
            let signals = std::env::var("STOKER_SIGNALS").as_deref() != Ok("off");
            let trainer = trainer(&dir, 3).handle_signals(signals);
            let stop = trainer.stop_handle();
            let go = dir.join("stop-now");
            std::thread::spawn(move || {
                while !go.exists() {
                    std::thread::sleep(Duration::from_millis(10));
                }
                stop.stop();
            });
            train(trainer, InjectShell::new().file(dir.join("INJECT_SHELL.tmp")), &seen)
        }
        other => panic!("unknown mode {other}"),
    };
    let report = report.unwrap();
    println!("outcome={:?} step={}", report.outcome, report.counters.global_step());
    // SAFETY: a null new action only reads the current one.
    let ignored = disposition(libc::SIGINT) == libc::SIG_IGN;
    println!("sigint-ignored={ignored}");
}

#[test]
fn signal_ignored_by_the_parent_stays_ignored() {
    let _serial = serial();
    let dir = scratch_dir("signal-ignored");
    let mut command = child("ignored");
    command.env("STOKER_SIGNAL_DIR", &dir);
    // SAFETY: signal(2) is async-signal-safe, as pre_exec requires (nohup, a background job).
    unsafe {
        command.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_IGN);
            Ok(())
        });
    }
    let (status, stdout, stderr) = finish(command.spawn().unwrap(), Duration::from_secs(120));
    assert!(status.success(), "{status}\n{stdout}\n{stderr}");
    assert!(stdout.contains("outcome=Finished step=15"), "the SIGINT stopped training:\n{stdout}\n{stderr}");
    assert!(stdout.contains("sigint-ignored=true"), "SIGINT is no longer ignored:\n{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn signal_outside_training_has_its_default_action() {
    let _serial = serial();
    for (mode, signal) in
        [("before", libc::SIGINT), ("after-int", libc::SIGINT), ("after-term", libc::SIGTERM)]
    {
        let dir = scratch_dir("signal-outside");
        let (status, stdout, stderr) =
            finish(child(mode).env("STOKER_SIGNAL_DIR", &dir).spawn().unwrap(), Duration::from_secs(120));
        assert_eq!(status.signal(), Some(signal), "{mode}: {status}\n{stdout}\n{stderr}");
        if mode != "before" {
            assert!(stdout.contains("outcome=Finished"), "{mode}: {stdout}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn signal_second_sigint_exits_at_once() {
    let _serial = serial();
    let dir = scratch_dir("signal-twice");
    let (status, stdout, stderr) =
        finish(child("twice").env("STOKER_SIGNAL_DIR", &dir).spawn().unwrap(), Duration::from_secs(120));
    assert_eq!(status.code(), Some(130), "{status}\n{stdout}\n{stderr}");
    assert!(stderr.contains("stoker: SIGINT received"), "{stderr}");
    assert!(!stdout.contains("after the second SIGINT"), "the second SIGINT returned:\n{stdout}");
    assert!(!stdout.contains("outcome="), "{stdout}");
    // The first SIGINT's checkpoint is complete.
    assert_eq!(Checkpoint::latest(&dir).unwrap().unwrap().global_step(), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

/// One Ctrl-C delivered twice (the terminal's process group and a launcher's forward): the
/// repeat, within the window, is the same request, so the run stops with its checkpoint.
#[test]
fn signal_sigint_repeated_at_once_is_one_request() {
    let _serial = serial();
    let dir = scratch_dir("signal-repeat");
    let (status, stdout, stderr) =
        finish(child("repeat").env("STOKER_SIGNAL_DIR", &dir).spawn().unwrap(), Duration::from_secs(120));
    assert!(status.success(), "{status}\n{stdout}\n{stderr}");
    assert!(stdout.contains("outcome=Interrupted") && stdout.contains("step=2"), "{stdout}\n{stderr}");
    assert_eq!(Checkpoint::latest(&dir).unwrap().unwrap().global_step(), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

/// One stop request that arrives as two different signals at once (a launcher turns a Ctrl-C
/// into a SIGTERM to each rank while the terminal's process group gets the SIGINT): within the
/// window, the second is the same request whatever its number, so the run stops with its
/// checkpoint and reports the first.
#[test]
fn signal_sigterm_then_sigint_at_once_is_one_request() {
    let _serial = serial();
    let dir = scratch_dir("signal-mixed");
    let (status, stdout, stderr) =
        finish(child("mixed").env("STOKER_SIGNAL_DIR", &dir).spawn().unwrap(), Duration::from_secs(120));
    assert!(status.success(), "{status}\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("outcome=Interrupted { signal: \"SIGTERM\"") && stdout.contains("step=2"),
        "{stdout}\n{stderr}"
    );
    assert_eq!(Checkpoint::latest(&dir).unwrap().unwrap().global_step(), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn shell_prompt_on_stdin_returns_on_sigint() {
    let _serial = serial();
    let dir = scratch_dir("shell-stdin");
    // The prompt reads a pipe nobody writes to (kept open): it waits until the signal.
    let mut process = child("shell").env("STOKER_SIGNAL_DIR", &dir).stdin(Stdio::piped()).spawn().unwrap();
    let stdin = process.stdin.take().unwrap();
    let mut stderr = process.stderr.take().unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 256];
    while !String::from_utf8_lossy(&seen).contains("stoker> ") {
        let n = stderr.read(&mut buf).unwrap();
        assert!(n > 0, "the child ended before its prompt:\n{}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    // SAFETY: kill(2) of our own child, not yet reaped.
    assert_eq!(unsafe { libc::kill(process.id() as i32, libc::SIGINT) }, 0);
    process.stderr = Some(stderr);
    let (status, stdout, rest) = finish(process, Duration::from_secs(120));
    drop(stdin);
    assert!(status.success(), "{status}\n{stdout}\n{rest}");
    assert!(
        stdout.contains("outcome=Interrupted { signal: \"SIGINT\""),
        "the run did not stop on the SIGINT:\n{stdout}\n{rest}"
    );
    assert!(stdout.contains("step=5"), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Read `stderr` until it shows the prompt; what was read.
fn read_until_prompt(stderr: &mut impl Read) -> String {
    let mut seen = Vec::new();
    let mut buf = [0u8; 256];
    while !String::from_utf8_lossy(&seen).contains("stoker> ") {
        let n = stderr.read(&mut buf).unwrap();
        assert!(n > 0, "the child ended before its prompt:\n{}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&seen).into_owned()
}

/// A StopHandle stop while the prompt waits on stdin (a pipe nobody writes to) wakes it: the run
/// stops at that boundary with its checkpoint, no signal needed; with the signals handled or not.
#[test]
fn shell_prompt_on_stdin_returns_on_a_stop_handle_stop() {
    let _serial = serial();
    for signals in ["on", "off"] {
        let dir = scratch_dir("shell-stop");
        let mut process = child("shell-stop")
            .env("STOKER_SIGNAL_DIR", &dir)
            .env("STOKER_SIGNALS", signals)
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = process.stdin.take().unwrap();
        let mut stderr = process.stderr.take().unwrap();
        let before = read_until_prompt(&mut stderr);
        std::fs::write(dir.join("stop-now"), "").unwrap();
        process.stderr = Some(stderr);
        // The child's stdin stays open until it ends: only the stop can end the prompt.
        let (status, stdout, rest) = finish(process, Duration::from_secs(120));
        drop(stdin);
        assert!(status.success(), "signals {signals}: {status}\n{stdout}\n{before}{rest}");
        assert!(
            stdout.contains("outcome=Interrupted { signal: \"StopHandle\", checkpoint: Some(")
                && stdout.contains("step=5"),
            "signals {signals}: the run did not stop at the prompt's boundary:\n{stdout}\n{before}{rest}"
        );
        assert!(rest.contains("InjectShell: a stop was asked (StopHandle): leaving the prompt"), "{rest}");
        assert_eq!(Checkpoint::latest(&dir).unwrap().unwrap().global_step(), 5);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
