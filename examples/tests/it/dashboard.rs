//! `digits --dashboard` in a real terminal: tmux, at a fixed size, on a server of the test's own
//! (`tmux -L`). The screen is read with `capture-pane` while training and after it; `q` is
//! pressed with `send-keys`. tmux is required (CI installs it): without it these tests fail.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use stoker_tests::scratch_dir;

const DIGITS: &str = env!("CARGO_BIN_EXE_digits");

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
        let script = format!("{command}; echo \"digits exited with $?\"; sleep 600");
        let out = tmux.run(&["new-session", "-d", "-x", "120", "-y", "40", "sh", "-c", &script]);
        assert!(out.is_some(), "tmux could not start a session");
        tmux
    }

    /// `tmux -L <socket> args...`: its stdout, `None` when it failed.
    fn run(&self, args: &[&str]) -> Option<String> {
        let out = Command::new("tmux")
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

fn digits_command(log_dir: &Path, epochs: u64) -> String {
    format!("'{DIGITS}' --log-dir '{}' --epochs {epochs} --dashboard", log_dir.display())
}

#[test]
fn dashboard_q_stops_at_a_boundary_with_a_checkpoint_and_restores_the_terminal() {
    let dir = scratch_dir("dashboard-q");
    let tmux = Tmux::start("q", &digits_command(&dir, 1000));
    let before = tmux.wait_for("third epoch", |s| epoch_shown(s).is_some_and(|e| e >= 3));
    for name in
        ["cost", "error", "accuracy", "learning_rate", "train_cost", "validation_cost", "validation_error"]
    {
        assert!(before.contains(name), "no curve `{name}` on the screen:\n{before}");
    }
    assert!(before.contains("/1000") && before.contains("running"), "{before}");
    assert!(before.contains("q: stop at the next step boundary"), "{before}");
    assert_eq!(tmux.modes(), (true, false), "while training: the alternate screen, no cursor");

    tmux.run(&["send-keys", "q"]).expect("send-keys");
    let after = tmux.wait_for("exit status", |s| s.contains("digits exited with"));
    assert!(after.contains("digits exited with 130"), "q ends the run as Ctrl-C does:\n{after}");
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
    let after = tmux.wait_for("exit status", |s| s.contains("digits exited with"));
    assert!(after.contains("digits exited with 0"), "{after}");
    assert!(after.contains("stoker ─ finished"), "the last frame stays, finished:\n{after}");
    assert!(after.contains("epoch 3/3") && after.contains("train_cost"), "{after}");
    assert!(after.contains("trained 3 epochs"), "{after}");
    assert_eq!(tmux.modes(), (false, true), "the terminal is restored");
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
    assert!(!stderr.contains("\x1b[?1049h"), "no alternate screen without a terminal: {stderr:?}");
}
