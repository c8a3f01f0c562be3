//! The helper processes a run starts (`StartProcOrThread`'s processes, the commands of
//! `SendMonitorData` and `SendStat`), started here so that they end with the process, even when
//! it ends at once: a second signal's `_exit` (in the handler), `StepTimeout`'s abort, the CUDA
//! watchdog, the dashboard's second Ctrl-C, an MPI abort.
//!
//! Two guards:
//! - every exit at once first kills the helpers recorded here with SIGKILL ([`kill_helpers`]:
//!   atomic loads and `kill(2)`, async-signal-safe, so the signal handler calls it too); a helper
//!   started in a process group of its own is killed with its group;
//! - on Linux, each helper also gets `PR_SET_PDEATHSIG` (SIGKILL when its parent ends, however it
//!   ends: a SIGKILL, a crash), checked against the race of a parent that ended before the
//!   request (the helper then exits at once). The kernel sends it when the *thread* that started
//!   the helper ends, not the process: helpers are therefore started by one thread of stoker's
//!   that lives as long as the process (`stoker-spawner`, started at the first helper), never by
//!   a trainer's thread, which a threads world or a program's own thread may end long before.
//!
//! A helper is recorded from its start until it is reaped ([`forget_helper`]); the record has
//! room for [`SLOTS`] helpers at once, and one past that is covered by the parent-death signal
//! alone (Linux). Elsewhere than Linux, only the kill at an exit at once applies.

use std::io;
use std::process::{Child, Command};
use std::sync::Mutex;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc::{self, Sender};

/// How many helpers are recorded at once.
pub(crate) const SLOTS: usize = 64;

/// The helpers to kill at an exit at once: a process id, its negation for a process group, 0 for
/// a free slot.
static HELPERS: [AtomicI32; SLOTS] = [const { AtomicI32::new(0) }; SLOTS];

/// A command for the spawner thread, and where its child goes back.
type Request = (Command, bool, Sender<(Command, io::Result<Child>)>);

/// The spawner thread's queue, once started.
static SPAWNER: Mutex<Option<Sender<Request>>> = Mutex::new(None);

/// Start `command` as a helper that ends with this process (see the module's documentation);
/// `group`: it leads a process group of its own (`process_group(0)`), which is killed whole. The
/// command comes back with the child (it keeps describing the helper).
pub(crate) fn spawn_helper(mut command: Command, group: bool) -> (Command, io::Result<Child>) {
    die_with_parent(&mut command);
    let queue = SPAWNER.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    let queue = match queue {
        Some(queue) => Some(queue),
        None => start_spawner(),
    };
    let Some(queue) = queue else {
        // No thread could be started: from this one (its end, not the process's, then sends the
        // parent-death signal).
        return spawn_recorded(command, group);
    };
    let (reply, answer) = mpsc::channel();
    if let Err(mpsc::SendError((command, group, _))) = queue.send((command, group, reply)) {
        return spawn_recorded(command, group);
    }
    answer.recv().unwrap_or_else(|_| {
        (Command::new("?"), Err(io::Error::other("stoker's spawner thread ended before answering")))
    })
}

/// The helper `pid` was reaped: it is no longer killed at an exit at once. Call it right after
/// the wait that reaps it.
pub(crate) fn forget_helper(pid: u32) {
    let Ok(pid) = i32::try_from(pid) else { return };
    for slot in &HELPERS {
        let _ = slot.compare_exchange(pid, 0, Ordering::SeqCst, Ordering::SeqCst);
        let _ = slot.compare_exchange(-pid, 0, Ordering::SeqCst, Ordering::SeqCst);
    }
}

/// SIGKILL to every helper recorded (a group's to the whole group), before the process ends at
/// once. Async-signal-safe: atomic operations and `kill(2)`.
pub(crate) fn kill_helpers() {
    for slot in &HELPERS {
        let target = slot.swap(0, Ordering::SeqCst);
        #[cfg(unix)]
        if target != 0 {
            // SAFETY: kill(2) takes no pointer. A positive id is a child not reaped yet (its id
            // is still its own); a negative one, the group it leads.
            unsafe { libc::kill(target, libc::SIGKILL) };
        }
        #[cfg(not(unix))]
        let _ = target;
    }
}

/// Start the spawner thread and keep its queue; `None` when no thread can be started.
fn start_spawner() -> Option<Sender<Request>> {
    let mut held = SPAWNER.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(queue) = held.as_ref() {
        return Some(queue.clone());
    }
    let (queue, requests) = mpsc::channel::<Request>();
    std::thread::Builder::new()
        .name("stoker-spawner".into())
        .spawn(move || {
            // Never ends: the queue is held by the static for the process's life.
            for (command, group, reply) in requests {
                let _ = reply.send(spawn_recorded(command, group));
            }
        })
        .ok()?;
    *held = Some(queue.clone());
    Some(queue)
}

/// Spawn `command` on this thread and record the child.
fn spawn_recorded(mut command: Command, group: bool) -> (Command, io::Result<Child>) {
    let child = command.spawn();
    if let Ok(child) = &child
        && let Ok(pid) = i32::try_from(child.id())
    {
        let target = if group && cfg!(unix) { -pid } else { pid };
        // With every slot taken, the parent-death signal alone covers it (Linux).
        let _ = HELPERS
            .iter()
            .any(|slot| slot.compare_exchange(0, target, Ordering::SeqCst, Ordering::SeqCst).is_ok());
    }
    (command, child)
}

/// On Linux: the child receives SIGKILL when its parent thread ends; a parent that ended before
/// the request is seen at once (the child then exits).
fn die_with_parent(command: &mut Command) {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        use std::os::unix::process::CommandExt;
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: the closure runs in the child between fork and exec and calls only prctl(2),
        // getppid(2) and _exit(2), all async-signal-safe; it allocates nothing and takes no lock
        // (`last_os_error` reads errno).
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
                if libc::getppid() != parent {
                    // The parent ended before the request: nobody would ever stop this helper.
                    libc::_exit(1);
                }
                Ok(())
            });
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let _ = command;
}
