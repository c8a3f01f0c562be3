//! Faults injected into the `digits` binary: SIGKILL at random moments, SIGINT.
//! Whatever moment a run dies at, `--resume` finishes it with the weights and the `stats.json` of
//! a run that was never interrupted.

#[cfg(unix)]
use std::io::{BufRead, Read};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError};
#[cfg(unix)]
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use burn_stoker::saver::Checkpoint;
use stoker_examples::Mlp;
use stoker_tests::{checkpoint_weights, scratch_dir};

const DIGITS: &str = env!("CARGO_BIN_EXE_digits");
/// The binary's hidden layer.
const HIDDEN: usize = 256;
/// 1437 training samples in batches of 32.
const STEPS_PER_EPOCH: u64 = 45;
/// The binary's default number of epochs.
const EPOCHS: u64 = 30;
/// Enough epochs that a run signalled after its first checkpoint cannot have finished.
#[cfg(unix)]
const LONG_EPOCHS: u64 = 200;

/// The machine may have few cores and the runs are timed: one test at a time.
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

fn digits(dir: &Path, epochs: u64, resume: bool) -> Command {
    let mut command = Command::new(DIGITS);
    command
        .arg("--log-dir")
        .arg(dir)
        .arg("--log-dir-policy")
        .arg("refuse")
        .arg("--epochs")
        .arg(epochs.to_string())
        .stdin(Stdio::null());
    if resume {
        command.arg("--resume");
    }
    #[cfg(unix)]
    stoker_tests::sigint_default(&mut command);
    command
}

/// Run `digits` to completion; its stderr.
fn run_to_end(dir: &Path, epochs: u64, resume: bool) -> String {
    let output = digits(dir, epochs, resume).output().expect("running digits");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "digits --log-dir {} --epochs {epochs}{} failed with {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        dir.display(),
        if resume { " --resume" } else { "" },
        output.status
    );
    let done = format!("trained {epochs} epochs ({} steps)", epochs * STEPS_PER_EPOCH);
    assert!(stdout.contains(&done), "stdout lacks `{done}`:\n{stdout}");
    stderr.into_owned()
}

/// Spawn `digits` with its stdout and stderr piped and read on threads (so that it never blocks
/// on a full pipe); `on_stderr_line` sees each line of stderr as it comes.
#[cfg(unix)]
fn spawn_piped(
    dir: &Path,
    epochs: u64,
    mut on_stderr_line: impl FnMut(&str) + Send + 'static,
) -> (Child, JoinHandle<String>, JoinHandle<String>) {
    let mut child = digits(dir, epochs, false)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning digits");
    let mut stdout = child.stdout.take().expect("a piped stdout");
    let stdout = std::thread::spawn(move || {
        let mut text = String::new();
        stdout.read_to_string(&mut text).expect("reading digits' stdout");
        text
    });
    let stderr = std::io::BufReader::new(child.stderr.take().expect("a piped stderr"));
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        for line in stderr.lines() {
            let line = line.expect("reading digits' stderr");
            on_stderr_line(&line);
            text.push_str(&line);
            text.push('\n');
        }
        text
    });
    (child, stdout, stderr)
}

/// Wait (polling every millisecond, 30 s at most) until the run has written `index.json`: its
/// first checkpoint is complete and training is under way.
#[cfg(unix)]
fn wait_for_first_checkpoint(child: &mut Child, dir: &Path) {
    let index = dir.join("checkpoints").join("index.json");
    let start = Instant::now();
    while !index.exists() {
        if let Some(status) = child.try_wait().expect("polling digits") {
            panic!("digits exited with {status} before its first checkpoint");
        }
        assert!(start.elapsed() < Duration::from_secs(30), "no {} after 30 s", index.display());
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[cfg(unix)]
fn send_sigint(pid: u32) {
    // SAFETY: kill(2) with a child's pid (not yet waited for, so not reused) and a valid signal.
    let sent = unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) };
    assert_eq!(sent, 0, "kill({pid}, SIGINT): {}", std::io::Error::last_os_error());
}

/// The latest complete checkpoint of `dir` and the weights in it.
fn final_weights(dir: &Path) -> (Checkpoint, Vec<Vec<f32>>) {
    let checkpoint =
        Checkpoint::latest(dir).expect("reading the checkpoints").expect("a complete checkpoint");
    let weights = checkpoint_weights(Mlp::new(HIDDEN, &burn_stoker::device::cpu()), checkpoint.dir());
    (checkpoint, weights)
}

/// The folders and files a checkpoint write in progress leaves in `checkpoints/`: `*.tmp`
/// (`step-N.<pid>-<n>.tmp/`, `index.json.<pid>-<n>.tmp`, a copy's `.tmp/`) and `*.old` (a copy
/// being replaced).
fn write_leftovers(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir.join("checkpoints")) else { return Vec::new() };
    let mut found: Vec<String> = entries
        .map(|e| e.expect("listing checkpoints").file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".tmp") || name.ends_with(".old"))
        .collect();
    found.sort();
    found
}

/// What a crash at any moment must leave in `dir/checkpoints`: `index.json`, when there is one,
/// parses, and the checkpoint it names latest, those it lists and every `step-N` newer than its
/// latest (renamed into place, the index not yet rewritten) read back complete. Older `step-N`
/// folders it does not list are being removed and may be partly gone: their names are returned.
fn check_integrity(dir: &Path) -> Result<Vec<String>, String> {
    let root = dir.join("checkpoints");
    let Ok(entries) = std::fs::read_dir(&root) else { return Ok(Vec::new()) };
    let mut steps = Vec::new();
    for entry in entries {
        let name = entry.map_err(|e| e.to_string())?.file_name().to_string_lossy().into_owned();
        if let Some(step) = name.strip_prefix("step-").and_then(|n| n.parse::<u64>().ok()) {
            steps.push((step, name));
        }
    }
    steps.sort();
    let (latest, listed) = match std::fs::read(root.join("index.json")) {
        Ok(bytes) => {
            let json: serde_json::Value =
                serde_json::from_slice(&bytes).map_err(|e| format!("index.json does not parse: {e}"))?;
            let latest =
                json["latest"].as_str().ok_or_else(|| format!("index.json names no latest: {json}"))?;
            let listed: Vec<String> = json["checkpoints"]
                .as_array()
                .ok_or_else(|| format!("index.json lists no checkpoints: {json}"))?
                .iter()
                .filter_map(|c| c.as_str().map(String::from))
                .collect();
            (Some(latest.to_string()), listed)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (None, Vec::new()),
        Err(e) => return Err(format!("reading index.json: {e}")),
    };
    let latest_step =
        latest.as_deref().and_then(|l| l.strip_prefix("step-")).and_then(|n| n.parse::<u64>().ok());
    let mut must_be_complete: Vec<String> = latest.into_iter().chain(listed.iter().cloned()).collect();
    let mut being_removed = Vec::new();
    for (step, name) in steps {
        if latest_step.is_none_or(|latest| step > latest) {
            must_be_complete.push(name);
        } else if !listed.contains(&name) && Checkpoint::read(root.join(&name)).is_err() {
            being_removed.push(name);
        }
    }
    for name in must_be_complete {
        Checkpoint::read(root.join(&name)).map_err(|e| format!("{name} is not complete: {e}"))?;
    }
    Ok(being_removed)
}

/// Where two `stats.json` first differ.
fn stats_difference(expected: &[u8], actual: &[u8]) -> String {
    let parse = |bytes: &[u8]| serde_json::from_slice::<Vec<serde_json::Value>>(bytes);
    let (Ok(expected), Ok(actual)) = (parse(expected), parse(actual)) else {
        return "one of them is not a JSON array".into();
    };
    match expected.iter().zip(&actual).position(|(e, a)| e != a) {
        Some(i) => format!("entry {i}: expected {}, got {}", expected[i], actual[i]),
        None => format!("{} entries expected, {} written", expected.len(), actual.len()),
    }
}

/// xorshift64*: a reproducible stream without a dependency.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Landing {
    BeforeFirstCheckpoint,
    DuringCheckpointWrite,
    BetweenCheckpoints,
    AfterTheEnd,
}

#[test]
fn sigkill_at_20_random_moments_then_resume_finishes_with_the_uninterrupted_weights() {
    let _serial = serial();
    let final_step = EPOCHS * STEPS_PER_EPOCH;
    let reference = scratch_dir("sigkill-reference");
    let start = Instant::now();
    run_to_end(&reference, EPOCHS, false);
    let full = start.elapsed();
    let (reference_last, reference_weights) = final_weights(&reference);
    assert_eq!(reference_last.global_step(), final_step);
    let reference_stats = std::fs::read(reference.join("stats.json")).expect("the reference's stats.json");
    let reference_min = checkpoint_weights(
        Mlp::new(HIDDEN, &burn_stoker::device::cpu()),
        &reference.join("checkpoints").join("min-validation_error"),
    );

    let seed = std::env::var("STOKER_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&s| s != 0)
        .unwrap_or(0x5EED_DEAD_BEEF_0001_u64);
    eprintln!(
        "uninterrupted run: {:.2} s; kill times uniform in [0, {:.2} s], seed {seed}",
        full.as_secs_f64(),
        1.2 * full.as_secs_f64()
    );
    let mut rng = XorShift(seed);
    let mut landings = Vec::new();
    let mut failures = Vec::new();
    let mut passed = 0;
    for trial in 0..20 {
        let dir = scratch_dir(&format!("sigkill-{trial}"));
        let delay = full.mul_f64(1.2 * rng.unit());
        let mut child = digits(&dir, EPOCHS, false)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawning digits");
        std::thread::sleep(delay);
        child.kill().expect("SIGKILL");
        let status: ExitStatus = child.wait().expect("waiting for digits");

        // A write in progress leaves `*.tmp` / `*.old` entries, or, while it removes the
        // checkpoints it no longer keeps, a partly removed `step-N`.
        let integrity = check_integrity(&dir);
        let mut leftovers = write_leftovers(&dir);
        if let Ok(being_removed) = &integrity {
            leftovers.extend(being_removed.iter().map(|name| format!("{name} (partly removed)")));
        }
        let before = Checkpoint::latest(&dir);
        let landing = if status.success() {
            Landing::AfterTheEnd
        } else if !leftovers.is_empty() {
            Landing::DuringCheckpointWrite
        } else {
            match &before {
                Ok(None) => Landing::BeforeFirstCheckpoint,
                Ok(Some(c)) if c.global_step() == final_step => Landing::AfterTheEnd,
                _ => Landing::BetweenCheckpoints,
            }
        };
        landings.push(landing);
        let failures_before = failures.len();
        let at = format!(
            "trial {trial} (seed {seed}, killed after {:.3} s, {landing:?}, exit {status}, leftovers {leftovers:?}, \
             dir {})",
            delay.as_secs_f64(),
            dir.display()
        );
        if let Err(why) = integrity {
            failures.push(format!("{at}: after the kill, {why}"));
        }
        let before = match before {
            Ok(before) => before.map(|c| c.global_step()),
            Err(e) => {
                failures.push(format!("{at}: no complete checkpoint after the kill: {e}"));
                continue;
            }
        };

        let stderr = run_to_end(&dir, EPOCHS, true);
        if let Some(step) = before {
            let resuming = format!("global step {step})");
            if !stderr.lines().any(|l| l.starts_with("stoker: resuming from") && l.ends_with(&resuming)) {
                failures
                    .push(format!("{at}: the resume does not say it resumes from step {step}:\n{stderr}"));
            }
        }
        if stderr.contains("warning") {
            failures.push(format!("{at}: the resume warns:\n{stderr}"));
        }
        let (last, weights) = final_weights(&dir);
        let stats = std::fs::read(dir.join("stats.json")).expect("stats.json after the resume");
        if (last.epoch_num(), last.global_step()) != (EPOCHS, final_step) {
            failures.push(format!(
                "{at}: the final checkpoint is at epoch {}, step {}",
                last.epoch_num(),
                last.global_step()
            ));
        }
        if weights != reference_weights {
            failures.push(format!("{at}: the final weights differ from the uninterrupted run's"));
        }
        if stats != reference_stats {
            failures.push(format!(
                "{at}: stats.json differs from the uninterrupted run's: {}",
                stats_difference(&reference_stats, &stats)
            ));
        }
        // The MinSaver copy is compared but not asserted: a kill after `step-N` is renamed into
        // place and before the copy written at the same boundary is leaves the previous copy, and
        // the resumed run, whose saved best value already is the new one, never replaces it.
        let min_dir = dir.join("checkpoints").join("min-validation_error");
        let min = min_dir
            .join("model.bpk")
            .exists()
            .then(|| checkpoint_weights(Mlp::new(HIDDEN, &burn_stoker::device::cpu()), &min_dir));
        if min.as_ref() != Some(&reference_min) {
            let step = Checkpoint::read(&min_dir).map(|c| c.global_step().to_string());
            failures.push(format!("{at}: the MinSaver copy min-validation_error is at step {step:?}"));
        }
        if failures.len() == failures_before {
            passed += 1;
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    let count = |l: Landing| landings.iter().filter(|&&x| x == l).count();
    eprintln!(
        "{passed}/{} resumed to the uninterrupted weights; kills: {} before the first checkpoint, {} during a \
         checkpoint write, {} between checkpoints, {} after the end",
        landings.len(),
        count(Landing::BeforeFirstCheckpoint),
        count(Landing::DuringCheckpointWrite),
        count(Landing::BetweenCheckpoints),
        count(Landing::AfterTheEnd)
    );
    assert!(failures.is_empty(), "{} failure(s):\n{}", failures.len(), failures.join("\n"));
    let _ = std::fs::remove_dir_all(&reference);
}

#[cfg(unix)]
#[test]
fn sigint_stops_at_a_step_boundary_with_a_checkpoint_and_resume_finishes() {
    let _serial = serial();
    let final_step = LONG_EPOCHS * STEPS_PER_EPOCH;
    let reference = scratch_dir("sigint-reference");
    run_to_end(&reference, LONG_EPOCHS, false);
    let (reference_last, reference_weights) = final_weights(&reference);
    assert_eq!(reference_last.global_step(), final_step);
    let reference_stats = std::fs::read(reference.join("stats.json")).expect("the reference's stats.json");

    let dir = scratch_dir("sigint");
    let (mut child, stdout, stderr) = spawn_piped(&dir, LONG_EPOCHS, |_| {});
    wait_for_first_checkpoint(&mut child, &dir);
    let sent = Instant::now();
    send_sigint(child.id());
    let status = child.wait().expect("waiting for digits");
    let stopped_in = sent.elapsed();
    let stdout = stdout.join().expect("the stdout reader");
    let stderr = stderr.join().expect("the stderr reader");
    assert!(stderr.contains("stoker: SIGINT received"), "stderr:\n{stderr}");
    assert_eq!(status.code(), Some(130), "{status}; stdout:\n{stdout}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("interrupted by SIGINT"))
        .unwrap_or_else(|| panic!("no `interrupted by SIGINT` line:\n{stdout}"));

    let last = Checkpoint::latest(&dir).expect("reading the checkpoints").expect("a complete checkpoint");
    assert!(last.global_step() < final_step, "the run finished before the SIGINT reached it: {line}");
    assert!(
        line.contains(&format!("(global step {})", last.global_step())),
        "the latest checkpoint is at step {}: {line}",
        last.global_step()
    );
    assert!(
        line.contains(&last.dir().display().to_string()),
        "the latest checkpoint is {}: {line}",
        last.dir().display()
    );
    assert_eq!(write_leftovers(&dir), Vec::<String>::new(), "a write was left unfinished");
    assert_eq!(check_integrity(&dir), Ok(Vec::new()));
    let stats = std::fs::read(dir.join("stats.json")).expect("stats.json after the interrupt");
    serde_json::from_slice::<serde_json::Value>(&stats).expect("stats.json parses");
    eprintln!(
        "SIGINT stopped the run {:.1} ms after it was sent, at epoch {} global step {} ({}a mid-epoch step)",
        stopped_in.as_secs_f64() * 1e3,
        last.epoch_num(),
        last.global_step(),
        if last.global_step().is_multiple_of(STEPS_PER_EPOCH) { "not " } else { "" }
    );

    let stderr = run_to_end(&dir, LONG_EPOCHS, true);
    let resuming = format!("global step {})", last.global_step());
    assert!(
        stderr.lines().any(|l| l.starts_with("stoker: resuming from") && l.ends_with(&resuming)),
        "the resume does not start from step {}:\n{stderr}",
        last.global_step()
    );
    let (resumed, weights) = final_weights(&dir);
    assert_eq!((resumed.epoch_num(), resumed.global_step()), (LONG_EPOCHS, final_step));
    assert!(weights == reference_weights, "the resumed weights differ from the uninterrupted run's");
    let stats = std::fs::read(dir.join("stats.json")).expect("stats.json after the resume");
    assert!(
        stats == reference_stats,
        "stats.json differs from the uninterrupted run's: {}",
        stats_difference(&reference_stats, &stats)
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&reference);
}

// A second SIGINT exits at once: tested deterministically in `tests/tests/signals.rs`
// (`signal_second_sigint_exits_at_once`: both signals raised from inside the run at known
// moments), not here, where a second `kill` sent on reading digits' stderr could arrive after
// the run had already stopped gracefully.
