//! Users' own models with the features they turn on together: a ConvNet with BatchNorm in a
//! data-parallel world (each rank's statistics its own, the chief's given to every rank at each
//! epoch's end); the ConvNet, an LSTM and a transformer encoder resumed bit for bit in a world
//! and, with dropout, on one device; a world under `LogDirPolicy::NewVersion` resuming every
//! rank from the chief's folder.

use std::path::Path;
use std::process::Command;

use burn::module::Module;
use burn::optim::AdamConfig;
use burn::tensor::{Device, Int, Tensor};
use burn_stoker::prelude::*;
use burn_stoker::world::Threads;
use stoker_tests::families::{
    ConvBn, LstmNet, TinyTransformer, all_bits, image_batches, sequence_batches, token_batches,
};
use stoker_tests::{CheckpointAndStop, scratch_dir};

/// Rows per batch, batches of the whole data (a world shares them out), epochs.
const ROWS: usize = 4;
const BATCHES: usize = 8;
const EPOCHS: u64 = 3;

type Images = Vec<(Tensor<4>, Tensor<2>)>;
type Bits = Vec<Vec<u32>>;

fn cpu() -> Device {
    burn_stoker::device::cpu()
}

/// A trainer of the ConvNet (dropout `p`) on `data`, Adam, no default callbacks, `dir`.
fn trainer(p: f64, data: Images, device: &Device, dir: &Path) -> Trainer<ConvBn, Images> {
    Trainer::new(ConvBn::new(p, device), AdamConfig::new().init(), data)
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .learning_rate(0.01)
        .max_epoch(EPOCHS)
        .log_dir(dir)
}

/// Two ranks of the threads transport train `model` on their shards of `data` in `dir`, Adam,
/// `EPOCHS` epochs; `stop_at`: a checkpoint and a stop at that global step; `resume`: from
/// `dir`'s checkpoint. Returns each rank's global step and every float tensor's bits.
fn world_of<M: Module + 'static, B: Clone + 'static>(
    (model, data, step): Family<M, B>,
    dir: &Path,
    stop_at: Option<u64>,
    resume: bool,
    policy: LogDirPolicy,
) -> Vec<(u64, Bits)> {
    Threads::new([cpu(), cpu()])
        .run(|world| {
            let device = world.device().clone();
            let report = Trainer::new(model(&device), AdamConfig::new().init(), world.shard(data(&device)))
                .default_callbacks(DefaultCallbacks::none())
                .handle_signals(false)
                .learning_rate(0.01)
                .max_epoch(EPOCHS)
                .log_dir(dir)
                .log_dir_policy(policy)
                .auto_resume(resume)
                .callbacks(stop_at.map(CheckpointAndStop))
                .world(world)
                .train(step)?;
            Ok::<_, TrainError<M>>((report.counters.global_step(), all_bits(&report.model)))
        })
        .expect("the world trains")
}

/// A family's step function.
type StepFn<M, B> = fn(&M, B, &mut Step<'_>) -> Tensor<1>;

/// A family in a world: each rank's model and data on its device, and the step.
type Family<M, B> = (fn(&Device) -> M, fn(&Device) -> Vec<B>, StepFn<M, B>);

/// The ConvNet without dropout (the ranks of one process share burn-flex's generator).
fn convnet() -> Family<ConvBn, (Tensor<4>, Tensor<2>)> {
    (|device| ConvBn::new(0.0, device), |device| image_batches(BATCHES, ROWS, device), ConvBn::step)
}

/// [`world_of`] the ConvNet.
fn world(dir: &Path, stop_at: Option<u64>, resume: bool, policy: LogDirPolicy) -> Vec<(u64, Bits)> {
    world_of(convnet(), dir, stop_at, resume, policy)
}

#[test]
fn batchnorm_in_a_world_of_two_threads_keeps_the_replicas_equal_and_repeats_bit_for_bit() {
    // Before each rank owned its statistics, the ranks' replicas shared them (burn's clone of a
    // `RunningState` shares it), the ranks updated them at racy moments, and the replicas'
    // check failed at the end of the first epoch in most runs.
    let runs: Vec<Vec<(u64, Bits)>> =
        (0..3).map(|_| world(&scratch_dir("bn-world"), None, false, LogDirPolicy::Refuse)).collect();
    let steps = EPOCHS * (BATCHES / 2) as u64;
    for ranks in &runs {
        assert_eq!(ranks[0].0, steps);
        assert_eq!(ranks[0], ranks[1], "both ranks end with the same weights and statistics");
    }
    assert_eq!(runs[0], runs[1], "a run repeats bit for bit");
    assert_eq!(runs[0], runs[2], "a run repeats bit for bit");
    // The statistics moved: BatchNorm's running mean (zeros at the start) is not zero.
    let bn_mean = &runs[0][0].1[4];
    assert!(bn_mean.iter().any(|&bits| f32::from_bits(bits) != 0.0), "{bn_mean:?}");
}

#[test]
fn in_a_world_each_rank_updates_its_own_batchnorm_statistics_and_every_rank_ends_with_the_chiefs() {
    // Learning rate 0: the weights stay as they are and the statistics follow the batches
    // alone, so the chief's are what one device computes over the chief's shard (batches 0, 2,
    // ...). Before, the ranks' replicas shared one set of statistics (burn's clone of a
    // `RunningState`), which averaged both ranks' updates.
    let dir = scratch_dir("bn-world-own");
    let chiefs: Images = image_batches(BATCHES, ROWS, &cpu()).into_iter().step_by(2).collect();
    let single = trainer(0.0, chiefs, &cpu(), &scratch_dir("bn-world-own-single"))
        .learning_rate(0.0)
        .train(ConvBn::step)
        .expect("one device");
    let single = all_bits(&single.model);
    let ranks = Threads::new([cpu(), cpu()])
        .run(|world| {
            let data = world.shard(image_batches(BATCHES, ROWS, world.device()));
            let device = world.device().clone();
            let report =
                trainer(0.0, data, &device, &dir).learning_rate(0.0).world(world).train(ConvBn::step)?;
            Ok::<_, TrainError<ConvBn>>(all_bits(&report.model))
        })
        .expect("the world trains");
    assert_eq!(ranks[0], single, "the chief's statistics are its own batches'");
    assert_eq!(ranks[1], single, "every rank ends an epoch with the chief's");
}

#[test]
fn batchnorm_in_a_world_of_two_threads_resumes_bit_for_bit() {
    let straight = world(&scratch_dir("bn-world-straight"), None, false, LogDirPolicy::Refuse);
    let dir = scratch_dir("bn-world-resumed");
    // Stopped in the middle of the second epoch, then resumed from its checkpoint.
    let stopped = world(&dir, Some(6), false, LogDirPolicy::Refuse);
    // The chief's stop is agreed at the next step's exchange; its checkpoint is step 6's.
    assert_eq!(stopped[0].0, 7);
    let resumed = world(&dir, None, true, LogDirPolicy::Refuse);
    assert_eq!(resumed, straight, "every rank's weights and statistics, bit for bit");
}

#[test]
fn a_world_under_new_version_resumes_every_rank_from_the_chiefs_folder() {
    // Before, only the chief mapped the log directory to its `version_N`: rank 1 looked for a
    // checkpoint in the base folder, started at step 0, and the ranks' counters disagreed.
    let straight = world(&scratch_dir("bn-world-version-straight"), None, false, LogDirPolicy::NewVersion);
    let dir = scratch_dir("bn-world-version");
    let stopped = world(&dir, Some(5), true, LogDirPolicy::NewVersion);
    assert_eq!(stopped[0].0, 6, "stopped one step after the chief's checkpoint at step 5");
    assert!(dir.join("version_0/checkpoints").is_dir());
    let resumed = world(&dir, None, true, LogDirPolicy::NewVersion);
    assert_eq!(resumed, straight);
    assert!(!dir.join("version_1").exists(), "the resume trained in version_0");
}

const CHILD: &str = "STOKER_FAMILIES_TEST_CHILD";

/// `model` trained on `data` on one device, seeded, Adam, `EPOCHS` epochs, in `dir`; `stop_at`:
/// a checkpoint and a stop there; `resume`: from `dir`. Returns the global step and every float
/// tensor's bits.
fn one_device<M: Module + 'static, B: Clone + 'static>(
    (model, data, step): (M, Vec<B>, StepFn<M, B>),
    dir: &Path,
    stop_at: Option<u64>,
    resume: bool,
) -> (u64, Bits) {
    let report = Trainer::new(model, AdamConfig::new().init(), data)
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .learning_rate(0.01)
        .max_epoch(EPOCHS)
        .log_dir(dir)
        .seed(7)
        .auto_resume(resume)
        .callbacks(stop_at.map(CheckpointAndStop))
        .train(step)
        .expect("training");
    (report.counters.global_step(), all_bits(&report.model))
}

/// A family trained straight (twice: a seeded run repeats), and stopped in the middle of the
/// second epoch then resumed: all three end bit for bit.
fn resumes_on_one_device<M: Module + 'static, B: Clone + 'static>(
    name: &str,
    family: impl Fn() -> (M, Vec<B>, StepFn<M, B>),
) {
    let straight = one_device(family(), &scratch_dir(name), None, false);
    assert_eq!(
        straight,
        one_device(family(), &scratch_dir(name), None, false),
        "{name}: a seeded run repeats"
    );
    let dir = scratch_dir(name);
    assert_eq!(one_device(family(), &dir, Some(11), false).0, 11);
    assert_eq!(one_device(family(), &dir, None, true), straight, "{name}: the resumed run, bit for bit");
}

#[test]
fn dropout_and_batchnorm_on_one_device_resume_bit_for_bit() {
    // Dropout draws from burn's generator, one per process: the runs go to a child process of
    // their own, where no other test draws meanwhile.
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &stoker_tests::test_path(module_path!(), "dropout_resume_child"),
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .output()
        .expect("running the test binary");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stdout));
    assert!(String::from_utf8_lossy(&output.stdout).contains("1 passed"));
}

#[test]
fn dropout_resume_child() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    // Before, the resumed run's dropout drew what the first steps had drawn, and BatchNorm's
    // checkpoint lacked its last update.
    let device = cpu();
    resumes_on_one_device("dropout-convnet", || {
        (ConvBn::new(0.3, &device), image_batches(BATCHES, ROWS, &device), ConvBn::step as StepFn<_, _>)
    });
    resumes_on_one_device("dropout-lstm", || {
        (LstmNet::new(&device), sequence_batches(BATCHES, ROWS, &device), LstmNet::step as StepFn<_, _>)
    });
    resumes_on_one_device("dropout-transformer", || {
        (
            TinyTransformer::new(0.2, &device),
            token_batches(BATCHES, ROWS, &device),
            TinyTransformer::step as StepFn<_, _>,
        )
    });
}

#[test]
fn an_lstm_and_a_transformer_in_a_world_of_two_threads_resume_bit_for_bit() {
    fn lstm() -> Family<LstmNet, (Tensor<3>, Tensor<2>)> {
        (LstmNet::new, |device| sequence_batches(BATCHES, ROWS, device), LstmNet::step)
    }
    type Tokens = (Tensor<2, Int>, Tensor<2>);
    fn transformer() -> Family<TinyTransformer, Tokens> {
        (
            |device| TinyTransformer::new(0.0, device),
            |device| token_batches(BATCHES, ROWS, device),
            TinyTransformer::step,
        )
    }
    let straight = world_of(lstm(), &scratch_dir("lstm-world"), None, false, LogDirPolicy::NewVersion);
    let dir = scratch_dir("lstm-world-resumed");
    assert_eq!(world_of(lstm(), &dir, Some(6), false, LogDirPolicy::NewVersion)[0].0, 7);
    assert_eq!(world_of(lstm(), &dir, None, true, LogDirPolicy::NewVersion), straight, "LSTM");
    let straight = world_of(transformer(), &scratch_dir("tf-world"), None, false, LogDirPolicy::NewVersion);
    let dir = scratch_dir("tf-world-resumed");
    assert_eq!(world_of(transformer(), &dir, Some(6), false, LogDirPolicy::NewVersion)[0].0, 7);
    assert_eq!(world_of(transformer(), &dir, None, true, LogDirPolicy::NewVersion), straight, "transformer");
}
