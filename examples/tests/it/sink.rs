//! The example's MLflow switch (`DigitsRun::mlflow`, `digits --mlflow URI`, which add
//! `burn_stoker::monitor::MlflowLogger`) against the fake MLflow tracking server of
//! `stoker_tests::mlflow`. The logger itself is tested in `tests/tests/it/mlflow.rs`.

use serde_json::Value as Json;
use stoker_examples::{DigitsConfig, DigitsRun, train_digits};
use stoker_tests::mlflow::{Fake, Mode, calls};
use stoker_tests::scratch_dir;

#[test]
fn sink_mlflow_gets_every_scalar_of_stats_json_at_its_step_the_params_and_the_end() {
    let fake = Fake::start(Mode::Healthy);
    let dir = scratch_dir("sink-mlflow-digits");
    let mut run = DigitsRun::new(&dir, burn_stoker::device::cpu());
    run.config = DigitsConfig::new().with_epochs(2).with_hidden(32).with_seed(3);
    run.mlflow = Some(fake.uri.clone());
    let (report, _) = train_digits(&run).expect("training succeeds");
    assert!(report.writer_failures.is_empty(), "{:?}", report.writer_failures);
    fake.assert_no_problems();

    // One run created, first; ended last, FINISHED.
    let calls = calls(&fake);
    assert_eq!(calls.first().map(String::as_str), Some("create"), "{calls:?}");
    assert_eq!(calls.iter().filter(|c| *c == "create").count(), 1, "{calls:?}");
    assert_eq!(calls.last().map(String::as_str), Some("update"), "{calls:?}");
    assert_eq!(calls.iter().filter(|c| *c == "update").count(), 1, "{calls:?}");
    let create = &fake.bodies("runs/create")[0];
    assert_eq!(create["experiment_id"], "0", "the default experiment");
    assert_eq!(create["run_name"], "digits");
    let update = &fake.bodies("runs/update")[0];
    assert_eq!(update["status"], "FINISHED", "{update}");
    assert!(update["end_time"].as_i64() >= create["start_time"].as_i64(), "{update} {create}");

    // The configuration as params.
    let params = fake.params();
    for (key, value) in [("epochs", "2"), ("batch_size", "32"), ("hidden", "32"), ("seed", "3")] {
        assert_eq!(params.get(key).map(String::as_str), Some(value), "param {key}: {params:?}");
    }

    // Every scalar of stats.json, at the epoch's global step, with its value.
    let stats: Vec<Json> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("stats.json")).unwrap()).unwrap();
    assert_eq!(stats.len(), 2);
    let metrics = fake.metrics();
    let mut checked = 0;
    for entry in &stats {
        let step = entry["global_step"].as_u64().unwrap();
        for (key, value) in entry.as_object().unwrap() {
            if key == "epoch_num" || key == "global_step" {
                continue;
            }
            let sent = metrics.iter().rev().find(|(k, s, _)| k == key && *s == step);
            let Some((_, _, sent)) = sent else {
                panic!("{key} at step {step} was not logged; logged: {metrics:?}");
            };
            assert_eq!(*sent, value.as_f64().unwrap(), "{key} at step {step}");
            checked += 1;
        }
    }
    assert!(
        checked >= 2 * 5,
        "validation_error, validation_cost, train_cost, train_accuracy, learning_rate: {checked}"
    );

    // Batched: one request per epoch end for the metrics, not one per scalar.
    let batches = fake
        .bodies("runs/log-batch")
        .iter()
        .filter(|b| b["metrics"].as_array().is_some_and(|m| !m.is_empty()))
        .count();
    assert!(batches <= 2, "{batches} metric batches for 2 epochs");
    assert!(
        metrics.len() >= 10 && batches < metrics.len(),
        "{} metrics in {batches} requests",
        metrics.len()
    );
}

#[test]
fn sink_mlflow_a_failing_server_disables_the_sink_and_training_goes_on() {
    let fake = Fake::start(Mode::FailLogBatch);
    let dir = scratch_dir("sink-mlflow-failing");
    let mut run = DigitsRun::new(&dir, burn_stoker::device::cpu());
    run.config = DigitsConfig::new().with_epochs(2).with_hidden(32);
    run.mlflow = Some(fake.uri.clone());
    let (report, _) = train_digits(&run).expect("training finishes although the tracker fails");
    assert_eq!(report.counters.epoch_num(), 2, "every epoch ran");
    assert_eq!(report.writer_failures.len(), 1, "{:?}", report.writer_failures);
    let failure = &report.writer_failures[0];
    assert_eq!(failure.writer, "MLflow", "{failure}");
    for says in [
        "500",
        "INVALID_PARAMETER_VALUE",
        "the fake server refuses every batch",
        &format!("{}/api/2.0/mlflow/runs/log-batch", fake.uri),
    ] {
        assert!(
            failure.error.to_string().contains(says),
            "the error does not say {says:?}: {}",
            failure.error
        );
    }
    // Disabled at the first error: one refused batch, nothing more sent but the run's end.
    let calls = calls(&fake);
    assert_eq!(calls.iter().filter(|c| *c == "log-batch").count(), 1, "{calls:?}");
    assert_eq!(calls.last().map(String::as_str), Some("update"), "{calls:?}");
    assert_eq!(fake.bodies("runs/update")[0]["status"], "FAILED", "an incomplete run is not FINISHED");
    // stats.json has both epochs: the other writers were not affected.
    let stats: Vec<Json> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("stats.json")).unwrap()).unwrap();
    assert_eq!(stats.len(), 2);
}

#[test]
fn sink_mlflow_digits_flag_logs_the_run() {
    let fake = Fake::start(Mode::Healthy);
    let dir = scratch_dir("sink-mlflow-cli");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_digits"))
        .args(["--log-dir", dir.join("log").to_str().unwrap(), "--epochs", "1", "--mlflow", &fake.uri])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("running digits");
    assert!(out.status.success(), "{}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    fake.assert_no_problems();
    assert_eq!(calls(&fake).first().map(String::as_str), Some("create"));
    assert_eq!(fake.bodies("runs/update")[0]["status"], "FINISHED");
    assert!(
        fake.metrics().iter().any(|(k, s, _)| k == "validation_error" && *s == 45),
        "{:?}",
        fake.metrics()
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("scalars sent to the MLflow tracking server"));

    // A tracker that refuses the batches: trained all the same, and said so instead of "sent".
    let failing = Fake::start(Mode::FailLogBatch);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_digits"))
        .args(["--log-dir", dir.join("failing").to_str().unwrap(), "--epochs", "1", "--mlflow", &failing.uri])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("running digits");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("warning: its logs are incomplete: writer MLflow failed"), "{stdout}");
    assert!(!stdout.contains("scalars sent"), "{stdout}");

    // A URI it cannot use is refused before anything is trained (exit status 2). Not an
    // `https://` one: the workspace's test build has the feature `mlflow-tls` on (the tests crate
    // turns it on), where such a URI is valid.
    let log = dir.join("refused");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_digits"))
        .args(["--log-dir", log.to_str().unwrap(), "--epochs", "1", "--mlflow", "ftp://example.com"])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("running digits");
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--mlflow"));
    assert!(!log.exists());
}
