//! A way to stop a run from outside it: [`StopHandle`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A way to stop a run from outside it, for a program that embeds training (a GUI's button, a
/// service's shutdown): [`stop`](Self::stop) asks the run to stop at its next step boundary,
/// where it writes a checkpoint, runs `after_train` and returns
/// [`Outcome::Interrupted`](crate::callback::Outcome::Interrupted) with `signal` `"StopHandle"`,
/// exactly as after a Ctrl-C. Clonable, `Send` and `Sync`: call it from any thread, any number of
/// times. In a data-parallel world, a stop asked on any rank's trainer stops every rank at the
/// same step boundary (the others see it as a SIGTERM). Made by
/// [`Trainer::stop_handle`](crate::trainer::Trainer::stop_handle); one per trainer, so stopping
/// one run leaves the others in the process running.
///
/// ```
/// use burn_stoker::trainer::StopHandle;
/// let handle = StopHandle::default();
/// let remote = handle.clone();
/// std::thread::spawn(move || remote.stop()).join().unwrap();
/// assert!(handle.is_stopped());
/// ```
#[derive(Debug, Clone, Default)]
pub struct StopHandle(Arc<AtomicBool>);

impl StopHandle {
    /// Ask the run to stop at its next step boundary, with a checkpoint.
    pub fn stop(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether a stop was asked.
    #[inline]
    pub fn is_stopped(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}
