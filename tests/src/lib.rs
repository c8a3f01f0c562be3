//! Fixtures shared by stoker's integration tests: a tiny model, its data, a scratch directory.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Device, Tensor, TensorData};

pub mod comet;
pub mod families;
pub mod mlflow;
pub mod mlflow_server;
pub mod reads;

/// The name libtest gives test `name` of the module whose `module_path!()` is `module`: its path
/// without the test binary's crate (`it::track` and `eta_...` give `track::eta_...`), what a child
/// process of the binary is given with `--exact` to run that one test.
pub fn test_path(module: &str, name: &str) -> String {
    match module.split_once("::") {
        Some((_, inner)) => format!("{inner}::{name}"),
        None => name.to_string(),
    }
}

/// `command`, with SIGINT's default action put back in the child before it starts: a test that
/// interrupts a child must work when the test command itself was started from a shell's
/// background job, where SIGINT arrives ignored (and stoker, as `nohup` asks, keeps an ignored
/// SIGINT ignored). A `pre_exec` registered after this one still runs after it.
#[cfg(unix)]
pub fn sigint_default(command: &mut std::process::Command) -> &mut std::process::Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: signal(2) is async-signal-safe, as a pre_exec closure must be.
    unsafe {
        command.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        })
    }
}

/// A fresh, empty directory under the system's temporary directory.
pub fn scratch_dir(name: &str) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("stoker-test-{}-{name}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("creating a scratch directory");
    dir
}

/// A linear model 2 -> 1.
pub fn tiny_model(device: &Device) -> Linear {
    LinearConfig::new(2, 1).init(device)
}

/// `batches` batches of 4 points of y = 2 x0 - x1 + 0.5.
pub fn tiny_data(batches: usize, device: &Device) -> Vec<(Tensor<2>, Tensor<2>)> {
    (0..batches)
        .map(|b| {
            let xs: Vec<f32> = (0..8).map(|i| ((b * 8 + i) as f32 * 0.37).sin()).collect();
            let ys: Vec<f32> = xs.chunks(2).map(|x| 2.0 * x[0] - x[1] + 0.5).collect();
            (
                Tensor::from_data(TensorData::new(xs, [4, 2]), device),
                Tensor::from_data(TensorData::new(ys, [4, 1]), device),
            )
        })
        .collect()
}

/// The mean squared error of `model` on a batch.
pub fn mse(model: &Linear, (x, y): (Tensor<2>, Tensor<2>)) -> Tensor<1> {
    (model.forward(x) - y).powi_scalar(2).mean()
}

/// Every float parameter of `model`, in visiting order, as host values: two models with equal
/// `weights` compute the same function.
pub fn weights<M: burn::module::Module>(model: &M) -> Vec<Vec<f32>> {
    struct Collect(Vec<Vec<f32>>);
    impl burn::module::ModuleVisitor for Collect {
        fn visit_float<const D: usize>(&mut self, param: &burn::module::Param<Tensor<D>>) {
            self.0.push(param.val().into_data().iter::<f32>().collect());
        }
    }
    let mut collect = Collect(Vec::new());
    model.visit(&mut collect);
    collect.0
}

/// The weights stored in a checkpoint's `model.bpk` (`dir/model.bpk`), loaded into `model`'s
/// architecture.
pub fn checkpoint_weights<M: burn::module::Module>(model: M, dir: &std::path::Path) -> Vec<Vec<f32>> {
    weights(&model.load_file(dir.join("model.bpk")))
}

/// Stops training after global step `at` (at the end of its epoch when `at` ends one).
pub struct StopAt(pub u64);

impl<M> burn_stoker::callback::Callback<M> for StopAt {
    fn trigger_step(&mut self, ctx: &mut burn_stoker::callback::Context<'_, M>) -> burn_stoker::Result<()> {
        if ctx.global_step() == self.0 && ctx.local_step() < ctx.counters().steps_per_epoch() {
            ctx.request_stop("stopped mid-epoch by the test");
        }
        Ok(())
    }
    fn trigger_epoch(&mut self, ctx: &mut burn_stoker::callback::Context<'_, M>) -> burn_stoker::Result<()> {
        if ctx.global_step() == self.0 {
            ctx.request_stop("stopped at an epoch's end by the test");
        }
        Ok(())
    }
}

/// At global step `0`: asks for a checkpoint (on the chief: a saver's job) and a stop.
pub struct CheckpointAndStop(pub u64);

impl<M> burn_stoker::callback::Callback<M> for CheckpointAndStop {
    fn trigger_step(&mut self, ctx: &mut burn_stoker::callback::Context<'_, M>) -> burn_stoker::Result<()> {
        if ctx.global_step() == self.0 {
            ctx.request_checkpoint(burn_stoker::state::KeepPolicy::default());
            ctx.request_stop("the test stops here");
        }
        Ok(())
    }
}

/// Fills the log directory's filesystem (a small [`Tmpfs`]) in `before_train`, after the writers
/// opened their files, then puts an 8 KiB text at every step: the TensorBoard writer's first
/// flush fails on a full disk.
pub struct FillDisk;

impl<M> burn_stoker::callback::Callback<M> for FillDisk {
    fn before_train(&mut self, ctx: &mut burn_stoker::callback::Context<'_, M>) -> burn_stoker::Result<()> {
        use std::io::Write;
        let mut filler = std::fs::File::create(ctx.log_dir().join("filler")).unwrap();
        let page = [0u8; 4096];
        while filler.write_all(&page).is_ok() {}
        Ok(())
    }
    fn trigger_step(&mut self, ctx: &mut burn_stoker::callback::Context<'_, M>) -> burn_stoker::Result<()> {
        ctx.monitors().put_text("blob", &"x".repeat(8192));
        Ok(())
    }
}

/// Fixtures of the data-parallel tests (threads in-process, MPI through the `mpi_worker` binary):
/// a fixed model, deterministic batches, and the loss.
pub mod world {
    use burn::module::Param;
    use burn::nn::{Linear, LinearConfig};
    use burn::tensor::{Device, Tensor, TensorData};
    use burn_stoker::trainer::Step;

    /// Batches of this many rows per rank.
    pub const B: usize = 4;

    /// The same 6 -> 3 model every time.
    pub fn fixed_model(device: &Device) -> Linear {
        let mut model = LinearConfig::new(6, 3).init(device);
        let w: Vec<f32> = (0..18).map(|i| (i as f32 * 0.37).cos() * 0.4).collect();
        model.weight = Param::from_tensor(Tensor::from_data(TensorData::new(w, [6, 3]), device));
        let bias = TensorData::new(vec![0.1f32, -0.2, 0.05], [3]);
        model.bias = Some(Param::from_tensor(Tensor::from_data(bias, device)));
        model
    }

    /// `n` batches of `rows` points of a fixed map 6 -> 3 with bends, deterministic.
    pub fn batches(n: usize, rows: usize, device: &Device) -> Vec<(Tensor<2>, Tensor<2>)> {
        (0..n)
            .map(|b| {
                let xs: Vec<f32> =
                    (0..rows * 6).map(|i| (((b * rows * 6 + i) as f32) * 0.731).sin()).collect();
                let ys: Vec<f32> = xs
                    .chunks(6)
                    .flat_map(|x| {
                        [x[0] - 2.0 * x[1] + x[5] * x[5], 0.5 * x[2] + x[3].abs(), x[4] - x[0] * x[1]]
                    })
                    .collect();
                (
                    Tensor::from_data(TensorData::new(xs, [rows, 6]), device),
                    Tensor::from_data(TensorData::new(ys, [rows, 3]), device),
                )
            })
            .collect()
    }

    /// The single-device run's batches: batches `2k` and `2k + 1` of [`batches`] stacked, so that
    /// one rank with batch 2B sees the samples two ranks with batch B see at step k.
    pub fn joined(steps: usize, device: &Device) -> Vec<(Tensor<2>, Tensor<2>)> {
        batches(2 * steps, B, device)
            .chunks(2)
            .map(|pair| {
                (
                    Tensor::cat(vec![pair[0].0.clone(), pair[1].0.clone()], 0),
                    Tensor::cat(vec![pair[0].1.clone(), pair[1].1.clone()], 0),
                )
            })
            .collect()
    }

    /// The mean squared error, as a training step.
    pub fn mse(model: &Linear, (x, y): (Tensor<2>, Tensor<2>), _step: &mut Step<'_>) -> Tensor<1> {
        (model.forward(x) - y).powi_scalar(2).mean()
    }

    /// The mean squared error of a step whose batches never reach the bias (a branch some ranks'
    /// data does not take): only the weight gets a gradient.
    pub fn without_bias(model: &Linear, (x, y): (Tensor<2>, Tensor<2>), _step: &mut Step<'_>) -> Tensor<1> {
        (x.matmul(model.weight.val()) - y).powi_scalar(2).mean()
    }

    /// Weights as bit patterns, to write and compare exactly.
    pub fn bits(weights: &[Vec<f32>]) -> Vec<Vec<u32>> {
        weights.iter().map(|w| w.iter().map(|v| v.to_bits()).collect()).collect()
    }

    /// Back from [`bits`].
    pub fn from_bits(bits: &[Vec<u32>]) -> Vec<Vec<f32>> {
        bits.iter().map(|w| w.iter().map(|v| f32::from_bits(*v)).collect()).collect()
    }

    /// Weights, parameter by parameter.
    pub type Weights = Vec<Vec<f32>>;

    /// Trains `steps` steps on `devices[0]` with batch 2B, then on two ranks (one per device, the
    /// threads transport) with batch B on the same samples, from the same initial model (rank 1
    /// builds other weights: the chief's must reach it); `inspect` sees each rank's world first.
    /// Returns the (single, rank 0, rank 1) weights.
    pub fn single_and_pair(
        devices: [Device; 2],
        steps: usize,
        optimizer: fn() -> burn::optim::ModuleOptimizer,
        inspect: fn(&burn_stoker::world::World),
    ) -> (Weights, Weights, Weights) {
        use burn_stoker::trainer::{DefaultCallbacks, Trainer};
        let device = devices[0].clone();
        let initial: Linear = LinearConfig::new(6, 3).init(&device);
        let single = Trainer::new(initial.clone(), optimizer(), joined(steps, &device))
            .default_callbacks(DefaultCallbacks::none())
            .handle_signals(false)
            .learning_rate(0.05)
            .log_dir(crate::scratch_dir("world-single"))
            .train(mse)
            .expect("single-device training");
        assert_eq!(single.counters.global_step(), steps as u64);

        let initial = std::sync::Mutex::new(initial);
        let dir = crate::scratch_dir("world-pair");
        let reports = burn_stoker::world::Threads::new(devices)
            .run(|world| {
                inspect(&world);
                let model = if world.is_chief() {
                    initial.lock().unwrap().clone()
                } else {
                    LinearConfig::new(6, 3).init(world.device())
                };
                let data = world.shard(batches(2 * steps, B, world.device()));
                Trainer::new(model, optimizer(), data)
                    .default_callbacks(DefaultCallbacks::none())
                    .handle_signals(false)
                    .learning_rate(0.05)
                    .log_dir(&dir)
                    .world(world)
                    .train(mse)
            })
            .expect("two ranks");
        assert_eq!(reports.len(), 2);
        for report in &reports {
            assert_eq!(report.counters.global_step(), steps as u64);
        }
        (crate::weights(&single.model), crate::weights(&reports[0].model), crate::weights(&reports[1].model))
    }

    /// The largest difference between two sets of weights.
    pub fn max_diff(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
        a.iter().flatten().zip(b.iter().flatten()).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
    }
}

/// A tmpfs of a fixed size mounted for the life of the guard (the tests run as root). A mount
/// that fails panics with the reason: a test that needs a full disk runs or fails, it never
/// skips.
pub struct Tmpfs {
    /// The mount point.
    pub dir: PathBuf,
}

impl Tmpfs {
    /// Mount a tmpfs of `kib` KiB on `dir` (created if missing).
    pub fn mount(dir: &std::path::Path, kib: u64) -> Tmpfs {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        let output = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(dir)
            .output()
            .unwrap_or_else(|e| panic!("running mount: {e}"));
        assert!(
            output.status.success(),
            "mounting a {kib} KiB tmpfs on {} failed ({}): {}; these tests need root (or CAP_SYS_ADMIN)",
            dir.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
        Tmpfs { dir: dir.to_path_buf() }
    }

    /// Fill what is left of the tmpfs with a file `name`; returns its path (remove it to free
    /// the space again).
    pub fn fill(&self, name: &str) -> PathBuf {
        use std::io::Write;
        let path = self.dir.join(name);
        let mut file = std::fs::File::create(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let page = [0xA5u8; 4096];
        loop {
            match file.write(&page) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::StorageFull => break,
                Err(e) => panic!("filling {}: {e}", path.display()),
            }
        }
        path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let status = std::process::Command::new("umount").arg(&self.dir).status();
        if !status.as_ref().is_ok_and(|s| s.success()) {
            eprintln!("warning: could not unmount {}: {status:?}", self.dir.display());
        }
    }
}

/// The names in `dir`, sorted (a panic naming `dir` when it cannot be read).
pub fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The folder of the checkpoint with the highest step in `log_dir/checkpoints`.
pub fn latest_checkpoint(log_dir: &Path) -> PathBuf {
    std::fs::read_dir(log_dir.join("checkpoints"))
        .expect("a checkpoints folder")
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let step: u64 = path.file_name()?.to_str()?.strip_prefix("step-")?.parse().ok()?;
            Some((step, path))
        })
        .max()
        .expect("a step-N checkpoint")
        .1
}

/// Rewrite the JSON file `name` of the checkpoint in `step_dir` with `change`, and seal the
/// manifest again as stoker seals it (each file's length and CRC-32C, then the CRC-32C of the
/// manifest's bytes before its checksum line): a crafted checkpoint that passes every check.
pub fn rewrite_checkpoint_json(step_dir: &Path, name: &str, change: impl FnOnce(&mut serde_json::Value)) {
    let path = step_dir.join(name);
    let mut value: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    change(&mut value);
    let bytes = serde_json::to_vec(&value).unwrap();
    std::fs::write(&path, &bytes).unwrap();
    reseal(step_dir, name, &bytes);
}

/// Record `bytes` as file `name` in the manifest of the checkpoint in `step_dir`, and seal it.
pub fn reseal(step_dir: &Path, name: &str, bytes: &[u8]) {
    let path = step_dir.join("manifest.json");
    let mut manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    manifest["files"][name] = serde_json::json!({ "len": bytes.len(), "crc32c": crc32c(bytes) });
    manifest.as_object_mut().unwrap().remove("checksum");
    let body = serde_json::to_vec_pretty(&manifest).unwrap();
    let mut sealed = body.strip_suffix(b"\n}").unwrap().to_vec();
    sealed.extend_from_slice(b",\n");
    let checksum = crc32c(&sealed);
    sealed.extend_from_slice(format!("  \"checksum\": {checksum}\n}}\n").as_bytes());
    std::fs::write(&path, sealed).unwrap();
}

/// CRC-32C (Castagnoli), bit by bit: independent of the crate the runtime uses.
pub fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0x82F6_3B78 } else { crc >> 1 };
        }
    }
    !crc
}
