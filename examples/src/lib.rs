//! The 8x8 handwritten digits (1797 samples, 10 classes, shipped inside `smartcore`), a small MLP
//! for them, and the training program of the README: shared by the `digits` binary and the tests.

use std::path::PathBuf;
use std::sync::Arc;

use burn::config::Config;
use burn::data::dataloader::batcher::Batcher;
use burn::data::dataloader::{DataLoader, DataLoaderBuilder};
use burn::data::dataset::InMemDataset;
use burn::module::Module;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{Linear, LinearConfig, Relu};
use burn::optim::AdamConfig;
use burn::tensor::{Device, Int, Tensor, TensorData};
use burn_stoker::prelude::*;

pub mod callback_list;
#[cfg(feature = "burn-train")]
pub mod learner;

// The guide (book/): every ```rust block of every chapter is compiled as a doc test of this crate,
// which has burn, burn_stoker and the digits (`Mlp`, `DigitBatcher`, `load_digits`, `digit_outputs`)
// at hand. `rust,no_run` blocks are compiled, not run.
/// The README's example, compiled as a doc test (the README is also burn-stoker's page on the
/// registry); CI also builds and runs it in a crate outside the workspace (`.ci/outside-crate`).
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct Readme;
#[cfg(doctest)]
#[doc = include_str!("../../book/src/introduction.md")]
pub struct BookIntroduction;
/// The quick start's program is also built and run by CI in a crate outside the workspace
/// (`.ci/outside-crate`), as the README's example is.
#[cfg(doctest)]
#[doc = include_str!("../../book/src/quick-start.md")]
pub struct BookQuickStart;
#[cfg(doctest)]
#[doc = include_str!("../../book/src/glossary.md")]
pub struct BookGlossary;
#[cfg(doctest)]
#[doc = include_str!("../../book/src/events-and-lifecycle.md")]
pub struct BookEventsAndLifecycle;
#[cfg(doctest)]
#[doc = include_str!("../../book/src/dsl.md")]
pub struct BookDsl;
#[cfg(doctest)]
#[doc = include_str!("../../book/src/fetches.md")]
pub struct BookFetches;
#[cfg(doctest)]
#[doc = include_str!("../../book/src/monitors-and-writers.md")]
pub struct BookMonitorsAndWriters;
#[cfg(doctest)]
#[doc = include_str!("../../book/src/dashboard.md")]
pub struct BookDashboard;
#[cfg(doctest)]
#[doc = include_str!("../../book/src/schedules.md")]
pub struct BookSchedules;
#[cfg(doctest)]
#[doc = include_str!("../../book/src/checkpoints-and-resume.md")]
pub struct BookCheckpointsAndResume;
#[cfg(doctest)]
#[doc = include_str!("../../book/src/log-directory.md")]
pub struct BookLogDirectory;
#[cfg(doctest)]
#[doc = include_str!("../../book/src/logging.md")]
pub struct BookLogging;
#[cfg(doctest)]
#[doc = include_str!("../../book/src/embedding.md")]
pub struct BookEmbedding;
#[cfg(doctest)]
#[doc = include_str!("../../book/src/devices-and-worlds.md")]
pub struct BookDevicesAndWorlds;
#[cfg(doctest)]
#[doc = include_str!("../../book/src/trackers.md")]
pub struct BookTrackers;
#[cfg(doctest)]
#[doc = include_str!("../../book/src/coming-from.md")]
pub struct BookComingFrom;
#[cfg(doctest)]
#[doc = include_str!("../../book/src/coming-from-tensorpack.md")]
pub struct BookComingFromTensorpack;
#[cfg(doctest)]
#[doc = include_str!("../../book/src/coming-from-neon.md")]
pub struct BookComingFromNeon;
#[cfg(doctest)]
#[doc = include_str!("../../book/src/coming-from-fastai.md")]
pub struct BookComingFromFastai;
#[cfg(doctest)]
#[doc = include_str!("../../book/src/coming-from-keras.md")]
pub struct BookComingFromKeras;
#[cfg(doctest)]
#[doc = include_str!("../../book/src/coming-from-lightning.md")]
pub struct BookComingFromLightning;
#[cfg(doctest)]
#[doc = include_str!("../../book/src/first-run-and-build-times.md")]
pub struct BookFirstRunAndBuildTimes;
#[cfg(doctest)]
#[doc = include_str!("../../book/src/troubleshooting.md")]
pub struct BookTroubleshooting;
/// The chapter on burn-train needs its bridge: compiled in the build with the feature
/// `burn-train` (the test command's `--doc burn_train`, which this module's name matches).
#[cfg(all(doctest, feature = "burn-train"))]
pub mod book_burn_train {
    #[doc = include_str!("../../book/src/migrating-from-burn-train.md")]
    pub struct BookMigratingFromBurnTrain;
}

/// Pixels per image.
pub const FEATURES: usize = 64;
/// Classes.
pub const CLASSES: usize = 10;

/// One image: 64 pixels scaled to [0, 1], and its digit.
#[derive(Debug, Clone)]
pub struct Digit {
    /// The pixels, row by row.
    pub pixels: [f32; FEATURES],
    /// The digit, 0 to 9.
    pub label: i64,
}

/// The digits split into a training and a validation set.
#[derive(Debug, Clone)]
pub struct Split {
    /// Training samples.
    pub train: Vec<Digit>,
    /// Validation samples.
    pub valid: Vec<Digit>,
}

/// Load the 1797 digits and split them, shuffled with `seed`, keeping `valid_fraction` for validation.
pub fn load_digits(seed: u64, valid_fraction: f64) -> Split {
    let dataset = smartcore::dataset::digits::load_dataset();
    let mut digits: Vec<Digit> = (0..dataset.num_samples)
        .map(|i| {
            let mut pixels = [0.0; FEATURES];
            for (p, v) in pixels.iter_mut().zip(&dataset.data[i * FEATURES..(i + 1) * FEATURES]) {
                *p = v / 16.0;
            }
            Digit { pixels, label: dataset.target[i] as i64 }
        })
        .collect();
    // Fisher-Yates with a SplitMix64 stream: the same split on every machine.
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    for i in (1..digits.len()).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        digits.swap(i, j);
    }
    let n_valid = (digits.len() as f64 * valid_fraction).round() as usize;
    let valid = digits.split_off(digits.len() - n_valid);
    Split { train: digits, valid }
}

/// A batch of digits on a device.
#[derive(Debug, Clone)]
pub struct DigitBatch {
    /// `[batch, 64]` pixels.
    pub images: Tensor<2>,
    /// `[batch]` labels.
    pub labels: Tensor<1, Int>,
}

/// fastai's `MixUp` mixes the images and keeps the labels
/// ([`MixUp`](burn_stoker::modify::MixUp)).
impl burn_stoker::modify::MixUpBatch for DigitBatch {
    type Targets = Tensor<1, Int>;
    fn batch_size(&self) -> usize {
        self.labels.dims()[0]
    }
    fn mix_inputs(self, mix: &burn_stoker::modify::Mix) -> Self {
        DigitBatch { images: mix.inputs(self.images), labels: self.labels }
    }
    fn targets(&self, mix: &burn_stoker::modify::Mix) -> (Self::Targets, Self::Targets) {
        (self.labels.clone(), mix.partners_of(self.labels.clone()))
    }
}

/// The cross-entropy of each sample, not reduced (fastai's loss function under `NoneReduce`):
/// the per-sample loss [`MixUp`](burn_stoker::modify::MixUp) mixes.
pub fn cross_entropy_per_sample(logits: Tensor<2>, labels: Tensor<1, Int>) -> Tensor<1> {
    let n = labels.dims()[0];
    -burn::tensor::activation::log_softmax(logits, 1).gather(1, labels.reshape([n, 1])).reshape([n])
}

/// Makes [`DigitBatch`]es.
#[derive(Debug, Clone, Default)]
pub struct DigitBatcher;

impl Batcher<Digit, DigitBatch> for DigitBatcher {
    fn batch(&self, items: Vec<Digit>, device: &Device) -> DigitBatch {
        let n = items.len();
        let pixels: Vec<f32> = items.iter().flat_map(|d| d.pixels).collect();
        let labels: Vec<i64> = items.iter().map(|d| d.label).collect();
        DigitBatch {
            images: Tensor::from_data(TensorData::new(pixels, [n, FEATURES]), device),
            labels: Tensor::from_data(TensorData::new(labels, [n]), device),
        }
    }
}

/// A burn data loader over `digits`, shuffled with `seed` when given.
pub fn loader(
    digits: Vec<Digit>,
    batch_size: usize,
    shuffle: Option<u64>,
    device: &Device,
) -> Arc<dyn DataLoader<DigitBatch>> {
    let builder = DataLoaderBuilder::new(DigitBatcher).batch_size(batch_size).set_device(device.clone());
    let builder = match shuffle {
        Some(seed) => builder.shuffle(seed),
        None => builder,
    };
    builder.build(InMemDataset::new(digits))
}

/// A two-layer perceptron: 64 -> hidden -> 10.
#[derive(Module, Debug)]
pub struct Mlp {
    hidden: Linear,
    output: Linear,
    activation: Relu,
}

impl Mlp {
    /// A new MLP on `device`.
    pub fn new(hidden: usize, device: &Device) -> Self {
        Mlp {
            hidden: LinearConfig::new(FEATURES, hidden).init(device),
            output: LinearConfig::new(hidden, CLASSES).init(device),
            activation: Relu::new(),
        }
    }

    /// Logits `[batch, 10]`.
    pub fn forward(&self, images: Tensor<2>) -> Tensor<2> {
        self.output.forward(self.activation.forward(self.hidden.forward(images)))
    }
}

/// The outputs shared by training and validation: the loss as `"cost"`, the per-sample
/// misclassification vector `"wrong"` and the batch accuracy `"accuracy"`. Returns the loss.
pub fn digit_outputs(model: &Mlp, batch: DigitBatch, out: &mut Outputs) -> Tensor<1> {
    let logits = model.forward(batch.images);
    let loss =
        CrossEntropyLossConfig::new().init(&logits.device()).forward(logits.clone(), batch.labels.clone());
    let wrong = logits.argmax(1).squeeze_dim::<1>(1).not_equal(batch.labels).float();
    out.put("accuracy", Tensor::<1>::ones([1], &wrong.device()) - wrong.clone().mean());
    out.put("wrong", wrong);
    out.put("cost", loss.clone());
    loss
}

/// The example's configuration, burn's way (`#[derive(Config)]`, as in burn's book): what decides
/// the trained weights. A run saves it as [`CONFIG_FILE`] in its log directory; read it back with
/// [`Config::load`](burn::config::Config::load). `DigitsConfig::new()` is the README's
/// configuration; `with_epochs(..)` and the other `with_*` setters change it.
#[derive(Config, Debug, PartialEq)]
pub struct DigitsConfig {
    /// Epochs.
    #[config(default = 30)]
    pub epochs: u64,
    /// Samples per batch (the global batch: in a data-parallel world each rank takes its share).
    #[config(default = 32)]
    pub batch_size: usize,
    /// Hidden units.
    #[config(default = 256)]
    pub hidden: usize,
    /// Seed of the split, the data order and the initial weights.
    #[config(default = 42)]
    pub seed: u64,
}

/// The name of the file in the log directory that holds the run's [`DigitsConfig`].
pub const CONFIG_FILE: &str = "config.json";

/// One run of the digits: its [`DigitsConfig`] and what is not part of it (where the logs go, the
/// device, which cannot be serialised, and what to do with the log directory).
#[derive(Debug, Clone)]
pub struct DigitsRun {
    /// The configuration, saved as `config.json` in the log directory.
    pub config: DigitsConfig,
    /// Where the logs go.
    pub log_dir: PathBuf,
    /// The device (see `burn_stoker::device`).
    pub device: Device,
    /// Resume from the log directory's latest complete checkpoint when there is one.
    pub resume: bool,
    /// What a fresh run does when the log directory holds an earlier run (refuse by default).
    pub log_dir_policy: LogDirPolicy,
    /// An MLflow tracking server (`http://host:port`) to send the scalars to, with the
    /// configuration as params, as a run named `digits` in the default experiment (see
    /// [`MlflowLogger`](burn_stoker::monitor::MlflowLogger)); `None` by default.
    pub mlflow: Option<String>,
    /// The terminal dashboard ([`Dashboard`](burn_stoker::monitor::Dashboard)) instead of the
    /// progress bar and the scalar printer on the chief; `false` by default.
    pub dashboard: bool,
}

impl DigitsRun {
    /// The README's configuration on `device`, logging into `log_dir`.
    pub fn new(log_dir: impl Into<PathBuf>, device: Device) -> Self {
        DigitsRun {
            config: DigitsConfig::new(),
            log_dir: log_dir.into(),
            device,
            resume: false,
            log_dir_policy: LogDirPolicy::default(),
            mlflow: None,
            dashboard: false,
        }
    }
}

/// A resume refused by [`SaveConfig`]: the checkpoint was trained with another configuration, so
/// resuming with this one would not continue that run. The program's own error, returned
/// through [`burn_stoker::Error::other`]; find it with
/// [`downcast_ref`](burn_stoker::Error::downcast_ref) on the error training returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigMismatch {
    /// The saved configuration (`config.json` in the log directory).
    pub path: PathBuf,
    /// Each difference: `"batch_size 32 there, 64 now"`.
    pub differences: Vec<String>,
}

impl std::fmt::Display for ConfigMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the run in {} was trained with another configuration ({}): resuming it with this one would not continue it; \
             resume with the saved configuration, or start afresh in another log directory",
            self.path.display(),
            self.differences.join(", ")
        )
    }
}

impl std::error::Error for ConfigMismatch {}

/// Saves the run's [`DigitsConfig`] as `config.json` in the log directory at `before_train`, on
/// the chief only, so after the log-directory policy has acted (a backup or a delete takes the
/// earlier run's `config.json` with it; `config.json` alone does not make a directory hold "an
/// earlier run"). A run resumed from a checkpoint checks the saved one first: a different
/// `batch_size`, `hidden` or `seed` would not continue the same run, so training stops with a
/// [`ConfigMismatch`] naming the file and each difference; a different `epochs` (training a finished run
/// further, say) is allowed, said on stderr, and saved.
#[derive(Debug)]
pub struct SaveConfig {
    config: DigitsConfig,
}

#[callback]
impl SaveConfig {
    #[on(before_train)]
    fn save(&mut self, ctx: &mut Context<'_, Mlp>) -> burn_stoker::Result<()> {
        if !ctx.is_chief() {
            return Ok(());
        }
        let path = ctx.log_dir().join(CONFIG_FILE);
        if ctx.global_step() > 0 && path.exists() {
            let saved = <DigitsConfig as burn::config::Config>::load(&path)
                .map_err(|e| burn_stoker::Error::msg(format!("reading {}: {e}", path.display())))?;
            let (old, new) = (&saved, &self.config);
            let differs: Vec<String> = [
                ("batch_size", old.batch_size.to_string(), new.batch_size.to_string()),
                ("hidden", old.hidden.to_string(), new.hidden.to_string()),
                ("seed", old.seed.to_string(), new.seed.to_string()),
            ]
            .into_iter()
            .filter(|(_, a, b)| a != b)
            .map(|(name, a, b)| format!("{name} {a} there, {b} now"))
            .collect();
            if !differs.is_empty() {
                return Err(burn_stoker::Error::other(ConfigMismatch { path, differences: differs }));
            }
            if old.epochs != new.epochs {
                eprintln!(
                    "digits: {}: epochs {} there, {} now; saved",
                    path.display(),
                    old.epochs,
                    new.epochs
                );
            }
        }
        burn::config::Config::save(&self.config, &path).map_err(|e| burn_stoker::Error::io(&path, e))
    }
}

/// Train the MLP on the digits with the default callbacks, validation every epoch, a
/// learning-rate schedule, checkpoints every epoch (the last 3 kept, and one per half hour of
/// training) and a copy of the one with the lowest validation error; with `run.mlflow`, the
/// scalars also go to that MLflow server.
/// Returns the report and the final validation error.
///
/// The weights are initialized from the seed and the data order follows it, so that two runs
/// with one configuration train the same weights, and a run resumed from a checkpoint
/// (`run.resume`) ends where an uninterrupted one does. The configuration is saved as
/// [`CONFIG_FILE`] in the log directory (see [`SaveConfig`]).
pub fn train_digits(run: &DigitsRun) -> burn_stoker::Result<(TrainReport<Mlp>, f64)> {
    train_digits_in(run, None)
}

/// [`train_digits`] as one rank of a data-parallel world: each rank trains on its shard of the
/// training set with batches of `batch_size / world size` (the global batch stays
/// `batch_size`), from the chief's initial weights; validation, checkpoints and logs are the
/// chief's, and the training cost and accuracy it logs are averaged over the ranks. The
/// validation error is read back on the chief; the other ranks return NaN for it.
pub fn train_digits_in(
    run: &DigitsRun,
    world: Option<burn_stoker::world::World>,
) -> burn_stoker::Result<(TrainReport<Mlp>, f64)> {
    let config = &run.config;
    let split = load_digits(config.seed, 0.2);
    let device = &run.device;
    let size = world.as_ref().map_or(1, |w| w.size());
    if !config.batch_size.is_multiple_of(size) {
        return Err(burn_stoker::Error::msg(format!(
            "the batch size {} does not split over {size} ranks",
            config.batch_size
        )));
    }
    let train = loader(split.train, config.batch_size / size, Some(config.seed), device);
    let (train, world) = match world {
        Some(world) => (world.shard(train), Some(world.mean_of(["cost", "accuracy"]))),
        None => (train, None),
    };
    let chief = world.as_ref().is_none_or(|w| w.is_chief());
    let valid = loader(split.valid, 256, None, device);
    device.seed(config.seed);
    let model = Mlp::new(config.hidden, device);
    // 1e-2, then 3e-3 from half-way, then 1e-3 for the last sixth (epochs 15 and 25 of 30).
    let (half, late) = (config.epochs / 2, config.epochs * 5 / 6);
    let mut schedule = vec![(0, 1e-2)];
    schedule.extend([(half, 3e-3), (late, 1e-3)].into_iter().filter(|&(epoch, _)| epoch > 0));
    schedule.dedup_by_key(|point| point.0);
    let callbacks = (
        InferenceRunner::new(valid, |model: &Mlp, batch: DigitBatch, out: &mut Outputs| {
            digit_outputs(model, batch, out);
        })
        .with(ScalarStats::new(["cost"]))
        .with(ClassificationError::new("wrong", "validation_error")),
        ScheduledHyperParamSetter::new("learning_rate", schedule),
        ModelSaver::new(3),
        MinSaver::new("validation_error"),
        TrainingScalars::default(),
        SaveConfig { config: config.clone() },
        (run.dashboard && chief).then(|| {
            burn_stoker::monitor::Dashboard::new().fetch(["cost"]).scalars([
                "cost",
                "accuracy",
                "error",
                "learning_rate",
            ])
        }),
        match &run.mlflow {
            Some(uri) => {
                Some(burn_stoker::monitor::MlflowLogger::new(uri)?.run_name("digits").params_of(config)?)
            }
            None => None,
        },
    );
    let trainer = Trainer::new(model, AdamConfig::new().init(), train);
    let trainer = match world {
        Some(world) => trainer.world(world),
        None => trainer,
    };
    let report = trainer
        .max_epoch(config.epochs)
        .log_dir(&run.log_dir)
        .auto_resume(run.resume)
        .log_dir_policy(run.log_dir_policy)
        // With `--dashboard`, the dashboard replaces the progress bar and the printer itself.
        .default_callbacks(DefaultCallbacks {
            progress: Some(ProgressBar::new().show(["cost", "accuracy"])),
            ..DefaultCallbacks::default()
        })
        .callbacks(callbacks)
        .train(|model: &Mlp, batch: DigitBatch, step: &mut Step<'_>| {
            digit_outputs(model, batch, step.outputs())
        })?;
    // Read from the report, not from stats.json: the run's log directory may be a version folder
    // inside `run.log_dir` (LogDirPolicy::NewVersion).
    let error = match (chief, report.latest("validation_error")) {
        (false, _) => f64::NAN,
        (true, Some(error)) => error,
        // Stopped (a Ctrl-C, a kill of another rank) before its first validation.
        (true, None) if report.outcome != burn_stoker::callback::Outcome::Finished => f64::NAN,
        (true, None) => return Err(burn_stoker::Error::msg("the run put no validation_error")),
    };
    Ok((report, error))
}

/// Puts the mean training cost and accuracy of each epoch (fetched every step, one transfer)
/// and the learning rate the epoch used. Its running sums are callback state: a run resumed in
/// the middle of an epoch (after Ctrl-C) averages over the whole epoch all the same.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct TrainingScalars {
    cost: f64,
    accuracy: f64,
    steps: u64,
    learning_rate: f64,
}

#[callback(state)]
impl TrainingScalars {
    #[on(after_step)]
    #[fetch("cost", "accuracy")]
    fn add(&mut self, cost: f64, accuracy: f64, ctx: &mut Context<'_, Mlp>) {
        self.cost += cost;
        self.accuracy += accuracy;
        self.steps += 1;
        self.learning_rate = ctx.learning_rate();
    }

    #[on(trigger_epoch)]
    fn put(&mut self, ctx: &mut Context<'_, Mlp>) {
        let n = self.steps.max(1) as f64;
        let monitors = ctx.monitors();
        monitors.put_scalar("train_cost", self.cost / n);
        monitors.put_scalar("train_accuracy", self.accuracy / n);
        monitors.put_scalar("learning_rate", self.learning_rate);
        *self = TrainingScalars::default();
    }
}
