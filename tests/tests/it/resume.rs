//! A resumed run continues as if it had never stopped: trained straight or stopped, dropped and
//! resumed from its log directory, a run ends with the same weights, optimizer state,
//! hyper-parameters, callback states, monitors and `stats.json`, bit for bit on the CPU with a
//! seeded data order — at an epoch boundary and in the middle of an epoch.

use std::path::Path;
use std::sync::{Arc, Mutex};

use burn::data::dataloader::batcher::Batcher;
use burn::data::dataloader::{DataLoader, DataLoaderBuilder};
use burn::data::dataset::InMemDataset;
use burn::module::Module;
use burn::nn::Linear;
use burn::optim::{AdamConfig, GradientsParams, ModuleOptimizer};
use burn::tensor::{Bytes, Device, Tensor, TensorData};
use burn_stoker::prelude::*;
use burn_stoker::{CheckpointError, Error, saver::Checkpoint};
use stoker_tests::{StopAt, mse, scratch_dir, tiny_model, weights};

type Batch = (Tensor<2>, Tensor<2>);

#[derive(Clone, Debug)]
struct PointBatcher;

impl Batcher<[f32; 3], Batch> for PointBatcher {
    fn batch(&self, items: Vec<[f32; 3]>, device: &Device) -> Batch {
        let n = items.len();
        let xs: Vec<f32> = items.iter().flat_map(|p| [p[0], p[1]]).collect();
        let ys: Vec<f32> = items.iter().map(|p| p[2]).collect();
        (
            Tensor::from_data(TensorData::new(xs, [n, 2]), device),
            Tensor::from_data(TensorData::new(ys, [n, 1]), device),
        )
    }
}

/// 22 points of y = 2 x0 - x1 + 0.5 in batches of 4 (the last of 2), reshuffled every pass from
/// `seed`: the order of a later pass depends on how many passes came before.
fn shuffled_data(device: &Device) -> Arc<dyn DataLoader<Batch>> {
    let points: Vec<[f32; 3]> = (0..22)
        .map(|i| {
            let (a, b) = ((i as f32 * 0.37).sin(), (i as f32 * 0.91).cos());
            [a, b, 2.0 * a - b + 0.5]
        })
        .collect();
    DataLoaderBuilder::new(PointBatcher)
        .batch_size(4)
        .shuffle(7)
        .set_device(device.clone())
        .build(InMemDataset::new(points))
}

/// Counts steps and sums the loss (fetched every step); puts their mean each epoch.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct LossTracker {
    steps: u64,
    sum: f64,
}

#[callback(state)]
impl LossTracker {
    #[on(after_step)]
    #[fetch("loss")]
    fn track(&mut self, loss: f32) {
        self.steps += 1;
        self.sum += f64::from(loss);
    }

    #[on(trigger_epoch)]
    fn report(&mut self, ctx: &mut Context<'_, impl Module>) {
        ctx.monitors().put_scalar("mean_loss", self.sum / self.steps as f64);
    }
}

/// LossTracker's losses as a deferred fetch: each arrives at a later step with the step it belongs
/// to, and the list of those steps is saved in checkpoints. A resumed run must receive every step
/// once: none twice (a read delivered before the checkpoint and again after the resume), none
/// lost (a read in flight when the checkpoint was written).
#[derive(Debug, Default)]
struct DeferredSteps {
    steps: Vec<u64>,
    sum: f64,
}

static DEFERRED_LOSS: [Fetch; 1] = [Fetch::deferred("loss")];

impl Callback<Linear> for DeferredSteps {
    fn fetches(&self) -> &[Fetch] {
        &DEFERRED_LOSS
    }
    fn fetched(&mut self, _ctx: &mut Context<'_, Linear>, values: &Fetched<'_>) -> burn_stoker::Result<()> {
        self.steps.push(values.step());
        self.sum += f64::from(values.get::<f32>("loss")?);
        Ok(())
    }
    fn save_state(&self) -> burn_stoker::Result<Option<serde_json::Value>> {
        Ok(Some(serde_json::json!({ "steps": self.steps, "sum": self.sum })))
    }
    fn load_state(&mut self, state: serde_json::Value) -> burn_stoker::Result<()> {
        self.steps = serde_json::from_value(state["steps"].clone()).map_err(Error::other)?;
        self.sum = state["sum"].as_f64().ok_or_else(|| Error::msg("DeferredSteps: no sum"))?;
        Ok(())
    }
}

/// Puts the learning rate every 4 steps: rows of `stats.json` in the middle of epochs (6 steps
/// each), which a resumed run must continue exactly.
struct EveryFourSteps;

impl Callback<Linear> for EveryFourSteps {
    fn trigger_step(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        if ctx.global_step().is_multiple_of(4) {
            let lr = ctx.learning_rate();
            ctx.monitors().put_scalar("lr_every_4", lr);
        }
        Ok(())
    }
}

/// What the run saw in `before_train`: the global step, the tracker's state, the history.
#[derive(Clone, Default)]
struct SeenAtStart(Arc<Mutex<Option<(u64, usize, f64)>>>);

impl Callback<Linear> for SeenAtStart {
    fn before_train(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let history = ctx.monitors_ref().history("mean_loss").len();
        *self.0.lock().unwrap() = Some((ctx.global_step(), history, ctx.learning_rate()));
        Ok(())
    }
}

const EPOCHS: u64 = 6;

/// One run of the experiment: `every_step` checkpoints at every step instead of every epoch.
fn run(
    model: Linear,
    dir: &Path,
    every_step: bool,
    stop_at: Option<u64>,
    resume: bool,
    seen: SeenAtStart,
) -> burn_stoker::Result<TrainReport<Linear>> {
    let device = burn_stoker::device::cpu();
    let saver = if every_step {
        PeriodicTrigger::new(ModelSaver::new(100)).every_k_steps(1)
    } else {
        PeriodicTrigger::new(ModelSaver::new(100)).every_k_epochs(1)
    };
    let callbacks = (
        LossTracker::default(),
        ScheduledHyperParamSetter::new("learning_rate", [(0, 2e-2), (3, 1e-2), (5, 5e-3)]).linear(),
        ScheduledHyperParamSetter::new("momentum_like", [(0, 0.5), (4, 0.0)]),
        saver,
        MinSaver::new("mean_loss"),
        seen,
        EveryFourSteps,
        burn_stoker::monitor::HistoryWriter::new(),
        burn_stoker::track::Recorder::new().valid_loss("mean_loss"),
        stop_at.map(StopAt),
        DeferredSteps::default(),
    );
    Trainer::new(model, AdamConfig::new().init(), shuffled_data(&device))
        .default_callbacks(DefaultCallbacks { progress: None, printer: None, ..DefaultCallbacks::default() })
        .hyper_param("momentum_like", 0.5)
        .handle_signals(false)
        .max_epoch(EPOCHS)
        .log_dir(dir)
        .auto_resume(resume)
        .callbacks(callbacks)
        .train(|model: &Linear, batch: Batch, step: &mut Step<'_>| {
            // A hyper-parameter the step reads: its value must be the restored one.
            let scale = 1.0 + step.hyper("momentum_like").unwrap_or(0.0) as f32;
            mse(model, batch).mul_scalar(scale)
        })
        .map_err(burn_stoker::Error::from)
}

/// The weights after one Adam step on `model` from the optimizer state `bytes`.
fn one_more_step(bytes: &[u8], model: Linear) -> Vec<Vec<f32>> {
    let device = burn_stoker::device::cpu();
    let optimizer: ModuleOptimizer = AdamConfig::new().init();
    let mut optimizer = optimizer.from_bytes(Bytes::from_bytes_vec(bytes.to_vec())).expect("optimizer state");
    let batch = shuffled_data(&device).iter().next().expect("a batch").expect("a batch");
    let grads = GradientsParams::from_grads(mse(&model, batch).backward(), &model);
    weights(&optimizer.step(1e-2, model, grads))
}

/// The state of an optimizer that never stepped.
fn fresh_optimizer_bytes(_model: &Linear) -> Vec<u8> {
    let optimizer: ModuleOptimizer = AdamConfig::new().init();
    optimizer.into_bytes().expect("serializing").to_vec()
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The lines of the journal a checkpoint's `mark` names (`{"file", "len", "crc32c"}`), up to its
/// length, grouped by what they record (a scalar's values by name, the rows, a recorder's
/// losses, its learning rates), each group in its order: two runs that record the same history
/// have the same groups, whichever steps their checkpoints appended at.
fn journal_lines(mark: &serde_json::Value) -> std::collections::BTreeMap<String, Vec<String>> {
    let bytes = read(Path::new(mark["file"].as_str().expect("the journal's file")));
    let len = mark["len"].as_u64().expect("the journal's length") as usize;
    assert_eq!(crc32c_of(&bytes[..len]), mark["crc32c"].as_u64().unwrap(), "the journal's checksum");
    let mut groups = std::collections::BTreeMap::<String, Vec<String>>::new();
    for line in String::from_utf8(bytes[..len].to_vec()).unwrap().lines() {
        let entry: Vec<serde_json::Value> = serde_json::from_str(line).unwrap();
        let group = match entry[0].as_str().unwrap() {
            "h" => format!("h {}", entry[1]),
            kind => kind.to_string(),
        };
        groups.entry(group).or_default().push(line.to_string());
    }
    groups
}

/// CRC-32C (Castagnoli), bit by bit: what the journal's mark records.
fn crc32c_of(bytes: &[u8]) -> u64 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0x82f6_3b78 } else { crc >> 1 };
        }
    }
    u64::from(!crc)
}

/// A checkpoint's saved state without its journal's mark (which names a file of its own run).
fn without_journal(state: &serde_json::Value) -> serde_json::Value {
    let mut state = state.clone();
    if let Some(object) = state.as_object_mut() {
        object.remove("journal");
    }
    state
}

/// Train straight; train to `stop`, drop everything, resume from the directory and finish; then
/// compare everything a run leaves.
fn straight_and_resumed(every_step: bool, stop: u64) {
    let device = burn_stoker::device::cpu();
    let model = tiny_model(&device);

    let straight_dir = scratch_dir("resume-straight");
    let straight =
        run(model.clone(), &straight_dir, every_step, None, false, SeenAtStart::default()).unwrap();
    assert_eq!(straight.outcome, Outcome::Finished);
    assert_eq!(straight.counters.global_step(), EPOCHS * 6);

    let split_dir = scratch_dir("resume-split");
    let first =
        run(model.clone(), &split_dir, every_step, Some(stop), false, SeenAtStart::default()).unwrap();
    assert!(matches!(first.outcome, Outcome::Stopped(_)), "{:?}", first.outcome);
    assert_eq!(first.counters.global_step(), stop);
    let stopped_at = Checkpoint::latest(&split_dir).unwrap().expect("a checkpoint");
    assert_eq!(stopped_at.global_step(), stop);
    drop(first);

    // A fresh model (other weights) and fresh callbacks: everything comes from the directory.
    let seen = SeenAtStart::default();
    let resumed = run(tiny_model(&device), &split_dir, every_step, None, true, seen.clone()).unwrap();
    assert_eq!(resumed.outcome, Outcome::Finished);
    assert_eq!(
        (resumed.counters.epoch_num(), resumed.counters.global_step()),
        (straight.counters.epoch_num(), straight.counters.global_step())
    );
    let (step_at_start, history_at_start, lr_at_start) = seen.0.lock().unwrap().expect("before_train ran");
    assert_eq!(step_at_start, stop, "before_train sees the restored counters");
    assert_eq!(history_at_start as u64, stop / 6, "before_train sees the restored history");
    assert!(lr_at_start > 0.0);

    // Weights, bit for bit.
    assert_eq!(weights(&resumed.model), weights(&straight.model));

    let a = Checkpoint::latest(&straight_dir).unwrap().unwrap();
    let b = Checkpoint::latest(&split_dir).unwrap().unwrap();
    assert_eq!(a.global_step(), EPOCHS * 6);
    assert_eq!(b.global_step(), EPOCHS * 6);
    // The same parameters (same ids, same weights), byte for byte.
    assert_eq!(a.model_bytes(), b.model_bytes(), "model.bpk");
    // The same optimizer state: burn writes its per-parameter states in hash-map order, so the
    // bytes may differ in layout; one more step from each must give the same weights.
    assert_eq!(
        one_more_step(a.optimizer_bytes(), straight.model.clone()),
        one_more_step(b.optimizer_bytes(), straight.model.clone()),
        "optimizer state"
    );
    assert_ne!(
        one_more_step(a.optimizer_bytes(), straight.model.clone()),
        one_more_step(&fresh_optimizer_bytes(&straight.model), straight.model.clone()),
        "the saved optimizer state matters (Adam's moments and time)"
    );
    // Hyper-parameters, callback states, counters, data position: the whole trainer.json (the
    // Recorder's journal is a file of each run's own, compared below).
    let without_recorder_journal = |state: &serde_json::Value| {
        let mut state = state.clone();
        state["callbacks"]["Recorder"]["journal"]["file"] = serde_json::Value::Null;
        state
    };
    assert_eq!(without_recorder_journal(a.trainer_state()), without_recorder_journal(b.trainer_state()));
    assert_eq!(a.hyper_param("momentum_like"), Some(0.0));
    let tracker = a.callback_state("LossTracker").expect("the tracker's state is saved");
    assert_eq!(tracker["steps"], EPOCHS * 6);
    // The deferred losses: every step once, in order, the very values the synchronous fetch read
    // (the same f64 sum, bit for bit), after a resume as in the straight run.
    for checkpoint in [&a, &b] {
        let deferred = checkpoint.callback_state("DeferredSteps").expect("the deferred tracker's state");
        let steps: Vec<u64> = serde_json::from_value(deferred["steps"].clone()).unwrap();
        assert_eq!(steps, (1..=EPOCHS * 6).collect::<Vec<u64>>());
        assert_eq!(deferred["sum"].as_f64().map(f64::to_bits), tracker["sum"].as_f64().map(f64::to_bits));
    }
    assert!(a.callback_state("MinSaver(mean_loss)").is_some_and(|s| s["best"].is_number()));
    // The monitors' history (in their journals, beside the checkpoints) and stats.json.
    assert_eq!(without_journal(a.monitors_state()), without_journal(b.monitors_state()));
    let (journal_a, journal_b) = (&a.monitors_state()["journal"], &b.monitors_state()["journal"]);
    assert_eq!(journal_lines(journal_a), journal_lines(journal_b));
    assert!(journal_lines(journal_a).contains_key("h \"mean_loss\""), "the values are in the journal");
    assert_eq!(read(&straight_dir.join("stats.json")), read(&split_dir.join("stats.json")));
    // A row at each epoch's end (steps 6, 12, ... 36) and at every 4th step between (4, 8, 16,
    // 20, 28, 32): what the callback put every 4 steps is all there.
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&read(&split_dir.join("stats.json"))).unwrap();
    let steps: Vec<u64> = rows.iter().map(|r| r["global_step"].as_u64().unwrap()).collect();
    assert_eq!(steps, [4, 6, 8, 12, 16, 18, 20, 24, 28, 30, 32, 36]);
    let every_4: Vec<u64> = rows
        .iter()
        .filter(|r| r.get("lr_every_4").is_some())
        .map(|r| r["global_step"].as_u64().unwrap())
        .collect();
    assert_eq!(every_4, [4, 8, 12, 16, 20, 24, 28, 32, 36]);
    // neon's output_file: every value put, the same as the straight run's.
    let history = read(&split_dir.join("history.jsonl"));
    assert_eq!(read(&straight_dir.join("history.jsonl")), history);
    assert_eq!(
        String::from_utf8(history).unwrap().lines().count(),
        6 + 9,
        "mean_loss 6 times, lr_every_4 9 times"
    );
    // fastai's Recorder: its records come back from the checkpoint, so the resumed run's plot of
    // the losses is the straight run's, pixel for pixel.
    let (recorder_a, recorder_b) =
        (a.callback_state("Recorder").unwrap(), b.callback_state("Recorder").unwrap());
    assert_eq!(without_journal(recorder_a), without_journal(recorder_b));
    let losses = journal_lines(&recorder_a["journal"]);
    assert_eq!(losses["l"].len(), 36, "every step's loss is in the recorder's journal");
    assert_eq!(losses, journal_lines(&recorder_b["journal"]));
    assert_eq!(read(&straight_dir.join("loss.png")), read(&split_dir.join("loss.png")));
    // The best copy is the same checkpoint.
    let best_a = Checkpoint::read(straight_dir.join("checkpoints/min-mean_loss")).unwrap();
    let best_b = Checkpoint::read(split_dir.join("checkpoints/min-mean_loss")).unwrap();
    assert_eq!(best_a.global_step(), best_b.global_step());
    assert_eq!(best_a.model_bytes(), best_b.model_bytes());
}

#[test]
fn resumed_at_an_epoch_boundary_ends_equal_to_a_straight_run() {
    straight_and_resumed(false, 18);
}

#[test]
fn resumed_in_the_middle_of_an_epoch_ends_equal_to_a_straight_run() {
    // Step 16 is the fourth step of epoch 3: the resumed run replays three passes over the
    // shuffled data and skips four batches of the third.
    straight_and_resumed(true, 16);
}

#[test]
fn resuming_a_finished_run_trains_nothing_more() {
    let device = burn_stoker::device::cpu();
    let dir = scratch_dir("resume-finished");
    let done = run(tiny_model(&device), &dir, false, None, false, SeenAtStart::default()).unwrap();
    let again = run(tiny_model(&device), &dir, false, None, true, SeenAtStart::default()).unwrap();
    assert_eq!(again.counters.global_step(), done.counters.global_step());
    assert_eq!(weights(&again.model), weights(&done.model));
}

#[test]
fn resume_from_a_missing_directory_is_an_error_naming_it() {
    let device = burn_stoker::device::cpu();
    let dir = scratch_dir("resume-missing");
    let error = Trainer::new(tiny_model(&device), AdamConfig::new().init(), shuffled_data(&device))
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .log_dir(&dir)
        .resume_from(dir.join("nowhere"))
        .train(|model: &Linear, batch: Batch, _step: &mut Step<'_>| mse(model, batch))
        .expect_err("an error")
        .error;
    assert!(matches!(error, Error::Checkpoint(CheckpointError::NotFound { .. })), "{error:?}");
    assert!(error.to_string().contains("nowhere"), "{error}");
}

#[test]
fn a_run_resumed_from_an_older_checkpoint_continues_tensorboard_and_stats_json_without_duplicates() {
    let device = burn_stoker::device::cpu();
    let model = tiny_model(&device);
    let straight_dir = scratch_dir("resume-tb-straight");
    run(model.clone(), &straight_dir, false, None, false, SeenAtStart::default()).unwrap();

    // A run that got to step 24, as if it had crashed after logging epochs 3 and 4 but the
    // checkpoints after step 12 were lost: resume from step-12.
    let dir = scratch_dir("resume-tb-crashed");
    run(model.clone(), &dir, false, Some(24), false, SeenAtStart::default()).unwrap();
    // (The experiment's `run` resumes from the latest checkpoint: this one is built by hand.)
    let callbacks = (
        LossTracker::default(),
        ScheduledHyperParamSetter::new("learning_rate", [(0, 2e-2), (3, 1e-2), (5, 5e-3)]).linear(),
        ScheduledHyperParamSetter::new("momentum_like", [(0, 0.5), (4, 0.0)]),
        PeriodicTrigger::new(ModelSaver::new(100)).every_k_epochs(1),
        MinSaver::new("mean_loss"),
        EveryFourSteps,
    );
    Trainer::new(tiny_model(&device), AdamConfig::new().init(), shuffled_data(&device))
        .default_callbacks(DefaultCallbacks { progress: None, printer: None, ..DefaultCallbacks::default() })
        .hyper_param("momentum_like", 0.5)
        .handle_signals(false)
        .max_epoch(EPOCHS)
        .log_dir(&dir)
        .resume_from(dir.join("checkpoints/step-12"))
        .callbacks(callbacks)
        .train(|model: &Linear, batch: Batch, step: &mut Step<'_>| {
            let scale = 1.0 + step.hyper("momentum_like").unwrap_or(0.0) as f32;
            mse(model, batch).mul_scalar(scale)
        })
        .unwrap();
    // The newer checkpoints of the abandoned run are set aside, not deleted.
    assert!(dir.join("checkpoints/step-18.abandoned").is_dir());
    assert!(dir.join("checkpoints/step-24.abandoned").is_dir());
    assert_eq!(Checkpoint::latest(&dir).unwrap().unwrap().global_step(), 36);
    // stats.json: rewritten from the checkpoint, then continued (the old one backed up).
    assert_eq!(read(&straight_dir.join("stats.json")), read(&dir.join("stats.json")));
    let backups = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with("stats.json.bak-"))
        .count();
    assert_eq!(backups, 1);

    // TensorBoard's own reader sees each epoch's mean_loss once, with the straight run's values.
    let stats: Vec<serde_json::Value> =
        serde_json::from_slice(&read(&straight_dir.join("stats.json"))).unwrap();
    let expected: Vec<(u64, f64)> = stats
        .iter()
        .filter_map(|e| Some((e["global_step"].as_u64().unwrap(), e.get("mean_loss")?.as_f64().unwrap())))
        .collect();
    assert_eq!(expected.len() as u64, EPOCHS);
    let expect_file = dir.join("expected.json");
    std::fs::write(&expect_file, serde_json::json!({ "mean_loss": expected }).to_string()).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/check_tensorboard.py");
    let output =
        std::process::Command::new("python3").arg(script).arg(&dir).arg(&expect_file).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("ok: 6 scalars in 1 tags"),
        "TensorBoard's reader disagrees:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
