//! A bounded wait: work that must end within a limit, and what to do when it does not.
//!
//! A rank of a CUDA world that fails tells the others at the exchange they wait in; but when it
//! failed before its backward, the others wait inside theirs, in burn's NCCL reduction, which
//! has no timeout and never returns without this rank's gradients. The failing rank's wait is
//! therefore bounded: past `FAILURE_WAIT` (120 s), the process ends with an error naming the
//! rank and its failure, rather than hang without a word.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a failed rank of a CUDA world waits for the others to meet it before ending the
/// process: longer than any rank needs to finish a step it can finish.
#[cfg(feature = "cuda")]
pub(crate) const FAILURE_WAIT: Duration = Duration::from_secs(120);

/// The bound on a failed CUDA rank's wait (see the module's documentation): past
/// [`FAILURE_WAIT`], an error naming `rank` and its `error`, and the process ends with status 1.
#[cfg(feature = "cuda")]
pub(crate) fn failure(rank: usize, error: &crate::error::Error) -> Watchdog {
    let message = format!(
        "rank {rank} failed ({error}); the other ranks still wait inside backward for its gradients \
         after {} s (burn's reduction on CUDA has no timeout): ending the process",
        FAILURE_WAIT.as_secs()
    );
    Watchdog::start(FAILURE_WAIT, move || {
        crate::logging::error!("{message}");
        crate::signal::kill_helpers();
        // At once, as the signal handler's exit: `exit` would run the atexit handlers and
        // flush stdio, while the other ranks' threads hold the CUDA driver's and NCCL's locks
        // inside the reduction (a handler waiting on one of them hangs the exit itself).
        // SAFETY: `_exit` ends the process; nothing runs after it.
        unsafe { libc::_exit(1) };
    })
}

/// Runs `expire` on a thread of its own unless dropped within the limit.
pub(crate) struct Watchdog {
    done: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// Watch for `limit`: `expire` runs when the watchdog is still alive then.
    pub(crate) fn start(limit: Duration, expire: impl FnOnce() + Send + 'static) -> Watchdog {
        let done = Arc::new((Mutex::new(false), Condvar::new()));
        let watched = Arc::clone(&done);
        let thread = std::thread::spawn(move || {
            let (lock, wake) = &*watched;
            let deadline = Instant::now() + limit;
            let mut finished = lock.lock().unwrap_or_else(PoisonError::into_inner);
            while !*finished {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    drop(finished);
                    expire();
                    return;
                }
                finished = wake.wait_timeout(finished, left).unwrap_or_else(PoisonError::into_inner).0;
            }
        });
        Watchdog { done, thread: Some(thread) }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        let (lock, wake) = &*self.done;
        *lock.lock().unwrap_or_else(PoisonError::into_inner) = true;
        wake.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    #[test]
    fn a_watchdog_still_alive_at_its_limit_runs_its_action() {
        let fired = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&fired);
        let _watch = Watchdog::start(Duration::from_millis(30), move || flag.store(true, Ordering::SeqCst));
        let start = Instant::now();
        while !fired.load(Ordering::SeqCst) {
            assert!(start.elapsed() < Duration::from_secs(10), "the action never ran");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_watchdog_dropped_in_time_never_runs_its_action_and_drops_at_once() {
        let fired = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&fired);
        let watch = Watchdog::start(Duration::from_secs(60), move || flag.store(true, Ordering::SeqCst));
        let start = Instant::now();
        drop(watch);
        assert!(start.elapsed() < Duration::from_secs(5), "dropping waited for the limit");
        assert!(!fired.load(Ordering::SeqCst));
    }
}
