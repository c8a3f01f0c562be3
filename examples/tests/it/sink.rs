//! The MLflow example sink (`stoker_examples::mlflow`) against a fake MLflow tracking server: a
//! `TcpListener` on 127.0.0.1 in a thread of this test that parses the HTTP/1.1 requests, checks
//! them against MLflow's REST API 2.0 (the endpoints, the JSON fields, MLflow's limits on batches
//! and keys), records them and answers as MLflow does. It is not a real MLflow server: the last
//! test, ignored by default, runs against one.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use burn::nn::Linear;
use burn_stoker::prelude::*;
use serde_json::{Value as Json, json};
use stoker_examples::mlflow::{MLFLOW_MAX_METRICS_PER_BATCH, MlflowLogger};
use stoker_examples::{DigitsConfig, DigitsRun, train_digits};
use stoker_tests::{mse, scratch_dir, tiny_data, tiny_model};

/// The run id the fake server gives every run it creates.
const RUN_ID: &str = "5f1e0c2a9b8d4e7f8a6b3c2d1e0f9a8b";

/// What the fake server answers to `runs/log-batch`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    /// As MLflow does: `{}`.
    Healthy,
    /// HTTP 500 with an MLflow error body, every time.
    FailLogBatch,
}

/// One request the fake server received.
#[derive(Debug, Clone)]
struct Request {
    path: String,
    body: Json,
}

/// A fake MLflow tracking server on 127.0.0.1.
struct Fake {
    uri: String,
    requests: Arc<Mutex<Vec<Request>>>,
    /// What the server found wrong in a request (MLflow would refuse it, or the test cannot read it).
    problems: Arc<Mutex<Vec<String>>>,
}

impl Fake {
    fn start(mode: Mode) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding 127.0.0.1:0");
        let uri = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let problems = Arc::new(Mutex::new(Vec::new()));
        let (r, p) = (Arc::clone(&requests), Arc::clone(&problems));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                if let Err(problem) = serve(stream, mode, &r) {
                    p.lock().unwrap().push(problem);
                }
            }
        });
        Fake { uri, requests, problems }
    }

    fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }

    fn assert_no_problems(&self) {
        let problems = self.problems.lock().unwrap();
        assert!(problems.is_empty(), "the fake MLflow server found problems: {problems:#?}");
    }

    /// The bodies of the requests to `endpoint` (`runs/create`...), in order.
    fn bodies(&self, endpoint: &str) -> Vec<Json> {
        let path = format!("/api/2.0/mlflow/{endpoint}");
        self.requests().into_iter().filter(|r| r.path == path).map(|r| r.body).collect()
    }

    /// Every metric logged, in order, as (key, step, value).
    fn metrics(&self) -> Vec<(String, u64, f64)> {
        self.bodies("runs/log-batch")
            .iter()
            .flat_map(|b| b["metrics"].as_array().cloned().unwrap_or_default())
            .map(|m| {
                let value = match &m["value"] {
                    Json::String(s) if s == "NaN" => f64::NAN,
                    Json::String(s) if s == "Infinity" => f64::INFINITY,
                    Json::String(s) if s == "-Infinity" => f64::NEG_INFINITY,
                    v => v.as_f64().expect("a number"),
                };
                (m["key"].as_str().unwrap().to_string(), m["step"].as_u64().unwrap(), value)
            })
            .collect()
    }

    /// Every param logged, as key -> value.
    fn params(&self) -> BTreeMap<String, String> {
        self.bodies("runs/log-batch")
            .iter()
            .flat_map(|b| b["params"].as_array().cloned().unwrap_or_default())
            .map(|p| (p["key"].as_str().unwrap().to_string(), p["value"].as_str().unwrap().to_string()))
            .collect()
    }
}

/// Read one HTTP/1.1 request from `stream`, check it, record it, answer it, close the connection.
fn serve(stream: TcpStream, mode: Mode, requests: &Mutex<Vec<Request>>) -> Result<(), String> {
    let mut reader = BufReader::new(stream.try_clone().map_err(|e| e.to_string())?);
    let mut line = String::new();
    reader.read_line(&mut line).map_err(|e| e.to_string())?;
    let mut parts = line.split_whitespace();
    let (method, path, version) = (parts.next(), parts.next(), parts.next());
    let (Some(method), Some(path), Some("HTTP/1.1")) = (method, path, version) else {
        return Err(format!("not an HTTP/1.1 request line: {line:?}"));
    };
    let (method, path) = (method.to_string(), path.to_string());
    let mut headers = BTreeMap::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).map_err(|e| e.to_string())?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':').ok_or_else(|| format!("a malformed header {header:?}"))?;
        headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
    }
    let body = if headers.get("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        let mut body = Vec::new();
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).map_err(|e| e.to_string())?;
            let size = usize::from_str_radix(size.trim(), 16).map_err(|e| format!("chunk size: {e}"))?;
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).map_err(|e| e.to_string())?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
        body
    } else {
        let length: usize =
            headers.get("content-length").map_or(Ok(0), |l| l.parse()).map_err(|e| format!("{e}"))?;
        let mut body = vec![0; length];
        reader.read_exact(&mut body).map_err(|e| e.to_string())?;
        body
    };
    let mut problems = Vec::new();
    if method != "POST" {
        problems.push(format!("{method} {path}: the sink only POSTs"));
    }
    if !headers.get("content-type").is_some_and(|t| t.starts_with("application/json")) {
        problems
            .push(format!("{path}: content-type {:?}, not application/json", headers.get("content-type")));
    }
    let body: Json = serde_json::from_slice(&body)
        .map_err(|e| format!("{path}: the body is not JSON ({e}): {}", String::from_utf8_lossy(&body)))?;
    requests.lock().unwrap().push(Request { path: path.clone(), body: body.clone() });
    problems.extend(check(&path, &body));

    let error =
        |status: u16, code: &str, message: &str| (status, json!({ "error_code": code, "message": message }));
    let (status, answer) = if !problems.is_empty() {
        error(400, "INVALID_PARAMETER_VALUE", &problems.join("; "))
    } else {
        match path.as_str() {
            "/api/2.0/mlflow/runs/create" => (
                200,
                json!({ "run": {
                    "info": {
                        "run_id": RUN_ID,
                        "run_uuid": RUN_ID,
                        "run_name": body["run_name"],
                        "experiment_id": body["experiment_id"],
                        "user_id": "",
                        "status": "RUNNING",
                        "start_time": body["start_time"],
                        "artifact_uri": format!("mlflow-artifacts:/{}/{RUN_ID}/artifacts", body["experiment_id"].as_str().unwrap_or("0")),
                        "lifecycle_stage": "active",
                    },
                    "data": { "tags": body["tags"] },
                    "inputs": {},
                }}),
            ),
            "/api/2.0/mlflow/runs/log-batch" if mode == Mode::FailLogBatch => {
                error(500, "INVALID_PARAMETER_VALUE", "the fake server refuses every batch")
            }
            "/api/2.0/mlflow/runs/log-batch" => (200, json!({})),
            "/api/2.0/mlflow/runs/update" => (
                200,
                json!({ "run_info": { "run_id": RUN_ID, "run_uuid": RUN_ID, "status": body["status"], "end_time": body["end_time"] } }),
            ),
            _ => error(404, "ENDPOINT_NOT_FOUND", &format!("no endpoint {path}")),
        }
    };
    let answer = answer.to_string();
    let reason = match status {
        200 => "OK",
        400 => "BAD REQUEST",
        404 => "NOT FOUND",
        _ => "INTERNAL SERVER ERROR",
    };
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 {status} {reason}\r\nServer: fake-mlflow\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
        answer.len()
    )
    .map_err(|e| e.to_string())?;
    stream.flush().map_err(|e| e.to_string())?;
    if problems.is_empty() { Ok(()) } else { Err(problems.join("; ")) }
}

/// What MLflow would refuse in a request to `path` (its REST API 2.0 and its limits).
fn check(path: &str, body: &Json) -> Vec<String> {
    let mut problems = Vec::new();
    let mut need = |ok: bool, what: String| {
        if !ok {
            problems.push(format!("{path}: {what}: {body}"));
        }
    };
    let key_ok = |key: &Json| {
        key.as_str().is_some_and(|k| {
            !k.is_empty()
                && k.len() <= 250
                && k.chars().all(|c| c.is_ascii_alphanumeric() || "_-. /".contains(c))
        })
    };
    match path {
        "/api/2.0/mlflow/runs/create" => {
            need(body["experiment_id"].is_string(), "experiment_id is not a string".into());
            need(
                body["start_time"].as_i64().is_some_and(|t| t > 1_600_000_000_000),
                "start_time is not in ms".into(),
            );
            need(body["run_name"].is_string(), "no run_name".into());
        }
        "/api/2.0/mlflow/runs/log-batch" => {
            need(body["run_id"] == RUN_ID, "another run_id".into());
            let metrics = body["metrics"].as_array().cloned().unwrap_or_default();
            let params = body["params"].as_array().cloned().unwrap_or_default();
            need(
                metrics.len() <= 1000,
                format!("{} metrics in one batch (MLflow takes 1000)", metrics.len()),
            );
            need(params.len() <= 100, format!("{} params in one batch (MLflow takes 100)", params.len()));
            need(metrics.len() + params.len() <= 1000, "over 1000 entities in one batch".into());
            need(!metrics.is_empty() || !params.is_empty(), "an empty batch".into());
            for m in &metrics {
                need(key_ok(&m["key"]), format!("metric key {} is not a valid MLflow key", m["key"]));
                let value_ok = m["value"].is_number()
                    || m["value"].as_str().is_some_and(|s| ["NaN", "Infinity", "-Infinity"].contains(&s));
                need(value_ok, format!("metric value {}", m["value"]));
                need(
                    m["timestamp"].as_i64().is_some_and(|t| t > 1_600_000_000_000),
                    "timestamp not in ms".into(),
                );
                need(m["step"].is_u64(), "step is not an integer".into());
            }
            for p in &params {
                need(key_ok(&p["key"]), format!("param key {} is not a valid MLflow key", p["key"]));
                need(p["value"].as_str().is_some_and(|v| v.len() <= 6000), "param value".into());
            }
        }
        "/api/2.0/mlflow/runs/update" => {
            need(body["run_id"] == RUN_ID, "another run_id".into());
            let status = body["status"].as_str().unwrap_or_default();
            need(["FINISHED", "FAILED", "KILLED"].contains(&status), format!("status {status}"));
            need(
                body["end_time"].as_i64().is_some_and(|t| t > 1_600_000_000_000),
                "end_time is not in ms".into(),
            );
        }
        _ => {}
    }
    problems
}

/// The endpoints called, in order, with `runs/` dropped.
fn calls(fake: &Fake) -> Vec<String> {
    fake.requests().iter().map(|r| r.path.trim_start_matches("/api/2.0/mlflow/runs/").to_string()).collect()
}

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

/// Puts `a` and `b` after every step, and stops or fails at the end of epoch `at` when told.
#[derive(Debug, Default)]
struct Scalars {
    stop_at: Option<u64>,
    fail_at: Option<u64>,
}

#[callback]
impl Scalars {
    #[on(after_step)]
    fn put(&mut self, ctx: &mut Context<'_, Linear>) {
        let step = ctx.global_step() as f64;
        ctx.monitors().put_scalar("a", step);
        // A name MLflow refuses as it is: the sink makes it a valid key.
        ctx.monitors().put_scalar("b[1]:x", -step);
    }

    #[on(trigger_epoch)]
    fn end(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        if self.stop_at == Some(ctx.epoch_num()) {
            ctx.request_stop("enough");
        }
        if self.fail_at == Some(ctx.epoch_num()) {
            return Err(burn_stoker::Error::msg("a callback failed"));
        }
        Ok(())
    }
}

/// Train the tiny model for 3 epochs of 4 steps with `scalars` and an MLflow logger sending
/// batches of at most `max_batch` metrics to `fake`.
fn train_tiny(
    fake: &Fake,
    scalars: Scalars,
    max_batch: usize,
) -> Result<TrainReport<Linear>, TrainError<Linear>> {
    let device = burn_stoker::device::cpu();
    let logger = MlflowLogger::new(&fake.uri)
        .expect("an http URI")
        .experiment_id("12")
        .run_name("tiny")
        .param("optimizer", "sgd")
        .max_batch(max_batch);
    Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(4, &device))
        .max_epoch(3)
        .log_dir(scratch_dir("sink-mlflow-tiny"))
        .default_callbacks(DefaultCallbacks::none())
        .callbacks((scalars, logger))
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
}

#[test]
fn sink_mlflow_splits_full_batches_and_sanitizes_keys() {
    let fake = Fake::start(Mode::Healthy);
    train_tiny(&fake, Scalars::default(), 5).expect("training succeeds");
    fake.assert_no_problems();
    let create = &fake.bodies("runs/create")[0];
    assert_eq!((create["experiment_id"].as_str(), create["run_name"].as_str()), (Some("12"), Some("tiny")));
    assert_eq!(fake.params().get("optimizer").map(String::as_str), Some("sgd"));
    // 12 steps, 2 scalars each, in order, none lost, no batch over 5.
    let expected: Vec<(String, u64, f64)> = (1..=12u64)
        .flat_map(|s| [("a".to_string(), s, s as f64), ("b_1__x".to_string(), s, -(s as f64))])
        .collect();
    assert_eq!(fake.metrics(), expected);
    let sizes: Vec<usize> = fake
        .bodies("runs/log-batch")
        .iter()
        .filter_map(|b| b["metrics"].as_array().map(Vec::len))
        .filter(|&n| n > 0)
        .collect();
    assert!(sizes.iter().all(|&n| n <= 5), "{sizes:?}");
    // A full batch goes at once; what is left goes at the epoch's end: 8 per epoch = 5 + 3.
    assert_eq!(sizes, [5, 3, 5, 3, 5, 3], "{sizes:?}");
    assert_eq!(fake.bodies("runs/update")[0]["status"], "FINISHED");
}

#[test]
fn sink_mlflow_run_status_follows_how_training_ended() {
    // A requested stop is a finished run (EarlyStopping ends runs this way).
    let fake = Fake::start(Mode::Healthy);
    let report = train_tiny(&fake, Scalars { stop_at: Some(1), ..Scalars::default() }, 1000).expect("a stop");
    assert!(matches!(report.outcome, Outcome::Stopped(_)), "{:?}", report.outcome);
    assert_eq!(fake.bodies("runs/update")[0]["status"], "FINISHED");
    fake.assert_no_problems();

    // An error that ends training early is a failed run, and the metrics before it are there.
    let fake = Fake::start(Mode::Healthy);
    let error =
        train_tiny(&fake, Scalars { fail_at: Some(2), ..Scalars::default() }, 1000).expect_err("an error");
    assert!(error.to_string().contains("a callback failed"), "{error}");
    assert_eq!(fake.bodies("runs/update")[0]["status"], "FAILED");
    assert_eq!(fake.metrics().len(), 2 * 8, "the 8 steps before the error, 2 scalars each");
    fake.assert_no_problems();
}

#[test]
fn sink_mlflow_refuses_a_uri_it_cannot_reach() {
    for uri in ["https://mlflow.example.com", "ftp://127.0.0.1:5000", "127.0.0.1:5000", "http://"] {
        let error = MlflowLogger::new(uri).expect_err(uri).to_string();
        assert!(error.contains(uri), "{error}");
    }
    assert!(MlflowLogger::new("http://127.0.0.1:5000/").is_ok());
    assert_eq!(MLFLOW_MAX_METRICS_PER_BATCH, 1000);
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

    // A URI it cannot use is refused before anything is trained (exit status 2).
    let log = dir.join("refused");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_digits"))
        .args(["--log-dir", log.to_str().unwrap(), "--epochs", "1", "--mlflow", "https://example.com"])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("running digits");
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--mlflow"));
    assert!(!log.exists());
}

/// `GET {uri}/api/2.0/mlflow/{endpoint}` on a real MLflow server, as JSON.
fn get(uri: &str, endpoint: &str) -> Json {
    let url = format!("{uri}/api/2.0/mlflow/{endpoint}");
    let text = ureq::get(&url)
        .call()
        .unwrap_or_else(|e| panic!("GET {url}: {e}"))
        .body_mut()
        .read_to_string()
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("GET {url}: {e}: {text}"))
}

/// Against a real MLflow tracking server, not run by default (CI has none: installing MLflow
/// and starting its server take minutes). Checked by hand with MLflow 3.17.2
/// (`pip install mlflow`, `mlflow server --host 127.0.0.1 --port 5077`), then
/// `STOKER_MLFLOW_URI=http://127.0.0.1:5077 cargo test --release -p stoker-examples --test it sink:: -- --ignored`.
#[test]
#[ignore = "needs a real MLflow server: set STOKER_MLFLOW_URI=http://HOST:PORT and pass --ignored"]
fn sink_mlflow_real_server_has_every_metric_param_and_the_status() {
    let uri = std::env::var("STOKER_MLFLOW_URI")
        .expect("STOKER_MLFLOW_URI=http://HOST:PORT of a running MLflow server");
    let name = format!("stoker-sink-test-{}-{}", std::process::id(), now_ms());
    let device = burn_stoker::device::cpu();
    let logger = MlflowLogger::new(&uri).unwrap().run_name(&name).param("optimizer", "sgd").max_batch(5);
    Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(4, &device))
        .max_epoch(3)
        .log_dir(scratch_dir("sink-mlflow-real"))
        .default_callbacks(DefaultCallbacks::none())
        .callbacks((Scalars::default(), logger))
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .expect("training succeeds");

    let filter = format!("attributes.run_name = '{name}'");
    let url = format!("{uri}/api/2.0/mlflow/runs/search");
    let found: Json = serde_json::from_str(
        &ureq::post(&url)
            .content_type("application/json")
            .send(json!({ "experiment_ids": ["0"], "filter": filter }).to_string())
            .unwrap_or_else(|e| panic!("POST {url}: {e}"))
            .body_mut()
            .read_to_string()
            .unwrap(),
    )
    .unwrap();
    let runs = found["runs"].as_array().cloned().unwrap_or_default();
    assert_eq!(runs.len(), 1, "one run named {name}: {found}");
    let info = &runs[0]["info"];
    assert_eq!(info["status"], "FINISHED", "{info}");
    let id = info["run_id"].as_str().unwrap();
    let params = runs[0]["data"]["params"].as_array().cloned().unwrap_or_default();
    assert!(params.contains(&json!({ "key": "optimizer", "value": "sgd" })), "{params:?}");
    for (key, sign) in [("a", 1.0), ("b_1__x", -1.0)] {
        let history = get(&uri, &format!("metrics/get-history?run_id={id}&metric_key={key}"));
        let mut got: Vec<(u64, f64)> = history["metrics"]
            .as_array()
            .unwrap_or_else(|| panic!("{key}: {history}"))
            .iter()
            .map(|m| (m["step"].as_u64().unwrap_or(0), m["value"].as_f64().unwrap()))
            .collect();
        got.sort_by_key(|&(step, _)| step);
        let expected: Vec<(u64, f64)> = (1..=12u64).map(|s| (s, sign * s as f64)).collect();
        assert_eq!(got, expected, "{key}");
    }
}

fn now_ms() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()
}
