//! Running the commands with `sh -c` on a thread of their own, one after the other, with a
//! bounded queue and a bounded wait at the end. Each command is a helper that ends with the
//! process, its process group killed when the process ends at once (`signal::spawn_helper`).

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::state::{BoundedSender, WriterQueue, bounded};

/// How many commands of one [`SendMonitorData`](crate::monitor::SendMonitorData) or
/// [`SendStat`](crate::monitor::SendStat) may wait to run; past that, new
/// ones are dropped and counted, so that a hung command never stalls training (see
/// [`WriterQueue`]).
pub const COMMAND_QUEUE_CAPACITY: usize = 64;

/// How long the end of training waits for queued and running commands by default.
pub(super) const DEFAULT_WAIT_AT_END: Duration = Duration::from_secs(30);

/// Runs commands with `sh -c` on a thread of its own, one after the other.
pub(super) struct CommandRunner {
    owner: &'static str,
    sender: Option<BoundedSender<String>>,
    /// The queue's view, kept after the sender is dropped at the end.
    pub(super) queue: WriterQueue,
    worker: Option<JoinHandle<()>>,
    /// Disconnected when the worker ends.
    finished: Receiver<()>,
    /// Set when the end of training stops waiting: kill what runs, drop what is queued.
    abandon: Arc<AtomicBool>,
}

impl std::fmt::Debug for CommandRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandRunner").field("owner", &self.owner).finish_non_exhaustive()
    }
}

impl CommandRunner {
    /// A runner whose queue is reported as `name` (the callback's).
    pub(super) fn start(owner: &'static str, name: String) -> Result<CommandRunner> {
        let (sender, commands) = bounded::<String>(name, COMMAND_QUEUE_CAPACITY);
        let queue = sender.queue().clone();
        let (done, finished) = mpsc::channel::<()>();
        let abandon = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&abandon);
        let worker = std::thread::Builder::new()
            .name(format!("stoker-{owner}"))
            .spawn(move || {
                let _done = done;
                run_commands(owner, &commands, &flag);
            })
            .map_err(|e| Error::context(format!("{owner}: starting its command thread"), e))?;
        Ok(CommandRunner { owner, sender: Some(sender), queue, worker: Some(worker), finished, abandon })
    }

    /// Queue `command`, or drop and count it when the queue is full; returns at once.
    pub(super) fn submit(&self, command: String) {
        if let Some(sender) = &self.sender
            && sender.send_or_drop(command).is_err()
        {
            crate::logging::warn!("{}: its command thread ended; a command was not run", self.owner);
        }
    }

    /// Wait up to `wait` for the queued and running commands, then kill and drop what is left.
    pub(super) fn finish(&mut self, wait: Duration) {
        drop(self.sender.take());
        let Some(worker) = self.worker.take() else { return };
        match self.finished.recv_timeout(wait) {
            Err(RecvTimeoutError::Disconnected) | Ok(()) => {}
            Err(RecvTimeoutError::Timeout) => {
                crate::logging::warn!(
                    "{}: its commands did not finish within {:?} after training; stopping them",
                    self.owner,
                    wait
                );
                self.abandon.store(true, Ordering::Relaxed);
            }
        }
        let _ = worker.join();
    }
}

impl Drop for CommandRunner {
    fn drop(&mut self) {
        self.finish(DEFAULT_WAIT_AT_END);
    }
}

/// The command thread: run each command to its end, or until the runner abandons it.
fn run_commands(owner: &'static str, commands: &Receiver<String>, abandon: &AtomicBool) {
    let mut dropped = 0usize;
    while let Ok(command) = commands.recv() {
        if abandon.load(Ordering::Relaxed) {
            dropped += 1;
            continue;
        }
        let mut started = shell(&command);
        started.stdin(Stdio::null());
        // Killed with its group if the process ends at once (see `signal::spawn_helper`).
        match crate::signal::spawn_helper(started, true).1 {
            Ok(child) => {
                let pid = child.id();
                wait_for(owner, &command, child, abandon);
                crate::signal::forget_helper(pid);
            }
            Err(e) => crate::logging::warn!("{owner}: command `{command}` could not start: {e}"),
        }
    }
    if dropped > 0 {
        crate::logging::warn!("{owner}: {dropped} queued command(s) were not run");
    }
}

/// `sh -c command`, in a process group of its own (its id the shell's), so that a kill reaches
/// what the command started too (a pipeline, a command in the background), not the shell alone.
#[cfg(unix)]
fn shell(command: &str) -> Command {
    use std::os::unix::process::CommandExt;
    let mut shell = Command::new("sh");
    shell.arg("-c").arg(command).process_group(0);
    shell
}

/// Kill `child` and every process of its group (what the command started), then reap it.
fn kill(child: &mut Child) {
    #[cfg(unix)]
    if let Ok(group) = libc::pid_t::try_from(child.id()) {
        // SAFETY: killpg(2) takes no pointer; the child is not reaped yet, so its id is still the
        // id of its group (which it leads: `process_group(0)`).
        unsafe { libc::killpg(group, libc::SIGKILL) };
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[cfg(not(unix))]
fn shell(command: &str) -> Command {
    let mut shell = Command::new("cmd");
    shell.arg("/C").arg(command);
    shell
}

fn wait_for(owner: &'static str, command: &str, mut child: Child, abandon: &AtomicBool) {
    let mut pause = Duration::from_millis(1);
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return,
            Ok(Some(status)) => {
                crate::logging::warn!("{owner}: command `{command}` failed ({status})");
                return;
            }
            Ok(None) if abandon.load(Ordering::Relaxed) => {
                kill(&mut child);
                crate::logging::warn!(
                    "{owner}: command `{command}` was still running; killed it and the processes it started"
                );
                return;
            }
            Ok(None) => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(20));
            }
            Err(e) => {
                crate::logging::warn!("{owner}: waiting for command `{command}`: {e}");
                return;
            }
        }
    }
}
