//! The `digits` binary's command line (clap): help, bad arguments refused with exit status 2
//! before anything is trained, `--threads` and `--mpi` mutually exclusive.

use std::process::{Command, Output, Stdio};

use stoker_tests::scratch_dir;

const DIGITS: &str = env!("CARGO_BIN_EXE_digits");

fn digits(args: &[&str]) -> Output {
    Command::new(DIGITS).args(args).stdin(Stdio::null()).output().expect("running digits")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn cli_help_lists_every_flag_on_stdout() {
    let out = digits(&["--help"]);
    assert!(out.status.success(), "{}", out.status);
    let help = text(&out.stdout);
    for flag in [
        "--log-dir",
        "--epochs",
        "--device",
        "--resume",
        "--log-dir-policy",
        "--threads",
        "--mpi",
        "--mlflow",
        "--dashboard",
        "--help",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}:\n{help}");
    }
    for policy in ["version", "refuse", "backup", "delete", "keep"] {
        assert!(help.contains(policy), "--help lacks the policy {policy}:\n{help}");
    }
    assert_eq!(text(&digits(&["-h"]).stdout).lines().next(), help.lines().next(), "-h is --help");
}

#[test]
fn cli_bad_arguments_exit_with_status_2_and_train_nothing() {
    let dir = scratch_dir("digits-cli");
    let log_dir = dir.join("log");
    let log = log_dir.to_str().unwrap();
    let cases: [(&[&str], &str); 8] = [
        (&["--threads", "2", "--mpi"], "cannot be used with"),
        (&["--threads", "0"], "--threads"),
        (&["--threads", "257"], "1..=256"),
        (&["--threads", "100000000"], "1..=256"),
        (&["--epochs", "0"], "--epochs"),
        (&["--log-dir-policy", "sometimes"], "refuse"),
        (&["--device", "tpu"], "tpu"),
        (&["--frobnicate"], "--frobnicate"),
    ];
    for (args, says) in cases {
        let out = digits(&[&["--log-dir", log, "--epochs", "1"][..], args].concat());
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "digits {args:?}: {}\nstderr:\n{stderr}", out.status);
        assert!(stderr.contains(says), "digits {args:?}: stderr does not mention `{says}`:\n{stderr}");
        assert!(!log_dir.exists(), "digits {args:?} wrote {}", log_dir.display());
    }
}

/// The example run twice into one `--log-dir` just works: each run trains in a new
/// `version_N` folder (the default policy), and `--resume` continues the newest.
#[test]
fn cli_runs_twice_into_new_version_folders_and_resume_continues_the_newest() {
    let dir = scratch_dir("digits-versions");
    let log = dir.to_str().unwrap();
    for (run, version) in [(1, "version_0"), (2, "version_1")] {
        let out = digits(&["--log-dir", log, "--epochs", "1"]);
        assert!(out.status.success(), "run {run}: {}\n{}", out.status, text(&out.stderr));
        assert!(dir.join(version).join("checkpoints").is_dir(), "run {run} trained in {version}");
        let stdout = text(&out.stdout);
        assert!(stdout.contains(&format!("logs in {}", dir.join(version).display())), "{stdout}");
    }
    let out = digits(&["--log-dir", log, "--epochs", "2", "--resume"]);
    assert!(out.status.success(), "resume: {}\n{}", out.status, text(&out.stderr));
    assert!(text(&out.stdout).contains("trained 2 epochs"), "{}", text(&out.stdout));
    assert!(!dir.join("version_2").exists(), "--resume continued version_1");
}

/// A shared library that makes `flock(2)` fail as a file system without locks does (NFS
/// without a lock manager, some FUSE and cluster file systems): `ENOLCK`.
#[cfg(target_os = "linux")]
fn no_locks_library(dir: &std::path::Path) -> std::path::PathBuf {
    let source = dir.join("nolock.c");
    std::fs::write(
        &source,
        "#include <errno.h>\nint flock(int fd, int op) { (void)fd; (void)op; errno = ENOLCK; return -1; }\n",
    )
    .unwrap();
    let library = dir.join("libnolock.so");
    let built = Command::new("cc").args(["-shared", "-fPIC", "-o"]).arg(&library).arg(&source).status();
    assert!(built.is_ok_and(|s| s.success()), "cc could not build {}", library.display());
    library
}

/// On a file system that cannot lock, training stops before it starts with an error that says
/// so and names the opt-out; with the opt-out (`STOKER_NO_LOCK=1`) it trains, warning that
/// nothing keeps a second run out.
#[cfg(target_os = "linux")]
#[test]
fn cli_a_file_system_without_locks_names_the_opt_out_which_trains_unlocked() {
    let dir = scratch_dir("digits-no-locks");
    std::fs::create_dir_all(&dir).unwrap();
    let library = no_locks_library(&dir);
    let log = dir.join("log");
    let run = |opt_out: bool| {
        let mut command = Command::new(DIGITS);
        command.args(["--epochs", "1", "--log-dir-policy", "refuse", "--log-dir"]).arg(&log);
        command.env("LD_PRELOAD", &library).env_remove("STOKER_NO_LOCK").stdin(Stdio::null());
        if opt_out {
            command.env("STOKER_NO_LOCK", "1");
        }
        command.output().expect("running digits")
    };
    let refused = run(false);
    let stderr = text(&refused.stderr);
    assert!(!refused.status.success(), "trained without a lock, unasked:\n{stderr}");
    for says in ["cannot lock", "STOKER_NO_LOCK=1", "Trainer::lock_log_dir(false)"] {
        assert!(stderr.contains(says), "the error does not say `{says}`:\n{stderr}");
    }
    assert!(!log.join("checkpoints").exists(), "nothing trained");
    let trained = run(true);
    let stderr = text(&trained.stderr);
    assert!(trained.status.success(), "{}\n{stderr}", trained.status);
    assert!(stderr.contains("is not locked"), "no warning that the directory is not locked:\n{stderr}");
    assert!(log.join("checkpoints").is_dir());
}

/// The signal handler's wake-up pipe is close-on-exec from its creation (`pipe2` with
/// `O_CLOEXEC`), not made so by a later `fcntl`: a process that another thread starts in between
/// would inherit it. Watched with strace (which the test command installs).
#[cfg(target_os = "linux")]
#[test]
fn cli_every_pipe_is_created_close_on_exec() {
    let dir = scratch_dir("digits-pipe2");
    let out = Command::new("strace")
        .args(["-f", "-qq", "-e", "trace=pipe,pipe2", DIGITS, "--epochs", "1", "--log-dir"])
        .arg(&dir)
        .stdin(Stdio::null())
        .output()
        .expect("running strace (the test command installs it)");
    assert!(out.status.success(), "{}\n{}", out.status, text(&out.stderr));
    let stderr = text(&out.stderr);
    let pipes: Vec<&str> = stderr.lines().filter(|l| l.contains("pipe")).collect();
    assert!(!pipes.is_empty(), "no pipe was created (the signal handler makes one):\n{stderr}");
    for pipe in pipes {
        assert!(pipe.contains("pipe2(") && pipe.contains("O_CLOEXEC"), "not close-on-exec at once: {pipe}");
    }
}
