//! `digits --dashboard` in a real terminal: tmux, at a fixed size, on a server of the test's own
//! (`tmux -L`). The screen is read with `capture-pane` while training and after it; `q` is
//! pressed with `send-keys`, signals sent with `kill`. The ways out that digits does not take (an
//! error, a panic, a scalar put in `after_train`, a second signal while `after_train` runs) are
//! the `dashboard_faults` program's. tmux is required (CI installs it): without it these tests
//! fail.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use stoker_tests::scratch_dir;

const DIGITS: &str = env!("CARGO_BIN_EXE_digits");
const FAULTS: &str = env!("CARGO_BIN_EXE_dashboard_faults");

/// A tmux server of its own, killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// A 120x40 session running `command` under `sh`; the pane stays after the command ends
    /// (`echo`es its exit status, then sleeps) so that the screen can still be read.
    fn start(name: &str, command: &str) -> Tmux {
        let socket = format!("stoker-{name}-{}", std::process::id());
        let tmux = Tmux { socket };
        let script = format!("{command}; echo \"program exited with $?\"; sleep 600");
        let out = tmux.run(&["new-session", "-d", "-x", "120", "-y", "40", "sh", "-c", &script]);
        assert!(out.is_some(), "tmux could not start a session");
        tmux
    }

    /// `tmux -L <socket> args...`: its stdout, `None` when it failed.
    fn run(&self, args: &[&str]) -> Option<String> {
        let out = stoker_tests::sigint_default(&mut Command::new("tmux"))
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .env_remove("TMUX")
            .output()
            .expect("tmux is required by this test (apt-get install tmux; .ci/run installs it)");
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The screen's text, wrapped lines joined.
    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-J"]).unwrap_or_default()
    }

    /// The screen's text with everything that scrolled off it above.
    fn history(&self) -> String {
        self.run(&["capture-pane", "-p", "-J", "-S", "-"]).unwrap_or_default()
    }

    /// The process id of the program the pane's `sh` runs.
    fn program_pid(&self) -> u32 {
        let shell = self.run(&["display", "-p", "#{pane_pid}"]).expect("the pane's pid");
        let shell: u32 = shell.trim().parse().expect("a pid");
        // A process's parent is the 4th field of /proc/PID/stat, after `(name)`.
        let child = std::fs::read_dir("/proc").expect("/proc").flatten().find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            let parent: u32 = stat.rsplit_once(") ")?.1.split(' ').nth(1)?.parse().ok()?;
            (parent == shell).then_some(pid)
        });
        child.expect("the program under the pane's shell")
    }

    /// Send `signal` (`libc::SIGINT`, ...) to the program.
    fn kill(&self, signal: i32) {
        let pid = self.program_pid();
        // SAFETY: kill(2) of a process this test started.
        let sent = unsafe { libc::kill(pid as libc::pid_t, signal) };
        assert_eq!(sent, 0, "kill({pid}, {signal}): {}", std::io::Error::last_os_error());
    }

    /// Read the screen until the program has exited; the screen then.
    fn wait_for_exit(&self) -> String {
        self.wait_for("exit status", |s| s.contains("program exited with"))
    }

    /// `(alternate screen on, cursor shown)`.
    fn modes(&self) -> (bool, bool) {
        let flags = self.run(&["display", "-p", "#{alternate_on} #{cursor_flag}"]).unwrap_or_default();
        let flags: Vec<&str> = flags.split_whitespace().collect();
        (flags.first() == Some(&"1"), flags.get(1) == Some(&"1"))
    }

    /// Read the screen until `done` holds of it (a minute at most).
    fn wait_for(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if done(&screen) {
                return screen;
            }
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "no {what} on the screen after 2 minutes:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

/// The epoch the status line shows (`epoch 7/1000`).
fn epoch_shown(screen: &str) -> Option<u64> {
    screen.match_indices(" epoch ").find_map(|(at, word)| {
        let rest = &screen[at + word.len()..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if digits.is_empty() || !rest[digits.len()..].starts_with('/') {
            return None;
        }
        digits.parse().ok()
    })
}

/// Whether the screen shows the third epoch or a later one, and the run's status `running` (not
/// `validating`, which it is for a moment at each epoch's end).
fn third_epoch_running(screen: &str) -> bool {
    epoch_shown(screen).is_some_and(|e| e >= 3) && screen.contains("stoker ─ running")
}

fn digits_command(log_dir: &Path, epochs: u64) -> String {
    format!("'{DIGITS}' --log-dir '{}' --epochs {epochs} --dashboard", log_dir.display())
}

#[test]
fn dashboard_q_stops_at_a_boundary_with_a_checkpoint_and_restores_the_terminal() {
    let dir = scratch_dir("dashboard-q");
    let tmux = Tmux::start("q", &digits_command(&dir, 1000));
    let before = tmux.wait_for("third epoch, running", third_epoch_running);
    for name in
        ["cost", "error", "accuracy", "learning_rate", "train_cost", "validation_cost", "validation_error"]
    {
        assert!(before.contains(name), "no curve `{name}` on the screen:\n{before}");
    }
    assert!(before.contains("/1000") && before.contains("running"), "{before}");
    assert!(before.contains("q: stop at the next step boundary"), "{before}");
    assert_eq!(tmux.modes(), (true, false), "while training: the alternate screen, no cursor");

    tmux.run(&["send-keys", "q"]).expect("send-keys");
    let after = tmux.wait_for_exit();
    assert!(after.contains("program exited with 130"), "q ends the run as Ctrl-C does:\n{after}");
    assert!(
        after.contains("interrupted (checkpoint written)"),
        "the final status stays on the screen:\n{after}"
    );
    assert_eq!(
        tmux.modes(),
        (false, true),
        "the terminal is restored: no alternate screen, the cursor shown"
    );

    // The run stopped at a step boundary with a checkpoint of that very step.
    let line = after.lines().find(|l| l.starts_with("interrupted by StopHandle")).expect("digits' line");
    let step: u64 =
        line.split("(global step ").nth(1).and_then(|r| r.split(')').next()).unwrap().parse().unwrap();
    let checkpoints = dir.join("version_0").join("checkpoints");
    assert!(checkpoints.join(format!("step-{step}")).is_dir(), "no checkpoint of step {step}: {line}");
    assert!(checkpoints.join("index.json").is_file());
    assert!(step < 1000 * 45, "stopped before the end: {line}");
}

#[test]
fn dashboard_shows_the_finished_status_and_restores_the_terminal() {
    let dir = scratch_dir("dashboard-finished");
    let tmux = Tmux::start("finished", &digits_command(&dir, 3));
    let after = tmux.wait_for_exit();
    assert!(after.contains("program exited with 0"), "{after}");
    assert!(after.contains("stoker ─ finished"), "the last frame stays, finished:\n{after}");
    assert!(after.contains("epoch 3/3") && after.contains("train_cost"), "{after}");
    assert!(after.contains("trained 3 epochs"), "{after}");
    assert_eq!(tmux.modes(), (false, true), "the terminal is restored");
    // The last frame has the last epoch's points: the legend's validation_error is the run's
    // last one, as the end-of-training summary below it says.
    let all = tmux.history();
    let number_after = |prefix: &str| -> Option<f64> {
        let at = all.find(prefix)? + prefix.len();
        let text: String =
            all[at..].trim_start().chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
        text.parse().ok()
    };
    let shown = number_after("validation_error ").expect("validation_error's legend");
    let summary = number_after("  validation_error  ").expect("the summary's validation_error");
    assert!(
        (shown - summary).abs() <= 1e-5 * summary.abs().max(1.0),
        "{shown} shown, {summary} last:\n{all}"
    );
}

#[test]
fn dashboard_falls_back_to_the_printer_when_stderr_is_not_a_terminal() {
    let dir = scratch_dir("dashboard-pipe");
    let out = Command::new(DIGITS)
        .args(["--log-dir", dir.to_str().unwrap(), "--epochs", "2", "--dashboard"])
        .output()
        .expect("running digits");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("epoch 2 (global step 90):") && stdout.contains("validation_error"), "{stdout}");
    // The dashboard replaces the default printer: each epoch printed once (issue 40, item 2;
    // before, the default printer printed it a second time beside the dashboard's).
    assert_eq!(stdout.lines().filter(|l| *l == "epoch 2 (global step 90):").count(), 1, "{stdout}");
    assert!(!stderr.contains("\x1b[?1049h"), "no alternate screen without a terminal: {stderr:?}");
}

fn faults_command(log_dir: &Path, args: &str) -> String {
    format!("'{FAULTS}' --log-dir '{}' {args}", log_dir.display())
}

#[test]
fn dashboard_restores_the_terminal_after_a_training_error() {
    let dir = scratch_dir("dashboard-error");
    let tmux = Tmux::start("error", &faults_command(&dir, "--epochs 5 --error-at 2"));
    let after = tmux.wait_for_exit();
    assert!(after.contains("program exited with 1"), "{after}");
    assert_eq!(tmux.modes(), (false, true), "the terminal is restored");
    assert!(
        after.contains(
            "training failed: callback `Fault` failed in trigger_epoch: Fault: the error asked for at epoch 2"
        ),
        "the error is on the normal screen:\n{after}"
    );
    assert!(after.contains("stoker ─ failed: callback `Fault`"), "the last frame says failed:\n{after}");
}

#[test]
fn dashboard_restores_the_terminal_after_a_panic_and_leaves_its_message_whole() {
    let dir = scratch_dir("dashboard-panic");
    let tmux = Tmux::start("panic", &faults_command(&dir, "--epochs 5 --panic-at 2"));
    let after = tmux.wait_for_exit();
    assert!(after.contains("program exited with 1"), "{after}");
    assert_eq!(tmux.modes(), (false, true), "the terminal is restored");
    let all = tmux.history();
    // The panic's message, as the panic hook printed it on the normal screen: nothing drawn
    // over it afterwards.
    let panicked = all.lines().position(|l| l.contains("panicked at examples/src/bin/dashboard_faults.rs"));
    let Some(at) = panicked else { panic!("no whole panic message on the screen:\n{all}") };
    assert!(all.lines().nth(at).unwrap().starts_with("thread 'main'"), "{all}");
    assert_eq!(all.lines().nth(at + 1), Some("Fault: the panic asked for at epoch 2"), "{all}");
    assert!(!all.lines().skip(at).any(|l| l.contains('│')), "the dashboard drew after the panic:\n{all}");
    assert!(
        after.contains(
            "training failed: panic in callback `Fault` in trigger_epoch: Fault: the panic asked for at epoch 2"
        ),
        "{after}"
    );
}

#[test]
fn dashboard_last_frame_shows_the_values_put_in_after_train() {
    let dir = scratch_dir("dashboard-final");
    let tmux = Tmux::start("final", &faults_command(&dir, "--epochs 2 --final-scalar"));
    let after = tmux.wait_for_exit();
    assert!(after.contains("program exited with 0"), "{after}");
    let all = tmux.history();
    let frame = all.split("stoker: training finished").next().expect("the screen");
    assert!(frame.contains("stoker ─ finished") && frame.contains("epoch 2/2"), "{all}");
    assert!(
        frame.contains("┌ final_score ") && frame.contains("final_score 0.75"),
        "no final_score, put in after_train, on the last frame:\n{all}"
    );
}

#[test]
fn dashboard_a_second_sigint_from_outside_restores_the_terminal_before_exiting() {
    let dir = scratch_dir("dashboard-sigint");
    // `after_train` sleeps a minute: the trainer still holds the signals when the second comes.
    let tmux = Tmux::start("sigint", &faults_command(&dir, "--epochs 1000 --linger 60"));
    tmux.wait_for("second epoch", |s| epoch_shown(s).is_some_and(|e| e >= 2));
    tmux.kill(libc::SIGINT);
    // The run stops at its next step boundary with a checkpoint, then lingers in `after_train`.
    let index = dir.join("checkpoints").join("index.json");
    let start = Instant::now();
    while !index.is_file() {
        assert!(start.elapsed() < Duration::from_secs(60), "no checkpoint after the first SIGINT");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Apart from the first by more than a moment: two signals in a row are one.
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(tmux.modes(), (true, false), "the dashboard holds the terminal in after_train");
    tmux.kill(libc::SIGINT);
    let after = tmux.wait_for_exit();
    assert!(after.contains("program exited with 130"), "{after}");
    assert_eq!(tmux.modes(), (false, true), "the terminal is restored before the exit:\n{after}");
}

#[test]
fn dashboard_in_a_world_of_two_threads_stops_on_sigint_and_restores_the_terminal() {
    let dir = scratch_dir("dashboard-world");
    let command = format!("{} --threads 2", digits_command(&dir, 1000));
    let tmux = Tmux::start("world", &command);
    let before = tmux.wait_for("third epoch, running", third_epoch_running);
    assert!(before.contains("running") && before.contains("validation_error"), "{before}");
    tmux.kill(libc::SIGINT);
    let after = tmux.wait_for_exit();
    assert!(after.contains("program exited with 130"), "{after}");
    assert!(after.contains("interrupted (checkpoint written)"), "{after}");
    assert!(after.contains("interrupted by SIGINT"), "{after}");
    assert_eq!(tmux.modes(), (false, true), "the terminal is restored");
}

#[test]
fn dashboard_in_a_world_of_two_threads_stops_on_q_and_restores_the_terminal() {
    let dir = scratch_dir("dashboard-world-q");
    let command = format!("{} --threads 2", digits_command(&dir, 1000));
    let tmux = Tmux::start("world-q", &command);
    tmux.wait_for("third epoch, running", third_epoch_running);
    tmux.run(&["send-keys", "q"]).expect("send-keys");
    let after = tmux.wait_for_exit();
    assert!(after.contains("program exited with 130"), "{after}");
    assert!(after.contains("interrupted (checkpoint written)"), "{after}");
    // (The chief's report names the stop SIGTERM, as the other rank saw it.)
    assert!(after.contains("interrupted by "), "{after}");
    assert_eq!(tmux.modes(), (false, true), "the terminal is restored");
}

/// `InjectShell`'s prompt opened while the dashboard holds the terminal: the dashboard puts the
/// terminal back while the prompt is open (no alternate screen, no raw mode, nothing drawn over
/// the prompt), the typed lines reach the prompt, and once it closes the dashboard takes the
/// terminal again and `q` stops the run at a step boundary with a checkpoint.
#[test]
fn dashboard_steps_aside_while_inject_shell_s_prompt_is_open() {
    let dir = scratch_dir("dashboard-shell");
    let pause = scratch_dir("dashboard-shell-pause").join("pause");
    let args = format!("--epochs 1000 --shell '{}'", pause.display());
    let tmux = Tmux::start("shell", &faults_command(&dir, &args));
    tmux.wait_for("second epoch", |s| epoch_shown(s).is_some_and(|e| e >= 2));
    std::fs::write(&pause, "").unwrap();
    let is_prompt = |line: &str| line.trim_end() == "stoker>";
    let prompt = tmux.wait_for("InjectShell's prompt", |s| {
        s.contains("training paused at epoch") && s.lines().any(is_prompt)
    });
    assert_eq!(
        tmux.modes(),
        (false, true),
        "while the prompt is open: the normal screen, the cursor shown:\n{prompt}"
    );
    assert!(!prompt.contains('│'), "the dashboard drew over the prompt:\n{prompt}");

    // A command typed with Enter reaches the prompt, and its answer stays on the screen.
    tmux.run(&["send-keys", "status", "Enter"]).expect("send-keys");
    let answer = tmux.wait_for("the answer to `status`", |s| s.contains(" of 1000, global step "));
    assert!(answer.contains("stoker> status"), "{answer}");
    assert!(!answer.contains('│'), "the dashboard drew over the prompt:\n{answer}");
    assert_eq!(tmux.modes(), (false, true), "the prompt still open:\n{answer}");

    // Closed, the dashboard is back, and `q` reaches it.
    tmux.run(&["send-keys", "continue", "Enter"]).expect("send-keys");
    let back = tmux.wait_for("the dashboard back, running", |s| s.contains("stoker ─ running"));
    assert_eq!(tmux.modes(), (true, false), "the dashboard holds the terminal again:\n{back}");
    assert!(!pause.exists(), "the prompt removes its file when training continues");
    tmux.run(&["send-keys", "q"]).expect("send-keys");
    let after = tmux.wait_for_exit();
    assert!(after.contains("program exited with 130"), "q stops the run:\n{after}");
    assert!(after.contains("interrupted (checkpoint written)"), "{after}");
    assert_eq!(tmux.modes(), (false, true), "the terminal is restored");
    let line =
        after.lines().find(|l| l.starts_with("interrupted at global step ")).expect("the program's line");
    let step: u64 = line["interrupted at global step ".len()..].trim().parse().expect("a step");
    let checkpoint = ["checkpoints", "version_0/checkpoints"]
        .iter()
        .map(|folder| dir.join(folder).join(format!("step-{step}")))
        .find(|path| path.is_dir());
    assert!(checkpoint.is_some(), "no checkpoint of step {step} in {}:\n{after}", dir.display());
}
