//! A fake MLflow tracking server for the tests of `burn_stoker::monitor::MlflowLogger` (in
//! `tests/tests/it/mlflow.rs`) and of the example's `--mlflow` (`examples/tests/it/sink.rs`): a
//! `TcpListener` on 127.0.0.1 in a thread of the test that parses the HTTP/1.1 requests, checks
//! them against MLflow's REST API 2.0 (the endpoints, the JSON fields, MLflow's limits on batches
//! and keys), records them and answers as MLflow does. It is not a real MLflow server: the ignored
//! test `mlflow::sink_mlflow_real_server_has_every_metric_param_and_the_status` runs against one.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use serde_json::{Value as Json, json};

/// The run id the fake server gives every run it creates.
pub const RUN_ID: &str = "5f1e0c2a9b8d4e7f8a6b3c2d1e0f9a8b";

/// What the fake server answers to `runs/log-batch`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    /// As MLflow does: `{}`.
    Healthy,
    /// HTTP 500 with an MLflow error body, every time.
    FailLogBatch,
    /// A slow server: answers `runs/create` at once, then holds every `runs/log-batch` (without
    /// answering) until [`Fake::release`] is called, and answers as `Healthy` from then on.
    HoldLogBatch,
    /// A server that never answers: it accepts each connection and holds it open, reading nothing
    /// and answering nothing (nothing is recorded).
    Silent,
}

/// One request the fake server received.
#[derive(Debug, Clone)]
pub struct Request {
    /// The request's path (`/api/2.0/mlflow/runs/create`...).
    pub path: String,
    /// Its JSON body.
    pub body: Json,
    /// Its `Authorization` header, if any.
    pub authorization: Option<String>,
}

/// A fake MLflow tracking server on 127.0.0.1. A clone is a handle on the same server (for a
/// callback that releases it).
#[derive(Clone)]
pub struct Fake {
    /// `http://127.0.0.1:PORT`, for `MlflowLogger::new`.
    pub uri: String,
    requests: Arc<Mutex<Vec<Request>>>,
    /// What the server found wrong in a request (MLflow would refuse it, or the test cannot read it).
    problems: Arc<Mutex<Vec<String>>>,
    /// How many requests it answered.
    answered: Arc<AtomicUsize>,
    /// Whether [`Mode::HoldLogBatch`]'s held requests may be answered.
    released: Arc<(Mutex<bool>, Condvar)>,
}

impl Fake {
    /// Start a server answering as `mode` says, on a free port, in a thread of this process.
    pub fn start(mode: Mode) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding 127.0.0.1:0");
        let uri = format!("http://{}", listener.local_addr().unwrap());
        let fake = Fake {
            uri,
            requests: Arc::new(Mutex::new(Vec::new())),
            problems: Arc::new(Mutex::new(Vec::new())),
            answered: Arc::new(AtomicUsize::new(0)),
            released: Arc::new((Mutex::new(false), Condvar::new())),
        };
        let server = fake.clone();
        std::thread::spawn(move || {
            // The connections a silent server holds open.
            let mut held = Vec::new();
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                if mode == Mode::Silent {
                    held.push(stream);
                    continue;
                }
                if let Err(problem) = serve(stream, mode, &server) {
                    server.problems.lock().unwrap().push(problem);
                }
            }
        });
        fake
    }

    /// Let [`Mode::HoldLogBatch`] answer the request it holds and every later one.
    pub fn release(&self) {
        let (released, wake) = &*self.released;
        *released.lock().unwrap() = true;
        wake.notify_all();
    }

    /// How many requests the server answered so far.
    pub fn answered(&self) -> usize {
        self.answered.load(Ordering::SeqCst)
    }

    /// Every request received, in order.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }

    /// Panics with what MLflow would have refused, if anything.
    pub fn assert_no_problems(&self) {
        let problems = self.problems.lock().unwrap();
        assert!(problems.is_empty(), "the fake MLflow server found problems: {problems:#?}");
    }

    /// The bodies of the requests to `endpoint` (`runs/create`...), in order.
    pub fn bodies(&self, endpoint: &str) -> Vec<Json> {
        let path = format!("/api/2.0/mlflow/{endpoint}");
        self.requests().into_iter().filter(|r| r.path == path).map(|r| r.body).collect()
    }

    /// Every metric logged, in order, as (key, step, value).
    pub fn metrics(&self) -> Vec<(String, u64, f64)> {
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
    pub fn params(&self) -> BTreeMap<String, String> {
        self.bodies("runs/log-batch")
            .iter()
            .flat_map(|b| b["params"].as_array().cloned().unwrap_or_default())
            .map(|p| (p["key"].as_str().unwrap().to_string(), p["value"].as_str().unwrap().to_string()))
            .collect()
    }
}

/// Read one HTTP/1.1 request from `stream`, check it, record it, answer it (under
/// [`Mode::HoldLogBatch`], a `runs/log-batch` once released), close the connection.
fn serve(stream: TcpStream, mode: Mode, fake: &Fake) -> Result<(), String> {
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
    fake.requests.lock().unwrap().push(Request {
        path: path.clone(),
        body: body.clone(),
        authorization: headers.get("authorization").cloned(),
    });
    if mode == Mode::HoldLogBatch && path == "/api/2.0/mlflow/runs/log-batch" {
        let (released, wake) = &*fake.released;
        let _released = wake.wait_while(released.lock().unwrap(), |released| !*released).unwrap();
    }
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
    fake.answered.fetch_add(1, Ordering::SeqCst);
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
            // RUNNING again: a resumed run continues the run it had created.
            need(["FINISHED", "FAILED", "KILLED", "RUNNING"].contains(&status), format!("status {status}"));
            need(
                status == "RUNNING" || body["end_time"].as_i64().is_some_and(|t| t > 1_600_000_000_000),
                "end_time is not in ms".into(),
            );
        }
        _ => {}
    }
    problems
}

/// The endpoints called, in order, with `runs/` dropped.
pub fn calls(fake: &Fake) -> Vec<String> {
    fake.requests().iter().map(|r| r.path.trim_start_matches("/api/2.0/mlflow/runs/").to_string()).collect()
}
