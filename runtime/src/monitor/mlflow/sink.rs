//! The sink behind [`MlflowLogger`](super::MlflowLogger): MLflow's REST API 2.0 over plain
//! HTTP/1.1, on the monitors' writer thread.

use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value as Json, json};

use crate::state::{EpochStats, MonitorSink, Record, Value};

/// The most params MLflow takes in one `runs/log-batch` request.
const MLFLOW_MAX_PARAMS_PER_BATCH: usize = 100;

/// The longest key MLflow takes.
const MLFLOW_MAX_KEY_LENGTH: usize = 250;

/// The name of [`MlflowLogger`](crate::monitor::MlflowLogger)'s sink, `"MLflow"`: its thread's, and the
/// [`writer`](crate::state::WriterFailure::writer) of its entry in
/// [`TrainReport::writer_failures`](crate::trainer::TrainReport::writer_failures) when the
/// tracking server failed.
#[cfg_attr(docsrs, doc(cfg(feature = "mlflow")))]
pub const MLFLOW_SINK_NAME: &str = "MLflow";

/// The pauses before the second and the third try of a request that got no answer.
const RETRY_PAUSES: [Duration; 2] = [Duration::from_secs(1), Duration::from_secs(4)];

/// What [`MlflowLogger`](super::MlflowLogger) and its sink share.
#[derive(Debug, Default)]
pub(super) struct RunLink {
    /// The MLflow run's id: the checkpoint's after a resume (set by `load_state` before the
    /// sink needs it), the one the server gave once the sink created the run.
    pub(super) run_id: Option<String>,
    /// The status decided in `after_train`, read by the sink when it closes.
    pub(super) status: Option<RunStatus>,
}

/// How an MLflow run ended: the `status` of `runs/update`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RunStatus {
    /// Every epoch ran, or a callback asked to stop (as `EarlyStopping` does).
    Finished,
    /// An error or a panic ended training early, or the sink itself failed (its metrics are
    /// incomplete).
    Failed,
    /// A signal (SIGINT, SIGTERM) stopped training.
    Killed,
}

impl RunStatus {
    /// MLflow's name for it: `"FINISHED"`, `"FAILED"`, `"KILLED"`.
    fn as_str(self) -> &'static str {
        match self {
            RunStatus::Finished => "FINISHED",
            RunStatus::Failed => "FAILED",
            RunStatus::Killed => "KILLED",
        }
    }
}

/// Where the run goes and what it is called: set on [`MlflowLogger`](super::MlflowLogger), read
/// by its sink.
#[derive(Debug, Clone)]
pub(super) struct Settings {
    /// `http://host:port` (no trailing slash).
    pub(super) tracking_uri: String,
    pub(super) experiment_id: String,
    pub(super) run_name: String,
    /// Sanitized keys, each once, in the order given.
    pub(super) params: Vec<(String, String)>,
    pub(super) max_batch: usize,
    pub(super) timeout: Duration,
    /// How long the end of training waits for the last requests.
    pub(super) end_timeout: Duration,
    /// The `Authorization` header, from MLflow's environment variables.
    pub(super) authorization: Option<super::auth::Authorization>,
}

/// A request that failed: whether the server answered (an HTTP error, an answer it could not
/// read) or not (the connection refused or dropped, the timeout reached: worth another try).
enum Failure {
    Answered(io::Error),
    Unanswered(io::Error),
}

/// The writer behind [`MlflowLogger`](super::MlflowLogger): talks to the tracking server on the
/// monitors' writer thread, registered by the callback at `setup`.
pub(super) struct MlflowSink {
    settings: Settings,
    /// The HTTP client. `ureq` (default features off: plain HTTP/1.1, no TLS, a few small
    /// crates) because MLflow's API is a few blocking JSON POSTs on a thread that may block:
    /// an async client would bring a runtime, and a hand-written HTTP client is what the
    /// project keeps crates for.
    agent: ureq::Agent,
    /// The run, once created.
    run_id: Option<String>,
    /// Metrics not sent yet, as MLflow's JSON.
    pending: Vec<Json>,
    /// Whether `runs/update` was sent.
    ended: bool,
    /// Whether the server answered the last request: a sink that failed on a server that
    /// does not answer does not try again to end the run.
    answering: bool,
    /// Once closing: when the end of training stops waiting (no request goes past it).
    deadline: Option<Instant>,
    link: Arc<Mutex<RunLink>>,
}

impl std::fmt::Debug for MlflowSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MlflowSink")
            .field("tracking_uri", &self.settings.tracking_uri)
            .field("run_id", &self.run_id)
            .field("pending", &self.pending.len())
            .finish_non_exhaustive()
    }
}

impl MlflowSink {
    pub(super) fn new(settings: Settings, link: Arc<Mutex<RunLink>>) -> MlflowSink {
        let agent = ureq::Agent::config_builder()
            // MLflow's error bodies say what was wrong: read them rather than stop at the status.
            .http_status_as_error(false)
            .timeout_global(Some(settings.timeout))
            .build()
            .into();
        let (run_id, pending, ended, answering, deadline) = (None, Vec::new(), false, true, None);
        MlflowSink { settings, agent, run_id, pending, ended, answering, deadline, link }
    }

    fn link(&self) -> MutexGuard<'_, RunLink> {
        self.link.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How long the next request may take: the timeout, less once closing if the end's
    /// deadline comes first (`None` past it).
    fn time_left(&self) -> Option<Duration> {
        match self.deadline {
            None => Some(self.settings.timeout),
            Some(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                (!left.is_zero()).then(|| left.min(self.settings.timeout))
            }
        }
    }

    /// `POST {tracking_uri}/api/2.0/mlflow/{endpoint}` with `body`, tried again after each of
    /// [`RETRY_PAUSES`] while the server does not answer (and the end's deadline allows); MLflow's
    /// JSON answer, or an error naming the URL, the HTTP status and MLflow's `error_code` and
    /// `message`.
    fn post(&mut self, endpoint: &str, body: &Json) -> io::Result<Json> {
        let url = format!("{}/api/2.0/mlflow/{endpoint}", self.settings.tracking_uri);
        let body = body.to_string();
        let mut pauses = RETRY_PAUSES.iter();
        loop {
            let Some(timeout) = self.time_left() else {
                self.answering = false;
                let end = self.settings.end_timeout;
                return Err(io::Error::other(format!(
                    "POST {url}: not sent, the {end:?} the end of training allows are over"
                )));
            };
            match self.post_once(&url, &body, timeout) {
                Ok(answer) => {
                    self.answering = true;
                    return Ok(answer);
                }
                Err(Failure::Answered(error)) => {
                    self.answering = true;
                    return Err(error);
                }
                Err(Failure::Unanswered(error)) => {
                    self.answering = false;
                    match pauses.next() {
                        Some(&pause) if self.time_left().is_some_and(|left| left > pause) => {
                            std::thread::sleep(pause);
                        }
                        _ => return Err(error),
                    }
                }
            }
        }
    }

    /// One try of [`post`](Self::post), within `timeout`.
    fn post_once(&self, url: &str, body: &str, timeout: Duration) -> Result<Json, Failure> {
        let fail = |what: String| io::Error::other(format!("POST {url}: {what}"));
        let mut request = self.agent.post(url).config().timeout_global(Some(timeout)).build();
        if let Some(authorization) = &self.settings.authorization {
            request = request.header("Authorization", authorization.header());
        }
        let mut response = request
            .content_type("application/json")
            .send(body)
            .map_err(|e| Failure::Unanswered(fail(e.to_string())))?;
        let status = response.status();
        let text = response
            .body_mut()
            .read_to_string()
            .map_err(|e| Failure::Unanswered(fail(format!("HTTP {status}: {e}"))))?;
        let answer = serde_json::from_str::<Json>(&text);
        if !status.is_success() {
            let said = match &answer {
                Ok(error) if error["error_code"].is_string() => format!(
                    "{}: {}",
                    error["error_code"].as_str().unwrap_or_default(),
                    error["message"].as_str().unwrap_or_default()
                ),
                _ => clip(&text),
            };
            return Err(Failure::Answered(fail(format!("HTTP {status}: {said}"))));
        }
        match answer {
            Ok(answer) => Ok(answer),
            Err(_) if text.trim().is_empty() => Ok(json!({})),
            Err(e) => Err(Failure::Answered(fail(format!(
                "HTTP {status}, but the answer is not JSON ({e}): {}",
                clip(&text)
            )))),
        }
    }

    /// The run's id, the first time continuing the run a resumed checkpoint names (set
    /// `RUNNING` again), or else creating the run and logging the params.
    fn run_id(&mut self) -> io::Result<String> {
        if let Some(id) = &self.run_id {
            return Ok(id.clone());
        }
        let resumed = self.link().run_id.clone();
        if let Some(id) = resumed {
            self.post("runs/update", &json!({ "run_id": id, "status": "RUNNING" }))?;
            self.run_id = Some(id.clone());
            return Ok(id);
        }
        let created = self.post(
            "runs/create",
            &json!({
                "experiment_id": self.settings.experiment_id,
                "start_time": now_ms(),
                "run_name": self.settings.run_name,
            }),
        )?;
        let Some(id) = created["run"]["info"]["run_id"].as_str().map(str::to_string) else {
            return Err(io::Error::other(format!(
                "POST {}/api/2.0/mlflow/runs/create: the answer has no run.info.run_id: {}",
                self.settings.tracking_uri,
                clip(&created.to_string())
            )));
        };
        self.run_id = Some(id.clone());
        self.link().run_id = Some(id.clone());
        let batches: Vec<Json> = (self.settings.params.chunks(MLFLOW_MAX_PARAMS_PER_BATCH))
            .map(|chunk| {
                let params: Vec<Json> = chunk.iter().map(|(k, v)| json!({ "key": k, "value": v })).collect();
                json!({ "run_id": id, "metrics": [], "params": params })
            })
            .collect();
        for batch in &batches {
            self.post("runs/log-batch", batch)?;
        }
        Ok(id)
    }

    /// Send the full batches of metrics waiting, and with `all` what is left too.
    fn send(&mut self, all: bool) -> io::Result<()> {
        let size = self.settings.max_batch;
        while self.pending.len() >= size || (all && !self.pending.is_empty()) {
            let id = self.run_id()?;
            let n = self.pending.len().min(size);
            let batch = json!({ "run_id": id, "metrics": &self.pending[..n] });
            self.post("runs/log-batch", &batch)?;
            self.pending.drain(..n);
        }
        Ok(())
    }

    /// End the run with `status`.
    fn end(&mut self, status: RunStatus) -> io::Result<()> {
        let id = self.run_id()?;
        self.ended = true;
        self.post("runs/update", &json!({ "run_id": id, "status": status.as_str(), "end_time": now_ms() }))
            .map(drop)
    }
}

impl MonitorSink for MlflowSink {
    fn name(&self) -> &str {
        MLFLOW_SINK_NAME
    }

    /// A server's pace never sets the steps': what a full queue cannot take is dropped and
    /// counted.
    fn drops_when_full(&self) -> bool {
        true
    }

    /// [`MlflowLogger::end_timeout`](super::MlflowLogger::end_timeout).
    fn close_timeout(&self) -> Option<Duration> {
        Some(self.settings.end_timeout)
    }

    fn write(&mut self, records: &[Record]) -> io::Result<()> {
        // The run exists from the first records on, whatever they hold.
        self.run_id()?;
        for record in records {
            let Value::Scalar(value) = record.value else { continue };
            self.pending.push(json!({
                "key": mlflow_key(&record.name),
                "value": mlflow_value(value),
                "timestamp": (record.wall_time * 1000.0).round() as i64,
                "step": record.global_step,
            }));
        }
        self.send(false)
    }

    fn end_epoch(&mut self, _stats: &EpochStats) -> io::Result<()> {
        self.send(true)
    }

    /// Nothing: the writer thread flushes after every batch of records (one per event, so one
    /// per step for scalars put at every step); the metrics go at the epoch's end instead, or
    /// when a batch is full.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// Send what is left and end the run, within the end's time
    /// ([`close_timeout`](MonitorSink::close_timeout), from now).
    fn close(&mut self) -> io::Result<()> {
        self.deadline = Some(Instant::now() + self.settings.end_timeout);
        self.send(true)?;
        let status = self.link().status.unwrap_or(RunStatus::Finished);
        self.end(status)
    }
}

impl Drop for MlflowSink {
    /// A sink dropped before it ended its run failed: end the run as `FAILED` (best effort, when
    /// the server answered the last request), so that MLflow does not show it running forever
    /// with half its metrics.
    fn drop(&mut self) {
        if self.run_id.is_some()
            && !self.ended
            && self.answering
            && let Err(error) = self.end(RunStatus::Failed)
        {
            crate::logging::warn!("MLflow: could not mark the run as FAILED: {error}");
        }
    }
}

/// `name` as a key MLflow takes: letters, digits and `_ - . space /`, any other character
/// replaced by `_`, at most 250 characters; an empty name is `_`.
pub(super) fn mlflow_key(name: &str) -> String {
    let key: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || "_-. /".contains(c) { c } else { '_' })
        .take(MLFLOW_MAX_KEY_LENGTH)
        .collect();
    if key.is_empty() { "_".into() } else { key }
}

/// `value` as MLflow's JSON: a number, or `"NaN"`, `"Infinity"`, `"-Infinity"` (what protobuf's
/// JSON mapping, and so MLflow's server, reads for the values JSON cannot write).
pub(super) fn mlflow_value(value: f64) -> Json {
    if value.is_nan() {
        json!("NaN")
    } else if value == f64::INFINITY {
        json!("Infinity")
    } else if value == f64::NEG_INFINITY {
        json!("-Infinity")
    } else {
        json!(value)
    }
}

/// Milliseconds since the Unix epoch.
fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// The first 300 characters of `text`, for an error message.
fn clip(text: &str) -> String {
    let mut clipped: String = text.chars().take(300).collect();
    if clipped.len() < text.len() {
        clipped.push('…');
    }
    clipped
}
