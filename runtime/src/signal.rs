//! SIGINT / SIGTERM: ask the running trainers to stop at the next step boundary; a second signal
//! exits at once.
//!
//! While at least one trainer that handles signals runs, stoker's handler is the process's
//! action for SIGINT and SIGTERM; when the last such trainer returns, the actions found before
//! it (the default one, the program's own handler) are put back, so outside training the
//! signals do what they did before stoker. A signal whose action was *ignore* when training
//! started (`nohup`, a shell's background job) is left ignored: stoker installs nothing for it.
//!
//! During training, the first SIGINT or SIGTERM is recorded and every running trainer stops at
//! its next step boundary, writes a checkpoint, runs `after_train` and returns; loops inside
//! callbacks (a validation pass, the data replay of a resumed run, the `InjectShell` prompt)
//! check the record and end early. A second signal ends the process at once with status
//! 128 + the signal's number, unless it comes within [`REPEAT_WINDOW_MS`] of the first, whatever
//! its number: one Ctrl-C can arrive twice, through the terminal's process group and through a
//! launcher that forwards it (a wrapper script, `mpirun` under some launchers), which may forward
//! it as a SIGTERM, and a second signal that close is the same request (the run reports the
//! first). A second press after the window exits at once, and first kills the helper processes
//! the run started ([`kill_helpers`]).
//!
//! The handler touches atomics, writes one byte to a pipe (for a prompt waiting in `poll`) and
//! may call `_exit`: all async-signal-safe. Before that `_exit` it puts back a terminal that the
//! dashboard (feature `dashboard`) holds in raw mode on its alternate screen, from a record the
//! dashboard leaves here ([`restore_terminal_on_exit`], [`forget_terminal`]): `tcsetattr` and
//! `write`, async-signal-safe too.
//!
//! A stop asked from inside the program, through a [`StopHandle`] (public as
//! `burn_stoker::trainer::StopHandle`), is noticed at the same boundary, beside the signal, and
//! wakes a prompt waiting on stdin through the same pipe. Who uses the terminal, a prompt or the
//! dashboard that steps aside for it, is `prompt`'s.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

mod children;
mod prompt;

pub(crate) use children::{forget_helper, kill_helpers, spawn_helper};
pub(crate) use prompt::open_prompt;
#[cfg(unix)]
pub(crate) use prompt::wait_readable_or_stop;
#[cfg(feature = "dashboard")]
pub(crate) use prompt::{TerminalHold, hold_terminal};

/// The number a stop asked through a [`StopHandle`](crate::trainer::StopHandle) travels under where a signal's would: it is
/// acted on as a SIGTERM is (in a world, the other ranks see it as one), and named `StopHandle`.
pub(crate) const STOP_REQUEST: i32 = -1;

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
    /// Ask the run to stop at its next step boundary, with a checkpoint (an `InjectShell`
    /// prompt waiting for a line returns at once).
    pub fn stop(&self) {
        self.0.store(true, Ordering::SeqCst);
        platform::wake();
    }

    /// Whether a stop was asked.
    #[inline]
    pub fn is_stopped(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// The signal received while trainers ran (0: none).
static RECEIVED: AtomicUsize = AtomicUsize::new(0);

/// A second signal this soon after the first (milliseconds), whatever its number, counts as the
/// same request.
pub(crate) const REPEAT_WINDOW_MS: u64 = 1000;

/// A running trainer's hold on the signal handler; dropping the last one puts the previous
/// actions back.
#[derive(Debug)]
pub(crate) struct SignalGuard(());

impl SignalGuard {
    /// Install the handler (when no trainer holds it yet) and count this trainer in.
    pub(crate) fn install() -> std::io::Result<SignalGuard> {
        platform::acquire()?;
        Ok(SignalGuard(()))
    }

    /// The signal received since the trainers started, if any: a relaxed load, nothing more.
    #[inline]
    pub(crate) fn received(&self) -> Option<i32> {
        received()
    }
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        platform::release();
    }
}

/// The signal received since the running trainers started, if any.
#[inline]
pub(crate) fn received() -> Option<i32> {
    match RECEIVED.load(Ordering::Relaxed) {
        0 => None,
        signal => Some(signal as i32),
    }
}

/// The conventional name of a signal number.
pub(crate) fn signal_name(signal: i32) -> String {
    platform::name(signal)
}

/// `"SIGINT"`, `"SIGTERM"`, or `"a signal"` for any other number.
pub(crate) fn static_name(signal: i32) -> &'static str {
    match signal_name(signal).as_str() {
        "SIGINT" => "SIGINT",
        "SIGTERM" => "SIGTERM",
        "StopHandle" => "StopHandle",
        _ => "a signal",
    }
}

/// While the dashboard holds the terminal behind `fd` (raw mode, its alternate screen): the exit
/// at a second signal first puts `fd`'s settings back as they are now (call this before raw
/// mode) and writes `leave` to it (the bytes that leave the alternate screen and show the
/// cursor). Until [`forget_terminal`]; a record already held stays (the first holder's settings
/// are the terminal's own).
#[cfg(feature = "dashboard")]
pub(crate) fn restore_terminal_on_exit(fd: i32, leave: &'static [u8]) -> std::io::Result<()> {
    platform::terminal::arm(fd, leave)
}

/// The terminal is back as it was: a second signal's exit leaves it alone.
#[cfg(feature = "dashboard")]
pub(crate) fn forget_terminal() {
    platform::terminal::disarm();
}

#[cfg(unix)]
mod platform {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};

    use super::RECEIVED;

    const SIGNALS: [i32; 2] = [libc::SIGINT, libc::SIGTERM];

    /// The trainers holding the handler, and the actions it replaced (`None`: left alone).
    struct Held {
        trainers: usize,
        previous: [Option<libc::sigaction>; 2],
    }

    static HELD: Mutex<Held> = Mutex::new(Held { trainers: 0, previous: [None, None] });
    /// The write end of the pipe the handler wakes waiting prompts through (-1: none).
    static WAKE_WRITE: AtomicI32 = AtomicI32::new(-1);
    static WAKE_READ: AtomicI32 = AtomicI32::new(-1);

    /// When the first signal came (CLOCK_MONOTONIC, nanoseconds; 0: none yet).
    static FIRST_AT: AtomicU64 = AtomicU64::new(0);

    extern "C" fn on_signal(signal: libc::c_int) {
        let now = monotonic_ns();
        let _ = FIRST_AT.compare_exchange(0, now.max(1), Ordering::SeqCst, Ordering::SeqCst);
        // The first signal is the one recorded (and reported); a second one does not replace it.
        let first = RECEIVED.compare_exchange(0, signal as usize, Ordering::SeqCst, Ordering::SeqCst);
        if first.is_err() {
            let since = now.saturating_sub(FIRST_AT.load(Ordering::SeqCst));
            if since < super::REPEAT_WINDOW_MS * 1_000_000 {
                return;
            }
            #[cfg(feature = "dashboard")]
            terminal::restore();
            super::kill_helpers();
            // SAFETY: _exit is async-signal-safe.
            unsafe { libc::_exit(128 + signal) };
        }
        let fd = WAKE_WRITE.load(Ordering::SeqCst);
        if fd >= 0 {
            let errno = errno_location();
            // SAFETY: write(2) of one byte to a non-blocking pipe; errno saved and restored.
            unsafe {
                let saved = errno.map(|e| *e);
                let _ = libc::write(fd, b"!".as_ptr().cast(), 1);
                if let (Some(e), Some(v)) = (errno, saved) {
                    *e = v;
                }
            }
        }
    }

    /// CLOCK_MONOTONIC in nanoseconds (0 if it cannot be read); clock_gettime(2) is
    /// async-signal-safe.
    fn monotonic_ns() -> u64 {
        let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime(2) writing into a local timespec.
        if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) } != 0 {
            return 0;
        }
        (now.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(now.tv_nsec as u64)
    }

    fn errno_location() -> Option<*mut libc::c_int> {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        // SAFETY: returns the calling thread's errno.
        return Some(unsafe { libc::__errno_location() });
        #[cfg(any(target_os = "macos", target_os = "ios", target_os = "freebsd"))]
        // SAFETY: returns the calling thread's errno.
        return Some(unsafe { libc::__error() });
        #[allow(unreachable_code)]
        None
    }

    /// The wake-up pipe, created once (both ends non-blocking and close-on-exec).
    fn wake_pipe() -> std::io::Result<()> {
        if WAKE_READ.load(Ordering::SeqCst) >= 0 {
            return Ok(());
        }
        let mut fds = [0; 2];
        // Close-on-exec from its creation: a process another thread starts meanwhile never
        // inherits it.
        #[cfg(not(any(target_os = "macos", target_os = "ios")))]
        // SAFETY: pipe2(2) into a two-element array.
        unsafe {
            if libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        // macOS has no pipe2: the flags follow, with a window in which an exec inherits them.
        #[cfg(any(target_os = "macos", target_os = "ios"))]
        // SAFETY: pipe(2) into a two-element array; fcntl on the descriptors just made.
        unsafe {
            if libc::pipe(fds.as_mut_ptr()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            for fd in fds {
                libc::fcntl(fd, libc::F_SETFL, libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK);
                libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
            }
        }
        WAKE_READ.store(fds[0], Ordering::SeqCst);
        WAKE_WRITE.store(fds[1], Ordering::SeqCst);
        Ok(())
    }

    /// Empty the wake-up pipe (a new set of trainers starts without a signal).
    fn drain() {
        let fd = WAKE_READ.load(Ordering::SeqCst);
        let mut buf = [0u8; 64];
        // SAFETY: read(2) into a local buffer from a non-blocking pipe.
        while fd >= 0 && unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
    }

    pub(super) fn acquire() -> std::io::Result<()> {
        let mut held = HELD.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if held.trainers == 0 {
            wake_pipe()?;
            drain();
            RECEIVED.store(0, Ordering::SeqCst);
            FIRST_AT.store(0, Ordering::SeqCst);
            let mut previous = [None, None];
            for (slot, &signal) in SIGNALS.iter().enumerate() {
                // SAFETY: a null new action only reads the current one; the action installed
                // calls an async-signal-safe handler.
                unsafe {
                    let mut old: libc::sigaction = std::mem::zeroed();
                    if libc::sigaction(signal, std::ptr::null(), &mut old) != 0 {
                        let error = std::io::Error::last_os_error();
                        restore(&previous);
                        return Err(error);
                    }
                    if old.sa_sigaction == libc::SIG_IGN {
                        // Ignored by whoever started the process: it stays ignored.
                        continue;
                    }
                    let mut action: libc::sigaction = std::mem::zeroed();
                    action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
                    action.sa_flags = libc::SA_RESTART;
                    libc::sigemptyset(&mut action.sa_mask);
                    if libc::sigaction(signal, &action, &mut old) != 0 {
                        let error = std::io::Error::last_os_error();
                        restore(&previous);
                        return Err(error);
                    }
                    previous[slot] = Some(old);
                }
            }
            held.previous = previous;
        }
        held.trainers += 1;
        Ok(())
    }

    pub(super) fn release() {
        let mut held = HELD.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        held.trainers -= 1;
        if held.trainers == 0 {
            let previous = std::mem::take(&mut held.previous);
            restore(&previous);
        }
    }

    fn restore(previous: &[Option<libc::sigaction>; 2]) {
        for (slot, &signal) in SIGNALS.iter().enumerate() {
            if let Some(old) = &previous[slot] {
                // SAFETY: putting back an action read from the kernel.
                unsafe { libc::sigaction(signal, old, std::ptr::null_mut()) };
            }
        }
    }

    /// Wake a prompt waiting in [`wait_readable_or`] (a byte to the pipe, if there is one).
    pub(super) fn wake() {
        let fd = WAKE_WRITE.load(Ordering::SeqCst);
        if fd >= 0 {
            // SAFETY: write(2) of one byte to a non-blocking pipe.
            let _ = unsafe { libc::write(fd, b"!".as_ptr().cast(), 1) };
        }
    }

    /// Wait until `fd` is readable (`Ok(true)`) or `ended` holds (`Ok(false)`), asked again each
    /// time a signal or [`wake`] writes to the pipe.
    pub(super) fn wait_readable_or(fd: i32, ended: &dyn Fn() -> bool) -> std::io::Result<bool> {
        {
            let _held = HELD.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            wake_pipe()?;
        }
        loop {
            if ended() {
                return Ok(false);
            }
            let wake = WAKE_READ.load(Ordering::SeqCst);
            let mut fds = [
                libc::pollfd { fd, events: libc::POLLIN, revents: 0 },
                libc::pollfd { fd: wake, events: libc::POLLIN, revents: 0 },
            ];
            let count = if wake >= 0 { 2 } else { 1 };
            // SAFETY: poll(2) on a local array of `count` descriptors.
            let ready = unsafe { libc::poll(fds.as_mut_ptr(), count, -1) };
            if ready < 0 {
                let error = std::io::Error::last_os_error();
                if error.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(error);
            }
            if fds[0].revents != 0 {
                return Ok(true);
            }
            if ended() {
                return Ok(false);
            }
            // A byte left from an earlier signal or stop: drop it and wait again.
            drain();
        }
    }

    /// The dashboard's terminal, put back by the exit at a second signal.
    #[cfg(feature = "dashboard")]
    pub(super) mod terminal {
        use std::cell::UnsafeCell;
        use std::sync::atomic::{AtomicU8, Ordering};

        /// `RECORD` holds nothing the handler may read / is being written / may be read.
        const EMPTY: u8 = 0;
        const WRITING: u8 = 1;
        const ARMED: u8 = 2;
        static STATE: AtomicU8 = AtomicU8::new(EMPTY);

        struct Terminal {
            fd: libc::c_int,
            settings: libc::termios,
            leave: &'static [u8],
        }

        /// Written only between `EMPTY` and `ARMED` (by one thread: the compare-exchange to
        /// `WRITING` admits one), read by the handler only while `ARMED`. (Not guarded: a
        /// `disarm` and a new `arm` on another thread while the handler reads; the dashboard
        /// arms again only when a next run takes the terminal.)
        struct Record(UnsafeCell<Option<Terminal>>);
        // SAFETY: access is ordered by `STATE`, as said above.
        unsafe impl Sync for Record {}
        static RECORD: Record = Record(UnsafeCell::new(None));

        pub(in super::super) fn arm(fd: i32, leave: &'static [u8]) -> std::io::Result<()> {
            // SAFETY: tcgetattr(3) into a zeroed termios (plain integers and arrays).
            let (got, settings) = unsafe {
                let mut settings: libc::termios = std::mem::zeroed();
                (libc::tcgetattr(fd, &mut settings), settings)
            };
            if got != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if STATE.compare_exchange(EMPTY, WRITING, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
                // SAFETY: `WRITING`: no other thread writes it, and the handler does not read it.
                unsafe { *RECORD.0.get() = Some(Terminal { fd, settings, leave }) };
                STATE.store(ARMED, Ordering::SeqCst);
            }
            Ok(())
        }

        pub(in super::super) fn disarm() {
            let _ = STATE.compare_exchange(ARMED, EMPTY, Ordering::SeqCst, Ordering::SeqCst);
        }

        /// In the handler: tcsetattr(3) and write(2), both async-signal-safe.
        pub(in super::super) fn restore() {
            if STATE.load(Ordering::SeqCst) != ARMED {
                return;
            }
            // SAFETY: `ARMED`: the record was written before and is not being written; then
            // tcsetattr(3) with settings tcgetattr(3) read, and write(2) of a static slice. The
            // process exits right after, so errno is not restored.
            unsafe {
                if let Some(t) = &*RECORD.0.get() {
                    libc::tcsetattr(t.fd, libc::TCSANOW, &t.settings);
                    let _ = libc::write(t.fd, t.leave.as_ptr().cast(), t.leave.len());
                }
            }
        }
    }

    pub(super) fn name(signal: i32) -> String {
        match signal {
            super::STOP_REQUEST => "StopHandle".into(),
            libc::SIGINT => "SIGINT".into(),
            libc::SIGTERM => "SIGTERM".into(),
            other => format!("signal {other}"),
        }
    }
}

#[cfg(not(unix))]
mod platform {
    #[cfg(feature = "dashboard")]
    pub(super) mod terminal {
        pub(in super::super) fn arm(_fd: i32, _leave: &'static [u8]) -> std::io::Result<()> {
            Ok(())
        }
        pub(in super::super) fn disarm() {}
    }
    pub(super) fn acquire() -> std::io::Result<()> {
        Ok(())
    }
    pub(super) fn release() {}
    pub(super) fn wake() {}
    pub(super) fn name(signal: i32) -> String {
        if signal == super::STOP_REQUEST { "StopHandle".into() } else { format!("signal {signal}") }
    }
}
