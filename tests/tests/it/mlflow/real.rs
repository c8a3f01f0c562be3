//! `MlflowLogger` against a real MLflow tracking server (`mlflow server`, started once for the
//! test binary by `stoker_tests::mlflow_server`), read back with MLflow's own Python client:
//! the params, every metric's history, the run continued after a resume, the best checkpoint as
//! an artifact; and over https, through a TLS door with a self-signed certificate.

use std::path::Path;
use std::time::{Duration, Instant};

use burn_stoker::monitor::{CheckpointArtifacts, MLFLOW_SINK_NAME, MlflowLogger};
use burn_stoker::prelude::*;
use burn_stoker::saver::MaxSaver;
use serde_json::{Value as Json, json};
use stoker_tests::mlflow_server::{artifact_paths, read_runs, server, wait_for_run};
use stoker_tests::scratch_dir;

use super::{Scalars, train_in};

/// The files of a checkpoint copy, each uploaded.
const COPY_FILES: [&str; 5] =
    ["manifest.json", "model.bpk", "monitors.json", "optimizer.bpk", "trainer.json"];

/// A run name no other test (nor an earlier run of the binary) uses.
fn unique(what: &str) -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    format!("stoker-{what}-{}-{}", std::process::id(), now.as_millis())
}

/// At each epoch's end, waits until the server has the run (so that the checkpoint written
/// next knows its id); at the end of epoch `artifact_at`, also until the run's artifacts hold the
/// best copy's files, uploaded while training goes on.
struct Waits {
    uri: String,
    name: String,
    artifact_at: Option<u64>,
}

impl<M> Callback<M> for Waits {
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        wait_for_run(&self.uri, &self.name);
        if self.artifact_at == Some(ctx.epoch_num()) {
            let deadline = Instant::now() + Duration::from_secs(60);
            while artifact_paths(&self.uri, &self.name, "checkpoints/max-a").len() < COPY_FILES.len() {
                assert!(Instant::now() < deadline, "the best copy was not uploaded during training");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(())
    }
}

/// `runs`' one run: FINISHED, with the param `optimizer`, `a` = step and `b_1__x` = -step logged
/// once at each of `steps` steps, and the best copy `max-a`: every file uploaded, the bytes of
/// the local copy in `log_dir` (downloaded into `download`).
fn assert_one_complete_run(runs: &[Json], steps: u64, log_dir: &Path, download: &Path) {
    assert_eq!(runs.len(), 1, "one MLflow run: {runs:?}");
    let run = &runs[0];
    assert_eq!(run["status"], "FINISHED", "{run}");
    assert_eq!(run["params"], json!({ "optimizer": "sgd" }), "{run}");
    for (key, sign) in [("a", 1.0), ("b_1__x", -1.0)] {
        let expected: Vec<Json> = (1..=steps).map(|s| json!([s, sign * s as f64])).collect();
        assert_eq!(run["metrics"][key], Json::Array(expected), "{key}: every step once, in order");
    }
    let paths: Vec<String> = COPY_FILES.iter().map(|f| format!("checkpoints/max-a/{f}")).collect();
    assert_eq!(run["artifacts"], json!(paths), "{run}");
    for file in COPY_FILES {
        let local = std::fs::read(log_dir.join("checkpoints/max-a").join(file)).unwrap();
        let uploaded = std::fs::read(download.join("checkpoints/max-a").join(file)).unwrap();
        assert!(local == uploaded, "{file}: the artifact is not the best copy's last version");
    }
}

#[test]
fn sink_mlflow_real_server_has_the_params_metrics_resumed_run_and_best_checkpoint() {
    let server = server();
    let name = unique("real");
    let dir = scratch_dir("sink-mlflow-real");
    let callbacks = |artifact_at| {
        let logger = MlflowLogger::new(&server.uri)
            .unwrap()
            .run_name(&name)
            .param("optimizer", "sgd")
            .max_batch(5)
            .checkpoint_artifacts(CheckpointArtifacts::EachBest);
        let waits = Waits { uri: server.uri.clone(), name: name.clone(), artifact_at };
        (Scalars::default(), MaxSaver::new("a"), waits, ModelSaver::new(10), logger)
    };
    let first = train_in(&dir, 4, 3, callbacks(Some(3)), false).expect("the first run trains");
    assert!(first.writer_failures.is_empty(), "{:?}", first.writer_failures);
    let resumed = train_in(&dir, 4, 4, callbacks(None), true).expect("the resumed run trains");
    assert_eq!(resumed.counters.global_step(), 16);
    assert!(resumed.writer_failures.is_empty(), "{:?}", resumed.writer_failures);

    let download = scratch_dir("sink-mlflow-real-download");
    let runs = read_runs(&server.uri, &name, &download, None);
    assert_one_complete_run(&runs, 16, &dir, &download);
}

#[test]
fn sink_mlflow_real_server_over_https_trusts_the_ca_it_is_given_and_no_other() {
    let server = server();
    let train = |name: &str, logger: MlflowLogger| {
        let logger =
            logger.run_name(name).param("optimizer", "sgd").checkpoint_artifacts(CheckpointArtifacts::AtEnd);
        let dir = scratch_dir("sink-mlflow-tls");
        let report = train_in(&dir, 2, 2, (Scalars::default(), MaxSaver::new("a"), logger), false)
            .expect("training succeeds");
        (dir, report)
    };
    let name = unique("tls");
    let logger = MlflowLogger::new(&server.tls_uri).unwrap().server_cert(&server.ca);
    let (dir, report) = train(&name, logger);
    assert!(report.writer_failures.is_empty(), "{:?}", report.writer_failures);
    let download = scratch_dir("sink-mlflow-tls-download");
    // Read back through the TLS door too, MLflow's client trusting the CA by its variable.
    let runs = read_runs(&server.tls_uri, &name, &download, Some(&server.ca));
    assert_one_complete_run(&runs, 4, &dir, &download);

    // Mozilla's roots do not include the test's CA: the server's certificate is refused, at once.
    let name = unique("tls-untrusted");
    let logger = MlflowLogger::new(&server.tls_uri).unwrap().end_timeout(Duration::from_secs(20));
    let started = Instant::now();
    let (_, report) = train(&name, logger);
    assert_eq!(report.writer_failures.len(), 1, "{:?}", report.writer_failures);
    let failure = &report.writer_failures[0];
    assert_eq!(failure.writer, MLFLOW_SINK_NAME);
    let error = failure.error.to_string();
    assert!(error.contains(&server.tls_uri) && error.contains("UnknownIssuer"), "{error}");
    assert!(error.contains("MLFLOW_TRACKING_SERVER_CERT_PATH"), "the fix is not in the message: {error}");
    // A request that got no answer is tried again after 1 s and 4 s; a refused certificate is not.
    assert!(started.elapsed() < Duration::from_secs(4), "a refused certificate was tried again: {error}");
    assert!(read_runs(&server.uri, &name, &download, None).is_empty(), "a run was created without TLS trust");
}
