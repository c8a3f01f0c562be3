//! Fault injection on the digits example: a disk that fills up mid-run, SIGKILL and SIGINT at
//! random moments, and resumes until the run finishes — then the final weights must be the
//! uninterrupted run's, bit for bit, and no complete checkpoint may have been lost on the way.
//!
//! `cargo build --release -p stoker-examples --bins && sudo target/release/faults --rounds 50`
//!
//! Each round mounts a fresh tmpfs (so it needs root; `--no-tmpfs` runs the signals without
//! the full disk in a temporary directory), fills part of it with a filler file so that the
//! run's log directory has room for only part of its files (in about half of the rounds), then
//! starts `digits --log-dir … --epochs N` and, at random, lets it run, kills it with SIGKILL or
//! interrupts it with SIGINT after a random delay. A run that met a full disk (which it logs,
//! going on without the checkpoints it could not write) gets its space back (the filler is
//! deleted); every run that did not finish, or met a full disk, is resumed with
//! `--resume`, and the round goes on until one finishes. After every attempt the newest
//! complete checkpoint (as `Checkpoint::latest` reads it) must be at least as new as the one
//! before: a crash, a signal or a full disk may lose the work since the last checkpoint, never
//! a checkpoint. The figure it prints is the one in the README.
//!
//! `--mpi N` does the same to a data-parallel world: `mpirun -n N digits --mpi` (the example
//! built with `--features mpi`), where a SIGKILL goes to one rank drawn at random (mpirun then
//! ends the job), a SIGINT to `mpirun` (which passes it on as SIGTERM after
//! `odls_base_sigkill_timeout`), and the full disk is the chief's log directory; the reference is
//! an uninterrupted world of the same size. `--threads N` trains N ranks in the one process
//! (`digits --threads N`).
//!
//! Each run trains under `--log-dir-policy refuse` in the round's folder; `--versioned` uses the
//! example's own default instead (`version`: the first attempt creates `version_0`, every resume
//! must continue it, on every rank).

#[cfg(unix)]
fn main() -> std::process::ExitCode {
    faults::main()
}

#[cfg(not(unix))]
fn main() {
    eprintln!("faults needs a Unix system (signals, tmpfs)");
    std::process::exit(2);
}

#[cfg(unix)]
mod faults {
    use std::path::{Path, PathBuf};
    use std::process::{Command, ExitCode, Stdio};
    use std::time::{Duration, Instant};

    use burn::module::{Module, ModuleVisitor, Param};
    use burn::tensor::Tensor;
    use burn_stoker::saver::{Checkpoint, MODEL_FILE};
    use stoker_examples::{DigitsConfig, Mlp};

    struct Options {
        rounds: u64,
        epochs: u64,
        seed: u64,
        digits: PathBuf,
        work: PathBuf,
        tmpfs: bool,
        /// The ranks of an MPI world (`None`: one process).
        mpi: Option<u64>,
        /// The ranks of a threads world in the one process (`None`: one rank).
        threads: Option<u64>,
        /// The example's default log-directory policy (`version`) instead of `refuse`.
        versioned: bool,
    }

    /// SplitMix64: enough randomness for choosing faults, and repeatable from `--seed`.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }

        /// Uniform in `[0, 1)`.
        fn unit(&mut self) -> f64 {
            (self.next() >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    /// What one attempt did to the run.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Fault {
        None,
        Kill,
        Interrupt,
    }

    /// How one attempt ended.
    #[derive(Debug)]
    enum Ended {
        Finished,
        Interrupted,
        Killed,
        DiskFull,
    }

    #[derive(Default)]
    struct Tally {
        finished_identical: u64,
        attempts: u64,
        kills: u64,
        interrupts: u64,
        disk_full: u64,
        rounds_with_full_disk: u64,
        failures: Vec<String>,
    }

    pub fn main() -> ExitCode {
        let options = match parse() {
            Ok(options) => options,
            Err(problem) => {
                eprintln!("error: {problem}");
                eprintln!(
                    "usage: faults [--rounds N] [--epochs N] [--seed N] [--digits PATH] [--work DIR] [--no-tmpfs] [--mpi N] [--threads N] [--versioned]"
                );
                return ExitCode::from(2);
            }
        };
        match run(&options) {
            Ok(tally) => {
                println!(
                    "{} of {} rounds finished with the uninterrupted run's weights, bit for bit; {} attempts: \
                     {} SIGKILL, {} SIGINT, {} stopped by a full disk (in {} rounds); complete checkpoints lost: {}",
                    tally.finished_identical,
                    options.rounds,
                    tally.attempts,
                    tally.kills,
                    tally.interrupts,
                    tally.disk_full,
                    tally.rounds_with_full_disk,
                    tally.failures.iter().filter(|f| f.contains("lost")).count()
                );
                for failure in &tally.failures {
                    println!("FAILED: {failure}");
                }
                if tally.failures.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE }
            }
            Err(error) => {
                eprintln!("error: {error}");
                ExitCode::FAILURE
            }
        }
    }

    fn parse() -> Result<Options, String> {
        let exe = std::env::current_exe().map_err(|e| format!("cannot find this program's path: {e}"))?;
        let mut options = Options {
            rounds: 50,
            epochs: 20,
            seed: 1,
            digits: exe.with_file_name("digits"),
            work: std::env::temp_dir().join(format!("stoker-faults-{}", std::process::id())),
            tmpfs: true,
            mpi: None,
            threads: None,
            versioned: false,
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
            let number = |text: String, name: &str| {
                text.parse::<u64>().ok().filter(|&n| n > 0).ok_or(format!("{name} takes a positive integer"))
            };
            match arg.as_str() {
                "--rounds" => options.rounds = number(value("--rounds")?, "--rounds")?,
                "--epochs" => options.epochs = number(value("--epochs")?, "--epochs")?,
                "--seed" => options.seed = number(value("--seed")?, "--seed")?,
                "--digits" => options.digits = value("--digits")?.into(),
                "--work" => options.work = value("--work")?.into(),
                "--no-tmpfs" => options.tmpfs = false,
                "--mpi" => options.mpi = Some(number(value("--mpi")?, "--mpi")?),
                "--threads" => options.threads = Some(number(value("--threads")?, "--threads")?),
                "--versioned" => options.versioned = true,
                other => return Err(format!("unknown argument `{other}`")),
            }
        }
        if !options.digits.is_file() {
            return Err(format!(
                "{} is not a file: build the example first (`cargo build --release -p stoker-examples --bins`) \
                 or pass --digits PATH",
                options.digits.display()
            ));
        }
        Ok(options)
    }

    fn run(options: &Options) -> Result<Tally, String> {
        std::fs::create_dir_all(&options.work).map_err(|e| format!("{}: {e}", options.work.display()))?;
        // The uninterrupted run: its weights, its duration and the room its log directory takes.
        // On a tmpfs when the rounds are (no fsync waits there): its duration sets the faults' times.
        let reference_mount = options.work.join("reference");
        let _mount = if options.tmpfs { Some(Tmpfs::mount(&reference_mount, 64 * 1024)?) } else { None };
        let reference = reference_mount.join("log");
        let _ = std::fs::remove_dir_all(&reference);
        let start = Instant::now();
        let out = digits(options, &reference, false)
            .output()
            .map_err(|e| format!("cannot start {}: {e}", options.digits.display()))?;
        let duration = start.elapsed();
        if !out.status.success() {
            return Err(format!(
                "the uninterrupted run failed: {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let expected = latest(&reference)?.ok_or("the uninterrupted run left no checkpoint")?;
        let room = du(&reference);
        println!(
            "uninterrupted run{}: {} epochs, {} steps, {:.1} s, its log directory takes {} KiB",
            options.mpi.map(|n| format!(" of {n} MPI ranks")).unwrap_or_default(),
            options.epochs,
            expected.global_step(),
            duration.as_secs_f64(),
            room / 1024
        );

        let mut rng = Rng(options.seed);
        let mut tally = Tally::default();
        for round in 1..=options.rounds {
            let dir = options.work.join("round");
            let mount = if options.tmpfs { Some(Tmpfs::mount(&dir, 4 * room / 1024 + 1024)?) } else { None };
            let _ = std::fs::remove_dir_all(dir.join("log"));
            let log = dir.join("log");
            // Room for 0.5 to 2.5 times what the finished run takes: about half the rounds meet a full
            // disk (a run needs more room while it replaces checkpoints).
            let filler = dir.join("filler");
            if mount.is_some() {
                let free = free_bytes(&dir)?;
                let leave = (room as f64 * (0.5 + 2.0 * rng.unit())) as u64;
                let size = free.saturating_sub(leave);
                fill(&filler, size)?;
            }
            let mut full_seen = false;
            let mut newest: Option<u64> = None;
            let mut outcome = Err(String::from("did not finish in 12 attempts"));
            for attempt in 0..12 {
                let fault = match (attempt, rng.unit()) {
                    // After 8 attempts, let it finish.
                    (8.., _) => Fault::None,
                    (_, x) if x < 0.4 => Fault::None,
                    (_, x) if x < 0.7 => Fault::Kill,
                    _ => Fault::Interrupt,
                };
                let delay = duration.mul_f64(1.2 * rng.unit());
                let rank = rng.next();
                tally.attempts += 1;
                let ended = match attempt_once(options, &log, attempt > 0, (fault, rank), delay) {
                    Ok(ended) => ended,
                    Err(e) => {
                        outcome = Err(format!("attempt {attempt}: {e}"));
                        break;
                    }
                };
                match ended {
                    Ended::Killed => tally.kills += 1,
                    Ended::Interrupted => tally.interrupts += 1,
                    Ended::DiskFull => {
                        tally.disk_full += 1;
                        full_seen = true;
                        // Give the space back, as a user would, and resume.
                        match std::fs::remove_file(&filler) {
                            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                                return Err(format!("{}: {e}", filler.display()));
                            }
                            _ => {}
                        }
                    }
                    Ended::Finished => {}
                }
                // No complete checkpoint may be lost: the newest one never goes back.
                let now = match latest(&log) {
                    Ok(checkpoint) => checkpoint.map(|c| c.global_step()),
                    Err(e) => {
                        outcome = Err(format!("attempt {attempt}: reading the checkpoints failed: {e}"));
                        break;
                    }
                };
                if now < newest {
                    outcome = Err(format!(
                        "attempt {attempt} ({ended:?}): lost a complete checkpoint: the newest was step {:?}, now {now:?}",
                        newest
                    ));
                    break;
                }
                newest = now;
                if let Ended::Finished = ended {
                    let last = latest(&log)?.ok_or("a finished run left no checkpoint")?;
                    outcome = if last.global_step() != expected.global_step() {
                        Err(format!(
                            "finished at step {}, the uninterrupted run at {}",
                            last.global_step(),
                            expected.global_step()
                        ))
                    } else if weights(&last) != weights(&expected) {
                        Err(String::from("finished with weights different from the uninterrupted run's"))
                    } else {
                        Ok(attempt + 1)
                    };
                    break;
                }
            }
            if full_seen {
                tally.rounds_with_full_disk += 1;
            }
            match outcome {
                Ok(attempts) => {
                    tally.finished_identical += 1;
                    println!(
                        "round {round}: identical after {attempts} attempt(s){}",
                        if full_seen { ", disk was full" } else { "" }
                    );
                }
                Err(problem) => {
                    println!("round {round}: FAILED: {problem}");
                    tally.failures.push(format!("round {round}: {problem}"));
                }
            }
            drop(mount);
            if !options.tmpfs {
                let _ = std::fs::remove_dir_all(&log);
            }
        }
        let _ = std::fs::remove_dir_all(&options.work);
        Ok(tally)
    }

    fn digits(options: &Options, log: &Path, resume: bool) -> Command {
        let mut command = match options.mpi {
            Some(ranks) => {
                let mut command = Command::new("mpirun");
                command.args(["--allow-run-as-root", "--oversubscribe", "-n", &ranks.to_string()]);
                command.arg(&options.digits).arg("--mpi");
                command
            }
            None => Command::new(&options.digits),
        };
        command
            .arg("--log-dir")
            .arg(log)
            .arg("--log-dir-policy")
            .arg(if options.versioned { "version" } else { "refuse" })
            .arg("--epochs")
            .arg(options.epochs.to_string());
        if let Some(threads) = options.threads {
            command.arg("--threads").arg(threads.to_string());
        }
        if resume {
            command.arg("--resume");
        }
        command.stdin(Stdio::null());
        // SIGINT's default action in the child: the rounds interrupt it, also when this program
        // was started from a shell's background job (SIGINT ignored, which digits keeps).
        // SAFETY: signal(2) is async-signal-safe, as a pre_exec closure must be.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut command, || {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                Ok(())
            });
        }
        command
    }

    /// One attempt: `fault` after `delay` (a SIGKILL goes to the rank `rank` picks, in a world).
    fn attempt_once(
        options: &Options,
        log: &Path,
        resume: bool,
        (fault, rank): (Fault, u64),
        delay: Duration,
    ) -> Result<Ended, String> {
        let mut child = digits(options, log, resume)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", options.digits.display()))?;
        // Read stderr on a thread so that a chatty child never blocks on a full pipe.
        let mut stderr = child.stderr.take().expect("piped");
        let reader = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
            text
        });
        let start = Instant::now();
        let mut signalled = false;
        let status = loop {
            if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
                break status;
            }
            if !signalled && fault != Fault::None && start.elapsed() >= delay {
                let signal = if fault == Fault::Kill { libc::SIGKILL } else { libc::SIGINT };
                let ranks =
                    if options.mpi.is_some() && fault == Fault::Kill { children(child.id()) } else { vec![] };
                let target = match ranks.len() {
                    0 if options.mpi.is_some() && fault == Fault::Kill => None,
                    0 => Some(child.id()),
                    n => Some(ranks[(rank % n as u64) as usize]),
                };
                if let Some(pid) = target {
                    // SAFETY: kill(2) on our child, or on one of its children (the world's ranks).
                    unsafe { libc::kill(pid as libc::pid_t, signal) };
                    signalled = true;
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let stderr = reader.join().unwrap_or_default();
        // A full disk is logged and training goes on (the savers' default, `OnWriteError::Log`):
        // a run that met one may finish without its last checkpoints. As a user would, the round
        // gives the space back and resumes from the last complete one.
        if stderr.contains("No space left on device") && (status.success() || fault == Fault::None) {
            return Ok(Ended::DiskFull);
        }
        if options.mpi.is_some() {
            return match (status.success(), fault) {
                (true, _) => Ok(Ended::Finished),
                _ if stderr.contains("No space left on device") => Ok(Ended::DiskFull),
                (false, Fault::Kill) if signalled => Ok(Ended::Killed),
                (false, Fault::Interrupt) if signalled => Ok(Ended::Interrupted),
                _ => Err(format!("mpirun ended with {status}: {}", stderr.trim())),
            };
        }
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(0), _) => Ok(Ended::Finished),
            (Some(130), _) => Ok(Ended::Interrupted),
            (_, Some(libc::SIGKILL)) => Ok(Ended::Killed),
            // SIGINT before the handler was installed (the process was still starting).
            (_, Some(libc::SIGINT)) => Ok(Ended::Interrupted),
            _ if stderr.contains("No space left on device") => Ok(Ended::DiskFull),
            _ => Err(format!("digits ended with {status}: {}", stderr.trim())),
        }
    }

    /// The processes whose parent is `pid` (mpirun's ranks).
    fn children(pid: u32) -> Vec<u32> {
        let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
        entries
            .flatten()
            .filter_map(|entry| {
                let child: u32 = entry.file_name().to_str()?.parse().ok()?;
                let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
                // pid (comm) state ppid ...: the comm may hold spaces, so read after its ')'.
                let ppid: u32 = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()?;
                (ppid == pid).then_some(child)
            })
            .collect()
    }

    /// The checkpoint's weights, bit for bit. (Its `model.bpk` bytes also hold burn's parameter
    /// ids, which every process draws anew, so the bytes of two runs never match.)
    fn weights(checkpoint: &Checkpoint) -> Vec<Vec<u32>> {
        struct Collect(Vec<Vec<u32>>);
        impl ModuleVisitor for Collect {
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
                self.0.push(param.val().into_data().iter::<f32>().map(f32::to_bits).collect());
            }
        }
        let device = burn_stoker::device::cpu();
        let model =
            Mlp::new(DigitsConfig::new().hidden, &device).load_file(checkpoint.dir().join(MODEL_FILE));
        let mut collect = Collect(Vec::new());
        model.visit(&mut collect);
        collect.0
    }

    /// The newest complete checkpoint of the round's run: in `log`, or in `log/version_0` under
    /// `--versioned` (every attempt of a round must train there).
    fn latest(log: &Path) -> Result<Option<Checkpoint>, String> {
        let versioned = log.join("version_0");
        let log = if versioned.is_dir() { versioned.as_path() } else { log };
        if !log.join("checkpoints").is_dir() {
            return Ok(None);
        }
        Checkpoint::latest(log).map_err(|e| e.to_string())
    }

    /// Bytes taken by the files under `dir`, rounded up to 4 KiB pages as tmpfs counts them.
    fn du(dir: &Path) -> u64 {
        let mut total = 0;
        if let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries.flatten() {
                let Ok(meta) = entry.metadata() else { continue };
                total +=
                    if meta.is_dir() { 4096 + du(&entry.path()) } else { meta.len().div_ceil(4096) * 4096 };
            }
        }
        total
    }

    fn free_bytes(dir: &Path) -> Result<u64, String> {
        let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).map_err(|e| e.to_string())?;
        // SAFETY: statvfs on a NUL-terminated path into a zeroed struct it fills.
        let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
        if unsafe { libc::statvfs(path.as_ptr(), &mut stat) } != 0 {
            return Err(format!("statvfs {}: {}", dir.display(), std::io::Error::last_os_error()));
        }
        Ok(stat.f_bavail as u64 * stat.f_frsize as u64)
    }

    fn fill(path: &Path, bytes: u64) -> Result<(), String> {
        let data = vec![0u8; bytes as usize];
        std::fs::write(path, data).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// A tmpfs mounted for the life of the guard.
    struct Tmpfs {
        dir: PathBuf,
    }

    impl Tmpfs {
        fn mount(dir: &Path, kib: u64) -> Result<Tmpfs, String> {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let out = Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
                .arg(dir)
                .output()
                .map_err(|e| format!("cannot run mount: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "mount -t tmpfs {} failed (run as root, or pass --no-tmpfs to skip the full disk): {}",
                    dir.display(),
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            Ok(Tmpfs { dir: dir.to_path_buf() })
        }
    }

    impl Drop for Tmpfs {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.dir).status();
        }
    }
}
