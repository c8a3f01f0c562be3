//! SIGINT / SIGTERM: ask the running trainers to stop at the next step boundary; a second signal
//! exits at once.
//!
//! The handler is installed once per process, through signal-hook (which chains to handlers
//! installed before it, so other libraries keep theirs). While no trainer runs, a signal does
//! what it did before stoker: when nothing else handled it, the default action (the process
//! ends). While a trainer runs, the first SIGINT or SIGTERM is recorded and every running trainer
//! stops at its next step boundary, writes a checkpoint, runs `after_train` and returns; a second
//! one ends the process at once with status 128 + the signal's number.

use std::sync::atomic::{AtomicUsize, Ordering};

/// The signal received while trainers ran (0: none).
static RECEIVED: AtomicUsize = AtomicUsize::new(0);
/// How many trainers handle signals now.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);

/// A running trainer's hold on the signal handler; dropping it lets signals act as before.
#[derive(Debug)]
pub(crate) struct SignalGuard(());

impl SignalGuard {
    /// Install the handler (once per process) and count this trainer in.
    pub(crate) fn install() -> std::io::Result<SignalGuard> {
        platform::install_once()?;
        if ACTIVE.fetch_add(1, Ordering::SeqCst) == 0 {
            RECEIVED.store(0, Ordering::SeqCst);
        }
        Ok(SignalGuard(()))
    }

    /// The signal received since the trainers started, if any: a relaxed load, nothing more.
    #[inline]
    pub(crate) fn received(&self) -> Option<i32> {
        match RECEIVED.load(Ordering::Relaxed) {
            0 => None,
            signal => Some(signal as i32),
        }
    }
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        ACTIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The conventional name of a signal number.
pub(crate) fn signal_name(signal: i32) -> String {
    platform::name(signal)
}

#[cfg(unix)]
mod platform {
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicBool, Ordering};

    use signal_hook::consts::{SIGINT, SIGTERM};

    use super::{ACTIVE, RECEIVED};

    static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
    /// Whether the signal's disposition was the default one before stoker (index 0: SIGINT).
    static WAS_DEFAULT: [AtomicBool; 2] = [AtomicBool::new(false), AtomicBool::new(false)];

    pub(super) fn install_once() -> std::io::Result<()> {
        INSTALLED
            .get_or_init(|| {
                for (slot, signal) in [SIGINT, SIGTERM].into_iter().enumerate() {
                    WAS_DEFAULT[slot].store(is_default(signal), Ordering::SeqCst);
                    // SAFETY: the action only touches atomics and calls signal-hook's
                    // async-signal-safe `exit` and `emulate_default_handler`.
                    unsafe { signal_hook::low_level::register(signal, move || on_signal(slot, signal)) }
                        .map_err(|e| format!("installing the handler of signal {signal}: {e}"))?;
                }
                Ok(())
            })
            .clone()
            .map_err(std::io::Error::other)
    }

    fn on_signal(slot: usize, signal: i32) {
        if ACTIVE.load(Ordering::SeqCst) > 0 {
            if RECEIVED.swap(signal as usize, Ordering::SeqCst) != 0 {
                signal_hook::low_level::exit(128 + signal);
            }
        } else if WAS_DEFAULT[slot].load(Ordering::SeqCst) {
            let _ = signal_hook::low_level::emulate_default_handler(signal);
        }
    }

    fn is_default(signal: i32) -> bool {
        // SAFETY: querying the current action with a null new action changes nothing.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            libc::sigaction(signal, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_DFL
        }
    }

    pub(super) fn name(signal: i32) -> String {
        match signal {
            SIGINT => "SIGINT".into(),
            SIGTERM => "SIGTERM".into(),
            other => format!("signal {other}"),
        }
    }
}

#[cfg(not(unix))]
mod platform {
    pub(super) fn install_once() -> std::io::Result<()> {
        Ok(())
    }
    pub(super) fn name(signal: i32) -> String {
        format!("signal {signal}")
    }
}
