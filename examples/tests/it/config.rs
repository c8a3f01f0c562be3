//! The example's configuration as a burn `Config`, saved as `config.json` in the log directory:
//! read back equal, after the log-directory policy acted, and checked on resume.

use burn::config::Config;
use burn_stoker::trainer::LogDirPolicy;
use stoker_examples::{CONFIG_FILE, ConfigMismatch, DigitsConfig, DigitsRun, train_digits};
use stoker_tests::scratch_dir;

/// A short run that is not the README's configuration, so that reading back the defaults would
/// not pass for reading back this one.
fn short_run(dir: &std::path::Path, seed: u64) -> DigitsRun {
    let mut run = DigitsRun::new(dir, burn_stoker::device::cpu());
    run.config = DigitsConfig::new().with_epochs(1).with_hidden(32).with_seed(seed);
    run
}

#[test]
fn config_json_written_by_a_run_reads_back_equal() {
    let dir = scratch_dir("config-read-back");
    let run = short_run(&dir, 7);
    train_digits(&run).expect("training succeeds");
    let saved = DigitsConfig::load(dir.join(CONFIG_FILE)).expect("config.json reads back");
    assert_eq!(saved, run.config);
}

#[test]
fn config_json_alone_is_not_an_earlier_run_and_is_replaced() {
    let dir = scratch_dir("config-alone");
    std::fs::create_dir_all(&dir).unwrap();
    DigitsConfig::new().with_seed(1).save(dir.join(CONFIG_FILE)).unwrap();
    let run = short_run(&dir, 2);
    assert_eq!(run.log_dir_policy, LogDirPolicy::Refuse);
    train_digits(&run).expect("a directory holding only config.json is not refused");
    assert_eq!(DigitsConfig::load(dir.join(CONFIG_FILE)).unwrap(), run.config);
}

#[test]
fn config_json_goes_aside_with_the_earlier_run_on_backup() {
    let dir = scratch_dir("config-backup");
    train_digits(&short_run(&dir, 1)).expect("the first run");
    let mut second = short_run(&dir, 2);
    second.log_dir_policy = LogDirPolicy::Backup;
    train_digits(&second).expect("the second run, backing up the first");
    assert_eq!(DigitsConfig::load(dir.join(CONFIG_FILE)).unwrap(), second.config);
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    let backups: Vec<_> = std::fs::read_dir(dir.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(&format!("{name}.backup-")))
        .collect();
    assert_eq!(backups.len(), 1, "{backups:?}");
    assert_eq!(DigitsConfig::load(backups[0].join(CONFIG_FILE)).unwrap(), short_run(&dir, 1).config);
}

#[test]
fn config_resume_checks_the_saved_configuration() {
    let dir = scratch_dir("config-resume");
    train_digits(&short_run(&dir, 1)).expect("the first run");

    // Another seed would not continue the run: refused, naming the file and the difference.
    let mut other = short_run(&dir, 2);
    other.resume = true;
    other.config.epochs = 2;
    let error = train_digits(&other).expect_err("a resume with another seed is refused");
    let Some(ConfigMismatch { path, differences }) = error.downcast_ref::<ConfigMismatch>() else {
        panic!("not a ConfigMismatch: {error}")
    };
    assert_eq!(path, &dir.join(CONFIG_FILE));
    assert_eq!(differences, &["seed 1 there, 2 now"]);
    let error = error.to_string();
    assert!(error.contains("seed 1 there, 2 now"), "{error}");
    assert!(error.contains(&dir.join(CONFIG_FILE).display().to_string()), "{error}");
    assert_eq!(DigitsConfig::load(dir.join(CONFIG_FILE)).unwrap().seed, 1, "config.json is left as it was");

    // More epochs continue it: the saved configuration says so afterwards.
    let mut more = short_run(&dir, 1);
    more.resume = true;
    more.config.epochs = 2;
    let (report, _) = train_digits(&more).expect("a resume with more epochs");
    assert_eq!(report.counters.epoch_num(), 2);
    assert_eq!(DigitsConfig::load(dir.join(CONFIG_FILE)).unwrap(), more.config);
}
