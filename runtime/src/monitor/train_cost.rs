//! neon's two default reporters of the training cost: [`TrainCost`] (`TrainCostCallback`: the
//! epoch's mean training cost, accumulated on the device) and [`TrainLogger`]
//! (`TrainLoggerCallback`: one line per epoch, "Epoch N complete. Train cost ...").

use std::borrow::Cow;
use std::io::Write;

use burn::tensor::Tensor;

use super::{EpochStats, MonitorSink, Record};
use crate::callback::{Callback, Context};
use crate::error::{Error, Result, setting_error};
use crate::fetch::{Fetch, FetchKind, Fetched, OutputTensor};

/// The name [`TrainCost`] puts the epoch's mean training cost under, by default.
pub const TRAIN_COST: &str = "train_cost";

/// neon's `TrainCostCallback`, as neon's own `Model.fit` computes the epoch's cost: the mean of
/// the step's `"loss"` over the steps of the epoch, put to the monitors as the scalar
/// `train_cost` at `after_epoch`.
///
/// The sum stays on the device: each step adds its loss, taken off the autodiff graph, to a
/// one-element device tensor (one addition queued on the device: no transfer, no sync), and
/// `after_epoch` reads the sum once. **One device-to-host transfer per epoch**, whatever the
/// epoch's length. The addition is still work at every step (a few allocations of burn's on the
/// CPU backend), which is why it is not among the default callbacks: turn it on in one line,
/// `DefaultCallbacks { train_cost: Some(TrainCost::new()), ..DefaultCallbacks::default() }`.
///
/// Differs from neon's callback, which stores a moving mean of the last 10 steps' costs at every
/// minibatch (a host value per step, which here would be a transfer per step): the epoch's mean is
/// what neon's `TrainLoggerCallback` prints, and a per-step moving average is
/// [`SimpleMovingAverage`](super::SimpleMovingAverage)`::new(["loss"], 10)`. A run resumed in the
/// middle of an epoch averages that epoch's steps since the resume.
///
/// ```
/// use burn_stoker::monitor::TrainCost;
///
/// // The mean of the output "nll" per epoch, put as "train_nll".
/// let cost = TrainCost::new().output("nll").scalar_name("train_nll");
/// # let _ = cost;
/// ```
#[derive(Debug, Clone)]
pub struct TrainCost {
    fetches: [Fetch; 1],
    scalar: Cow<'static, str>,
    /// The sum of this epoch's losses so far, on the device (without autodiff).
    sum: Option<Tensor<1>>,
    /// The steps summed in `sum`.
    steps: u64,
}
crate::kind::kind!(TrainCost);

impl Default for TrainCost {
    fn default() -> Self {
        TrainCost::new()
    }
}

impl TrainCost {
    /// The mean of `"loss"` per epoch, put as [`TRAIN_COST`].
    pub fn new() -> Self {
        TrainCost { fetches: [Fetch::device("loss")], scalar: Cow::Borrowed(TRAIN_COST), sum: None, steps: 0 }
    }

    /// Average this output instead of `"loss"` (a one-element tensor the step puts).
    pub fn output(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.fetches = [Fetch { name: name.into(), kind: FetchKind::Device }];
        self
    }

    /// Put the mean under this name instead of [`TRAIN_COST`].
    pub fn scalar_name(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.scalar = name.into();
        self
    }
}

impl<M> Callback<M> for TrainCost {
    fn takes_after_batch(&self) -> bool {
        false
    }
    fn fetches(&self) -> &[Fetch] {
        &self.fetches
    }

    fn setup(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        if self.fetches[0].name.is_empty() {
            return Err(setting_error("TrainCost", "output", "a non-empty output name", "\"\""));
        }
        if self.scalar.is_empty() {
            return Err(setting_error("TrainCost", "scalar_name", "a non-empty name", "\"\""));
        }
        Ok(())
    }

    fn before_epoch(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        self.sum = None;
        self.steps = 0;
        Ok(())
    }

    #[inline]
    fn after_step(&mut self, _ctx: &mut Context<'_, M>, values: &Fetched<'_>) -> Result<()> {
        let name = &self.fetches[0].name;
        let tensor = values.nth(0, name).device(name)?;
        if tensor.num_elements() != 1 {
            return Err(Error::fetch(format!(
                "TrainCost: `{name}` has shape {:?}, not a single value; average a scalar output",
                tensor.dims()
            )));
        }
        let loss = match tensor {
            OutputTensor::Rank1(loss) => loss.clone().without_autodiff(),
            other => other.flat().without_autodiff(),
        };
        self.sum = Some(match self.sum.take() {
            Some(sum) => sum + loss,
            None => loss,
        });
        self.steps += 1;
        Ok(())
    }

    fn after_epoch(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let Some(sum) = self.sum.take() else { return Ok(()) };
        // The epoch's one transfer.
        let sum: f32 = sum.into_scalar::<f32>();
        let mean = f64::from(sum) / self.steps as f64;
        ctx.monitors().put_scalar(&self.scalar, mean);
        self.steps = 0;
        Ok(())
    }
}

/// neon's `TrainLoggerCallback`: at the end of every `every_k_epochs`-th epoch, one line
/// `Epoch N complete. Train cost C.` (and `Eval cost E.` when [`eval_cost`](Self::eval_cost)
/// names a scalar put during the epoch, neon's `LossCallback` value), on stdout. It reads the
/// epoch's scalars as the writers do, after the epoch's callbacks put them; it does no work at a
/// step.
///
/// Not in the default callbacks: [`ScalarPrinter`](super::ScalarPrinter), which is, already
/// prints `train_cost` (and every other scalar) at each epoch's end, and two printers would say
/// the same thing twice. Turn it on in one line (with [`TrainCost`], which puts the cost it
/// prints), `DefaultCallbacks { train_cost: Some(TrainCost::new()), train_logger:
/// Some(TrainLogger::new()), ..DefaultCallbacks::default() }`.
/// neon's `minibatch_freq` (a line every k minibatches with the step's cost) is not offered: it
/// needs the cost on the host at those steps; `ScalarPrinter::enable_step` prints scalars as they
/// are put.
///
/// ```
/// use burn_stoker::monitor::TrainLogger;
///
/// let logger = TrainLogger::new().every_k_epochs(2).eval_cost("validation_loss");
/// # let _ = logger;
/// ```
#[derive(Debug, Clone)]
pub struct TrainLogger {
    every_k_epochs: u64,
    train_cost: String,
    eval_cost: Option<String>,
}
crate::kind::kind!(TrainLogger);

impl Default for TrainLogger {
    fn default() -> Self {
        TrainLogger::new()
    }
}

impl TrainLogger {
    /// Log every epoch, the scalar [`TRAIN_COST`], no evaluation cost.
    pub fn new() -> Self {
        TrainLogger { every_k_epochs: 1, train_cost: TRAIN_COST.to_string(), eval_cost: None }
    }

    /// Log every k-th epoch (neon's `epoch_freq`); at least 1.
    pub fn every_k_epochs(mut self, k: u64) -> Self {
        self.every_k_epochs = k;
        self
    }

    /// The scalar read as the training cost (default [`TRAIN_COST`]).
    pub fn train_cost(mut self, name: impl Into<String>) -> Self {
        self.train_cost = name.into();
        self
    }

    /// Also log this scalar as the evaluation cost when it was put during the epoch.
    pub fn eval_cost(mut self, name: impl Into<String>) -> Self {
        self.eval_cost = Some(name.into());
        self
    }

    /// The writer this logger runs, writing to `out` (the callback writes to stdout).
    pub fn sink(&self, out: Box<dyn Write + Send>) -> Result<impl MonitorSink + std::fmt::Debug + use<>> {
        if self.every_k_epochs == 0 {
            return Err(setting_error("TrainLogger", "every_k_epochs", "at least 1", 0));
        }
        Ok(TrainLoggerSink { logger: self.clone(), out })
    }
}

impl<M> Callback<M> for TrainLogger {
    fn takes_after_batch(&self) -> bool {
        false
    }
    fn setup(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let sink = self.sink(Box::new(std::io::stdout()))?;
        ctx.monitors().add_sink(sink);
        Ok(())
    }
}

/// The writer behind [`TrainLogger`].
struct TrainLoggerSink {
    logger: TrainLogger,
    out: Box<dyn Write + Send>,
}

impl std::fmt::Debug for TrainLoggerSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrainLoggerSink").field("logger", &self.logger).finish_non_exhaustive()
    }
}

impl MonitorSink for TrainLoggerSink {
    fn name(&self) -> &str {
        "TrainLogger"
    }

    fn write(&mut self, _records: &[Record]) -> std::io::Result<()> {
        Ok(())
    }

    fn end_epoch(&mut self, stats: &EpochStats) -> std::io::Result<()> {
        if !stats.epoch_num.is_multiple_of(self.logger.every_k_epochs) {
            return Ok(());
        }
        let mut line = format!("Epoch {} complete.", stats.epoch_num);
        match stats.scalars.get(&self.logger.train_cost) {
            Some(cost) => line += &format!(" Train cost {}.", super::printer::format_scalar(*cost)),
            None => line += &format!(" Train cost n/a (no scalar `{}`).", self.logger.train_cost),
        }
        if let Some(eval) = &self.logger.eval_cost
            && let Some(cost) = stats.scalars.get(eval)
        {
            line += &format!(" Eval cost {}.", super::printer::format_scalar(*cost));
        }
        writeln!(self.out, "{line}")?;
        self.out.flush()
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}
