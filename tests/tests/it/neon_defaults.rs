//! neon's defaults and what a neon user sees: the switches of `neon.util.argparser` parsed and
//! acted on (`--save_path` implying `--serialize`, `--history` 1 and what `-H K` keeps,
//! `--serialize 0`, `-eval`, `--model_file`), the progress bar's smoothed cost and last
//! validation loss, `SaveBestState`'s file as a state a run resumes from, and `SaveBestState` /
//! `EarlyStop` under `--eval_freq 2` (neon/callbacks/callbacks.py, neon/util/argparser.py).

use std::path::Path;
use std::sync::{Arc, Mutex};

use burn::module::Module;
use burn::nn::Linear;
use burn_stoker::cli::{CallbackArgs, normalize_args};
use burn_stoker::compat::neon::early_stop;
use burn_stoker::prelude::*;
use burn_stoker::saver::{Checkpoint, LoadModel, SaveBestState};
use burn_stoker::track::ProgressBar;
use clap::Parser;
use stoker_tests::{mse, scratch_dir, tiny_data, tiny_model, weights};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    callbacks: CallbackArgs,
}

fn parse(args: &[&str]) -> CallbackArgs {
    Cli::try_parse_from(std::iter::once("train").chain(args.iter().copied())).unwrap().callbacks
}

type Weights = Vec<Vec<f32>>;

/// A log of the model's weights: `(epoch, weights)` at each epoch's end, and the weights the
/// first step of the run starts from.
#[derive(Clone, Default)]
struct WeightLog {
    epochs: Arc<Mutex<Vec<(u64, Weights)>>>,
    first: Arc<Mutex<Option<(u64, Weights)>>>,
}

impl Callback<Linear> for WeightLog {
    fn before_step(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let mut first = self.first.lock().unwrap();
        if first.is_none() {
            *first = Some((ctx.global_step(), weights(ctx.model())));
        }
        Ok(())
    }
    fn after_epoch(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.epochs.lock().unwrap().push((ctx.epoch_num(), weights(ctx.model())));
        Ok(())
    }
}

impl WeightLog {
    fn at(&self, epoch: u64) -> Weights {
        self.epochs.lock().unwrap().iter().find(|(e, _)| *e == epoch).expect("epoch recorded").1.clone()
    }
    fn first(&self) -> (u64, Weights) {
        self.first.lock().unwrap().clone().expect("a step ran")
    }
}

/// A validation at every epoch's end that puts `val_loss` from a script (epoch 1 first).
struct Validation(Vec<f64>);

impl Callback<Linear> for Validation {
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        ctx.request_validation()
    }
    fn validate(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let value = self.0[ctx.epoch_num() as usize - 1];
        ctx.monitors().put_scalar("val_loss", value);
        ctx.monitors().put_scalar("validation_cost", value);
        Ok(())
    }
}

fn trainer(
    dir: &Path,
    epochs: u64,
) -> Trainer<Linear, Vec<(burn::tensor::Tensor<2>, burn::tensor::Tensor<2>)>> {
    let device = burn_stoker::device::cpu();
    Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(3, &device))
        .learning_rate(0.1)
        .max_epoch(epochs)
        .log_dir(dir)
        .handle_signals(false)
        .default_callbacks(DefaultCallbacks::none())
}

fn step_fn(
    model: &Linear,
    batch: (burn::tensor::Tensor<2>, burn::tensor::Tensor<2>),
    _: &mut Step<'_>,
) -> burn::tensor::Tensor<1> {
    mse(model, batch)
}

fn step_dirs(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("step-"))
        .collect();
    names.sort();
    names
}

#[test]
fn neon_switches_parse_with_neons_defaults() {
    let defaults = parse(&[]);
    // neon's `-H/--history` keeps 1 checkpoint by default.
    assert_eq!((defaults.history, defaults.serialize, defaults.save_path.as_deref()), (1, None, None));
    assert!(defaults.saver().is_none() && defaults.model_loader().is_none());
    // `--serialize` alone is every epoch (neon's nargs='?', const=1); short flags -s and -H.
    let args = parse(&["--serialize", "-s", "runs/a", "-H", "3", "--model_file", "best/model.bpk"]);
    assert_eq!(args.serialize, Some(1));
    assert_eq!(args.save_path.as_deref(), Some(Path::new("runs/a")));
    assert_eq!(args.history, 3);
    assert_eq!(args.model_loader().unwrap().path(), Path::new("best/model.bpk"));
    assert_eq!(parse(&["--serialize", "4"]).serialize, Some(4));
    // neon/util/argparser.py: `--serialize 0` is its default, no serialization; with
    // `--save_path` it becomes 1 ("No schedule given for model serialization").
    let off = parse(&["--serialize", "0"]);
    assert_eq!(off.serialize, Some(0));
    assert!(off.saver().is_none());
    assert!(parse(&["--serialize", "0", "-s", "runs/a"]).saver().is_some());
    // neon/callbacks/callbacks.py, SerializeModelCallback: `history > 1` keeps history + 1 files,
    // else the one file at save_path (-H 0 too).
    let kept: Vec<usize> =
        ["0", "1", "2", "3"].iter().map(|k| parse(&["-H", k]).kept_checkpoints()).collect();
    assert_eq!(kept, [1, 1, 3, 4]);
    // neon's `-eval N` (single dash), through `normalize_args`; `--eval` is clap's alias.
    let cli = Cli::try_parse_from(normalize_args(["train", "-eval", "3"])).unwrap();
    assert_eq!(cli.callbacks.eval_freq, Some(3));
    assert_eq!(parse(&["--eval", "4"]).eval_freq, Some(4));
}

#[test]
fn neon_save_path_alone_turns_checkpoints_on_every_epoch_keeping_history_1() {
    let dir = scratch_dir("neon-save-path");
    let path = dir.display().to_string();
    let args = parse(&["--save_path", &path]);
    let saver = args.saver().expect("--save_path implies --serialize 1");
    trainer(&args.log_dir("unused"), 3).callbacks(saver).train(step_fn).unwrap();
    // A checkpoint at each of the 3 epochs, the last one kept (--history 1).
    let root = dir.join("checkpoints");
    assert_eq!(step_dirs(&root), ["step-9"]);
    // --history 2, every second epoch of 4: steps 6 and 12.
    let dir = scratch_dir("neon-serialize-2");
    let path = dir.display().to_string();
    let args = parse(&["--save_path", &path, "--serialize", "2", "--history", "2"]);
    trainer(&dir, 4).callbacks(args.saver().unwrap()).train(step_fn).unwrap();
    assert_eq!(step_dirs(&dir.join("checkpoints")), ["step-12", "step-6"]);
}

/// neon/callbacks/callbacks.py, `SerializeModelCallback.save_history`: with `-H 2`, the oldest
/// file goes only once more than 2 are there, before the next is written: 3 remain.
#[test]
fn neon_history_k_keeps_what_neons_serialize_callback_keeps() {
    for (history, kept) in [("2", vec!["step-12", "step-15", "step-9"]), ("1", vec!["step-15"])] {
        let dir = scratch_dir("neon-history");
        let path = dir.display().to_string();
        let args = parse(&["--save_path", &path, "--serialize", "-H", history]);
        // 5 epochs of 3 steps, a checkpoint at each epoch's end: steps 3, 6, ..., 15.
        trainer(&dir, 5).callbacks(args.saver().unwrap()).train(step_fn).unwrap();
        assert_eq!(step_dirs(&dir.join("checkpoints")), kept, "-H {history}");
    }
}

/// A validation requested by its trigger (under `--eval_freq`'s `PeriodicTrigger`) that puts
/// `val_loss` from a script (epoch 1 first).
struct Evaluation(Vec<f64>);

impl Callback<Linear> for Evaluation {
    fn trigger(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        ctx.request_validation()
    }
    fn validate(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let value = self.0[ctx.epoch_num() as usize - 1];
        ctx.monitors().put_scalar("val_loss", value);
        Ok(())
    }
}

/// neon/callbacks/callbacks.py, `SaveBestStateCallback` and `EarlyStopCallback`: their
/// `_get_cached_epoch_loss` is None at an epoch `LossCallback` did not evaluate, and the epoch is
/// skipped. With `--eval_freq 2`, epoch 1 has no `val_loss` yet (this run failed there before),
/// epochs 2 and 4 have one; a resumed run goes on the same way.
#[test]
fn neon_eval_freq_2_skips_the_epochs_without_a_value_in_save_best_state_and_early_stop() {
    let dir = scratch_dir("neon-eval-freq-2");
    let args = parse(&["--eval_freq", "2", "--serialize", "-H", "9"]);
    // Only the even epochs' values are ever put.
    let script = vec![0.1, 0.5, 0.05, 0.25, 0.01, 0.75];
    let seen = Arc::new(Mutex::new(Vec::new()));
    let run = |epochs: u64, resume: bool| {
        let seen = seen.clone();
        let stop = early_stop("val_loss", move |(), value: f64| {
            seen.lock().unwrap().push(value);
            ((), false)
        });
        trainer(&dir, epochs)
            .auto_resume(resume)
            .callbacks((
                args.evaluation(Evaluation(script.clone())).unwrap(),
                SaveBestState::new("best", "val_loss"),
                stop,
                args.saver().unwrap(),
            ))
            .train(step_fn)
            .unwrap()
    };
    run(4, false);
    assert_eq!(*seen.lock().unwrap(), [0.5, 0.25], "EarlyStop called at epochs 2 and 4 only");
    let best = Checkpoint::read(dir.join("best")).unwrap();
    assert_eq!((best.epoch_num(), best.global_step()), (4, 12), "epoch 4's 0.25 is the best");
    // Resumed from epoch 4 to 6: epoch 5 skipped, epoch 6's 0.75 is worse than 0.25.
    let report = run(6, true);
    assert_eq!(report.counters.global_step(), 18);
    assert_eq!(*seen.lock().unwrap(), [0.5, 0.25, 0.75]);
    assert_eq!(Checkpoint::read(dir.join("best")).unwrap().global_step(), 12);
}

#[test]
fn neon_model_file_loads_the_weights_before_the_first_step() {
    let device = burn_stoker::device::cpu();
    let dir = scratch_dir("neon-model-file");
    // A model other than the one the trainer starts from, saved by plain burn.
    let other = trainer(&dir.join("first"), 2).train(step_fn).unwrap().model;
    let file = dir.join("other.bpk");
    other.clone().save_file(&file).unwrap();
    let expected = weights(&other);
    assert_ne!(expected, weights(&tiny_model(&device)));

    let path = file.display().to_string();
    let args = parse(&["--model_file", &path]);
    let log = WeightLog::default();
    trainer(&dir.join("second"), 1)
        .callbacks((args.model_loader().unwrap(), log.clone()))
        .train(step_fn)
        .unwrap();
    assert_eq!(log.first(), (0, expected.clone()));

    // A checkpoint folder is read through its model.bpk.
    let log = WeightLog::default();
    let saved = dir.join("third");
    trainer(&saved, 1).callbacks(ModelSaver::new(1)).train(step_fn).unwrap();
    let checkpoint = saved.join("checkpoints/step-3");
    let in_checkpoint = stoker_tests::checkpoint_weights(tiny_model(&device), &checkpoint);
    trainer(&dir.join("fourth"), 1)
        .callbacks((LoadModel::new(&checkpoint), log.clone()))
        .train(step_fn)
        .unwrap();
    assert_eq!(log.first().1, in_checkpoint);

    // A missing file is an error at setup, before any step, naming it.
    let missing = dir.join("missing.bpk");
    let log = WeightLog::default();
    let error = trainer(&dir.join("fifth"), 1)
        .callbacks((LoadModel::new(&missing), log.clone()))
        .train(step_fn)
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(error.contains("setup") && error.contains(&missing.display().to_string()), "{error}");
    assert!(log.first.lock().unwrap().is_none(), "no step ran");
}

/// A writer the tests read after training.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Shared {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn neon_progress_bar_shows_the_cost_smoothed_over_10_steps_and_the_last_validation_loss() {
    let dir = scratch_dir("neon-progress");
    let out = Shared::default();
    let defaults = DefaultCallbacks {
        progress: Some(ProgressBar::new().draw_to(out.clone())),
        ..DefaultCallbacks::none()
    };
    let device = burn_stoker::device::cpu();
    // 3 epochs of 20 steps; the step's loss is its global step number g (1 for the first).
    Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(20, &device))
        .max_epoch(3)
        .log_dir(&dir)
        .handle_signals(false)
        .default_callbacks(defaults)
        .callbacks(Validation(vec![2.5, 1.25, 0.75]))
        .train(|model: &Linear, batch, step: &mut Step<'_>| {
            let g = step.counters().global_step() + 1;
            mse(model, batch).mul_scalar(0.0).add_scalar(g as f32)
        })
        .unwrap();
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    // At each refresh (every 20 steps), the mean of the last 10 costs, neon's cost/train:
    // steps 11..=20 -> 15.5, 31..=40 -> 35.5, 51..=60 -> 55.5.
    for cost in ["cost=15.5", "cost=35.5", "cost=55.5"] {
        assert!(text.contains(cost), "{cost} missing:\n{text}");
    }
    // Never the mean of a partial window or of steps apart.
    let shown: Vec<&str> = text.split_whitespace().filter(|w| w.starts_with("cost=")).collect();
    assert!(shown.iter().all(|c| ["cost=15.5", "cost=35.5", "cost=55.5"].contains(c)), "{shown:?}");
    // The last validation loss after each validation: on the epoch's finished bar, then on the
    // next epoch's.
    for loss in ["validation_cost=2.5", "validation_cost=1.25", "validation_cost=0.75"] {
        assert!(text.contains(loss), "{loss} missing:\n{text}");
    }
    let last = text.lines().rev().find(|l| l.contains("epoch 3/3")).unwrap();
    assert!(last.contains("cost=55.5") && last.contains("validation_cost=0.75"), "{last}");
}

#[test]
fn neon_save_best_state_is_a_state_a_run_resumes_from() {
    let dir = scratch_dir("neon-best-state");
    let log = WeightLog::default();
    // The lowest val_loss at epoch 2 of 4.
    let history = vec![1.0, 0.5, 0.75, 0.9];
    trainer(&dir, 4)
        .callbacks((Validation(history.clone()), SaveBestState::new("best", "val_loss"), log.clone()))
        .train(step_fn)
        .unwrap();
    let best = dir.join("best");
    // A complete checkpoint of epoch 2 (3 steps per epoch): the weights and everything to go on.
    let checkpoint = Checkpoint::read(&best).unwrap();
    assert_eq!((checkpoint.epoch_num(), checkpoint.global_step()), (2, 6));
    assert!(!checkpoint.optimizer_bytes().is_empty());
    let device = burn_stoker::device::cpu();
    assert_eq!(stoker_tests::checkpoint_weights(tiny_model(&device), &best), log.at(2));
    assert_eq!(checkpoint.callback_state("SaveBestState(val_loss)").unwrap()["best"], 0.5);

    // A new run resumes from it: epoch 3 on, from epoch 2's weights.
    let resumed = WeightLog::default();
    let second = scratch_dir("neon-best-state-resumed");
    let report = trainer(&second, 4)
        .resume_from(&best)
        .callbacks((Validation(history), SaveBestState::new("best", "val_loss"), resumed.clone()))
        .train(step_fn)
        .unwrap();
    assert_eq!(resumed.first(), (6, log.at(2)));
    assert_eq!(report.counters.global_step(), 12);
    // Its best, restored, stays epoch 2's 0.5: epochs 3 and 4 (0.75, 0.9) write no worse state.
    assert!(!second.join("best").exists());
    assert_eq!(Checkpoint::read(&best).unwrap().global_step(), 6);
}
