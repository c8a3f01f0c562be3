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
//! is killed and what is still queued is dropped, each with a warning. On unix each command runs
//! in a process group of its own: the kill reaches every process it started (a pipeline, a
//! command in the background), and a Ctrl-C on the terminal goes to the trainer, not to it.

mod runner;
mod template;

use std::borrow::Cow;
use std::time::Duration;

pub use runner::COMMAND_QUEUE_CAPACITY;
use runner::{CommandRunner, DEFAULT_WAIT_AT_END};
use template::Template;

use super::{MonitorSink, Record, Value};
use crate::callback::{Callback, Context};
use crate::error::Result;

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
        crate::kind::detailed::<Self>(self.template.names.join(","))
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
        crate::kind::detailed::<Self>(self.template.names.join(","))
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
mod tests;
