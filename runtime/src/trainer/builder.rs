//! The trainer as a builder: what to train, on what, with which callbacks, for how long.

use std::borrow::Cow;
use std::marker::PhantomData;
use std::path::PathBuf;
use std::time::Duration;

use burn::module::Module;
use burn::optim::ModuleOptimizer;

use super::test_phase::TestPhase;
use super::{DefaultCallbacks, LogDirPolicy, TrainData};
#[cfg(doc)]
use crate::callback::Outcome;
use crate::callback::{Callback, Callbacks};
#[cfg(doc)]
use crate::inference::InferenceRunner;
use crate::signal::StopHandle;
use crate::state::HyperParams;
use crate::world::World;

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
#[doc(alias = "Learner")]
#[doc(alias = "LearnerBuilder")]
#[doc(alias = "SupervisedTraining")]
pub struct Trainer<M, D, C = (), K = ()> {
    pub(super) model: M,
    pub(super) optimizer: ModuleOptimizer,
    pub(super) data: D,
    pub(super) callbacks: C,
    pub(super) settings: Settings,
    /// The test set's runner ([`Trainer::test`]).
    pub(super) test: Option<TestPhase<M>>,
    pub(super) marker: PhantomData<fn() -> K>,
}

/// The least time between the starts of two deferred reads on a GPU unless
/// [`Trainer::deferred_read_interval`] says otherwise: 100 ms.
pub const DEFERRED_READ_INTERVAL: Duration = Duration::from_millis(100);

/// The most bytes of deferred values the device holds for their reads unless
/// [`Trainer::deferred_read_budget`] says otherwise: 256 MiB.
pub const DEFERRED_READ_BUDGET: u64 = 256 << 20;

/// Everything a trainer is told besides its model, optimizer, data and callbacks; the builder's
/// methods set it, [`Trainer::train`] reads it.
#[derive(Debug)]
pub(super) struct Settings {
    pub(super) defaults: DefaultCallbacks,
    pub(super) max_epoch: u64,
    pub(super) starting_epoch: u64,
    pub(super) steps_per_epoch: Option<u64>,
    pub(super) log_dir: PathBuf,
    pub(super) log_dir_policy: LogDirPolicy,
    pub(super) hyper: HyperParams,
    pub(super) resume: Resume,
    pub(super) resume_inexact: bool,
    pub(super) handle_signals: bool,
    pub(super) world: Option<World>,
    pub(super) seed: Option<u64>,
    pub(super) deferred_read_interval: Duration,
    pub(super) deferred_read_budget: u64,
    pub(super) stop: StopHandle,
    pub(super) lock_log_dir: bool,
    /// The weights the test set is evaluated with ([`Trainer::test_weights`]).
    pub(super) test_weights: Option<PathBuf>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            defaults: DefaultCallbacks::default(),
            max_epoch: 1,
            starting_epoch: 1,
            steps_per_epoch: None,
            log_dir: PathBuf::from("train_log"),
            log_dir_policy: LogDirPolicy::Refuse,
            hyper: HyperParams::new(1e-3),
            resume: Resume::Fresh,
            resume_inexact: false,
            handle_signals: true,
            world: None,
            seed: None,
            deferred_read_interval: DEFERRED_READ_INTERVAL,
            deferred_read_budget: DEFERRED_READ_BUDGET,
            stop: StopHandle::default(),
            lock_log_dir: true,
            test_weights: None,
        }
    }
}

/// Where a run resumes from.
#[derive(Debug, Clone)]
pub(super) enum Resume {
    Fresh,
    From(PathBuf),
    Auto,
}

/// The callbacks of a trainer whose [`callbacks`](Trainer::callbacks) was not called yet: only
/// `()`. A second `.callbacks(...)` fails to compile on this bound, with the fix in its message.
#[diagnostic::on_unimplemented(
    message = "`.callbacks(...)` was already called on this trainer: a second call would replace the first",
    label = "this trainer already has its callbacks",
    note = "give every callback in one call, as a tuple: `.callbacks((first, second))`"
)]
pub trait NoCallbacksYet: sealed::Sealed {}
impl NoCallbacksYet for () {}

mod sealed {
    /// Only `()` is [`NoCallbacksYet`](super::NoCallbacksYet).
    pub trait Sealed {}
    impl Sealed for () {}
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
            settings: Settings::default(),
            test: None,
            marker: PhantomData,
        }
    }
}

impl<M: Module, D: TrainData, K, C: Callbacks<M, K>> Trainer<M, D, C, K> {
    /// The callbacks: one callback, a tuple, a `Vec`, or a `#[derive(Callbacks)]` struct, all in
    /// one call. A second call does not compile (it would replace the first silently): give
    /// them together, `.callbacks((a, b))`.
    pub fn callbacks<K2, C2: Callbacks<M, K2>>(self, callbacks: C2) -> Trainer<M, D, C2, K2>
    where
        C: NoCallbacksYet,
    {
        Trainer {
            model: self.model,
            optimizer: self.optimizer,
            data: self.data,
            callbacks,
            settings: self.settings,
            test: self.test,
            marker: PhantomData,
        }
    }
    /// Replace the default callbacks (`DefaultCallbacks::none()` turns them all off).
    pub fn default_callbacks(mut self, defaults: DefaultCallbacks) -> Self {
        self.settings.defaults = defaults;
        self
    }
    /// The least time between the starts of two deferred reads ([`DEFERRED_READ_INTERVAL`],
    /// 100 ms, by default): how often the values of deferred fetches
    /// ([`Fetch::deferred`](crate::fetch::Fetch::deferred)) are read back from a GPU.
    ///
    /// At most one deferred read is in flight. The steps that ask for deferred values while it
    /// is, or sooner than this after it started, have their values (still on the device) read
    /// together by the next one, each delivered with its own step. On a CPU backend a read is
    /// done when it starts (the values are in host memory) and the next may start at once:
    /// there, each step's values arrive at the next step.
    ///
    /// Why not read at every step on a GPU: a read costs about one device synchronization. On
    /// CUDA, cubecl's read future waits for the copy's fence in its first poll; on wgpu, while a
    /// read is in flight a cubecl thread waits on the device for the latest submission, and the
    /// steps run about as slowly as with a synchronous fetch. Measured on an H100 (the README's
    /// "Benchmarks"), a deferred fetch at every step of a small MLP: 0.94 of no fetch with this
    /// interval, 0.70 (CUDA) and 0.81 (wgpu) with a read whenever none is in flight, 0.68 and
    /// 0.63 with a synchronous fetch. `Duration::ZERO` reads whenever none is in flight.
    pub fn deferred_read_interval(mut self, interval: Duration) -> Self {
        self.settings.deferred_read_interval = interval;
        self
    }
    /// The most bytes of deferred values ([`Fetch::deferred`](crate::fetch::Fetch::deferred))
    /// the device holds for their reads ([`DEFERRED_READ_BUDGET`], 256 MiB, by default): the
    /// values of the steps waiting for the next read and those of the read in flight. Once they
    /// reach it, the step boundary waits for the oldest read (a device synchronization) and the
    /// next one starts at once, whatever the read interval: a large deferred tensor (an
    /// activation, a batch of images) never fills the device's memory with steps not yet read,
    /// and a single step's values larger than the budget are read back at the next boundary.
    /// `u64::MAX` lifts the bound (the steps are still bounded: a read gathers 1024 at most).
    pub fn deferred_read_budget(mut self, bytes: u64) -> Self {
        self.settings.deferred_read_budget = bytes;
        self
    }
    /// Train up to and including epoch `max_epoch`.
    #[doc(alias = "num_epochs")]
    #[doc(alias = "max_epochs")]
    #[doc(alias = "epochs")]
    pub fn max_epoch(mut self, max_epoch: u64) -> Self {
        self.settings.max_epoch = max_epoch;
        self
    }
    /// The first epoch to train (1 unless resuming): between 1 and `max_epoch`, or
    /// [`train`](Self::train) returns an error. A resumed run takes it from the checkpoint.
    pub fn starting_epoch(mut self, starting_epoch: u64) -> Self {
        self.settings.starting_epoch = starting_epoch;
        self
    }
    /// Steps per epoch; by default, one pass over the data. When the data runs out within an
    /// epoch, a new pass starts.
    pub fn steps_per_epoch(mut self, steps: u64) -> Self {
        self.settings.steps_per_epoch = Some(steps);
        self
    }
    /// Where checkpoints, `stats.json` and event files go. The run holds it alone (a second
    /// trainer into it is refused while this one runs); what a fresh run does when it holds an
    /// earlier run is [`log_dir_policy`](Self::log_dir_policy)'s choice.
    pub fn log_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.settings.log_dir = dir.into();
        self
    }
    /// Whether the run locks its log directory (yes by default): the operating system's file
    /// lock on `LOG_DIR/.lock` keeps a second trainer out while this one runs. `false` (or the
    /// environment variable `STOKER_NO_LOCK=1`) trains without it, with a warning, on a file
    /// system that cannot lock (some cluster and FUSE file systems refuse `flock`, which is an
    /// error naming this switch): nothing then keeps two runs from writing into one directory,
    /// so make sure only one uses it. The guide's page on the log directory says which file
    /// systems lock, and what locks local to each host mean for runs on several machines.
    pub fn lock_log_dir(mut self, lock: bool) -> Self {
        self.settings.lock_log_dir = lock;
        self
    }
    /// What a fresh run does when its log directory holds an earlier run: refuse to train (the
    /// default), move it aside, delete it, or write beside it. A resume keeps the directory
    /// whatever the policy. See [`LogDirPolicy`].
    pub fn log_dir_policy(mut self, policy: LogDirPolicy) -> Self {
        self.settings.log_dir_policy = policy;
        self
    }
    /// The initial learning rate.
    pub fn learning_rate(mut self, value: f64) -> Self {
        self.settings.hyper.set_learning_rate(value);
        self
    }
    /// Register a named hyper-parameter that callbacks can set and the step can read.
    pub fn hyper_param(mut self, name: impl Into<Cow<'static, str>>, value: f64) -> Self {
        self.settings.hyper.register(name, value);
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
        self.settings.hyper.register_fn(name, get, set);
        self
    }
    /// Register a named hyper-parameter held in a [`SharedParam`](crate::state::SharedParam) that your
    /// step or data pipeline reads. See [`HyperParams::register_shared`].
    ///
    /// # Panics
    /// If `name` is `"learning_rate"` (built in).
    pub fn hyper_param_shared(
        mut self,
        name: impl Into<Cow<'static, str>>,
        param: &crate::state::SharedParam,
    ) -> Self {
        self.settings.hyper.register_shared(name, param);
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
    /// A checkpoint inside the log directory (however `path` spells it: a symlink, `./`, `..`)
    /// continues the run there: the checkpoints newer than it are set aside as
    /// `step-N.abandoned`, the MinSaver / MaxSaver copies written after it as
    /// `<copy>.abandoned` (a better model of the abandoned timeline is never overwritten), and the [`log_dir_policy`](Self::log_dir_policy) is not consulted. A
    /// checkpoint from elsewhere starts a new run in the log directory, under the policy.
    ///
    /// Random operations inside the step (dropout) draw from the backend's generator, which burn
    /// does not expose: [`seed`](Self::seed) it to repeat them.
    #[doc(alias = "ckpt_path")]
    pub fn resume_from(mut self, path: impl Into<PathBuf>) -> Self {
        self.settings.resume = Resume::From(path.into());
        self
    }
    /// Resume from the log directory's latest complete checkpoint when there is one, as
    /// [`resume_from`](Self::resume_from) does; start afresh when there is none. Either way the
    /// log directory is taken as this run's: the [`log_dir_policy`](Self::log_dir_policy) is not
    /// consulted (a run killed before its first checkpoint starts again in its directory).
    pub fn auto_resume(mut self, enable: bool) -> Self {
        self.settings.resume = if enable { Resume::Auto } else { Resume::Fresh };
        self
    }
    /// Resume from a checkpoint even when its data position no longer names the same samples:
    /// it was written by a data-parallel world of another size, or with passes over the data
    /// of another length. Off by default: such a resume is refused with an error saying what
    /// changed. On, it is a warning, and the run continues with the model, the optimizer, the
    /// counters and the callbacks' state as saved, but not exactly as the uninterrupted run
    /// would have: the rest of the interrupted epoch's samples differ (some are seen twice, some
    /// skipped), and what follows from them.
    pub fn resume_inexact(mut self, allow: bool) -> Self {
        self.settings.resume_inexact = allow;
        self
    }
    /// Train as one rank of a data-parallel world (`World::mpi` with the `mpi` feature, or the world a
    /// [`Threads`](crate::world::Threads) runner gives each rank): every replica starts from the
    /// chief's weights, each step's gradients are averaged over the ranks before the optimizer
    /// runs, `chief_only` callbacks run on the chief only, and only the chief writes into the
    /// log directory. A stop, a skipped epoch, a signal or an error on any rank stops every rank
    /// at the same step boundary. See [`crate::world`].
    pub fn world(mut self, world: World) -> Self {
        self.settings.world = Some(world);
        self
    }
    /// Seed the random operations of training with `seed`: when training starts (after a
    /// checkpoint is restored, before the callbacks' `setup`), the generator of each device the
    /// model is on is seeded (burn's `Device::seed`) with `seed + rank` (rank 0 outside a
    /// data-parallel world), so that what the step draws (dropout, noise) repeats from one run to
    /// the next whatever the program drew before training. Nothing else in stoker draws random
    /// numbers: the trainer's own order of work is fixed.
    ///
    /// Reproducible with one seed, on one backend and one machine: the weights after N steps of
    /// a fresh run with the same model, data and step. Not covered, and yours to seed:
    /// - **the initial weights**: the model is built before the trainer, so seed its device
    ///   before building it (`device.seed(s)`, then `Config::init(&device)`);
    /// - **the data order**: a `Vec` of batches is taken in order; a burn `DataLoader` shuffles
    ///   with the seed given to `DataLoaderBuilder::shuffle(seed)`, and stoker keeps the
    ///   position in it across a resume (see [`resume_from`](Self::resume_from)).
    ///
    /// The devices are seeded before every step, from `seed`, the rank and the global step (and
    /// once with `seed + rank` when training starts): burn does not expose a generator's state,
    /// so no checkpoint could hold it, and seeded per step a resumed run's steps draw what the
    /// uninterrupted run's drew (dropout included). burn's generators are one per process, so in
    /// a seeded threads world the ranks' forward and backward passes take turns (their exchanges
    /// and optimizer steps still overlap): each rank draws what its own seed gives.
    #[doc(alias = "seed_everything")]
    pub fn seed(mut self, seed: u64) -> Self {
        self.settings.seed = Some(seed);
        self
    }
    /// Whether SIGINT and SIGTERM stop training gracefully (on by default): at the next step
    /// boundary a checkpoint is written, `after_train` runs everywhere, the monitors are flushed
    /// and the run returns [`Outcome::Interrupted`]; a second signal exits at once with status
    /// 128 + the signal's number.
    ///
    /// Long loops see the first signal too ([`Context::signal_received`](crate::callback::Context::signal_received)):
    /// an [`InferenceRunner`](crate::inference::InferenceRunner) pass stops early without writing
    /// its results, a resumed run's data replay ends the run before its first step (no checkpoint
    /// is written; the one resumed from stays the latest), the
    /// [`InjectShell`](crate::debug::InjectShell) prompt returns. A signal during `after_train`
    /// is reported in [`TrainReport::late_signal`](crate::trainer::TrainReport::late_signal).
    ///
    /// The handler is installed with `sigaction` when training starts and the previous actions
    /// (the default, or the program's own handler) are put back when the last running trainer
    /// returns: while no trainer runs, the signals act as they did before. A signal whose action
    /// is *ignore* when training starts (`nohup`, a background job) is left ignored.
    pub fn handle_signals(mut self, enable: bool) -> Self {
        self.settings.handle_signals = enable;
        self
    }

    /// A handle that stops this trainer's run from another thread: [`StopHandle::stop`] ends it
    /// at the next step boundary with a checkpoint, as a Ctrl-C does (whether or not
    /// [`handle_signals`](Self::handle_signals) is on). Take it before [`train`](Self::train):
    ///
    /// ```no_run
    /// # use burn_stoker::prelude::*;
    /// # use burn::nn::{Linear, LinearConfig};
    /// # use burn::optim::SgdConfig;
    /// # use burn::tensor::{Device, Tensor};
    /// # let device = Device::default();
    /// # let batches: Vec<(Tensor<2>, Tensor<2>)> = Vec::new();
    /// let model: Linear = LinearConfig::new(4, 1).init(&device);
    /// let trainer = Trainer::new(model, SgdConfig::new().init(), batches).max_epoch(1000);
    /// let stop = trainer.stop_handle();
    /// std::thread::spawn(move || {
    ///     std::thread::sleep(std::time::Duration::from_secs(60)); // a GUI's button, say
    ///     stop.stop();
    /// });
    /// let report = trainer.train(|model: &Linear, (x, y): (Tensor<2>, Tensor<2>), _: &mut Step<'_>| {
    ///     (model.forward(x) - y).powi_scalar(2).mean()
    /// })?;
    /// assert!(matches!(report.outcome, Outcome::Interrupted { .. }));
    /// # Ok::<(), burn_stoker::Error>(())
    /// ```
    pub fn stop_handle(&self) -> StopHandle {
        self.settings.stop.clone()
    }
}

impl<M, D, C, K> Trainer<M, D, C, K> {
    /// Evaluate a test set once training ends (Lightning's `trainer.test`, Keras's `evaluate`):
    /// `runner`, an [`InferenceRunner`] over the test set whose inferencers name their results
    /// `test_...` (`.prefix("test")`: `test_accuracy`, `test_cost`), runs one pass after every
    /// callback's `after_train`, and its results go to the monitors: `stats.json` (a last row),
    /// TensorBoard and the other writers, the end-of-training summary, and
    /// [`TrainReport::test`](super::TrainReport::test) /
    /// [`TrainReport::latest`](super::TrainReport::latest).
    ///
    /// - **Weights.** The model as training leaves it: the best weights when an
    ///   [`EarlyStopping`](crate::stop::EarlyStopping) with `restore_best_weights` put them back
    ///   in its `after_train`, the final ones otherwise; or those of a best copy, with
    ///   [`test_weights`](Self::test_weights). The report's model stays the one training left.
    /// - **When.** After a run that ended without an error and was not interrupted
    ///   ([`Outcome::Finished`] or [`Outcome::Stopped`], an early stop included); after a
    ///   failure, a signal, a [`StopHandle`](crate::trainer::StopHandle) stop or non-finite
    ///   weights the test set is not evaluated (the log says so). An error of the pass fails the
    ///   run, with its report.
    /// - **Where.** On the chief, over the whole test set, the other ranks of a world doing
    ///   nothing: the runner must not be [`data_parallel`](InferenceRunner::data_parallel)
    ///   (refused before training starts). The runner is not one of the run's callbacks: it
    ///   takes no other event, and no callback receives the test set's batch events.
    ///
    /// ```no_run
    /// # use burn_stoker::prelude::*;
    /// # use burn::nn::{Linear, LinearConfig};
    /// # use burn::optim::SgdConfig;
    /// # use burn::tensor::{Device, Tensor};
    /// # use burn_stoker::inference::MulticlassStats;
    /// # let device = Device::default().autodiff();
    /// # let (train, valid, test): (Vec<(Tensor<2>, Tensor<1>)>, Vec<(Tensor<2>, Tensor<1>)>, Vec<(Tensor<2>, Tensor<1>)>) = (Vec::new(), Vec::new(), Vec::new());
    /// fn forward(model: &Linear, (x, label): (Tensor<2>, Tensor<1>), out: &mut Outputs) {
    ///     out.put("logits", model.forward(x));
    ///     out.put("label", label);
    /// }
    /// let model: Linear = LinearConfig::new(8, 3).init(&device);
    /// let report = Trainer::new(model, SgdConfig::new().init(), train)
    ///     .max_epoch(20)
    ///     .callbacks((
    ///         InferenceRunner::new(valid, forward).with(MulticlassStats::new("logits", "label", 3)),
    ///         EarlyStopping::new("val_accuracy").patience(3).restore_best_weights(true),
    ///     ))
    ///     .test(InferenceRunner::new(test, forward).with(MulticlassStats::new("logits", "label", 3).prefix("test")))
    ///     .train(|model: &Linear, (x, label): (Tensor<2>, Tensor<1>), _: &mut Step<'_>| {
    ///         let (n, device) = (x.dims()[0], x.device());
    ///         burn::nn::loss::CrossEntropyLossConfig::new()
    ///             .init(&device)
    ///             .forward(model.forward(x), label.int().reshape([n]))
    ///     })?;
    /// println!("test accuracy {:?}", report.latest("test_accuracy"));
    /// # Ok::<(), burn_stoker::Error>(())
    /// ```
    #[doc(alias = "evaluate")]
    #[doc(alias = "Evaluator")]
    pub fn test(mut self, runner: impl Callback<M> + Send + 'static) -> Self {
        self.test = Some(TestPhase::new(runner));
        self
    }
    /// The weights the test set is evaluated with ([`test`](Self::test)): those of a burnpack
    /// or a checkpoint folder (its `model.bpk`), such as a `MinSaver` / `MaxSaver` best copy
    /// (`"checkpoints/min-val_loss"`) or a [`SaveBestState`](crate::saver::SaveBestState) file.
    /// A relative path is taken from the log directory. When the file does not exist (no best
    /// copy was written), the log says so and the weights training left are evaluated; one
    /// that is not a model of this architecture fails the run.
    pub fn test_weights(mut self, path: impl Into<PathBuf>) -> Self {
        self.settings.test_weights = Some(path.into());
        self
    }
}
