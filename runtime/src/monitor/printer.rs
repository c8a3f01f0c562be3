//! Prints scalars to the terminal, filtered by regular expressions.

use std::io::Write;

use regex_lite::Regex;

use super::{EpochStats, MonitorSink, Record, Value};
use crate::callback::Context;
use crate::error::{Error, Result};

/// Prints the scalars put during each epoch when it ends (and, with `enable_step`, as they are
/// put), sorted by name, to stdout. On by default.
///
/// `whitelist` / `blacklist` are regular expressions searched in each name (anchor them with `^`
/// and `$` for a whole-name match): a name is printed when it matches some whitelist pattern (all
/// names, without a whitelist) and no blacklist pattern.
///
/// ```
/// use burn_stoker::monitor::ScalarPrinter;
/// use burn_stoker::trainer::DefaultCallbacks;
///
/// // The default printer, but only the validation scalars, and none of the profile's times.
/// let defaults = DefaultCallbacks {
///     printer: Some(
///         ScalarPrinter::new().whitelist(["^validation", "^val-"]).blacklist(["^profile/"]),
///     ),
///     ..DefaultCallbacks::default()
/// };
/// # let _ = defaults;
/// ```
#[derive(Debug, Default, Clone)]
pub struct ScalarPrinter {
    enable_step: bool,
    enable_epoch: bool,
    whitelist: Option<Vec<String>>,
    blacklist: Vec<String>,
}

impl ScalarPrinter {
    /// Print at the end of every epoch, every name.
    pub fn new() -> Self {
        ScalarPrinter { enable_step: false, enable_epoch: true, whitelist: None, blacklist: Vec::new() }
    }
    /// Also print scalars as soon as they are put (at the end of the event that put them).
    pub fn enable_step(mut self, enable: bool) -> Self {
        self.enable_step = enable;
        self
    }
    /// Print at the end of each epoch (on by default).
    pub fn enable_epoch(mut self, enable: bool) -> Self {
        self.enable_epoch = enable;
        self
    }
    /// Print only the names matching one of these patterns.
    pub fn whitelist<S: Into<String>>(mut self, patterns: impl IntoIterator<Item = S>) -> Self {
        self.whitelist = Some(patterns.into_iter().map(Into::into).collect());
        self
    }
    /// Never print the names matching one of these patterns.
    pub fn blacklist<S: Into<String>>(mut self, patterns: impl IntoIterator<Item = S>) -> Self {
        self.blacklist = patterns.into_iter().map(Into::into).collect();
        self
    }

    /// The writer this printer runs, printing to `out`. An invalid pattern is an error naming it.
    pub fn sink(&self, out: Box<dyn Write + Send>) -> Result<impl MonitorSink + std::fmt::Debug + use<>> {
        let compile = |patterns: &[String]| -> Result<Vec<Regex>> {
            patterns
                .iter()
                .map(|p| {
                    Regex::new(p)
                        .map_err(|e| Error::context(format!("ScalarPrinter: invalid pattern `{p}`"), e))
                })
                .collect()
        };
        Ok(PrinterSink {
            enable_step: self.enable_step,
            enable_epoch: self.enable_epoch,
            whitelist: self.whitelist.as_deref().map(compile).transpose()?,
            blacklist: compile(&self.blacklist)?,
            out,
        })
    }
}

/// Opened when training starts, once every callback is set up: nothing is printed beside a
/// callback that holds the terminal (the dashboard).
#[crate::callback]
impl ScalarPrinter {
    #[on(before_train)]
    fn open<M>(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if ctx.terminal_held() {
            return Ok(());
        }
        let sink = self.sink(Box::new(std::io::stdout()))?;
        ctx.monitors().add_sink(sink);
        Ok(())
    }
}

/// The writer behind [`ScalarPrinter`].
struct PrinterSink {
    enable_step: bool,
    enable_epoch: bool,
    whitelist: Option<Vec<Regex>>,
    blacklist: Vec<Regex>,
    out: Box<dyn Write + Send>,
}

impl std::fmt::Debug for PrinterSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrinterSink")
            .field("enable_step", &self.enable_step)
            .field("enable_epoch", &self.enable_epoch)
            .finish_non_exhaustive()
    }
}

impl PrinterSink {
    fn allowed(&self, name: &str) -> bool {
        self.whitelist.as_ref().is_none_or(|w| w.iter().any(|r| r.is_match(name)))
            && !self.blacklist.iter().any(|r| r.is_match(name))
    }
}

/// Five significant digits, like Python's `{:.5g}`.
pub(crate) fn format_scalar(v: f64) -> String {
    positional(v, 5).unwrap_or_else(|| format!("{v:.4e}"))
}

/// `v` with `digits` significant digits in positional notation, trailing zeros dropped, when its
/// magnitude is from 1e-4 to below 10^digits (as C's `%g` decides); 0 and non-finite values as
/// Rust writes them. `None` where `%g` would switch to scientific notation.
pub(crate) fn positional(v: f64, digits: i32) -> Option<String> {
    if v == 0.0 || !v.is_finite() {
        return Some(format!("{v}"));
    }
    let magnitude = v.abs().log10().floor() as i32;
    if !(-4..digits).contains(&magnitude) {
        return None;
    }
    let decimals = (digits - 1 - magnitude).max(0) as usize;
    let text = format!("{v:.decimals$}");
    Some(if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.').to_string() } else { text })
}

impl MonitorSink for PrinterSink {
    fn name(&self) -> &str {
        "ScalarPrinter"
    }

    fn write(&mut self, records: &[Record]) -> std::io::Result<()> {
        for record in records {
            let Value::Scalar(v) = record.value else { continue };
            if !self.allowed(&record.name) {
                continue;
            }
            if self.enable_step {
                writeln!(self.out, "[step {}] {}: {}", record.global_step, record.name, format_scalar(v))?;
            }
        }
        Ok(())
    }

    fn end_epoch(&mut self, stats: &EpochStats) -> std::io::Result<()> {
        let shown: Vec<(&String, &f64)> =
            stats.scalars.iter().filter(|(name, _)| self.allowed(name)).collect();
        if !self.enable_epoch || shown.is_empty() {
            return Ok(());
        }
        writeln!(self.out, "epoch {} (global step {}):", stats.epoch_num, stats.global_step)?;
        for (name, v) in shown {
            writeln!(self.out, "  {name}: {}", format_scalar(*v))?;
        }
        self.out.flush()
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}
