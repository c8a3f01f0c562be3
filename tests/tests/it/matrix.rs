//! The matrices that keep the seams fixed (issue 39): every model family on every kind of world
//! killed and interrupted, and every pair of features together. Each case runs the
//! `matrix_worker` binary (under `mpirun -n 2` for an MPI world; under `script`, which gives it a
//! terminal, when the dashboard is on): an uninterrupted reference run, then the same command
//! interrupted (SIGKILL of a rank, a Ctrl-C, a `StopHandle` stop, a full disk) and resumed until
//! it finishes. The finished run must hold the reference's weights on every rank, bit for bit
//! (BatchNorm's statistics included), as the guide promises.
#![cfg(all(unix, feature = "mpi"))]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value as Json;
use stoker_tests::{Tmpfs, scratch_dir};

/// How a case's run is interrupted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// SIGKILL to one process (rank 1 of an MPI world) once training started.
    Kill,
    /// SIGINT to the process (to `mpirun` for an MPI world), as Ctrl-C on its terminal.
    CtrlC,
    /// The worker's own `StopHandle` stop at global step 9.
    Handle,
}

/// One case: a model, a world, the features on, how it is interrupted, and whether the disk
/// under its log directory fills up once training started.
#[derive(Debug, Clone)]
struct Case {
    model: &'static str,
    world: &'static str,
    features: Vec<&'static str>,
    stop: Stop,
    full_disk: bool,
}

impl Case {
    fn name(&self) -> String {
        let disk = if self.full_disk { "+fulldisk" } else { "" };
        format!("{}-{}-{}-{:?}{disk}", self.model, self.world, self.features.join("+"), self.stop)
    }

    /// The features that decide the weights: `early`'s restored best weights. The others (how
    /// it stops, the folders, the savers, the writers, the dashboard) must not change them.
    fn weight_features(&self) -> Vec<&'static str> {
        self.features.iter().copied().filter(|f| *f == "early").collect()
    }

    /// The key of the reference run of this case.
    fn reference_key(&self) -> String {
        format!("{}-{}-{}", self.model, self.world, self.weight_features().join("+"))
    }

    /// The worker's command for a run with its log directory in `log` and its records in
    /// `out`, with `extra` features.
    fn command(&self, log: &Path, out: &Path, extra: &[&str], resume: bool) -> Command {
        let worker = env!("CARGO_BIN_EXE_matrix_worker");
        let mut args: Vec<String> = vec![self.model.into(), self.world.into()];
        args.push(log.display().to_string());
        args.push(out.display().to_string());
        args.extend(self.features.iter().chain(extra).map(|f| f.to_string()));
        if resume {
            args.push("--resume".into());
        }
        let mut line: Vec<String> = match self.world {
            "mpi" => {
                ["mpirun", "--allow-run-as-root", "--oversubscribe", "-n", "2"].map(String::from).to_vec()
            }
            _ => Vec::new(),
        };
        line.push(worker.into());
        line.extend(args);
        let mut command = if self.features.contains(&"dashboard") {
            // A terminal for the dashboard: `script` runs the line on a pseudo-terminal.
            let quoted: Vec<String> = line.iter().map(|a| format!("'{a}'")).collect();
            let mut script = Command::new("script");
            script.args(["-qfec", &quoted.join(" "), "/dev/null"]);
            script
        } else {
            let mut direct = Command::new(&line[0]);
            direct.args(&line[1..]);
            direct
        };
        command.env_remove("OMPI_MCA_odls_base_sigkill_timeout").env("TERM", "xterm");
        stoker_tests::sigint_default(&mut command);
        command
    }
}

/// Start `command` with `input` on its standard input (closed after it).
fn spawn(mut command: Command, input: &[u8]) -> Child {
    use std::io::Write;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {command:?}: {e}"));
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    child
}

/// Wait for `child` to end (at most 3 minutes: a hang is a failure); its output.
fn finish(mut child: Child, what: &str) -> (bool, String) {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let output = child.wait_with_output().unwrap();
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            return (status.success(), text);
        }
        if started.elapsed() > Duration::from_secs(120) {
            // The worker (under `script` or `mpirun`) and its ranks, then the launcher.
            let _ = Command::new("pkill").args(["-KILL", "-f", &what.replace('+', "\\+")]).status();
            let _ = child.kill();
            let output = child.wait_with_output().unwrap();
            let text = String::from_utf8_lossy(&output.stderr).into_owned();
            return (false, format!("{what}: still running after 2 minutes, killed\n{text}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Each rank's record in `out`, by rank.
fn records(out: &Path) -> BTreeMap<usize, Json> {
    let mut found = BTreeMap::new();
    for rank in 0..2 {
        if let Ok(text) = std::fs::read_to_string(out.join(format!("rank-{rank}.json"))) {
            found.insert(rank, serde_json::from_str(&text).unwrap());
        }
    }
    found
}

/// A fresh folder for one run of a case, with its `out/`.
fn fresh(dir: &Path) -> PathBuf {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir.join("out")).unwrap();
    dir.to_path_buf()
}

/// The reference runs, by [`Case::reference_key`]: each rank's weights.
static REFERENCES: Mutex<BTreeMap<String, Vec<Json>>> = Mutex::new(BTreeMap::new());

/// The weights an uninterrupted run of `case` ends with, on each rank.
fn reference(case: &Case, root: &Path) -> Vec<Json> {
    let key = case.reference_key();
    // Held while the reference runs: two cases of one key wait for one run.
    let mut references = REFERENCES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(found) = references.get(&key) {
        return found.clone();
    }
    let plain = Case { features: case.weight_features(), ..case.clone() };
    let dir = fresh(&root.join(format!("reference-{key}")));
    let command = plain.command(&dir.join("log"), &dir.join("out"), &["slow"], false);
    let (ok, text) = finish(spawn(command, b""), &key);
    assert!(ok, "the reference run {key} failed:\n{text}");
    let weights: Vec<Json> = records(&dir.join("out")).into_values().map(|r| r["weights"].clone()).collect();
    references.insert(key, weights.clone());
    weights
}

/// Run `case`: interrupted once, then resumed until it finishes (at most 4 resumes); the error
/// that says what went wrong, or `None`.
fn run_case(case: &Case, root: &Path) -> Option<String> {
    let expected = reference(case, root);
    let name = case.name();
    let dir = fresh(&root.join(&name));
    let disk = case.full_disk.then(|| Tmpfs::mount(&dir.join("disk"), 8 * 1024));
    // The log directory (and the archive beside it) on the small disk when it fills up.
    let log = disk.as_ref().map_or(dir.clone(), |d| d.dir.clone()).join("log");
    let out = dir.join("out");
    let shell_input: &[u8] = if case.features.contains(&"shell") { b"status\ncontinue\n" } else { b"" };
    let child = spawn(case.command(&log, &out, &["slow"], false), shell_input);
    if !wait_for(&out.join("started"), 90) {
        let (_, text) = finish(child, &name);
        return Some(format!("{name}: never started training:\n{text}"));
    }
    let filler = disk.as_ref().map(|d| d.fill("filler"));
    interrupt(case, &out, &child);
    let (_, first) = finish(child, &name);
    if let Some(filler) = filler {
        std::fs::remove_file(filler).unwrap();
    }
    let mut transcript = format!("--- interrupted run:\n{first}");
    for attempt in 0..4 {
        let _ = std::fs::remove_file(out.join("rank-0.json"));
        let _ = std::fs::remove_file(out.join("rank-1.json"));
        // The MLflow server is down now; the stop asked once is not asked again.
        let features = case.features.iter().filter(|f| **f != "handle");
        let features = features.map(|f| if *f == "mlflow" { "mlflow-down" } else { f }).collect();
        let resumed = Case { features, ..case.clone() };
        let (ok, text) = finish(spawn(resumed.command(&log, &out, &[], true), b""), &name);
        transcript.push_str(&format!("--- resume {attempt}:\n{text}"));
        let found = records(&out);
        if ok && found.len() == expected.len() {
            let weights: Vec<Json> = found.values().map(|r| r["weights"].clone()).collect();
            if weights != expected {
                return Some(format!(
                    "{name}: resumed to other weights than the uninterrupted run's\n{transcript}"
                ));
            }
            return None;
        }
    }
    Some(format!("{name}: never finished\n{transcript}"))
}

/// Interrupt the run `child` of `case` as it says (a `StopHandle` stop is the worker's own).
fn interrupt(case: &Case, out: &Path, child: &Child) {
    let pid = |rank: usize| {
        std::fs::read_to_string(out.join(format!("pid-{rank}"))).ok()?.trim().parse::<i32>().ok()
    };
    let (signal, target) = match case.stop {
        Stop::Handle => return,
        Stop::Kill if case.world == "mpi" => (libc::SIGKILL, pid(1)),
        Stop::Kill => (libc::SIGKILL, pid(0)),
        // Ctrl-C reaches mpirun, which forwards it to the ranks; a direct run gets it itself.
        Stop::CtrlC if case.world == "mpi" && !case.features.contains(&"dashboard") => {
            (libc::SIGINT, Some(child.id() as i32))
        }
        Stop::CtrlC => (libc::SIGINT, pid(0)),
    };
    if let Some(target) = target {
        // SAFETY: kill(2) with a process id read from the worker.
        unsafe { libc::kill(target, signal) };
    }
}

/// Whether `path` appears within `secs` seconds.
fn wait_for(path: &Path, secs: u64) -> bool {
    let started = Instant::now();
    while !path.exists() {
        if started.elapsed() > Duration::from_secs(secs) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// Run `cases` two at a time; the failures, each with its output.
fn run_all(cases: Vec<Case>, root: &Path) -> Vec<String> {
    let queue = Mutex::new(cases);
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                loop {
                    let Some(case) = queue.lock().unwrap().pop() else { break };
                    if let Some(failure) = run_case(&case, root) {
                        failures.lock().unwrap().push(failure);
                    }
                }
            });
        }
    });
    failures.into_inner().unwrap()
}

/// The features of the pairs matrix, as the issue lists them.
const FEATURES: [&str; 14] = [
    "versioned",
    "threads",
    "mpi",
    "archive",
    "best",
    "early",
    "min",
    "dashboard",
    "shell",
    "mlflow",
    "cbdata",
    "fulldisk",
    "handle",
    "ctrlc",
];

/// The case of the pair `(a, b)`; `None` for a pair that is not a combination (a world is
/// threads or MPI, not both).
fn pair_case(a: &'static str, b: &'static str) -> Option<Case> {
    let pair = [a, b];
    let has = |f: &str| pair.contains(&f);
    if has("threads") && has("mpi") {
        return None;
    }
    let world = if has("threads") {
        "threads"
    } else if has("mpi") {
        "mpi"
    } else {
        "one"
    };
    let stop = if has("handle") {
        Stop::Handle
    } else if has("ctrlc") {
        Stop::CtrlC
    } else {
        Stop::Kill
    };
    let features =
        pair.into_iter().filter(|f| !["threads", "mpi", "fulldisk", "ctrlc"].contains(f)).collect();
    Some(Case { model: "mlp", world, features, stop, full_disk: has("fulldisk") })
}

/// Every pair of features, with or without `cbdata` (HDF5).
fn pairs(with_cbdata: bool) -> (Vec<Case>, usize) {
    let mut cases = Vec::new();
    let mut not_combinations = 0;
    for (i, a) in FEATURES.iter().enumerate() {
        for b in &FEATURES[i + 1..] {
            if (*a == "cbdata" || *b == "cbdata") != with_cbdata {
                continue;
            }
            match pair_case(a, b) {
                Some(case) => cases.push(case),
                None => not_combinations += 1,
            }
        }
    }
    (cases, not_combinations)
}

/// Issue 39's feature pairs: every pair of the 14 features but those with `cbdata` (the next
/// test, with the feature `hdf5`) trains, is interrupted (as the pair says, else SIGKILL) and
/// resumes to the uninterrupted run's weights.
#[test]
fn every_pair_of_features_trains_stops_and_resumes_to_the_uninterrupted_weights() {
    let (cases, skipped) = pairs(false);
    let count = cases.len();
    let failures = run_all(cases, &scratch_dir("matrix-pairs"));
    println!(
        "feature pairs: {count} run, {skipped} not a combination (threads with mpi), {} failed",
        failures.len()
    );
    assert!(failures.is_empty(), "{} of {count} pairs failed:\n{}", failures.len(), failures.join("\n\n"));
}

/// The pairs with neon's callback_data file.
#[cfg(feature = "hdf5")]
#[test]
fn every_pair_with_callback_data_trains_stops_and_resumes_to_the_uninterrupted_weights() {
    let (cases, _) = pairs(true);
    let count = cases.len();
    let failures = run_all(cases, &scratch_dir("matrix-pairs-hdf5"));
    println!("feature pairs with cbdata: {count} run, {} failed", failures.len());
    assert!(failures.is_empty(), "{} of {count} pairs failed:\n{}", failures.len(), failures.join("\n\n"));
}

/// Issue 39's model families: the MLP, the ConvNet with BatchNorm and dropout, the LSTM and the
/// transformer, on one device, a threads world and an MPI world, under the example's defaults
/// (versioned folders, `auto_resume`): SIGKILL once training started, then resumed; Ctrl-C,
/// then resumed. Each ends with the uninterrupted run's weights on every rank.
#[test]
fn every_model_family_on_every_world_resumes_bit_for_bit_after_sigkill_and_ctrl_c() {
    let mut cases = Vec::new();
    for model in ["mlp", "convbn", "lstm", "transformer"] {
        for world in ["one", "threads", "mpi"] {
            for stop in [Stop::Kill, Stop::CtrlC] {
                cases.push(Case { model, world, features: vec!["versioned"], stop, full_disk: false });
            }
        }
    }
    let count = cases.len();
    let failures = run_all(cases, &scratch_dir("matrix-families"));
    println!("model families: {count} cases run, {} failed", failures.len());
    assert!(failures.is_empty(), "{} of {count} cases failed:\n{}", failures.len(), failures.join("\n\n"));
}
