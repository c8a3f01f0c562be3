//! The training loop: burn's step wrapped in tensorpack's callback lifecycle, with checkpoints,
//! resume and graceful interrupts.

mod interrupt;
mod resume;

use std::borrow::Cow;
use std::cell::RefCell;
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::Arc;

use burn::data::dataloader::{DataLoader, DataLoaderIterator};
use burn::module::Module;
use burn::optim::{GradientsParams, ModuleOptimizer};
use burn::tensor::Tensor;

use crate::callback::{
    Callbacks, Context, Control, Counters, Event, StepGradients, StepLoss, TrainState, resolve_order,
};
use crate::error::{Error, Result};
use crate::fetch::{FetchPlan, OutputTensor, Outputs};
use crate::monitor::{JsonWriter, Monitors, ScalarPrinter, TensorBoardWriter};
use crate::param::HyperParams;
use crate::saver::{Checkpoint, KeepPolicy};
use crate::track::ProgressBar;
use interrupt::{SignalGuard, signal_name};
use resume::{Boundary, DataPosition, Restored};

/// Training data: anything that yields batches, epoch after epoch.
pub trait TrainData {
    /// What one step consumes.
    type Batch;
    /// One pass over the data.
    type Iter<'a>: BatchIter<Self::Batch>
    where
        Self: 'a;
    /// Start a pass.
    fn pass(&self) -> Self::Iter<'_>;
}

/// One pass over [`TrainData`].
pub trait BatchIter<B> {
    /// The next batch, `None` at the end of the pass.
    fn next_batch(&mut self) -> Option<Result<B>>;
    /// The number of batches in a pass, when known (asked after the first batch).
    fn batches_hint(&self) -> Option<u64>;
}

/// A burn data loader is training data; its number of batches per pass is worked out from its
/// progress after the first batch (all batches but the last have the same size).
impl<B> TrainData for Arc<dyn DataLoader<B>> {
    type Batch = B;
    type Iter<'a>
        = Box<dyn DataLoaderIterator<B> + 'a>
    where
        Self: 'a;
    fn pass(&self) -> Self::Iter<'_> {
        DataLoader::iter(self.as_ref())
    }
}

impl<B> BatchIter<B> for Box<dyn DataLoaderIterator<B> + '_> {
    fn next_batch(&mut self) -> Option<Result<B>> {
        self.next().map(|r| r.map_err(|e| Error::Data(format!("the data loader failed: {e:?}"))))
    }
    fn batches_hint(&self) -> Option<u64> {
        let progress = self.progress();
        (progress.items_processed > 0).then(|| progress.items_total.div_ceil(progress.items_processed) as u64)
    }
}

/// Batches held in memory are training data (each pass clones them; burn tensors clone cheaply).
impl<B: Clone> TrainData for Vec<B> {
    type Batch = B;
    type Iter<'a>
        = VecBatches<'a, B>
    where
        Self: 'a;
    fn pass(&self) -> Self::Iter<'_> {
        VecBatches { batches: self, next: 0 }
    }
}

/// A pass over a `Vec` of batches.
#[derive(Debug)]
pub struct VecBatches<'a, B> {
    batches: &'a [B],
    next: usize,
}

impl<B: Clone> BatchIter<B> for VecBatches<'_, B> {
    fn next_batch(&mut self) -> Option<Result<B>> {
        let batch = self.batches.get(self.next)?.clone();
        self.next += 1;
        Some(Ok(batch))
    }
    fn batches_hint(&self) -> Option<u64> {
        Some(self.batches.len() as u64)
    }
}

/// What the training step sees besides the model and the batch: where to put named outputs, the
/// hyper-parameters and the counters.
pub struct Step<'a> {
    outputs: &'a mut Outputs,
    hyper: &'a HyperParams,
    counters: &'a Counters,
}

impl Step<'_> {
    /// Put a named output (`"accuracy"`, logits...) that callbacks may fetch. The loss is always
    /// there as `"loss"`.
    #[inline]
    pub fn output(&mut self, name: &'static str, tensor: impl Into<OutputTensor>) {
        self.outputs.put(name, tensor);
    }
    /// The outputs put so far, to hand to code shared with inference.
    pub fn outputs(&mut self) -> &mut Outputs {
        self.outputs
    }
    /// A hyper-parameter's current value.
    pub fn hyper(&self, name: &str) -> Option<f64> {
        self.hyper.get(name)
    }
    /// The counters (`global_step` counts the steps before this one).
    pub fn counters(&self) -> &Counters {
        self.counters
    }
}

/// The callbacks a trainer starts with, like tensorpack's and neon's: a progress bar, TensorBoard
/// event files, `stats.json`, and a scalar printer. Each can be replaced or turned off.
#[derive(Debug, crate::Callbacks)]
pub struct DefaultCallbacks {
    /// The progress bar.
    pub progress: Option<ProgressBar>,
    /// The TensorBoard writer.
    pub tensorboard: Option<TensorBoardWriter>,
    /// The `stats.json` writer.
    pub json: Option<JsonWriter>,
    /// The scalar printer.
    pub printer: Option<ScalarPrinter>,
}

impl Default for DefaultCallbacks {
    fn default() -> Self {
        DefaultCallbacks {
            progress: Some(ProgressBar::new()),
            tensorboard: Some(TensorBoardWriter),
            json: Some(JsonWriter),
            printer: Some(ScalarPrinter::new()),
        }
    }
}

impl DefaultCallbacks {
    /// No default callback at all.
    pub fn none() -> Self {
        DefaultCallbacks { progress: None, tensorboard: None, json: None, printer: None }
    }
}

/// Why a run that returned `Ok` ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Every epoch up to `max_epoch` ran.
    Finished,
    /// A callback asked to stop (tensorpack's `StopTraining`), for this reason.
    Stopped(String),
    /// SIGINT or SIGTERM stopped training at a step boundary; a checkpoint was written there
    /// (resume from it with [`Trainer::auto_resume`]).
    Interrupted {
        /// `"SIGINT"` or `"SIGTERM"`.
        signal: String,
        /// The checkpoint written when the signal was handled.
        checkpoint: Option<PathBuf>,
    },
}

/// How a run ended, and the trained model.
#[derive(Debug)]
pub struct TrainReport<M> {
    /// The model after the last step.
    pub model: M,
    /// Why the run ended.
    pub outcome: Outcome,
    /// The counters at the end.
    pub counters: Counters,
    /// Device-to-host transfers made for fetches during the run.
    pub fetch_transfers: u64,
}

/// The trainer: a model, a burn optimizer, training data, callbacks, and how long to train.
///
/// ```no_run
/// # use burn_stoker::prelude::*;
/// # use burn::nn::{Linear, LinearConfig};
/// # use burn::optim::AdamConfig;
/// # use burn::tensor::{Device, Tensor};
/// let device = Device::default().autodiff();
/// let model: Linear = LinearConfig::new(4, 1).init(&device);
/// let batches = vec![(Tensor::<2>::ones([8, 4], &device), Tensor::<2>::zeros([8, 1], &device))];
/// let report = Trainer::new(model, AdamConfig::new().init(), batches)
///     .max_epoch(3)
///     .auto_resume(true)
///     .log_dir("train_log/linear")
///     .train(|model: &Linear, (x, y): (Tensor<2>, Tensor<2>), _step: &mut Step<'_>| {
///         (model.forward(x) - y).powi_scalar(2).mean()
///     })?;
/// # Ok::<(), burn_stoker::Error>(())
/// ```
pub struct Trainer<M, D, C = (), K = ()> {
    model: M,
    optimizer: ModuleOptimizer,
    data: D,
    callbacks: C,
    defaults: DefaultCallbacks,
    max_epoch: u64,
    starting_epoch: u64,
    steps_per_epoch: Option<u64>,
    log_dir: PathBuf,
    hyper: HyperParams,
    resume: Resume,
    handle_signals: bool,
    marker: PhantomData<fn() -> K>,
}

/// Where a run resumes from.
#[derive(Debug, Clone)]
enum Resume {
    Fresh,
    From(PathBuf),
    Auto,
}

impl<M: Module, D: TrainData> Trainer<M, D, (), ()> {
    /// A trainer of `model` with `optimizer` (burn's, e.g. `AdamConfig::new().init()`) on `data`,
    /// with the default callbacks, one epoch, learning rate 1e-3 and log directory `train_log`.
    pub fn new(model: M, optimizer: impl Into<ModuleOptimizer>, data: D) -> Self {
        Trainer {
            model,
            optimizer: optimizer.into(),
            data,
            callbacks: (),
            defaults: DefaultCallbacks::default(),
            max_epoch: 1,
            starting_epoch: 1,
            steps_per_epoch: None,
            log_dir: PathBuf::from("train_log"),
            hyper: HyperParams::new(1e-3),
            resume: Resume::Fresh,
            handle_signals: true,
            marker: PhantomData,
        }
    }
}

impl<M: Module, D: TrainData, K, C: Callbacks<M, K>> Trainer<M, D, C, K> {
    /// The callbacks: one callback, a tuple, a `Vec`, or a `#[derive(Callbacks)]` struct.
    pub fn callbacks<K2, C2: Callbacks<M, K2>>(self, callbacks: C2) -> Trainer<M, D, C2, K2> {
        Trainer {
            model: self.model,
            optimizer: self.optimizer,
            data: self.data,
            callbacks,
            defaults: self.defaults,
            max_epoch: self.max_epoch,
            starting_epoch: self.starting_epoch,
            steps_per_epoch: self.steps_per_epoch,
            log_dir: self.log_dir,
            hyper: self.hyper,
            resume: self.resume,
            handle_signals: self.handle_signals,
            marker: PhantomData,
        }
    }
    /// Replace the default callbacks (`DefaultCallbacks::none()` turns them all off).
    pub fn default_callbacks(mut self, defaults: DefaultCallbacks) -> Self {
        self.defaults = defaults;
        self
    }
    /// Train up to and including epoch `max_epoch`.
    pub fn max_epoch(mut self, max_epoch: u64) -> Self {
        self.max_epoch = max_epoch;
        self
    }
    /// The first epoch to train (1 unless resuming).
    pub fn starting_epoch(mut self, starting_epoch: u64) -> Self {
        self.starting_epoch = starting_epoch;
        self
    }
    /// Steps per epoch; by default, one pass over the data. When the data runs out within an
    /// epoch, a new pass starts.
    pub fn steps_per_epoch(mut self, steps: u64) -> Self {
        self.steps_per_epoch = Some(steps);
        self
    }
    /// Where checkpoints, `stats.json` and event files go.
    pub fn log_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.log_dir = dir.into();
        self
    }
    /// The initial learning rate.
    pub fn learning_rate(mut self, value: f64) -> Self {
        self.hyper.set_learning_rate(value);
        self
    }
    /// Register a named hyper-parameter that callbacks can set and the step can read.
    pub fn hyper_param(mut self, name: impl Into<Cow<'static, str>>, value: f64) -> Self {
        self.hyper.register(name, value);
        self
    }
    /// Register a named hyper-parameter that lives in an object of yours (tensorpack's
    /// `ObjAttrParam`), read through `get` and written through `set`: callbacks set it by name,
    /// the step reads it, checkpoints save and restore it. See [`HyperParams::register_fn`].
    ///
    /// # Panics
    /// If `name` is `"learning_rate"` (built in).
    pub fn hyper_param_fn(
        mut self,
        name: impl Into<Cow<'static, str>>,
        get: impl Fn() -> f64 + Send + Sync + 'static,
        set: impl Fn(f64) + Send + Sync + 'static,
    ) -> Self {
        self.hyper.register_fn(name, get, set);
        self
    }
    /// Register a named hyper-parameter held in a [`SharedParam`](crate::SharedParam) that your
    /// step or data pipeline reads. See [`HyperParams::register_shared`].
    ///
    /// # Panics
    /// If `name` is `"learning_rate"` (built in).
    pub fn hyper_param_shared(
        mut self,
        name: impl Into<Cow<'static, str>>,
        param: &crate::SharedParam,
    ) -> Self {
        self.hyper.register_shared(name, param);
        self
    }
    /// Resume from the latest complete checkpoint under `path` — a log directory, its
    /// `checkpoints` folder, or one checkpoint's folder. Restored: the model's weights, the
    /// optimizer's state, the counters and the position in the data (the same data, seeded the
    /// same way, continues in the same order), every hyper-parameter, every stateful callback's
    /// state (after its `setup`, before `before_train`) and the monitors' history; `stats.json` is
    /// rewritten from the checkpoint and continued. A checkpoint that fails verification is
    /// reported and the one before it is used; no usable checkpoint is an error.
    ///
    /// Random operations inside the step (dropout) draw from the backend's generator, which burn
    /// does not expose: seed it to repeat them.
    pub fn resume_from(mut self, path: impl Into<PathBuf>) -> Self {
        self.resume = Resume::From(path.into());
        self
    }
    /// Resume from the log directory's latest complete checkpoint when there is one, as
    /// [`resume_from`](Self::resume_from) does; start afresh when there is none.
    pub fn auto_resume(mut self, enable: bool) -> Self {
        self.resume = if enable { Resume::Auto } else { Resume::Fresh };
        self
    }
    /// Whether SIGINT and SIGTERM stop training gracefully (on by default): at the next step
    /// boundary a checkpoint is written, `after_train` runs everywhere, the monitors are flushed
    /// and the run returns [`Outcome::Interrupted`]; a second signal exits at once. While no
    /// trainer runs, the signals act as they did before.
    pub fn handle_signals(mut self, enable: bool) -> Self {
        self.handle_signals = enable;
        self
    }

    /// Train: run the callbacks' lifecycle around `step`, which computes the loss of one batch
    /// (and may put named outputs). Returns the trained model, or the first error; `after_train`
    /// runs for every callback whose setup ran, and the monitors are flushed, in every case.
    pub fn train<F>(self, step: F) -> Result<TrainReport<M>>
    where
        F: FnMut(&M, D::Batch, &mut Step<'_>) -> Tensor<1>,
    {
        let Trainer {
            mut model,
            mut optimizer,
            data,
            callbacks,
            defaults,
            max_epoch,
            starting_epoch,
            steps_per_epoch,
            log_dir,
            mut hyper,
            resume,
            handle_signals,
            marker: _,
        } = self;
        let checkpoint = match &resume {
            Resume::Fresh => None,
            Resume::Auto => Checkpoint::latest(&log_dir)?,
            Resume::From(path) => Some(Checkpoint::latest(path)?.ok_or_else(|| {
                Error::Checkpoint(format!("no checkpoint to resume from in {}", path.display()))
            })?),
        };
        let mut counters = Counters {
            epoch_num: starting_epoch - 1,
            global_step: 0,
            local_step: 0,
            starting_epoch,
            max_epoch,
            steps_per_epoch: steps_per_epoch.unwrap_or(0),
        };
        let mut restored = None;
        if let Some(checkpoint) = checkpoint {
            let r = Restored::read(checkpoint, &mut model, &mut optimizer, &mut hyper, &mut counters)?;
            restored = Some(r);
        } else if starting_epoch == 0 || starting_epoch > max_epoch.max(1) {
            return Err(Error::msg(format!(
                "starting_epoch must be between 1 and max_epoch ({max_epoch}), not {starting_epoch}"
            )));
        }
        let signals = if handle_signals {
            Some(
                SignalGuard::install()
                    .map_err(|e| Error::msg(format!("handling SIGINT and SIGTERM: {e}")))?,
            )
        } else {
            None
        };
        let mut run = Run::new(
            (defaults, callbacks),
            TrainState {
                counters,
                model: Some(model),
                optimizer,
                hyper,
                monitors: Monitors::new(),
                control: Control::default(),
                log_dir,
                checkpoint_policy: KeepPolicy::default(),
            },
        )?;
        run.signals = signals;
        if let Some(restored) = restored {
            run.restore(restored)?;
        }
        let outcome = {
            let mut step = step;
            catch_unwind(AssertUnwindSafe(|| run.main_loop(&data, &mut step)))
        };
        let result = match outcome {
            Ok(result) => result,
            Err(payload) => Err(Error::Panic { location: run.location(), message: panic_message(&*payload) }),
        };
        let after = run.after_train();
        let closed = run.state.monitors.close();
        let result = result.and(after).and(closed);
        let model = run.state.model.take();
        let outcome = match (run.interrupted.take(), run.state.control.stop.take()) {
            (Some(signal), _) => Outcome::Interrupted { signal, checkpoint: run.last_checkpoint.clone() },
            (None, Some(reason)) => Outcome::Stopped(reason),
            (None, None) => Outcome::Finished,
        };
        match (result, model) {
            (Ok(()), Some(model)) => Ok(TrainReport {
                model,
                outcome,
                counters: run.state.counters,
                fetch_transfers: run.plan.transfers(),
            }),
            (Ok(()), None) => Err(Error::msg("the model was lost")),
            (Err(error), _) => Err(error),
        }
    }
}

/// Where the trainer is, to name the culprit of a panic.
#[derive(Debug, Clone, Copy)]
enum Phase {
    Trainer,
    Callback(usize, &'static str),
    /// Delivering an event to every callback in one pass; the run's `cursor` names the callback.
    Delivering(&'static str),
    Step,
    Data,
}

struct Run<M, C, K> {
    callbacks: C,
    state: TrainState<M>,
    names: Vec<Cow<'static, str>>,
    order: Vec<usize>,
    /// Callbacks that declare fetches, with their slots.
    fetchers: Vec<(usize, u64)>,
    /// Callbacks that take the loss before backward, and the gradients after it, in run order.
    loss_hooks: Vec<usize>,
    grad_hooks: Vec<usize>,
    plan: FetchPlan,
    outputs: Outputs,
    phase: Phase,
    /// Whether the resolved order is the registration order (events then go in one pass).
    in_order: bool,
    /// The flat index of the callback running during a one-pass delivery.
    cursor: usize,
    /// How many callbacks (in `order`) had their setup attempted.
    set_up: usize,
    /// Passes started over the training data, batches taken from the current one.
    data_position: DataPosition,
    /// What a resumed run still has to restore or replay once the callbacks are set up.
    resumed: Option<Restored>,
    /// The local step the first epoch starts at (a run resumed in the middle of an epoch).
    first_local_step: u64,
    signals: Option<SignalGuard>,
    /// The signal that stopped training.
    interrupted: Option<String>,
    /// The last complete checkpoint written or resumed from.
    last_checkpoint: Option<PathBuf>,
    marker: PhantomData<fn() -> K>,
}

impl<M: Module, K, C: Callbacks<M, K>> Run<M, C, K> {
    fn new(callbacks: C, state: TrainState<M>) -> Result<Self> {
        let count = callbacks.len();
        let mut names = Vec::with_capacity(count);
        let mut orders = Vec::with_capacity(count);
        let mut plan = FetchPlan::default();
        let mut fetchers = Vec::new();
        let mut hooks = Vec::with_capacity(count);
        for i in 0..count {
            let info = callbacks.info(i);
            hooks.push(info.step_hooks);
            let mut mask = 0;
            for fetch in info.fetches {
                mask |= plan.declare(fetch, &info.name)?;
            }
            if mask != 0 {
                fetchers.push((i, mask));
            }
            names.push(info.name);
            orders.push(info.order);
        }
        for (i, name) in names.iter().enumerate() {
            if names[..i].contains(name) {
                return Err(Error::Order(format!(
                    "two callbacks are named `{name}`; give one another name so that order constraints and errors can tell them apart"
                )));
            }
        }
        let order = resolve_order(&names, &orders)?;
        let in_order = order.iter().enumerate().all(|(position, &i)| position == i);
        let loss_hooks = order.iter().copied().filter(|&i| hooks[i].loss).collect();
        let grad_hooks = order.iter().copied().filter(|&i| hooks[i].gradients).collect();
        Ok(Run {
            loss_hooks,
            grad_hooks,
            callbacks,
            state,
            names,
            order,
            fetchers,
            plan,
            outputs: Outputs::new(),
            phase: Phase::Trainer,
            in_order,
            cursor: 0,
            set_up: 0,
            data_position: DataPosition::default(),
            resumed: None,
            first_local_step: 0,
            signals: None,
            interrupted: None,
            last_checkpoint: None,
            marker: PhantomData,
        })
    }

    fn location(&self) -> String {
        match self.phase {
            Phase::Trainer => "the trainer".into(),
            Phase::Callback(i, event) => format!("callback `{}` in {event}", self.names[i]),
            Phase::Delivering(event) => format!("callback `{}` in {event}", self.names[self.cursor]),
            Phase::Step => "the training step".into(),
            Phase::Data => "the data loader".into(),
        }
    }

    /// Deliver `event` to every callback in order.
    #[inline]
    fn deliver(&mut self, event: Event<'_>) -> Result<()> {
        deliver_in_order(
            &mut self.callbacks,
            &self.order,
            self.in_order,
            &mut self.state,
            (&mut self.phase, &mut self.cursor),
            &self.names,
            event,
        )
    }

    fn main_loop<D, F>(&mut self, data: &D, step: &mut F) -> Result<()>
    where
        D: TrainData,
        F: FnMut(&M, D::Batch, &mut Step<'_>) -> Tensor<1>,
    {
        std::fs::create_dir_all(&self.state.log_dir).map_err(|e| Error::io(&self.state.log_dir, e))?;
        // Setup, remembering how far it got so that after_train reaches exactly those callbacks.
        for position in 0..self.order.len() {
            self.set_up = position + 1;
            let i = self.order[position];
            self.phase = Phase::Callback(i, "setup");
            let mut ctx = Context { state: &mut self.state };
            self.callbacks
                .dispatch(i, Event::Setup, &mut ctx)
                .map_err(|e| wrap(&self.names[i], "setup", e))?;
        }
        self.phase = Phase::Trainer;
        self.load_callback_states()?;
        self.state.monitors.publish();

        // The first pass starts now (a resumed run replays the passes and batches it had taken):
        // its first batch tells the number of steps per epoch.
        self.phase = Phase::Data;
        let target = self.resumed.take().map(|r| r.data_position);
        let mut pass = data.pass();
        self.data_position = DataPosition { passes: 1, batches: 0 };
        if let Some(target) = target {
            for _ in 1..target.passes {
                pass = data.pass();
                self.data_position.passes += 1;
            }
            while self.data_position.batches < target.batches {
                match pass.next_batch() {
                    Some(batch) => drop(batch?),
                    None => break,
                }
                self.data_position.batches += 1;
            }
        }
        let mut first = pass.next_batch().transpose()?;
        if first.is_none() && self.data_position.batches > 0 {
            pass = data.pass();
            self.data_position = DataPosition { passes: self.data_position.passes + 1, batches: 0 };
            first = pass.next_batch().transpose()?;
        }
        if first.is_none() {
            return Err(Error::Data("the training data produced no batch".into()));
        }
        self.data_position.batches += 1;
        if self.state.counters.steps_per_epoch == 0 {
            self.state.counters.steps_per_epoch = pass.batches_hint().unwrap_or(0);
        }
        if self.state.counters.steps_per_epoch == 0 {
            return Err(Error::Data(
                "the number of steps per epoch is unknown: set it with Trainer::steps_per_epoch".into(),
            ));
        }
        self.phase = Phase::Trainer;

        self.deliver(Event::BeforeTrain)?;
        self.boundary(Boundary::BeforeTrain)?;
        let mut names_checked = false;
        let max_epoch = self.state.counters.max_epoch;
        let mut epoch = self.state.counters.starting_epoch;
        let mut local_step = self.first_local_step;
        while epoch <= max_epoch && self.state.control.stop.is_none() {
            let counters = &mut self.state.counters;
            counters.epoch_num = epoch;
            counters.local_step = std::mem::take(&mut local_step);
            self.state.monitors.epoch_num = epoch;
            self.deliver(Event::BeforeEpoch)?;
            let steps = self.state.counters.steps_per_epoch;
            while self.state.counters.local_step < steps
                && self.state.control.stop.is_none()
                && !self.state.control.skip_epoch
            {
                self.phase = Phase::Data;
                let batch = match first.take() {
                    Some(batch) => batch,
                    None => {
                        let next = match pass.next_batch() {
                            Some(batch) => batch?,
                            None => {
                                pass = data.pass();
                                self.data_position =
                                    DataPosition { passes: self.data_position.passes + 1, batches: 0 };
                                pass.next_batch().ok_or_else(|| {
                                    Error::Data("the training data produced no batch in a new pass".into())
                                })??
                            }
                        };
                        self.data_position.batches += 1;
                        next
                    }
                };
                self.phase = Phase::Trainer;
                let mut mask = 0;
                for &(i, slots) in &self.fetchers {
                    if self.callbacks.wants_fetch(i, &self.state.counters) {
                        mask |= slots;
                    }
                }
                self.deliver(Event::BeforeStep)?;
                self.run_step(batch, step)?;
                if !names_checked && !self.fetchers.is_empty() {
                    let owners: Vec<(String, u64)> =
                        self.fetchers.iter().map(|&(i, m)| (self.names[i].to_string(), m)).collect();
                    self.plan.check_names(&self.outputs, &owners, "the training step")?;
                    names_checked = true;
                }
                self.plan.fill(&self.outputs, mask)?;
                let values = if mask == 0 { crate::fetch::Fetched::none() } else { self.plan.view() };
                deliver_in_order(
                    &mut self.callbacks,
                    &self.order,
                    self.in_order,
                    &mut self.state,
                    (&mut self.phase, &mut self.cursor),
                    &self.names,
                    Event::AfterStep(values),
                )?;
                self.deliver(Event::TriggerStep)?;
                self.boundary(Boundary::Step)?;
            }
            self.state.control.skip_epoch = false;
            if self.state.control.stop.is_some() {
                break;
            }
            self.deliver(Event::AfterEpoch)?;
            self.deliver(Event::TriggerEpoch)?;
            self.state.monitors.end_epoch();
            self.boundary(Boundary::EpochEnd)?;
            epoch += 1;
        }
        Ok(())
    }

    /// Between steps: notice a signal, and write the checkpoint some callback asked for. Costs a
    /// relaxed atomic load and two tests when there is nothing to do.
    #[inline]
    fn boundary(&mut self, at: Boundary) -> Result<()> {
        if let Some(signal) = self.signals.as_ref().and_then(SignalGuard::received)
            && self.interrupted.is_none()
        {
            self.on_signal(signal);
        }
        if self.state.control.checkpoint.is_some() || !self.state.control.copies.is_empty() {
            self.write_checkpoint(at)?;
        }
        Ok(())
    }

    #[cold]
    fn on_signal(&mut self, signal: i32) {
        let name = signal_name(signal);
        eprintln!(
            "stoker: {name} received: stopping at this step boundary after writing a checkpoint; {name} again exits at once"
        );
        let policy = self.state.checkpoint_policy;
        self.state.control.checkpoint.get_or_insert(policy);
        if self.state.control.stop.is_none() {
            self.state.control.stop = Some(format!("interrupted by {name}"));
        }
        self.interrupted = Some(name);
    }

    /// One step: the user's forward and loss, backward, the optimizer; with the events inside the
    /// step for the callbacks that asked for them.
    #[inline]
    fn run_step<B, F>(&mut self, batch: B, step: &mut F) -> Result<()>
    where
        F: FnMut(&M, B, &mut Step<'_>) -> Tensor<1>,
    {
        self.phase = Phase::Step;
        self.outputs.clear();
        let state = &mut self.state;
        let mut loss = step(
            state.model.as_ref().expect("the model is present between steps"),
            batch,
            &mut Step { outputs: &mut self.outputs, hyper: &state.hyper, counters: &state.counters },
        );
        if !self.loss_hooks.is_empty() {
            loss = self.loss_hooks_run(loss)?;
        }
        let state = &mut self.state;
        let model = state.model.as_ref().expect("the model is present between steps");
        let mut grads = Some(GradientsParams::from_grads(loss.backward(), model));
        self.outputs.put("loss", loss);
        if !self.grad_hooks.is_empty() {
            grads = self.grad_hooks_run(grads)?;
        }
        let state = &mut self.state;
        if let Some(grads) = grads {
            let model = state.model.take().expect("the model is present between steps");
            state.model = Some(state.optimizer.step(state.hyper.learning_rate(), model, grads));
        }
        state.counters.global_step += 1;
        state.counters.local_step += 1;
        state.monitors.global_step = state.counters.global_step;
        self.phase = Phase::Trainer;
        Ok(())
    }

    /// `before_backward` for the callbacks that take the loss.
    #[cold]
    fn loss_hooks_run(&mut self, loss: Tensor<1>) -> Result<Tensor<1>> {
        let slot = StepLoss { loss: RefCell::new(Some(loss)), outputs: &self.outputs };
        for &i in &self.loss_hooks {
            self.phase = Phase::Callback(i, "before_backward");
            let mut ctx = Context { state: &mut self.state };
            self.callbacks
                .dispatch(i, Event::BeforeBackward(&slot), &mut ctx)
                .map_err(|e| wrap(&self.names[i], "before_backward", e))?;
        }
        self.phase = Phase::Step;
        slot.loss.into_inner().ok_or_else(|| Error::msg("a before_backward callback removed the loss"))
    }

    /// `after_backward` for the callbacks that take the gradients.
    #[cold]
    fn grad_hooks_run(&mut self, grads: Option<GradientsParams>) -> Result<Option<GradientsParams>> {
        let slot = StepGradients { grads: RefCell::new(grads) };
        for &i in &self.grad_hooks {
            self.phase = Phase::Callback(i, "after_backward");
            let mut ctx = Context { state: &mut self.state };
            self.callbacks
                .dispatch(i, Event::AfterBackward(&slot), &mut ctx)
                .map_err(|e| wrap(&self.names[i], "after_backward", e))?;
        }
        self.phase = Phase::Step;
        Ok(slot.grads.into_inner())
    }

    /// `after_train` for every callback whose setup ran, each shielded from the others' panics.
    fn after_train(&mut self) -> Result<()> {
        let mut first_error = None;
        for position in 0..self.set_up {
            let i = self.order[position];
            self.phase = Phase::Callback(i, "after_train");
            let callbacks = &mut self.callbacks;
            let state = &mut self.state;
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                let mut ctx = Context { state };
                callbacks.dispatch(i, Event::AfterTrain, &mut ctx)
            }));
            let error = match outcome {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(wrap(&self.names[i], "after_train", e)),
                Err(payload) => Some(Error::Panic {
                    location: format!("callback `{}` in after_train", self.names[i]),
                    message: panic_message(&*payload),
                }),
            };
            if let Some(error) = error {
                if first_error.is_none() {
                    first_error = Some(error);
                } else {
                    eprintln!("stoker: {error}");
                }
            }
        }
        self.phase = Phase::Trainer;
        self.state.monitors.publish();
        first_error.map_or(Ok(()), Err)
    }
}

#[inline]
fn deliver_in_order<M, K, C: Callbacks<M, K>>(
    callbacks: &mut C,
    order: &[usize],
    in_order: bool,
    state: &mut TrainState<M>,
    (phase, cursor): (&mut Phase, &mut usize),
    names: &[Cow<'static, str>],
    event: Event<'_>,
) -> Result<()> {
    let mut ctx = Context { state };
    if in_order {
        *phase = Phase::Delivering(event.name());
        if let Err(e) = callbacks.dispatch_all(0, event, &mut ctx, cursor) {
            return Err(wrap(&names[*cursor], event.name(), e));
        }
    } else {
        for &i in order {
            *phase = Phase::Callback(i, event.name());
            if let Err(e) = callbacks.dispatch(i, event, &mut ctx) {
                return Err(wrap(&names[i], event.name(), e));
            }
        }
    }
    *phase = Phase::Trainer;
    if ctx.state.monitors.has_pending() {
        ctx.state.monitors.publish();
    }
    Ok(())
}

fn wrap(name: &str, event: &'static str, error: Error) -> Error {
    Error::Callback { callback: name.to_string(), event, source: Box::new(error) }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".into()
    }
}

/// Time `events` deliveries of `trigger_step` to every callback of `callbacks`, exactly as the
/// trainer delivers events between steps (for the dispatch benchmark; not a public API).
#[doc(hidden)]
pub fn time_event_delivery<M: Module, K, C: Callbacks<M, K>>(
    callbacks: C,
    model: M,
    optimizer: impl Into<ModuleOptimizer>,
    events: u64,
) -> Result<std::time::Duration> {
    let mut run = Run::new(
        callbacks,
        TrainState {
            counters: Counters { epoch_num: 1, max_epoch: 1, starting_epoch: 1, ..Counters::default() },
            model: Some(model),
            optimizer: optimizer.into(),
            hyper: HyperParams::new(1e-3),
            monitors: Monitors::new(),
            control: Control::default(),
            log_dir: PathBuf::new(),
            checkpoint_policy: KeepPolicy::default(),
        },
    )?;
    let start = std::time::Instant::now();
    for _ in 0..events {
        run.deliver(std::hint::black_box(Event::TriggerStep))?;
    }
    Ok(start.elapsed())
}
