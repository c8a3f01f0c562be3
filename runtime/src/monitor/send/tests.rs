//! Unit tests of the command templates and of the command runner.

use super::template::Template;
use crate::error::Result;

fn template(command: &str, names: &[&str]) -> Result<Template> {
    Template::parse("test", command.into(), names.iter().map(|n| n.to_string()).collect())
}

#[test]
fn placeholders_are_replaced_like_python_format() {
    let t = template("echo {a} {b:.2f} {{x}} {epoch_num}/{global_step} {a}", &["a", "b"]).unwrap();
    assert_eq!(t.render(&[0.25, 1.0 / 3.0], 2, 40), "echo 0.25 0.33 {x} 2/40 0.25");
    assert_eq!(t.render(&[1.0, f64::NAN], 1, 1), "echo 1.0 NaN {x} 1/1 1.0");
}

#[test]
fn a_watched_name_takes_precedence_over_the_counters() {
    let t = template("{epoch_num}", &["epoch_num"]).unwrap();
    assert_eq!(t.render(&[7.5], 1, 1), "7.5");
}

#[test]
fn bad_templates_are_errors_naming_the_problem() {
    let error = |c: &str, n: &[&str]| template(c, n).expect_err("an error").to_string();
    assert!(error("echo {c}", &["a"]).contains("`{c}` names none of the scalars `a`"));
    assert!(error("echo {a", &["a"]).contains("unclosed"));
    assert!(error("echo a}", &["a"]).contains("single `}`"));
    assert!(error("echo {a:>5}", &["a"]).contains("only `{name}` and `{name:.Nf}`"));
    assert!(error("echo", &[]).contains("no scalar names"));
    assert!(error("echo {a}", &["a", "a"]).contains("`a` is given twice"));
    assert!(error("echo {a}", &["a", ""]).contains("empty"));
}

/// Whether process `pid` is gone: no such process, or a zombie nobody reaped yet.
#[cfg(target_os = "linux")]
fn gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z')),
    }
}

/// A command still running when the end of training stops waiting is killed with everything it
/// started: `sh` and its children (a pipeline, a command in the background), not `sh` alone.
#[cfg(target_os = "linux")]
#[test]
fn an_abandoned_command_is_killed_with_the_processes_it_started() {
    use std::time::{Duration, Instant};
    let dir = std::env::temp_dir().join(format!("stoker-send-group-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let pid_file = dir.join("pid");
    let mut runner = super::runner::CommandRunner::start("SendStat", "SendStat".into()).unwrap();
    runner.submit(format!("sleep 60 & echo $! > {}.tmp; mv {0}.tmp {0}; wait", pid_file.display()));
    let started = Instant::now();
    while !pid_file.exists() {
        assert!(started.elapsed() < Duration::from_secs(10), "the command did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    let sleeper = std::fs::read_to_string(&pid_file).unwrap().trim().to_string();
    assert!(!gone(&sleeper));
    runner.finish(Duration::from_millis(50));
    let killed = Instant::now();
    while !gone(&sleeper) && killed.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let left = !gone(&sleeper);
    if left {
        // SAFETY: kill(2) of the process the test started, to leave nothing behind.
        unsafe { libc::kill(sleeper.parse().unwrap(), libc::SIGKILL) };
    }
    assert!(!left, "the command's child {sleeper} outlived the kill");
    std::fs::remove_dir_all(&dir).unwrap();
}
