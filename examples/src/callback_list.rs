//! The callbacks tensorpack's documentation lists for training a ResNet on ImageNet, written with
//! stoker and training the digits MLP: the second example.
//!
//! | tensorpack | here |
//! |---|---|
//! | `ModelSaver()` | [`ModelSaver`], every epoch (`--serialize N`: every `N`), the last `--history` kept |
//! | `MinSaver('val-error-top1')` | [`MinSaver`]`("val-error-top1")` |
//! | `InferenceRunner(dataset_val, [ClassificationError('wrong-top1', 'val-error-top1'), ClassificationError('wrong-top5', 'val-error-top5')])` | [`InferenceRunner`] with two [`ClassificationError`]s, every epoch (`--eval_freq N`: every `N`) |
//! | `ScheduledHyperParamSetter('learning_rate', [(30, 1e-2), (60, 1e-3), (85, 1e-4), (95, 1e-5)])` | the same points scaled from 105 epochs to the run's |
//! | `HumanHyperParamSetter('learning_rate')` | [`HumanHyperParamSetter`]: edit `<log_dir>/hyper.txt` |
//! | `SendStat('curl ... body={val-error-top1}', 'val-error-top1')` | [`SendStat`] with `--send-command` (default: append a line to `<log_dir>/val-error.txt`) |
//! | `GPUUtilizationTracker()` | [`GpuUtilizationTracker`]: a one-line note without a GPU |
//! | `InjectShell(shell='ipython')` | [`InjectShell`]: `touch INJECT_SHELL.tmp` (in the working directory, as tensorpack) pauses at the end of the epoch |
//! | `EstimatedTimeLeft()` | [`EstimatedTimeLeft`] |
//! | extra: `MovingAverageSummary()`, `ProgressBar()`, `MergeAllSummaries()` | [`MovingAverageSummary`] of the training cost and error, the progress bar |
//! | monitors: `TFEventWriter()`, `JSONWriter()`, `ScalarPrinter()` | stoker's default callbacks |

use std::path::PathBuf;

use burn::optim::AdamConfig;
use burn::tensor::{Device, Tensor};
use burn_stoker::debug::InjectShell;
use burn_stoker::monitor::{MovingAverageSummary, SendStat};
use burn_stoker::prelude::*;
use burn_stoker::track::{EstimatedTimeLeft, GpuUtilizationTracker};

use crate::{DigitBatch, Mlp, load_digits, loader};

/// How to run the list.
#[derive(Debug, Clone)]
pub struct ListConfig {
    /// Where the logs go.
    pub log_dir: PathBuf,
    /// Epochs (tensorpack's ResNet trains 105; the schedule's points are scaled to this).
    pub epochs: u64,
    /// Checkpoint every this many epochs.
    pub serialize: u64,
    /// Checkpoints kept.
    pub history: usize,
    /// Validate every this many epochs.
    pub eval_freq: u64,
    /// The `SendStat` command; `{val-error-top1}` and `{epoch_num}` are replaced by their values.
    /// `None`: append `epoch val-error-top1` lines to `<log_dir>/val-error.txt`.
    pub send_command: Option<String>,
    /// Show the progress bar.
    pub progress_bar: bool,
    /// Seed of the split, the weights and the data order.
    pub seed: u64,
    /// The device.
    pub device: Device,
}

impl ListConfig {
    /// 20 epochs, everything every epoch, 3 checkpoints kept, on `device`.
    pub fn new(log_dir: impl Into<PathBuf>, device: Device) -> Self {
        ListConfig {
            log_dir: log_dir.into(),
            epochs: 20,
            serialize: 1,
            history: 3,
            eval_freq: 1,
            send_command: None,
            progress_bar: true,
            seed: 7,
            device,
        }
    }

    /// The `SendStat` command this configuration runs. The default one names
    /// `<log_dir>/val-error.txt` as one literal shell word, whatever the directory's name holds
    /// (quotes, `$(...)`, braces): see [`shell_word`]. (A name that is not UTF-8 reaches the shell
    /// with its invalid bytes replaced: `SendStat` commands are strings.)
    pub fn command(&self) -> String {
        self.send_command.clone().unwrap_or_else(|| {
            let file = self.log_dir.join("val-error.txt");
            format!("echo '{{epoch_num}} {{val-error-top1}}' >> {}", shell_word(&file.to_string_lossy()))
        })
    }
}

/// `text` as one word of a `SendStat` command: single-quoted for `sh` (a `'` inside becomes
/// `'\''`: close the quote, an escaped quote, reopen), so that the shell expands nothing in it,
/// and with its braces doubled, so that `SendStat` reads none of them as a placeholder.
pub fn shell_word(text: &str) -> String {
    let mut word = String::with_capacity(text.len() + 2);
    word.push('\'');
    for c in text.chars() {
        match c {
            '\'' => word.push_str("'\\''"),
            '{' => word.push_str("{{"),
            '}' => word.push_str("}}"),
            c => word.push(c),
        }
    }
    word.push('\'');
    word
}

/// tensorpack's ResNet schedule, `[(30, 1e-2), (60, 1e-3), (85, 1e-4), (95, 1e-5)]` over 105
/// epochs after a start at 0.1, scaled to `epochs` and to Adam's learning rates (a tenth of
/// SGD's): the epochs `epochs * 30 / 105` and so on, each point set after its epoch.
pub fn schedule(epochs: u64) -> Vec<(u64, f64)> {
    let mut points = vec![(0, 1e-2)];
    for (at, value) in [(30, 1e-3), (60, 1e-4), (85, 1e-5), (95, 1e-6)] {
        let epoch = (epochs * at / 105).max(1);
        if epoch > points.last().map_or(0, |p| p.0) && epoch < epochs {
            points.push((epoch, value));
        }
    }
    points
}

/// The outputs of training and validation: the loss as `"cost"`, the per-sample top-1 and top-5
/// errors as `"wrong-top1"` and `"wrong-top5"` (a sample is wrong in the top `k` when `k` or
/// more logits are greater than its label's), and the batch's top-1 error as
/// `"train-error-top1"`. Returns the loss.
pub fn outputs(model: &Mlp, batch: DigitBatch, out: &mut Outputs) -> Tensor<1> {
    let logits = model.forward(batch.images);
    let loss = burn::nn::loss::CrossEntropyLossConfig::new()
        .init(&logits.device())
        .forward(logits.clone(), batch.labels.clone());
    let [n, _] = logits.dims();
    let label_logit = logits.clone().gather(1, batch.labels.clone().reshape([n, 1]));
    let above = logits.greater(label_logit).int().sum_dim(1).reshape([n]);
    let wrong = above.clone().greater_equal_elem(1).float();
    out.put("train-error-top1", wrong.clone().mean());
    out.put("wrong-top1", wrong);
    out.put("wrong-top5", above.greater_equal_elem(5).float());
    out.put("cost", loss.clone());
    loss
}

/// Train the digits MLP with the list. Returns the report.
pub fn train_with_list(config: &ListConfig) -> burn_stoker::Result<TrainReport<Mlp>> {
    let split = load_digits(config.seed, 0.2);
    let device = &config.device;
    let train = loader(split.train, 32, Some(config.seed), device);
    let valid = loader(split.valid, 256, None, device);
    device.seed(config.seed);
    let model = Mlp::new(256, device);
    let validation = InferenceRunner::new(valid, |model: &Mlp, batch: DigitBatch, out: &mut Outputs| {
        outputs(model, batch, out);
    })
    .with(ClassificationError::new("wrong-top1", "val-error-top1"))
    .with(ClassificationError::new("wrong-top5", "val-error-top5"));
    let schedule = schedule(config.epochs);
    let callbacks = (
        // Validation first: the callbacks of one event run in this order, and MinSaver and
        // SendStat read the value it puts in the same `trigger_epoch`. (tensorpack lists the
        // savers first; its MinSaver then compares the previous epoch's value.)
        PeriodicTrigger::new(validation).every_k_epochs(config.eval_freq),
        PeriodicTrigger::new(ModelSaver::new(config.history)).every_k_epochs(config.serialize),
        MinSaver::new("val-error-top1"),
        ScheduledHyperParamSetter::new("learning_rate", schedule.clone()),
        HumanHyperParamSetter::new("learning_rate"),
        SendStat::new(config.command(), ["val-error-top1"])?,
        GpuUtilizationTracker::new(),
        InjectShell::new(),
        EstimatedTimeLeft::new(),
        MovingAverageSummary::new(["cost", "train-error-top1"]),
    );
    let defaults = DefaultCallbacks {
        progress: config.progress_bar.then(|| ProgressBar::new().show(["cost"])),
        ..DefaultCallbacks::default()
    };
    let report = Trainer::new(model, AdamConfig::new().init(), train)
        // The schedule's first value from the start, so that `hyper.txt` is created with it.
        .learning_rate(schedule[0].1)
        .max_epoch(config.epochs)
        .log_dir(&config.log_dir)
        .default_callbacks(defaults)
        .callbacks(callbacks)
        .train(|model: &Mlp, batch: DigitBatch, step: &mut Step<'_>| outputs(model, batch, step.outputs()))?;
    Ok(report)
}
