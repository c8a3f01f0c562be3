//! [`StartProcOrThread`]: helper threads and processes that live as long as training.

use std::process::{Child, Command};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::callback::{Callback, Context};
use crate::error::{Error, Result};

/// The stop request a thread started by [`StartProcOrThread`] receives: check it in the
/// thread's loop, or wait on it.
#[derive(Debug, Clone, Default)]
pub struct StopFlag(Arc<AtomicBool>);

impl StopFlag {
    /// Whether the thread was asked to stop.
    pub fn is_stopped(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
    /// Sleep until asked to stop or until `timeout` has passed; whether the thread was asked to
    /// stop. Only the started thread itself may wait (the stop wakes it).
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while !self.is_stopped() {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            std::thread::park_timeout(deadline - now);
        }
        true
    }
    /// Sleep until asked to stop.
    pub fn wait(&self) {
        while !self.is_stopped() {
            std::thread::park();
        }
    }
    fn set(&self) {
        self.0.store(true, Ordering::Release);
    }
}

type ThreadBody = Box<dyn FnOnce(StopFlag) + Send>;

enum Item {
    Thread { name: String, body: Option<ThreadBody>, flag: StopFlag, handle: Option<JoinHandle<()>> },
    Process { command: Command, child: Option<Child> },
}

impl Item {
    fn describe(&self) -> String {
        match self {
            Item::Thread { name, .. } => format!("thread `{name}`"),
            Item::Process { command, child } => match child {
                Some(child) => format!("process {:?} (pid {})", command.get_program(), child.id()),
                None => format!("process {:?}", command.get_program()),
            },
        }
    }
}

/// Starts threads and processes before training and stops them after it (tensorpack's
/// `StartProcOrThread(startable, stop_at_last=True)`).
///
/// Everything starts in `before_train`, in the order given; a failure to start is an error
/// naming what failed (what did start is still stopped in `after_train`). With
/// [`stop_at_train_end`](Self::stop_at_train_end) (on by default) everything is stopped in
/// `after_train` — after success, a stop, an error or a panic elsewhere:
/// - a thread's [`StopFlag`] is set and the thread woken, then it is joined; a thread that has
///   not returned after the grace period is left running with a warning, and a thread that
///   panicked is an error;
/// - a process receives SIGTERM, then SIGKILL if it has not exited after the grace period (on
///   platforms without signals, it is killed at once), and is waited for (no zombie is left).
///
/// All are asked to stop first, then waited for together: the grace period (5 s by default)
/// bounds the whole wait. Processes are signalled themselves, not their children (as
/// tensorpack's `Process.terminate()`): start a program directly, or with `exec` in a shell
/// command. With `stop_at_train_end(false)`, threads and processes are left running (tensorpack
/// does the same; it stops only its `StoppableThread`s and processes).
///
/// - **SIGINT masked**, as tensorpack's `start_proc_mask_signal`: a process starts with SIGINT
///   ignored (kept through `exec`; on unix), a thread runs with SIGINT blocked. A Ctrl-C at the
///   terminal, which reaches every process of the foreground group, leaves them running: the
///   trainer receives it, stops at the step boundary, and `after_train` stops them in order.
/// - **Ends with the process**, with [`stop_at_train_end`](Self::stop_at_train_end) on: when the
///   process ends at once (a second Ctrl-C, [`StepTimeout`](crate::debug::StepTimeout)'s abort,
///   the CUDA watchdog, an MPI abort), its processes are killed first (SIGKILL; no grace period
///   then); on Linux they also receive SIGKILL when the process ends in any other way (a SIGKILL,
///   a crash: `PR_SET_PDEATHSIG`). With `stop_at_train_end(false)` they are left alone.
/// - **Every rank**: in data-parallel training it runs on every rank, tensorpack's `_chief_only
///   = False` for this callback (each rank's helpers, e.g. a data feeder);
///   [`chief_only(true)`](Self::chief_only) keeps it to the chief.
///
/// Anything else with a start and a stop (tensorpack's "startable") runs in a thread:
/// `.thread("server", |stop| { server.start(); stop.wait(); server.stop(); })`.
///
/// ```no_run
/// use std::process::Command;
/// use std::time::Duration;
/// use burn_stoker::debug::StartProcOrThread;
/// let helpers = StartProcOrThread::new()
///     .thread("heartbeat", |stop| {
///         while !stop.wait_timeout(Duration::from_secs(60)) {
///             eprintln!("still training");
///         }
///     })
///     .process({
///         let mut board = Command::new("tensorboard");
///         board.args(["--logdir", "train_log"]);
///         board
///     })
///     .grace_period(Duration::from_secs(2));
/// # let _ = helpers;
/// ```
pub struct StartProcOrThread {
    items: Vec<Item>,
    stop_at_train_end: bool,
    grace: Duration,
    chief_only: bool,
}
crate::kind::kind!(StartProcOrThread);

impl std::fmt::Debug for StartProcOrThread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let items: Vec<String> = self.items.iter().map(Item::describe).collect();
        f.debug_struct("StartProcOrThread")
            .field("items", &items)
            .field("stop_at_train_end", &self.stop_at_train_end)
            .field("grace", &self.grace)
            .field("chief_only", &self.chief_only)
            .finish()
    }
}

impl Default for StartProcOrThread {
    fn default() -> Self {
        StartProcOrThread::new()
    }
}

impl StartProcOrThread {
    /// Nothing to start yet; add threads and processes with the methods below.
    pub fn new() -> Self {
        StartProcOrThread {
            items: Vec::new(),
            stop_at_train_end: true,
            grace: Duration::from_secs(5),
            chief_only: false,
        }
    }
    /// Start a thread named `name` running `body`, which receives its stop request.
    pub fn thread(mut self, name: impl Into<String>, body: impl FnOnce(StopFlag) + Send + 'static) -> Self {
        self.items.push(Item::Thread {
            name: name.into(),
            body: Some(Box::new(body)),
            flag: StopFlag::default(),
            handle: None,
        });
        self
    }
    /// Start a process.
    pub fn process(mut self, command: Command) -> Self {
        self.items.push(Item::Process { command, child: None });
        self
    }
    /// Whether to stop everything in `after_train` (default true; tensorpack's `stop_at_last`).
    pub fn stop_at_train_end(mut self, stop: bool) -> Self {
        self.stop_at_train_end = stop;
        self
    }
    /// Whether it runs on the chief only in data-parallel training (default false: on every
    /// rank, as tensorpack's).
    pub fn chief_only(mut self, chief_only: bool) -> Self {
        self.chief_only = chief_only;
        self
    }
    /// How long threads and processes have to stop before a process is killed and a thread left
    /// behind (default 5 s).
    pub fn grace_period(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }
    /// The ids of the processes started, in the order given (empty before `before_train`).
    pub fn pids(&self) -> Vec<u32> {
        self.items
            .iter()
            .filter_map(|item| match item {
                Item::Process { child: Some(child), .. } => Some(child.id()),
                _ => None,
            })
            .collect()
    }

    fn start(&mut self) -> Result<()> {
        for item in &mut self.items {
            match item {
                Item::Thread { name, body, flag, handle } => {
                    let Some(body) = body.take() else { continue };
                    let flag = flag.clone();
                    let spawned = std::thread::Builder::new()
                        .name(name.clone())
                        .spawn(move || {
                            block_sigint();
                            body(flag)
                        })
                        .map_err(|e| {
                            Error::context(format!("StartProcOrThread could not start thread `{name}`"), e)
                        })?;
                    *handle = Some(spawned);
                }
                Item::Process { command, child } => {
                    if child.is_some() {
                        continue;
                    }
                    ignore_sigint(command);
                    let spawned = if self.stop_at_train_end {
                        // It ends with the process, even one that ends at once.
                        let placeholder = Command::new(command.get_program());
                        let taken = std::mem::replace(command, placeholder);
                        let (taken, spawned) = crate::signal::spawn_helper(taken, false);
                        *command = taken;
                        spawned
                    } else {
                        command.spawn()
                    };
                    let spawned = spawned.map_err(|e| {
                        Error::context(format!("StartProcOrThread could not start {command:?}"), e)
                    })?;
                    *child = Some(spawned);
                }
            }
        }
        Ok(())
    }

    /// Ask everything to stop, wait up to the grace period, then kill the processes left.
    fn stop(&mut self) -> Result<()> {
        for item in &mut self.items {
            match item {
                Item::Thread { flag, handle: Some(handle), .. } => {
                    flag.set();
                    handle.thread().unpark();
                }
                Item::Process { child: Some(child), .. } => terminate(child),
                _ => {}
            }
        }
        let deadline = Instant::now() + self.grace;
        let mut errors = Vec::new();
        for item in &mut self.items {
            let description = item.describe();
            match item {
                Item::Thread { handle, .. } => {
                    let Some(thread) = handle.take() else { continue };
                    while !thread.is_finished() && Instant::now() < deadline {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    if !thread.is_finished() {
                        crate::logging::warn!(bare:
                            "StartProcOrThread: {description} did not stop within {:?}; left running",
                            self.grace
                        );
                        continue;
                    }
                    if let Err(payload) = thread.join() {
                        let message = payload
                            .downcast_ref::<&str>()
                            .map(|s| (*s).to_string())
                            .or_else(|| payload.downcast_ref::<String>().cloned())
                            .unwrap_or_else(|| "a panic without a message".into());
                        errors.push(format!("{description} panicked: {message}"));
                    }
                }
                Item::Process { child, .. } => {
                    let Some(mut process) = child.take() else { continue };
                    let exited = loop {
                        match process.try_wait() {
                            Ok(Some(_)) => break true,
                            Ok(None) if Instant::now() < deadline => {
                                std::thread::sleep(Duration::from_millis(5))
                            }
                            Ok(None) => break false,
                            Err(e) => {
                                errors.push(format!("waiting for {description}: {e}"));
                                break false;
                            }
                        }
                    };
                    if !exited {
                        let _ = process.kill();
                        if let Err(e) = process.wait() {
                            errors.push(format!("waiting for {description} after SIGKILL: {e}"));
                        }
                    }
                    crate::signal::forget_helper(process.id());
                    // Keep the pid visible (the process is reaped).
                    *child = Some(process);
                }
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(Error::msg(format!("StartProcOrThread: {}", errors.join("; "))))
        }
    }
}

/// Block SIGINT in the calling thread (a started thread), so that the trainer's thread receives
/// it.
fn block_sigint() {
    #[cfg(unix)]
    // SAFETY: the set is initialized by `sigemptyset` before use; `pthread_sigmask` changes only
    // the calling thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Start `command` with SIGINT ignored: a disposition that `exec` keeps.
fn ignore_sigint(command: &mut Command) {
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: the closure runs in the child between fork and exec and calls only
        // `signal`, which is async-signal-safe; it allocates nothing and takes no lock.
        unsafe {
            command.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_IGN);
                Ok(())
            });
        }
    }
    #[cfg(not(unix))]
    let _ = command;
}

/// SIGTERM where there are signals; a kill elsewhere.
fn terminate(child: &mut Child) {
    if matches!(child.try_wait(), Ok(Some(_))) {
        return;
    }
    #[cfg(unix)]
    {
        if let Ok(pid) = libc::pid_t::try_from(child.id()) {
            // SAFETY: `kill` takes no pointer; the child is not reaped yet, so its pid is still ours.
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = child.kill();
    }
}

impl<M> Callback<M> for StartProcOrThread {
    fn chief_only(&self) -> bool {
        self.chief_only
    }
    fn before_train(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        self.start()
    }
    fn after_train(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        if self.stop_at_train_end { self.stop() } else { Ok(()) }
    }
}
