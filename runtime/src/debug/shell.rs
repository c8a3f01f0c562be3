//! [`InjectShell`]: pause training when a file appears, and inspect or steer it from a prompt.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::Tensor;

use super::shell_input::{Input, MAX_LINE, Pending, Read};
use crate::callback::{Callback, Context};
use crate::error::{Error, Result};
use crate::signal::StopHandle;

/// Pauses training when a file exists, for a person to inspect and steer it from a prompt
/// (tensorpack's `InjectShell(file='INJECT_SHELL.tmp')`).
///
/// At each `trigger` (the end of every epoch by default; wrap it in a
/// [`PeriodicTrigger`](crate::trigger::PeriodicTrigger) to look every `k` steps) it checks whether the
/// file exists — one `stat`, nothing per step. If it does, training pauses and a prompt reads
/// commands, one per line:
///
/// ```text
/// help                  the commands
/// status                the epoch, the global step and the local step
/// monitors              every scalar's latest value (also: ls)
/// history NAME [N]      the last N values (all by default) of scalar NAME, as `step: value`
/// hyper                 every hyper-parameter and its value
/// get NAME              a hyper-parameter's value
/// set NAME VALUE        set a hyper-parameter, from the next step on
/// params                the model's parameters: name (burn's field path, `fc1.weight`), shape
/// param NAME [N]        a parameter's shape, min, max, mean, L2 norm and first N values (8)
/// stop                  stop training after this trigger (after_train still runs), then continue
/// continue              resume training (also: c, exit, quit, and the end of the input)
/// ```
///
/// A SIGINT or SIGTERM (when the trainer handles signals), or a stop asked through the run's
/// [`StopHandle`](crate::trainer::StopHandle), ends the prompt at once: training stops at this
/// boundary with its checkpoint. On stdin (unix) the prompt waits for input and for those
/// together, reading the descriptor itself (unbuffered, so that several lines pasted at once are
/// all read); a reader given to [`with_io`](Self::with_io) is checked between lines.
///
/// With a [`Dashboard`](crate::monitor::Dashboard) holding the terminal, the prompt on stdin and
/// stderr waits until the dashboard has stepped aside (the terminal put back as it was: out of
/// raw mode and of the alternate screen, no key read) and the dashboard takes the terminal again
/// once the prompt closes.
///
/// The prompt reads stdin and writes to stderr, or the reader and writer given to
/// [`with_io`](Self::with_io). A line longer than 64 KiB is read to its end and dropped (with a
/// message), so input without a newline never grows memory without bound.
///
/// **The file** is where tensorpack puts it: `INJECT_SHELL.tmp`, a relative path taken from the
/// working directory of the program (`touch INJECT_SHELL.tmp` in the folder the run was started
/// from), made absolute at setup, which says where on stderr ("InjectShell: create ... to open
/// a prompt"), as tensorpack says at construction. An absolute path
/// (`.file(log_dir.join("pause"))`) is used as it is. As tensorpack's `_after_train`, the file
/// is removed at the end of training (with [`keep_file`](Self::keep_file) too), so that it does
/// not pause the next run.
///
/// The parameters are read by name (`params`, `param fc1.weight`): the path of burn's field
/// names, as [`Hist`](crate::monitor::Hist) names them; reading one is one device-to-host
/// transfer of that tensor, while training is paused.
///
/// Differences from tensorpack, which opens an IPython or pdb shell on the trainer (Rust has no
/// such shell): the prompt offers the commands above. When training continues, the file is
/// removed, so that one `touch` pauses once; tensorpack leaves it, which pauses again at every
/// trigger until the person deletes it ([`keep_file`](Self::keep_file) does that). The end of the
/// input continues training, so a run without a terminal never stays paused.
///
/// ```
/// use burn_stoker::debug::InjectShell;
/// use burn_stoker::trigger::PeriodicTrigger;
/// // Look for train_log/pause every 100 steps.
/// let shell = PeriodicTrigger::new(InjectShell::new().file("pause")).every_k_steps(100);
/// # let _ = shell;
/// ```
pub struct InjectShell {
    file: PathBuf,
    path: PathBuf,
    keep_file: bool,
    io: Option<(Box<dyn BufRead + Send>, Box<dyn Write + Send>)>,
    /// Bytes read from stdin past the last line handled.
    pending: Pending,
}
crate::kind::kind!(InjectShell);

impl std::fmt::Debug for InjectShell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InjectShell").field("file", &self.file).field("keep_file", &self.keep_file).finish()
    }
}

impl Default for InjectShell {
    fn default() -> Self {
        InjectShell::new()
    }
}

/// The default file name.
pub const INJECT_SHELL_FILE: &str = "INJECT_SHELL.tmp";

const HELP: &str = "\
commands:
  help                  this list
  status                the epoch, the global step and the local step
  monitors | ls         every scalar's latest value
  history NAME [N]      the last N values (all by default) of scalar NAME
  hyper                 every hyper-parameter and its value
  get NAME              a hyper-parameter's value
  set NAME VALUE        set a hyper-parameter, from the next step on
  params                the model's parameters: name, shape
  param NAME [N]        a parameter's shape, statistics and first N values (8 by default)
  stop                  stop training after this trigger, then continue
  continue | c          resume training (also: exit, quit, end of input)
";

/// What a command asks of the prompt.
enum Next {
    Prompt,
    Continue,
}

impl InjectShell {
    /// Pause when `INJECT_SHELL.tmp` exists in the working directory; prompt on stdin and
    /// stderr.
    pub fn new() -> Self {
        InjectShell {
            file: PathBuf::from(INJECT_SHELL_FILE),
            path: PathBuf::new(),
            keep_file: false,
            io: None,
            pending: Pending::default(),
        }
    }
    /// The file that pauses training; a relative path is taken from the working directory.
    pub fn file(mut self, file: impl Into<PathBuf>) -> Self {
        self.file = file.into();
        self
    }
    /// Leave the file in place when training continues (tensorpack's behaviour): training pauses
    /// again at every trigger until the file is removed.
    pub fn keep_file(mut self, keep: bool) -> Self {
        self.keep_file = keep;
        self
    }
    /// Read commands from `input` and write to `output` instead of stdin and stderr.
    pub fn with_io(
        mut self,
        input: impl BufRead + Send + 'static,
        output: impl Write + Send + 'static,
    ) -> Self {
        self.io = Some((Box::new(input), Box::new(output)));
        self
    }
    /// The file looked for, once the log directory is known (after setup).
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn shell<M: Module>(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let io_error = |e: std::io::Error| Error::context("InjectShell", e);
        let mut stderr;
        let signals = ctx.signals_handled();
        let stop = ctx.stop_handle();
        // On the terminal, the dashboard stepped aside, until the prompt returns.
        let _terminal = self.io.is_none().then(crate::signal::open_prompt);
        let (mut input, output): (Input<'_>, &mut dyn Write) = match &mut self.io {
            Some((input, output)) => (Input::Reader(input.as_mut()), output.as_mut()),
            None => {
                stderr = std::io::stderr();
                (Input::Stdin { pending: &mut self.pending, signals, stop: &stop }, &mut stderr)
            }
        };
        writeln!(
            output,
            "InjectShell: {} exists: training paused at epoch {}, global step {}. \
             Type `help` for the commands, `continue` to resume.",
            self.path.display(),
            ctx.epoch_num(),
            ctx.global_step()
        )
        .map_err(io_error)?;
        let mut line = String::new();
        loop {
            if let Some(why) = leave_for(ctx, &stop) {
                writeln!(
                    output,
                    "\nInjectShell: {why}: leaving the prompt; training stops at this boundary."
                )
                .map_err(io_error)?;
                break;
            }
            write!(output, "stoker> ").and_then(|()| output.flush()).map_err(io_error)?;
            line.clear();
            match input.read_line(&mut line).map_err(io_error)? {
                Read::Line => {}
                Read::End => {
                    writeln!(output).map_err(io_error)?;
                    break;
                }
                Read::Signal => continue,
                Read::TooLong => {
                    writeln!(output, "a line longer than {MAX_LINE} bytes: ignored").map_err(io_error)?;
                    continue;
                }
            }
            if leave_for(ctx, &stop).is_some() {
                continue;
            }
            match command(line.trim(), ctx, output).map_err(io_error)? {
                Next::Prompt => {}
                Next::Continue => break,
            }
        }
        if !self.keep_file {
            match std::fs::remove_file(&self.path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(&self.path, e)),
            }
        }
        writeln!(output, "InjectShell: training continues.").and_then(|()| output.flush()).map_err(io_error)
    }
}

/// Why the prompt must close at once, if it must: a signal, or a stop asked through the run's
/// [`StopHandle`].
fn leave_for<M>(ctx: &Context<'_, M>, stop: &StopHandle) -> Option<String> {
    match ctx.signal_received() {
        Some(signal) => Some(format!("{signal} received")),
        None => stop.is_stopped().then(|| "a stop was asked (StopHandle)".to_string()),
    }
}

/// Run one command line.
fn command<M: Module>(line: &str, ctx: &mut Context<'_, M>, out: &mut dyn Write) -> std::io::Result<Next> {
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        [] => {}
        ["help" | "?"] => out.write_all(HELP.as_bytes())?,
        ["status"] => status(ctx, out)?,
        ["monitors" | "ls"] => monitors(ctx, out)?,
        ["history", name, rest @ ..] if rest.len() <= 1 => history(ctx, name, rest.first().copied(), out)?,
        ["hyper"] => hyper(ctx, out)?,
        ["params"] => params(ctx, out)?,
        ["param", name, rest @ ..] if rest.len() <= 1 => param(ctx, name, rest.first().copied(), out)?,
        ["get", name] => get(ctx, name, out)?,
        ["set", name, value] => set(ctx, name, value, out)?,
        ["stop"] => {
            ctx.request_stop("stopped from InjectShell");
            writeln!(out, "training stops after this trigger")?;
            return Ok(Next::Continue);
        }
        ["continue" | "c" | "exit" | "quit" | "q"] => return Ok(Next::Continue),
        [word, ..] => usage(word, out)?,
    }
    Ok(Next::Prompt)
}

/// `status`: the counters.
fn status<M>(ctx: &Context<'_, M>, out: &mut dyn Write) -> std::io::Result<()> {
    let c = *ctx.counters();
    writeln!(
        out,
        "epoch {} of {}, global step {}, local step {} of {}",
        c.epoch_num(),
        c.max_epoch(),
        c.global_step(),
        c.local_step(),
        c.steps_per_epoch()
    )
}

/// `monitors`: the latest value of every scalar.
fn monitors<M>(ctx: &Context<'_, M>, out: &mut dyn Write) -> std::io::Result<()> {
    let monitors = ctx.monitors_ref();
    let mut any = false;
    for name in monitors.scalar_names() {
        if let Some(&(step, value)) = monitors.history(name).last() {
            writeln!(out, "{name} = {value} (step {step})")?;
            any = true;
        }
    }
    if !any {
        writeln!(out, "no scalar has been put yet")?;
    }
    Ok(())
}

/// A command's optional number of values: `default` without one, `None` when it is not a number.
fn parse_count(count: Option<&str>, default: usize) -> Option<usize> {
    count.map_or(Some(default), |n| n.parse().ok())
}

/// `history NAME [N]`: the last `count` values of a scalar (all of them without `count`).
fn history<M>(
    ctx: &Context<'_, M>,
    name: &str,
    count: Option<&str>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let Some(count) = parse_count(count, usize::MAX) else {
        return writeln!(out, "history: `{}` is not a number of values", count.unwrap_or_default());
    };
    let history = ctx.monitors_ref().history(name);
    if history.is_empty() {
        let known: Vec<&str> = ctx.monitors_ref().scalar_names().collect();
        writeln!(out, "no scalar named `{name}`; known: {}", known.join(", "))?;
    }
    for (step, value) in &history[history.len().saturating_sub(count)..] {
        writeln!(out, "{step}: {value}")?;
    }
    Ok(())
}

/// `hyper`: every hyper-parameter.
fn hyper<M>(ctx: &Context<'_, M>, out: &mut dyn Write) -> std::io::Result<()> {
    let hyper = ctx.hyper();
    for name in hyper.names() {
        writeln!(out, "{name} = {}", hyper.get(name).unwrap_or(f64::NAN))?;
    }
    Ok(())
}

/// `get NAME`: one hyper-parameter.
fn get<M>(ctx: &Context<'_, M>, name: &str, out: &mut dyn Write) -> std::io::Result<()> {
    match ctx.hyper().get(name) {
        Some(value) => writeln!(out, "{name} = {value}"),
        None => {
            let known: Vec<&str> = ctx.hyper().names().collect();
            writeln!(out, "no hyper-parameter named `{name}`; known: {}", known.join(", "))
        }
    }
}

/// `set NAME VALUE`: set a hyper-parameter.
fn set<M>(ctx: &mut Context<'_, M>, name: &str, value: &str, out: &mut dyn Write) -> std::io::Result<()> {
    match value.parse::<f64>() {
        Err(_) => writeln!(out, "set: `{value}` is not a number"),
        Ok(value) => match ctx.hyper_mut().set(name, value) {
            Ok(()) => writeln!(out, "{name} = {value}"),
            Err(e) => writeln!(out, "set: {e}"),
        },
    }
}

/// The model's float parameters, by path, flattened (read on demand).
struct Parameters {
    path: Vec<String>,
    found: Vec<(String, Vec<usize>, Tensor<1>)>,
}

impl ModuleVisitor for Parameters {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_string());
    }
    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let tensor = param.val();
        let shape = tensor.dims().to_vec();
        let n: usize = shape.iter().product();
        self.found.push((self.path.join("."), shape, tensor.reshape([n])));
    }
}

fn parameters<M: Module>(ctx: &Context<'_, M>) -> Vec<(String, Vec<usize>, Tensor<1>)> {
    let mut visitor = Parameters { path: Vec::new(), found: Vec::new() };
    ctx.model().visit(&mut visitor);
    visitor.found
}

/// `params`: every float parameter's name and shape.
fn params<M: Module>(ctx: &Context<'_, M>, out: &mut dyn Write) -> std::io::Result<()> {
    for (name, shape, _) in parameters(ctx) {
        writeln!(out, "{name} {shape:?}")?;
    }
    Ok(())
}

/// `param NAME [N]`: one parameter's shape, statistics and first `count` values.
fn param<M: Module>(
    ctx: &Context<'_, M>,
    name: &str,
    count: Option<&str>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let Some(count) = parse_count(count, 8) else {
        return writeln!(out, "param: `{}` is not a number of values", count.unwrap_or_default());
    };
    let all = parameters(ctx);
    let Some((_, shape, tensor)) = all.iter().find(|(path, ..)| path == name) else {
        let known: Vec<&str> = all.iter().map(|(path, ..)| path.as_str()).collect();
        return writeln!(out, "no parameter named `{name}`; known: {}", known.join(", "));
    };
    let values: Vec<f32> = tensor.clone().into_data().iter::<f32>().collect();
    let (min, max) =
        values.iter().fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    let sum: f64 = values.iter().map(|&v| f64::from(v)).sum();
    let norm = values.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>().sqrt();
    let mean = sum / values.len().max(1) as f64;
    writeln!(out, "{name} {shape:?}: min {min}, max {max}, mean {mean}, norm {norm}")?;
    let shown: Vec<String> = values.iter().take(count).map(f32::to_string).collect();
    writeln!(out, "[{}{}]", shown.join(", "), if values.len() > count { ", ..." } else { "" })
}

/// A command with the wrong arguments (its usage), or an unknown one (the commands).
fn usage(word: &str, out: &mut dyn Write) -> std::io::Result<()> {
    const KNOWN: [&str; 11] = [
        "help", "status", "monitors", "history", "hyper", "get", "set", "params", "param", "stop", "continue",
    ];
    let expects = match word {
        "history" => Some("history NAME [N]"),
        "param" => Some("param NAME [N]"),
        "get" => Some("get NAME"),
        "set" => Some("set NAME VALUE"),
        _ if KNOWN.contains(&word) => Some(word),
        _ => None,
    };
    match expects {
        Some(usage) => writeln!(out, "usage: {usage}"),
        None => writeln!(out, "unknown command `{word}`; commands: {}", KNOWN.join(", ")),
    }
}

impl<M: Module> Callback<M> for InjectShell {
    fn setup(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        self.path = std::path::absolute(&self.file).map_err(|e| Error::io(&self.file, e))?;
        crate::logging::info!("InjectShell: create {} to open a prompt", self.path.display());
        Ok(())
    }
    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if self.path.exists() { self.shell(ctx) } else { Ok(()) }
    }
    fn after_train(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        if self.path.as_os_str().is_empty() {
            return Ok(());
        }
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io(&self.path, e)),
            _ => Ok(()),
        }
    }
}
