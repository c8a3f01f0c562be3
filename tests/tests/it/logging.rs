//! The library's messages go through the `log` facade: with a logger installed, stoker's
//! warnings reach it (a target under `burn_stoker::`, their level) instead of stderr.
//!
//! The test logger is process-wide and this binary runs every integration test in one process:
//! once installed, every test's stoker messages go to it. It echoes each to stderr, so a test's
//! output still shows them; no test reads its own process's stderr (those that check stderr read
//! a child process's, where no logger is installed).

use std::path::Path;
use std::sync::{Mutex, OnceLock};

use log::{Level, LevelFilter, Log, Metadata, Record};
use stoker_tests::scratch_dir;

/// One captured message.
#[derive(Debug, Clone)]
struct Captured {
    level: Level,
    target: String,
    message: String,
}

/// Records stoker's messages (targets under `burn_stoker`) and echoes them to stderr; ignores
/// the other crates' (burn's).
struct TestLogger {
    records: Mutex<Vec<Captured>>,
}

impl Log for TestLogger {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target().starts_with("burn_stoker")
    }
    fn log(&self, record: &Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let message = record.args().to_string();
        eprintln!("[{} {}] {message}", record.level(), record.target());
        let captured = Captured { level: record.level(), target: record.target().to_string(), message };
        self.records.lock().unwrap_or_else(|e| e.into_inner()).push(captured);
    }
    fn flush(&self) {}
}

/// The process's test logger, installed on first use.
fn logger() -> &'static TestLogger {
    static LOGGER: OnceLock<&'static TestLogger> = OnceLock::new();
    LOGGER.get_or_init(|| {
        let logger: &'static TestLogger = Box::leak(Box::new(TestLogger { records: Mutex::new(Vec::new()) }));
        log::set_logger(logger).expect("no other logger in this process");
        // Info: stoker's messages, not burn's debug and trace chatter.
        log::set_max_level(LevelFilter::Info);
        logger
    })
}

/// The captured messages that mention `dir`.
fn captured_about(dir: &Path) -> Vec<Captured> {
    let dir = dir.display().to_string();
    let records = logger().records.lock().unwrap_or_else(|e| e.into_inner());
    records.iter().filter(|r| r.message.contains(&dir)).cloned().collect()
}

#[test]
fn logging_a_full_writer_queue_warns_through_the_logger() {
    logger();
    let dir = scratch_dir("logging-queue");
    // The writer's name carries the run's directory: that is what its warning names.
    let name = format!("Stalled({})", dir.display());
    crate::monitors::train_behind_a_stalled_writer(&name, &dir);
    let captured = captured_about(&dir);
    let warning = captured
        .iter()
        .find(|r| r.message.contains("is behind: its queue holds"))
        .unwrap_or_else(|| panic!("no warning of the full queue reached the logger: {captured:#?}"));
    assert_eq!(warning.level, Level::Warn, "{warning:?}");
    assert!(warning.target.starts_with("burn_stoker::"), "{warning:?}");
    // The logger gets the message; the prefix is stderr's alone.
    assert!(warning.message.starts_with(&name), "{warning:?}");
}

#[test]
fn logging_an_unremovable_old_checkpoint_warns_through_the_logger() {
    logger();
    let dir = scratch_dir("logging-unremovable");
    crate::checkpoint::train_past_an_unremovable_checkpoint(&dir);
    let captured = captured_about(&dir);
    let warning = captured
        .iter()
        .find(|r| r.message.contains("is complete, but removing") && r.message.contains("step-5"))
        .unwrap_or_else(|| {
            panic!("no warning of the unremovable checkpoint reached the logger: {captured:#?}")
        });
    assert_eq!(warning.level, Level::Warn, "{warning:?}");
    assert!(warning.target.starts_with("burn_stoker::"), "{warning:?}");
    assert!(!warning.message.starts_with("stoker:"), "{warning:?}");
}

/// tensorpack's `MinSaver` / `MaxSaver` on a statistic that is never put: a warning ("not
/// available"; here once per saver) and no copy, where Keras's `ModelCheckpoint(save_best_only)`
/// saves anyway. The catalogue's `MinSaver` row says so.
#[test]
fn logging_a_best_saver_on_a_statistic_never_put_warns_once_and_saves_nothing() {
    use burn::nn::Linear;
    use burn_stoker::prelude::*;
    use stoker_tests::{mse, tiny_data, tiny_model};
    logger();
    let dir = scratch_dir("logging-never-put");
    let statistic = format!("never_put_{}", std::process::id());
    let device = burn_stoker::device::cpu();
    let report =
        Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(2, &device))
            .max_epoch(3)
            .log_dir(&dir)
            .default_callbacks(DefaultCallbacks::none())
            .handle_signals(false)
            .callbacks((MinSaver::new(statistic.as_str()), MaxSaver::new(statistic.as_str())))
            .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
            .unwrap();
    assert_eq!(report.outcome, Outcome::Finished);
    for copy in ["min", "max"] {
        let folder = dir.join("checkpoints").join(format!("{copy}-{statistic}"));
        assert!(!folder.exists(), "{} was written", folder.display());
    }
    let records = logger().records.lock().unwrap_or_else(|e| e.into_inner());
    let warnings: Vec<&Captured> = records.iter().filter(|r| r.message.contains(&statistic)).collect();
    assert_eq!(warnings.len(), 2, "one warning per saver over three epochs: {warnings:#?}");
    for warning in warnings {
        assert_eq!(warning.level, Level::Warn, "{warning:?}");
        assert!(warning.message.contains("has been put yet"), "{warning:?}");
    }
}

/// `hyper.txt` as a symlink planted in the log directory, to another file of this user's (a key,
/// a token): `HumanHyperParamSetter` does not read through it, so no warning quotes the target's
/// lines (its warning about a line that is not `name:value` once echoed them), and it says what
/// is wrong instead.
#[cfg(unix)]
#[test]
fn logging_a_hyper_file_linked_elsewhere_quotes_none_of_the_target_s_lines() {
    use burn::nn::Linear;
    use burn_stoker::param::HumanHyperParamSetter;
    use burn_stoker::prelude::*;
    use stoker_tests::{mse, tiny_data, tiny_model};
    logger();
    let dir = scratch_dir("logging-hyper-link");
    let elsewhere = scratch_dir("logging-hyper-link-target");
    let token = format!("PRIVATE-KEY-LINE-{}", std::process::id());
    let target = elsewhere.join("id_key");
    let contents = format!("{token}\nlearning_rate:0.5\n");
    std::fs::write(&target, &contents).unwrap();
    std::os::unix::fs::symlink(&target, dir.join("hyper.txt")).unwrap();
    let device = burn_stoker::device::cpu();
    let report =
        Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(2, &device))
            .max_epoch(2)
            .learning_rate(0.1)
            .log_dir(&dir)
            .default_callbacks(DefaultCallbacks::none())
            .handle_signals(false)
            .callbacks(HumanHyperParamSetter::new("learning_rate"))
            .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
            .unwrap();
    assert_eq!(report.outcome, Outcome::Finished);
    let records = logger().records.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let quoting: Vec<&Captured> = records.iter().filter(|r| r.message.contains(&token)).collect();
    assert!(quoting.is_empty(), "a message quotes the link's target: {quoting:#?}");
    let about: Vec<&Captured> = records
        .iter()
        .filter(|r| r.message.contains(&dir.display().to_string()) && r.message.contains("symbolic link"))
        .collect();
    assert!(!about.is_empty(), "no warning says that hyper.txt is a symbolic link: {records:#?}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), contents, "the target was changed");
}
