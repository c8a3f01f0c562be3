//! Callbacks that receive step outputs along with the step: [`ProcessTensors`] (a closure over
//! them) and [`TensorPrinter`] (prints them).

use std::borrow::Cow;
use std::io::Write;
use std::marker::PhantomData;
use std::thread::JoinHandle;

use super::tensors::{TensorFetches, TensorValues, tensor_period_builders};
use crate::callback::{Callback, CallbackReturn, Context, Counters};
use crate::error::{Error, Result};
use crate::fetch::{Fetch, Fetched};
use crate::state::{BoundedSender, bounded};

/// Fetches some step outputs along with the step and calls a function on their values
/// (tensorpack's `ProcessTensors(names, fn)`): at every step by default, every `k` steps with
/// [`every_k_steps`](Self::every_k_steps), at the last step of every `k` epochs with
/// [`every_k_epochs`](Self::every_k_epochs), or at the steps a
/// [`PeriodicCallback`](crate::trigger::PeriodicCallback) or
/// [`EnableCallbackIf`](crate::trigger::EnableCallbackIf) around it lets through. The values leave the device
/// only at those steps, in the one transfer the trainer makes for every callback.
///
/// The function receives the values ([`TensorValues`], in the order of the names) and the
/// context (to put monitors, read the counters, stop training...); it returns `()`,
/// `burn_stoker::Result<()>` or a [`Flow`](crate::callback::Flow). It runs on the training thread, in
/// `after_step`: slow work belongs on a thread of its own.
///
/// ```
/// use burn_stoker::debug::ProcessTensors;
/// # use burn_stoker::callback::Context;
/// # fn main() -> burn_stoker::Result<()> {
/// // Print the loss and the accuracy, and their sum, every 10 steps.
/// let callback = ProcessTensors::new(["loss", "accuracy"], |values, ctx: &mut Context<'_, ()>| {
///     let (loss, accuracy) = (values.get(0), values.get(1));
///     if let (Some(l), Some(a)) = (loss.scalar(), accuracy.scalar()) {
///         println!("step {}: {l} {a} {}", ctx.global_step(), l + a);
///     }
/// })
/// .every_k_steps(10);
/// # let _ = callback;
/// # Ok(())
/// # }
/// ```
pub struct ProcessTensors<M, F> {
    tensors: TensorFetches,
    function: F,
    model: PhantomData<fn(&M)>,
}
crate::kind::kind!(ProcessTensors<M, F>);

impl<M, F> std::fmt::Debug for ProcessTensors<M, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessTensors").field("tensors", &self.tensors).finish()
    }
}

impl<M, F, R> ProcessTensors<M, F>
where
    F: FnMut(TensorValues<'_>, &mut Context<'_, M>) -> R,
    R: CallbackReturn,
{
    /// Call `function` with the values of the outputs `names` at every step.
    pub fn new<N: Into<Cow<'static, str>>>(names: impl IntoIterator<Item = N>, function: F) -> Self {
        ProcessTensors {
            tensors: TensorFetches::every_step("ProcessTensors", names),
            function,
            model: PhantomData,
        }
    }
}

impl<M, F> ProcessTensors<M, F> {
    tensor_period_builders!("Run");
}

impl<M, F, R> Callback<M> for ProcessTensors<M, F>
where
    F: FnMut(TensorValues<'_>, &mut Context<'_, M>) -> R,
    R: CallbackReturn,
{
    fn fetches(&self) -> &[Fetch] {
        self.tensors.fetches()
    }
    fn wants_fetch(&self, counters: &Counters) -> bool {
        self.tensors.wants(counters)
    }
    fn setup(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        self.tensors.check()
    }
    fn after_step(&mut self, ctx: &mut Context<'_, M>, values: &Fetched<'_>) -> Result<()> {
        let Some(values) = self.tensors.due_values(ctx.counters(), values)? else {
            return Ok(());
        };
        (self.function)(values, ctx).apply(ctx)
    }
}

/// How many steps' texts may wait for the [`TensorPrinter`]'s thread.
const PRINTER_QUEUE_CAPACITY: usize = 256;

/// Prints the values of some step outputs to stderr at every step (tensorpack's
/// `TensorPrinter(names)`), every `k` steps with [`every_k_steps`](Self::every_k_steps), or at
/// the last step of every `k` epochs with [`every_k_epochs`](Self::every_k_epochs); the values
/// are fetched only at those steps.
///
/// One line per tensor, `[step 12] name: value`, in [`HostTensor`](super::HostTensor)'s compact
/// numpy-like form (a tensor of one value prints as the number; more than 1000 values are
/// summarized); a tensor of several rows continues on the next lines. The text is formatted on
/// the training thread and written by a thread of its own, so that a slow terminal does not slow
/// training; up to 256 texts wait for it, and when it is that far behind training waits for it
/// (one warning on stderr), so that memory stays bounded and nothing is lost. Everything is
/// written when `after_train` returns.
///
/// ```
/// use burn_stoker::debug::TensorPrinter;
/// let printer = TensorPrinter::new(["loss", "logits"]).every_k_steps(100);
/// # let _ = printer;
/// ```
pub struct TensorPrinter {
    tensors: TensorFetches,
    output: Option<Box<dyn Write + Send>>,
    thread: Option<(BoundedSender<String>, JoinHandle<std::io::Result<()>>)>,
    line: String,
}
crate::kind::kind!(TensorPrinter);

impl std::fmt::Debug for TensorPrinter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TensorPrinter").field("tensors", &self.tensors).finish()
    }
}

impl TensorPrinter {
    /// Print the outputs `names` at every step.
    pub fn new<N: Into<Cow<'static, str>>>(names: impl IntoIterator<Item = N>) -> Self {
        TensorPrinter {
            tensors: TensorFetches::every_step("TensorPrinter", names),
            output: None,
            thread: None,
            line: String::new(),
        }
    }
    tensor_period_builders!("Print");
    /// Write to `output` instead of stderr (a file, a buffer in a test).
    pub fn with_output(mut self, output: impl Write + Send + 'static) -> Self {
        self.output = Some(Box::new(output));
        self
    }

    fn finish(&mut self) -> Result<()> {
        let Some((sender, handle)) = self.thread.take() else { return Ok(()) };
        drop(sender);
        match handle.join() {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(Error::context("TensorPrinter could not write", e)),
            Err(_) => Err(Error::msg("TensorPrinter's writer thread panicked")),
        }
    }
}

impl<M> Callback<M> for TensorPrinter {
    fn fetches(&self) -> &[Fetch] {
        self.tensors.fetches()
    }
    fn wants_fetch(&self, counters: &Counters) -> bool {
        self.tensors.wants(counters)
    }
    fn setup(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        self.tensors.check()
    }
    fn before_train(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        let mut output = self.output.take().unwrap_or_else(|| Box::new(std::io::stderr()));
        let (sender, receiver) = bounded::<String>("TensorPrinter", PRINTER_QUEUE_CAPACITY);
        let handle = std::thread::Builder::new()
            .name("stoker-TensorPrinter".into())
            .spawn(move || {
                let mut result = Ok(());
                for text in receiver {
                    // Keep draining after an error so that the training thread never blocks.
                    if result.is_ok() {
                        result = output.write_all(text.as_bytes()).and_then(|()| output.flush());
                    }
                }
                result
            })
            .map_err(|e| Error::context("TensorPrinter could not start its thread", e))?;
        self.thread = Some((sender, handle));
        Ok(())
    }
    fn after_step(&mut self, ctx: &mut Context<'_, M>, values: &Fetched<'_>) -> Result<()> {
        let Some(values) = self.tensors.due_values(ctx.counters(), values)? else {
            return Ok(());
        };
        let step = ctx.global_step();
        self.line.clear();
        for tensor in values.iter() {
            use std::fmt::Write as _;
            let _ = writeln!(self.line, "[step {step}] {}: {tensor}", tensor.name);
        }
        if let Some((sender, _)) = &self.thread {
            // A writer stopped by an error reports it in after_train.
            let _ = sender.send_waiting(std::mem::take(&mut self.line));
        }
        Ok(())
    }
    fn after_train(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        self.finish()
    }
}
