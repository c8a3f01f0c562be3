//! A prompt on the terminal (`InjectShell`'s, reading stdin) and the dashboard that holds the
//! terminal (feature `dashboard`): while a prompt is open the dashboard steps aside (it puts the
//! terminal back as it found it, draws nothing and reads no key) and takes the terminal again
//! once the prompt closes. The prompt, on the training thread, waits until the dashboard's
//! thread has stepped aside before it writes a word; the dashboard's thread sees the prompt by
//! one relaxed load each time round its loop. Nothing here is on the step's path.
//!
//! The prompt's wait for a line ends on a stop too: a signal (when the run handles them) or the
//! run's [`StopHandle`], whose [`stop`](StopHandle::stop) writes a byte to the pipe the prompt
//! polls beside stdin.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use super::StopHandle;

/// The prompts open now (one relaxed load for the dashboard's thread).
static PROMPTS: AtomicUsize = AtomicUsize::new(0);

/// Who uses the terminal: the holders (dashboards' threads) and, of them, those stepped aside.
struct Users {
    holders: usize,
    aside: usize,
}

static USERS: Mutex<Users> = Mutex::new(Users { holders: 0, aside: 0 });
/// Notified when a prompt closes, a holder steps aside, or a holder lets go.
static CHANGED: Condvar = Condvar::new();

fn users() -> MutexGuard<'static, Users> {
    USERS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A prompt open on the terminal, from [`open_prompt`] until dropped.
#[derive(Debug)]
pub(crate) struct PromptOpen(());

/// Open a prompt on the terminal: returns once every holder of the terminal (the dashboard) has
/// stepped aside, so that what the prompt writes is seen and what is typed reaches it.
pub(crate) fn open_prompt() -> PromptOpen {
    PROMPTS.fetch_add(1, Ordering::SeqCst);
    let mut users = users();
    while users.holders > users.aside {
        users = CHANGED.wait(users).unwrap_or_else(PoisonError::into_inner);
    }
    PromptOpen(())
}

impl Drop for PromptOpen {
    fn drop(&mut self) {
        let _users = users();
        PROMPTS.fetch_sub(1, Ordering::SeqCst);
        CHANGED.notify_all();
    }
}

/// A thread holding the terminal (the dashboard's screen thread), from [`hold_terminal`] until
/// dropped: it steps aside for a prompt ([`TerminalHold::step_aside`]).
// The dashboard's alone (and this module's tests'): without it nothing holds the terminal.
#[cfg(any(feature = "dashboard", test))]
#[derive(Debug)]
pub(crate) struct TerminalHold(());

/// Count a holder of the terminal in: a prompt opened from now on waits until it steps aside.
#[cfg(any(feature = "dashboard", test))]
pub(crate) fn hold_terminal() -> TerminalHold {
    users().holders += 1;
    TerminalHold(())
}

#[cfg(any(feature = "dashboard", test))]
impl TerminalHold {
    /// Whether a prompt is open (or opening): the holder must step aside.
    #[inline]
    pub(crate) fn prompt_open(&self) -> bool {
        PROMPTS.load(Ordering::Relaxed) > 0
    }

    /// Call once the terminal is put back as it was: the prompts go on, and this returns when
    /// none is open any more (`true`: take the terminal again), or when `give_up` says so
    /// (`false`; asked every 100 ms: the run is closing).
    pub(crate) fn step_aside(&self, give_up: &dyn Fn() -> bool) -> bool {
        let mut users = users();
        users.aside += 1;
        CHANGED.notify_all();
        while PROMPTS.load(Ordering::SeqCst) > 0 && !give_up() {
            users = CHANGED
                .wait_timeout(users, std::time::Duration::from_millis(100))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        users.aside -= 1;
        PROMPTS.load(Ordering::SeqCst) == 0
    }
}

#[cfg(any(feature = "dashboard", test))]
impl Drop for TerminalHold {
    fn drop(&mut self) {
        users().holders -= 1;
        CHANGED.notify_all();
    }
}

/// Wait until `fd` is readable (`Ok(true)`), or a stop is asked through `stop`, or (with
/// `signals`: the run handles them) a signal is received (`Ok(false)`). Unix.
#[cfg(unix)]
pub(crate) fn wait_readable_or_stop(fd: i32, stop: &StopHandle, signals: bool) -> std::io::Result<bool> {
    super::platform::wait_readable_or(fd, &|| stop.is_stopped() || (signals && super::received().is_some()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One test touches the process-wide counts.
    #[test]
    fn a_prompt_waits_for_the_holder_to_step_aside_and_the_holder_for_the_prompt_to_close() {
        let hold = hold_terminal();
        assert!(!hold.prompt_open());
        let (opened, closed) = (std::sync::mpsc::channel(), std::sync::mpsc::channel::<()>());
        let prompt = std::thread::spawn(move || {
            let open = open_prompt();
            opened.0.send(()).unwrap();
            let () = closed.1.recv().unwrap();
            drop(open);
        });
        while !hold.prompt_open() {
            std::thread::yield_now();
        }
        // Not open until the holder stepped aside.
        assert!(opened.1.try_recv().is_err());
        let stepped = std::thread::scope(|scope| {
            let aside = scope.spawn(|| hold.step_aside(&|| false));
            opened.1.recv().unwrap();
            closed.0.send(()).unwrap();
            aside.join().unwrap()
        });
        assert!(stepped, "the prompt closed: take the terminal again");
        assert!(!hold.prompt_open());
        prompt.join().unwrap();
        // A holder that lets go never keeps a prompt waiting.
        drop(hold);
        drop(open_prompt());
    }
}
