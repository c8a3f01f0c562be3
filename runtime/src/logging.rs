//! Where stoker's messages go: the [`log`] facade, or stderr when no logger is installed.
//!
//! Every message of the library (a warning that an old checkpoint could not be removed, that a
//! writer is behind, the note that a run resumes from a checkpoint, ...) is a [`log`] record with
//! a target per module (`burn_stoker::saver::checkpoint`, `burn_stoker::state::queue`, ...):
//!
//! - **A logger is installed** (`env_logger`, a `tracing-subscriber` with `tracing-log`,
//!   burn-train's file logger: anything that sets [`log::set_max_level`] above `Off`): every
//!   message goes to it, filtered by its own rules, and stoker prints nothing itself.
//! - **No logger is installed**: the messages at or above the stderr fallback's level
//!   ([`stderr_fallback`], `Info` unless told otherwise: everything) are written to stderr, one line
//!   each: `stoker: warning: <message>` for a warning (`stoker: <message>` for one that names its
//!   source first, `stoker: StepTimeout: ...`), `stoker: <message>` for the others. A logger gets
//!   the message alone: the target and the level say the rest.
//!
//! Where the documentation of a callback says it writes a line "on stderr", that line is a record
//! of this facade, on stderr only without a logger.
//!
//! The fallback's level is, in order: the last [`stderr_fallback`] call, or the environment
//! variable `STOKER_LOG` (`off`, `error`, `warn`, `info`, `debug`, `trace`: read once, at the first
//! message), or `Info`. `STOKER_LOG=off` silences stoker without a line of code;
//! `stderr_fallback(LevelFilter::Off)` does so from the program.
//!
//! The callbacks whose job is to print stay printers, not log records: [`ScalarPrinter`],
//! [`ProgressBar`], the end-of-training summary ([`TrainSummaryPrinter`]), the model summary's
//! table ([`ModelSummary`]), [`InjectShell`]'s prompt and [`TensorPrinter`]. Remove
//! or replace them like any callback ([`DefaultCallbacks`]).
//!
//! ```
//! use burn_stoker::logging::stderr_fallback;
//! use log::LevelFilter;
//!
//! // Without a logger: only warnings and errors on stderr.
//! stderr_fallback(LevelFilter::Warn);
//! // Nothing at all.
//! stderr_fallback(LevelFilter::Off);
//! # stderr_fallback(LevelFilter::Info);
//! ```
//!
//! [`ScalarPrinter`]: crate::monitor::ScalarPrinter
//! [`ProgressBar`]: crate::track::ProgressBar
//! [`TrainSummaryPrinter`]: crate::trainer::TrainSummaryPrinter
//! [`ModelSummary`]: crate::track::ModelSummary
//! [`InjectShell`]: crate::debug::InjectShell
//! [`TensorPrinter`]: crate::debug::TensorPrinter
//! [`DefaultCallbacks`]: crate::trainer::DefaultCallbacks

use std::fmt;
use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};

use log::{Level, LevelFilter};

/// The environment variable read for the stderr fallback's level when the program sets none.
const STOKER_LOG: &str = "STOKER_LOG";

/// The fallback's level (a `LevelFilter` as `usize`), or [`UNSET`] before it is known.
static FALLBACK: AtomicU8 = AtomicU8::new(UNSET);
const UNSET: u8 = u8::MAX;

/// Without a logger, write stoker's messages at or above `level` to stderr (`Off`: none).
///
/// The default is `Info` (every message), or what the `STOKER_LOG` environment variable says;
/// this call overrides both, for the whole process. With a logger installed, stderr gets nothing
/// from stoker whatever this says: the logger's own filter decides.
pub fn stderr_fallback(level: LevelFilter) {
    FALLBACK.store(level as u8, Ordering::Relaxed);
}

/// The stderr fallback's level now (see [`stderr_fallback`]).
pub fn stderr_fallback_level() -> LevelFilter {
    match FALLBACK.load(Ordering::Relaxed) {
        UNSET => {
            let level = from_env(std::env::var(STOKER_LOG).ok().as_deref());
            // A `stderr_fallback` call made meanwhile wins.
            let _ = FALLBACK.compare_exchange(UNSET, level as u8, Ordering::Relaxed, Ordering::Relaxed);
            from_u8(FALLBACK.load(Ordering::Relaxed))
        }
        stored => from_u8(stored),
    }
}

/// `STOKER_LOG`'s value as a level: `Info` when unset or not a level's name.
fn from_env(value: Option<&str>) -> LevelFilter {
    value.and_then(|v| v.trim().parse().ok()).unwrap_or(LevelFilter::Info)
}

fn from_u8(value: u8) -> LevelFilter {
    LevelFilter::iter().find(|l| *l as u8 == value).unwrap_or(LevelFilter::Info)
}

/// Whether a logger is installed (one that asked for anything: `log::max_level()` above `Off`).
fn logger_installed() -> bool {
    log::max_level() != LevelFilter::Off
}

/// Whether a message at `level` goes to stderr: no logger, and the fallback lets it through.
pub(crate) fn to_stderr(level: Level) -> bool {
    !logger_installed() && level <= stderr_fallback_level()
}

/// What stderr's line starts with: `stoker: warning: ` for a warning (unless `bare`, a warning
/// whose text names its source first, as it always read), `stoker: ` otherwise.
fn prefix(level: Level, bare: bool) -> &'static str {
    if level == Level::Warn && !bare { "stoker: warning: " } else { "stoker: " }
}

/// Where a message was made: its module (the record's target), file and line.
#[derive(Debug)]
pub(crate) struct Site {
    target: &'static str,
    file: &'static str,
    line: u32,
}

impl Site {
    pub(crate) const fn new(target: &'static str, file: &'static str, line: u32) -> Site {
        Site { target, file, line }
    }
}

/// One message: to the logger if one is installed, else to stderr if the fallback lets it
/// through. What the macros below call; off every step's path (a warning said once, a message
/// at setup or at the end), and allocating nothing of its own.
#[cold]
#[inline(never)]
pub(crate) fn emit(level: Level, bare: bool, site: &'static Site, args: fmt::Arguments<'_>) {
    if logger_installed() {
        if level <= log::max_level() && level <= log::STATIC_MAX_LEVEL {
            log::logger().log(
                &log::Record::builder()
                    .args(args)
                    .level(level)
                    .target(site.target)
                    .module_path_static(Some(site.target))
                    .file_static(Some(site.file))
                    .line(Some(site.line))
                    .build(),
            );
        }
    } else if to_stderr(level) {
        // A closed stderr must not end training: the line is lost, not the run.
        let _ = writeln!(std::io::stderr().lock(), "{}{args}", prefix(level, bare));
    }
}

/// The logger's buffered records out now, or stderr's: before the process ends without unwinding
/// (`_exit`, `MPI_Abort`).
pub(crate) fn flush() {
    if logger_installed() {
        log::logger().flush();
    }
    let _ = std::io::stderr().flush();
}

/// The one macro behind `error!`, `warn!` and `info!`: `emit` with the caller's module as the
/// target.
macro_rules! message {
    ($level:expr, $bare:expr, $($arg:tt)+) => {{
        static SITE: $crate::logging::Site = $crate::logging::Site::new(module_path!(), file!(), line!());
        $crate::logging::emit($level, $bare, &SITE, format_args!($($arg)+))
    }};
}

/// An error that does not end the run (a background writer's failure, a second error at the end):
/// `stoker: <message>` on stderr without a logger.
macro_rules! error_ {
    ($($arg:tt)+) => { $crate::logging::message!(::log::Level::Error, false, $($arg)+) };
}

/// A warning: `stoker: warning: <message>` on stderr without a logger. `warn!(bare: ...)`: a
/// warning whose text names its source first (`StepTimeout: ...`), `stoker: <message>`.
macro_rules! warn_ {
    (bare: $($arg:tt)+) => { $crate::logging::message!(::log::Level::Warn, true, $($arg)+) };
    ($($arg:tt)+) => { $crate::logging::message!(::log::Level::Warn, false, $($arg)+) };
}

/// What the run does (resuming from a checkpoint, a file moved aside, a tracker's reading):
/// `stoker: <message>` on stderr without a logger.
macro_rules! info_ {
    ($($arg:tt)+) => { $crate::logging::message!(::log::Level::Info, false, $($arg)+) };
}

// Under other names, then renamed: a macro named `warn` meets the built-in `#[warn]` attribute in
// a `use`, never in a path (`crate::logging::warn!`).
pub(crate) use {error_ as error, info_ as info, message, warn_ as warn};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logging_the_stderr_fallback_follows_the_switch_then_the_environment_then_info() {
        assert_eq!(from_env(None), LevelFilter::Info);
        assert_eq!(from_env(Some("off")), LevelFilter::Off);
        assert_eq!(from_env(Some("WARN")), LevelFilter::Warn);
        assert_eq!(from_env(Some("chatty")), LevelFilter::Info);
        for level in LevelFilter::iter() {
            assert_eq!(from_u8(level as u8), level);
        }
        // No test of this binary installs a logger: the fallback decides.
        assert!(!logger_installed());
        let before = stderr_fallback_level();
        stderr_fallback(LevelFilter::Off);
        assert!(!to_stderr(Level::Error));
        stderr_fallback(LevelFilter::Warn);
        assert!(to_stderr(Level::Error) && to_stderr(Level::Warn) && !to_stderr(Level::Info));
        stderr_fallback(LevelFilter::Info);
        assert!(to_stderr(Level::Info) && !to_stderr(Level::Debug));
        stderr_fallback(before);
    }

    #[test]
    fn logging_stderr_lines_keep_their_prefixes() {
        assert_eq!(prefix(Level::Warn, false), "stoker: warning: ");
        assert_eq!(prefix(Level::Warn, true), "stoker: ");
        assert_eq!(prefix(Level::Error, false), "stoker: ");
        assert_eq!(prefix(Level::Info, false), "stoker: ");
    }
}
