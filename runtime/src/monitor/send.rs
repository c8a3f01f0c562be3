//! Commands run with monitored scalars: tensorpack's `SendMonitorData` (a monitor that runs a
//! command once all its names have a new value) and `SendStat` (a callback that runs a command
//! with the latest values, every epoch).
//!
//! Both run their commands with `sh -c` on a thread of their own, one at a time in the order they
//! were asked for, never on the step's path. A command that cannot start or exits with a
//! non-zero status is a warning on stderr, never a training failure. Up to
//! [`COMMAND_QUEUE_CAPACITY`] commands wait for the thread; when it is that far behind (a hung
//! command), a new command is dropped and counted instead of stalling training (one warning on
//! stderr; the run's [`TrainReport::dropped`](crate::trainer::TrainReport::dropped) gives the
//! count). When training ends they
//! wait for the commands still queued or running, up to a bounded time
//! ([`wait_at_end`](SendMonitorData::wait_at_end), 30 s by default); what is still running then
//! is killed and what is still queued is dropped, each with a warning.

use std::borrow::Cow;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

use super::{MonitorSink, Record, Value};
use crate::callback::{Callback, Context};
use crate::error::{Error, Result};
use crate::state::{BoundedSender, WriterQueue, bounded};

/// How many commands of one [`SendMonitorData`] or [`SendStat`] may wait to run; past that, new
/// ones are dropped and counted, so that a hung command never stalls training (see
/// [`WriterQueue`](crate::state::WriterQueue)).
pub const COMMAND_QUEUE_CAPACITY: usize = 64;

/// How long the end of training waits for queued and running commands by default.
const DEFAULT_WAIT_AT_END: Duration = Duration::from_secs(30);

/// One piece of a command template.
#[derive(Debug, Clone, PartialEq)]
enum Piece {
    /// Text copied as it is.
    Text(String),
    /// The value of `names[index]`, with a fixed number of decimals or in its shortest form.
    Value { index: usize, decimals: Option<usize> },
    /// The epoch the values were put in.
    Epoch,
    /// The global step the values were put at.
    Step,
}

/// A command with `{name}` placeholders, parsed once.
#[derive(Debug, Clone)]
struct Template {
    owner: &'static str,
    command: String,
    names: Vec<String>,
    pieces: Vec<Piece>,
}

impl Template {
    /// Parse `command`: `{name}` (a name of `names`, or `epoch_num` / `global_step`),
    /// `{name:.Nf}` (N decimals), `{{` and `}}` (literal braces), as Python's `str.format`.
    fn parse(owner: &'static str, command: String, names: Vec<String>) -> Result<Template> {
        let bad = |what: String| Error::msg(format!("{owner}: {what} in command `{command}`"));
        if names.is_empty() {
            return Err(Error::msg(format!("{owner}: no scalar names given for command `{command}`")));
        }
        for (i, name) in names.iter().enumerate() {
            if name.is_empty() {
                return Err(Error::msg(format!("{owner}: an empty scalar name")));
            }
            if names[..i].contains(name) {
                return Err(Error::msg(format!("{owner}: scalar name `{name}` is given twice")));
            }
        }
        let mut pieces = Vec::new();
        let mut text = String::new();
        let mut chars = command.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '{' if chars.peek() == Some(&'{') => {
                    chars.next();
                    text.push('{');
                }
                '}' if chars.peek() == Some(&'}') => {
                    chars.next();
                    text.push('}');
                }
                '}' => return Err(bad("a single `}` (write `}}` for a literal brace)".into())),
                '{' => {
                    let mut field = String::new();
                    loop {
                        match chars.next() {
                            Some('}') => break,
                            Some('{') | None => {
                                return Err(bad(format!(
                                    "an unclosed placeholder `{{{field}` (write `{{{{` for a literal brace)"
                                )));
                            }
                            Some(c) => field.push(c),
                        }
                    }
                    let (name, spec) = match field.split_once(':') {
                        Some((name, spec)) => (name, Some(spec)),
                        None => (field.as_str(), None),
                    };
                    let decimals = match spec {
                        None => None,
                        Some(spec) => Some(
                            spec.strip_prefix('.')
                                .and_then(|s| s.strip_suffix('f'))
                                .and_then(|n| n.parse::<usize>().ok())
                                .ok_or_else(|| {
                                    bad(format!(
                                        "format `{{{field}}}`: only `{{name}}` and `{{name:.Nf}}` (N decimals) are supported"
                                    ))
                                })?,
                        ),
                    };
                    let piece = match names.iter().position(|n| n == name) {
                        Some(index) => Piece::Value { index, decimals },
                        None if name == "epoch_num" && decimals.is_none() => Piece::Epoch,
                        None if name == "global_step" && decimals.is_none() => Piece::Step,
                        None => {
                            return Err(bad(format!(
                                "placeholder `{{{field}}}` names none of the scalars {} (nor `epoch_num`, `global_step`)",
                                names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
                            )));
                        }
                    };
                    if !text.is_empty() {
                        pieces.push(Piece::Text(std::mem::take(&mut text)));
                    }
                    pieces.push(piece);
                }
                c => text.push(c),
            }
        }
        if !text.is_empty() {
            pieces.push(Piece::Text(text));
        }
        Ok(Template { owner, command, names, pieces })
    }

    /// The command with `values` (one per name, in order) in place of the placeholders.
    fn render(&self, values: &[f64], epoch_num: u64, global_step: u64) -> String {
        let mut out = String::with_capacity(self.command.len() + 16 * values.len());
        for piece in &self.pieces {
            match piece {
                Piece::Text(text) => out.push_str(text),
                Piece::Value { index, decimals: None } => out.push_str(&format!("{:?}", values[*index])),
                Piece::Value { index, decimals: Some(n) } => out.push_str(&format!("{:.n$}", values[*index])),
                Piece::Epoch => out.push_str(&epoch_num.to_string()),
                Piece::Step => out.push_str(&global_step.to_string()),
            }
        }
        out
    }
}

/// Runs commands with `sh -c` on a thread of its own, one after the other.
struct CommandRunner {
    owner: &'static str,
    sender: Option<BoundedSender<String>>,
    /// The queue's view, kept after the sender is dropped at the end.
    queue: WriterQueue,
    worker: Option<JoinHandle<()>>,
    /// Disconnected when the worker ends.
    finished: Receiver<()>,
    /// Set when the end of training stops waiting: kill what runs, drop what is queued.
    abandon: Arc<AtomicBool>,
}

impl CommandRunner {
    /// A runner whose queue is reported as `name` (the callback's).
    fn start(owner: &'static str, name: String) -> Result<CommandRunner> {
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
    fn submit(&self, command: String) {
        if let Some(sender) = &self.sender
            && sender.send_or_drop(command).is_err()
        {
            crate::logging::warn!("{}: its command thread ended; a command was not run", self.owner);
        }
    }

    /// Wait up to `wait` for the queued and running commands, then kill and drop what is left.
    fn finish(&mut self, wait: Duration) {
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
        match shell(&command).stdin(Stdio::null()).spawn() {
            Ok(child) => wait_for(owner, &command, child, abandon),
            Err(e) => crate::logging::warn!("{owner}: command `{command}` could not start: {e}"),
        }
    }
    if dropped > 0 {
        crate::logging::warn!("{owner}: {dropped} queued command(s) were not run");
    }
}

#[cfg(unix)]
fn shell(command: &str) -> Command {
    let mut shell = Command::new("sh");
    shell.arg("-c").arg(command);
    shell
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
                let _ = child.kill();
                let _ = child.wait();
                crate::logging::warn!("{owner}: command `{command}` was still running; killed it");
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

/// Runs a command with some monitored scalars each time all of them have a new value
/// (tensorpack's `SendMonitorData`): e.g. to send the validation error to a phone, or to feed a
/// custom dashboard.
///
/// `command` is a shell command (`sh -c`) in which `{name}` stands for the value of scalar
/// `name`, one of `names`. As in tensorpack, the values are collected as they are put (a later
/// value of a name replaces the earlier one); once every name has a value, the command runs
/// with them and the collection starts over empty. The collection is looked at when the event
/// that put the values ends (tensorpack looks after each step and each epoch), so the last
/// value put during one event wins.
///
/// Placeholders, as in Python's `str.format`: `{name}` writes the value in its shortest exact
/// form, as Python's `str(float)` does but for the spelling of the exponent and of NaN (`0.25`,
/// `1.0`, `1e-7`, `NaN`, `inf`), `{name:.3f}` with 3 decimals, `{{` and `}}` are literal
/// braces. Beyond tensorpack: `{epoch_num}` and `{global_step}` give the counters when the
/// last of the values was put (unless a watched scalar has that name). A placeholder that names none of
/// these is an error at construction, not at the first send.
///
/// The command runs off the step's path, on a thread of its own (one command at a time, in
/// order); a command that fails is a warning on stderr, never a training failure. At the end of
/// training the run waits for the pending commands up to [`wait_at_end`](Self::wait_at_end)
/// (30 s by default), so that the last epoch's values are sent. tensorpack runs the command
/// inside the trainer with `os.system`, blocking training while it runs.
///
/// ```
/// use burn_stoker::monitor::SendMonitorData;
/// let send = SendMonitorData::new(
///     "curl -s -u $PUSHBULLET_TOKEN: https://api.pushbullet.com/v2/pushes \
///      -d type=note -d title='epoch {epoch_num}' -d body='error {validation_error:.4f}' > /dev/null",
///     ["validation_error"],
/// )?;
/// # let _ = send;
/// # Ok::<(), burn_stoker::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct SendMonitorData {
    template: Template,
    wait_at_end: Duration,
}
crate::kind::kind!(SendMonitorData);

impl SendMonitorData {
    /// Run `command` each time every one of `names` has a new value. An empty or repeated
    /// name, or a placeholder that names none of them, is an error.
    pub fn new<S: Into<String>>(
        command: impl Into<String>,
        names: impl IntoIterator<Item = S>,
    ) -> Result<Self> {
        let names = names.into_iter().map(Into::into).collect();
        let template = Template::parse("SendMonitorData", command.into(), names)?;
        Ok(SendMonitorData { template, wait_at_end: DEFAULT_WAIT_AT_END })
    }

    /// How long the end of training waits for commands still queued or running (30 s by
    /// default); after it, the running command is killed and the queued ones are dropped.
    pub fn wait_at_end(mut self, wait: Duration) -> Self {
        self.wait_at_end = wait;
        self
    }

    /// The command with `values` (one per name, in order) in place of its placeholders: what
    /// would run.
    pub fn render(&self, values: &[f64], epoch_num: u64, global_step: u64) -> String {
        assert_eq!(values.len(), self.template.names.len(), "one value per name");
        self.template.render(values, epoch_num, global_step)
    }
}

impl<M> Callback<M> for SendMonitorData {
    fn name(&self) -> Cow<'static, str> {
        Cow::Owned(format!("SendMonitorData({})", self.template.names.join(",")))
    }
    fn setup(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let runner = CommandRunner::start(self.template.owner, Callback::<M>::name(self).into_owned())?;
        ctx.monitors().track_queue(runner.queue.clone());
        let sink = SendSink {
            values: vec![None; self.template.names.len()],
            at: (0, 0),
            runner,
            template: self.template.clone(),
            wait_at_end: self.wait_at_end,
        };
        ctx.monitors().add_sink(sink);
        Ok(())
    }
}

/// The writer behind [`SendMonitorData`].
struct SendSink {
    template: Template,
    /// The values collected so far, one per name.
    values: Vec<Option<f64>>,
    /// The (epoch, global step) the last of them was put at.
    at: (u64, u64),
    runner: CommandRunner,
    wait_at_end: Duration,
}

impl MonitorSink for SendSink {
    fn name(&self) -> &str {
        "SendMonitorData"
    }

    fn write(&mut self, records: &[Record]) -> std::io::Result<()> {
        let mut touched = false;
        for record in records {
            let Value::Scalar(v) = record.value else { continue };
            let Some(index) = self.template.names.iter().position(|n| **n == *record.name) else { continue };
            self.at = (record.epoch_num, record.global_step);
            self.values[index] = Some(v);
            touched = true;
        }
        if touched && self.values.iter().all(Option::is_some) {
            let values: Vec<f64> = self.values.iter_mut().map(|v| v.take().unwrap_or_default()).collect();
            let (epoch, step) = self.at;
            self.runner.submit(self.template.render(&values, epoch, step));
        }
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }

    fn close(&mut self) -> std::io::Result<()> {
        self.runner.finish(self.wait_at_end);
        Ok(())
    }
}

/// Runs a command with the latest values of some scalars at every `trigger` — every epoch, or at
/// another period under [`PeriodicTrigger`](crate::trigger::PeriodicTrigger) (tensorpack's `SendStat`,
/// "an equivalent of [`SendMonitorData`], but as a normal callback").
///
/// The placeholders are those of [`SendMonitorData`]; `{epoch_num}` and `{global_step}` are the
/// counters at the trigger. The values are the latest in the monitors' history when this
/// callback's trigger runs, so register it after the callbacks that put them in the same event
/// (or order it with `#[order(after = ...)]`). A name with no value yet skips the command with
/// a warning on stderr (tensorpack fails with a `KeyError`). Commands run off the step's path as
/// [`SendMonitorData`]'s do; `after_train` waits for them up to
/// [`wait_at_end`](Self::wait_at_end).
///
/// ```
/// use burn_stoker::prelude::*;
/// use burn_stoker::monitor::SendStat;
/// // Every 5 epochs, append the latest validation error to a file.
/// let send = PeriodicTrigger::new(SendStat::new(
///     "echo {epoch_num} {validation_error} >> errors.txt",
///     ["validation_error"],
/// )?)
/// .every_k_epochs(5);
/// # let _ = send;
/// # Ok::<(), burn_stoker::Error>(())
/// ```
#[derive(Debug)]
pub struct SendStat {
    template: Template,
    wait_at_end: Duration,
    runner: Option<CommandRunner>,
}
crate::kind::kind!(SendStat);

impl std::fmt::Debug for CommandRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandRunner").field("owner", &self.owner).finish_non_exhaustive()
    }
}

impl SendStat {
    /// Run `command` with the latest values of `names` at every trigger. An empty or repeated
    /// name, or a placeholder that names none of them, is an error.
    pub fn new<S: Into<String>>(
        command: impl Into<String>,
        names: impl IntoIterator<Item = S>,
    ) -> Result<Self> {
        let names = names.into_iter().map(Into::into).collect();
        let template = Template::parse("SendStat", command.into(), names)?;
        Ok(SendStat { template, wait_at_end: DEFAULT_WAIT_AT_END, runner: None })
    }

    /// How long `after_train` waits for commands still queued or running (30 s by default);
    /// after it, the running command is killed and the queued ones are dropped.
    pub fn wait_at_end(mut self, wait: Duration) -> Self {
        self.wait_at_end = wait;
        self
    }
}

impl<M> Callback<M> for SendStat {
    fn name(&self) -> Cow<'static, str> {
        Cow::Owned(format!("SendStat({})", self.template.names.join(",")))
    }
    fn setup(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let runner = CommandRunner::start(self.template.owner, Callback::<M>::name(self).into_owned())?;
        ctx.monitors().track_queue(runner.queue.clone());
        self.runner = Some(runner);
        Ok(())
    }
    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let monitors = ctx.monitors_ref();
        let mut values = Vec::with_capacity(self.template.names.len());
        for name in &self.template.names {
            match monitors.latest(name) {
                Some(v) => values.push(v),
                None => {
                    crate::logging::warn!(
                        "SendStat: no value of `{name}` yet at epoch {} (global step {}); command not run",
                        ctx.epoch_num(),
                        ctx.global_step()
                    );
                    return Ok(());
                }
            }
        }
        if let Some(runner) = &self.runner {
            runner.submit(self.template.render(&values, ctx.epoch_num(), ctx.global_step()));
        }
        Ok(())
    }
    fn after_train(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        if let Some(mut runner) = self.runner.take() {
            runner.finish(self.wait_at_end);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(command: &str, names: &[&str]) -> Result<Template> {
        Template::parse("test", command.into(), names.iter().map(|n| n.to_string()).collect())
    }

    #[test]
    fn placeholders_are_replaced_like_python_format() {
        let t = template("echo {a} {b:.2f} {{x}} {epoch_num}/{global_step} {a}", &["a", "b"]).unwrap();
        assert_eq!(t.render(&[0.25, 1.0 / 3.0], 2, 40), "echo 0.25 0.33 {x} 2/40 0.25");
        assert_eq!(t.render(&[1.0, f64::NAN], 1, 1), "echo 1.0 NaN {x} 1/1 1.0");
    }

    #[test]
    fn a_watched_name_takes_precedence_over_the_counters() {
        let t = template("{epoch_num}", &["epoch_num"]).unwrap();
        assert_eq!(t.render(&[7.5], 1, 1), "7.5");
    }

    #[test]
    fn bad_templates_are_errors_naming_the_problem() {
        let error = |c: &str, n: &[&str]| template(c, n).expect_err("an error").to_string();
        assert!(error("echo {c}", &["a"]).contains("`{c}` names none of the scalars `a`"));
        assert!(error("echo {a", &["a"]).contains("unclosed"));
        assert!(error("echo a}", &["a"]).contains("single `}`"));
        assert!(error("echo {a:>5}", &["a"]).contains("only `{name}` and `{name:.Nf}`"));
        assert!(error("echo", &[]).contains("no scalar names"));
        assert!(error("echo {a}", &["a", "a"]).contains("`a` is given twice"));
        assert!(error("echo {a}", &["a", ""]).contains("empty"));
    }
}
