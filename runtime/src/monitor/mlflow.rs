//! The MLflow tracking-server writer (feature `mlflow`): [`MlflowLogger`] and the sink it
//! registers, which speaks MLflow's REST API 2.0 over plain HTTP/1.1.

use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value as Json, json};

use crate::callback::Context;
use crate::callback::Outcome;
use crate::error::{Error, Result};
use crate::state::{EpochStats, MonitorSink, Record, Value};

/// The most metrics MLflow takes in one `runs/log-batch` request: [`MlflowLogger`]'s largest and
/// default [`max_batch`](MlflowLogger::max_batch).
#[cfg_attr(docsrs, doc(cfg(feature = "mlflow")))]
pub const MLFLOW_MAX_METRICS_PER_BATCH: usize = 1000;

/// The most params MLflow takes in one `runs/log-batch` request.
const MLFLOW_MAX_PARAMS_PER_BATCH: usize = 100;

/// The longest key MLflow takes.
const MLFLOW_MAX_KEY_LENGTH: usize = 250;

/// The longest param value MLflow takes (MLflow 2.x; 1.x took 500).
const MLFLOW_MAX_PARAM_VALUE_LENGTH: usize = 6000;

/// The name of [`MlflowLogger`]'s sink, `"MLflow"`: its thread's, and the
/// [`writer`](crate::state::WriterFailure::writer) of its entry in
/// [`TrainReport::writer_failures`](crate::trainer::TrainReport::writer_failures) when the
/// tracking server failed.
#[cfg_attr(docsrs, doc(cfg(feature = "mlflow")))]
pub const MLFLOW_SINK_NAME: &str = "MLflow";

/// How long one request may take by default, connecting included.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// How an MLflow run ended: the `status` of `runs/update`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RunStatus {
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

/// Where the run goes and what it is called: set on [`MlflowLogger`], read by its sink.
#[derive(Debug, Clone)]
struct Settings {
    /// `http://host:port` (no trailing slash).
    tracking_uri: String,
    experiment_id: String,
    run_name: String,
    /// Sanitized keys, each once, in the order given.
    params: Vec<(String, String)>,
    max_batch: usize,
    timeout: Duration,
}

/// Sends every monitored scalar to an [MLflow](https://mlflow.org) tracking server, through
/// MLflow's REST API 2.0. Feature `mlflow` (off by default).
///
/// Add it to the trainer's callbacks and every scalar the callbacks put (the validation error,
/// the training cost, the learning rate...) reaches the tracker. It registers a
/// [`MonitorSink`] at `setup`, which does its work on the monitors' writer thread, never on the
/// step's path:
///
/// 1. the first time records arrive, `POST {tracking_uri}/api/2.0/mlflow/runs/create`
///    (`experiment_id`, `start_time`, `run_name`) creates a run, then the parameters given with
///    [`param`](MlflowLogger::param) / [`params_of`](MlflowLogger::params_of) are logged with
///    `POST /api/2.0/mlflow/runs/log-batch` (up to 100 a request, MLflow's limit);
/// 2. scalars are collected and sent with `runs/log-batch` (key, value, timestamp in ms, step =
///    the global step they were put at) at the end of every epoch, when a batch is full
///    ([`max_batch`](MlflowLogger::max_batch), [`MLFLOW_MAX_METRICS_PER_BATCH`] by default:
///    MLflow's limit) and when training ends; never one request per scalar;
/// 3. when training ends, `POST /api/2.0/mlflow/runs/update` ends the run with a status decided
///    in `after_train` from how training ended ([`Context::outcome`]): `KILLED` after a signal,
///    `FINISHED` when the last epoch ended or a callback asked to stop, `FAILED` when an error
///    or a panic ended training or the loss or weights stopped being finite.
///
/// MLflow accepts keys made of letters, digits and `_ - . space /`: any other character of a
/// scalar's name is replaced by `_` (`top-1[val]` is logged as `top-1_val_`). Non-finite values
/// are sent as MLflow's own client sends them (`"NaN"`, `"Infinity"`, `"-Infinity"`). Runs on
/// the chief only in data-parallel training, as every monitor writer does.
///
/// A tracker that fails (down, refusing a request) never stops training: as with every monitor
/// writer, the first error is reported once on stderr, the sink is disabled for the rest of the
/// run, and [`TrainReport::writer_failures`](crate::trainer::TrainReport::writer_failures)
/// names it ([`MLFLOW_SINK_NAME`]) with the error: the URL, the HTTP status and MLflow's
/// `error_code` and `message`. The run it had created is then ended as `FAILED` (best effort),
/// since its metrics are incomplete.
///
/// # Plain HTTP only
///
/// The sink speaks plain HTTP/1.1 (through `ureq`, built without TLS) and sends no credentials:
/// TLS would bring a C-compiled cryptography crate (`ring`) into the build. To reach a server
/// behind `https://`, either
///
/// - run a local forwarder that adds the TLS and give its `http://` address: an SSH tunnel to the
///   server's own plain-HTTP port (`ssh -N -L 5000:127.0.0.1:5000 tracking-host`, then
///   `http://127.0.0.1:5000`), or a TLS client proxy such as stunnel (client mode) or a local
///   nginx whose `proxy_pass` is the `https://` URL (it can add an `Authorization` header too);
/// - or send the records yourself: implement [`MonitorSink`] with the HTTP client of your choice
///   and register it from a callback's `setup` with
///   [`Monitors::add_sink`](crate::state::Monitors::add_sink), as this type does. The same way
///   plugs in any other tracker (a database, a message queue...); Weights & Biases reads the
///   TensorBoard event files stoker writes (`wandb sync --sync-tensorboard <log dir>`).
///
/// ```
/// use burn_stoker::monitor::MlflowLogger;
/// # fn callbacks() -> burn_stoker::Result<()> {
/// let mlflow = MlflowLogger::new("http://127.0.0.1:5000")?
///     .experiment_id("0")
///     .run_name("digits")
///     .param("optimizer", "adam");
/// // Trainer::new(..).callbacks((InferenceRunner::new(..), mlflow)).train(..)
/// # let _ = mlflow;
/// # Ok(())
/// # }
/// # callbacks().unwrap();
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "mlflow")))]
#[derive(Debug)]
pub struct MlflowLogger {
    settings: Settings,
    /// The status decided in `after_train`, read by the sink when it closes.
    status: Arc<Mutex<Option<RunStatus>>>,
}

impl MlflowLogger {
    /// Log to the MLflow tracking server at `tracking_uri` (`http://host:port`, as
    /// `mlflow server` prints it), in the default experiment (`"0"`), as a run named `"stoker"`.
    ///
    /// Only plain `http://` is supported (see [Plain HTTP only](MlflowLogger#plain-http-only)
    /// for an `https://` server). Any other URI is an error naming it.
    pub fn new(tracking_uri: impl Into<String>) -> Result<Self> {
        let uri = tracking_uri.into();
        let host = uri.strip_prefix("http://").map(|rest| rest.split('/').next().unwrap_or_default());
        if host.is_none_or(str::is_empty) {
            let what = if uri.starts_with("https://") {
                "https needs TLS, which burn-stoker's MLflow sink leaves out: give the http:// address of a \
                 local forwarder that adds it (see MlflowLogger's docs)"
            } else {
                "expected http://host:port"
            };
            return Err(Error::msg(format!("MLflow tracking URI `{uri}`: {what}")));
        }
        Ok(MlflowLogger {
            settings: Settings {
                tracking_uri: uri.trim_end_matches('/').to_string(),
                experiment_id: "0".into(),
                run_name: "stoker".into(),
                params: Vec::new(),
                max_batch: MLFLOW_MAX_METRICS_PER_BATCH,
                timeout: DEFAULT_TIMEOUT,
            },
            status: Arc::new(Mutex::new(None)),
        })
    }

    /// The experiment the run belongs to, by id (`"0"`, MLflow's default experiment, unless
    /// set; `mlflow experiments search` lists the ids).
    pub fn experiment_id(mut self, id: impl Into<String>) -> Self {
        self.settings.experiment_id = id.into();
        self
    }

    /// The run's name in MLflow's UI (`"stoker"` unless set).
    pub fn run_name(mut self, name: impl Into<String>) -> Self {
        self.settings.run_name = name.into();
        self
    }

    /// Log a parameter (a hyper-parameter, the data set's name...) with the run. The key is
    /// sanitized as the scalars' names are; a value longer than MLflow's 6000 characters is cut;
    /// a key given twice keeps its last value (MLflow refuses to change a param).
    pub fn param(mut self, key: &str, value: impl ToString) -> Self {
        let key = mlflow_key(key);
        let mut value = value.to_string();
        if value.len() > MLFLOW_MAX_PARAM_VALUE_LENGTH {
            let mut end = MLFLOW_MAX_PARAM_VALUE_LENGTH;
            while !value.is_char_boundary(end) {
                end -= 1;
            }
            value.truncate(end);
        }
        let params = &mut self.settings.params;
        match params.iter_mut().find(|(k, _)| *k == key) {
            Some(param) => param.1 = value,
            None => params.push((key, value)),
        }
        self
    }

    /// Log every field of a configuration (a burn `#[derive(Config)]`, anything `Serialize`) as
    /// a parameter: nested fields as `outer.inner`, strings as they are, other values as JSON.
    /// A configuration that is not a struct or a map is one param, `config`.
    pub fn params_of(self, config: &impl serde::Serialize) -> Result<Self> {
        let value = serde_json::to_value(config)
            .map_err(|e| Error::context("MLflow: serializing the configuration's params", e))?;
        let mut flat = Vec::new();
        flatten("", &value, &mut flat);
        Ok(flat.into_iter().fold(self, |logger, (key, value)| logger.param(&key, value)))
    }

    /// Send a batch of metrics as soon as it holds `n` (1 to [`MLFLOW_MAX_METRICS_PER_BATCH`],
    /// MLflow's limit, which is also the default); what is left goes at the end of every epoch
    /// and when training ends.
    pub fn max_batch(mut self, n: usize) -> Self {
        self.settings.max_batch = n.clamp(1, MLFLOW_MAX_METRICS_PER_BATCH);
        self
    }

    /// How long one request may take, connecting included (30 s by default); past it the
    /// request fails, and with it the sink.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.settings.timeout = timeout;
        self
    }
}

/// `value`'s fields as `(key, text)` pairs, nested keys joined with `.`.
fn flatten(prefix: &str, value: &Json, out: &mut Vec<(String, String)>) {
    match value {
        Json::Object(fields) => {
            for (key, field) in fields {
                let key = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
                flatten(&key, field, out);
            }
        }
        Json::String(text) => out.push((key_or_config(prefix), text.clone())),
        other => out.push((key_or_config(prefix), other.to_string())),
    }
}

fn key_or_config(prefix: &str) -> String {
    if prefix.is_empty() { "config".into() } else { prefix.into() }
}

#[crate::callback]
impl MlflowLogger {
    #[on(setup)]
    fn start<M>(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let sink = MlflowSink::new(self.settings.clone(), Arc::clone(&self.status));
        ctx.monitors().add_sink(sink);
        Ok(())
    }

    #[on(after_train)]
    fn decide_status<M>(&mut self, ctx: &mut Context<'_, M>) {
        let status = match ctx.outcome() {
            Some(Outcome::Finished | Outcome::Stopped(_)) => RunStatus::Finished,
            Some(Outcome::Interrupted { .. }) => RunStatus::Killed,
            Some(Outcome::NonFinite { .. } | Outcome::Failed) | None => RunStatus::Failed,
        };
        *self.status.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(status);
    }
}

/// The writer behind [`MlflowLogger`]: talks to the tracking server on the monitors' writer
/// thread, registered by the callback at `setup`.
struct MlflowSink {
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
    status: Arc<Mutex<Option<RunStatus>>>,
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
    fn new(settings: Settings, status: Arc<Mutex<Option<RunStatus>>>) -> MlflowSink {
        let agent = ureq::Agent::config_builder()
            // MLflow's error bodies say what was wrong: read them rather than stop at the status.
            .http_status_as_error(false)
            .timeout_global(Some(settings.timeout))
            .build()
            .into();
        MlflowSink { settings, agent, run_id: None, pending: Vec::new(), ended: false, status }
    }

    /// `POST {tracking_uri}/api/2.0/mlflow/{endpoint}` with `body`; MLflow's JSON answer, or an
    /// error naming the URL, the HTTP status and MLflow's `error_code` and `message`.
    fn post(&self, endpoint: &str, body: &Json) -> io::Result<Json> {
        let url = format!("{}/api/2.0/mlflow/{endpoint}", self.settings.tracking_uri);
        let fail = |what: String| io::Error::other(format!("POST {url}: {what}"));
        let mut response = self
            .agent
            .post(&url)
            .content_type("application/json")
            .send(body.to_string())
            .map_err(|e| fail(e.to_string()))?;
        let status = response.status();
        let text = response.body_mut().read_to_string().map_err(|e| fail(format!("HTTP {status}: {e}")))?;
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
            return Err(fail(format!("HTTP {status}: {said}")));
        }
        match answer {
            Ok(answer) => Ok(answer),
            Err(_) if text.trim().is_empty() => Ok(json!({})),
            Err(e) => Err(fail(format!("HTTP {status}, but the answer is not JSON ({e}): {}", clip(&text)))),
        }
    }

    /// The run's id, creating the run (and logging the params) the first time.
    fn run_id(&mut self) -> io::Result<String> {
        if let Some(id) = &self.run_id {
            return Ok(id.clone());
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
        for chunk in self.settings.params.chunks(MLFLOW_MAX_PARAMS_PER_BATCH) {
            let params: Vec<Json> = chunk.iter().map(|(k, v)| json!({ "key": k, "value": v })).collect();
            self.post("runs/log-batch", &json!({ "run_id": id, "metrics": [], "params": params }))?;
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

    fn close(&mut self) -> io::Result<()> {
        self.send(true)?;
        let status = self
            .status
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .unwrap_or(RunStatus::Finished);
        self.end(status)
    }
}

impl Drop for MlflowSink {
    /// A sink dropped before it ended its run failed: end the run as `FAILED` (best effort), so
    /// that MLflow does not show it running forever with half its metrics.
    fn drop(&mut self) {
        if self.run_id.is_some()
            && !self.ended
            && let Err(error) = self.end(RunStatus::Failed)
        {
            crate::logging::warn!("MLflow: could not mark the run as FAILED: {error}");
        }
    }
}

/// `name` as a key MLflow takes: letters, digits and `_ - . space /`, any other character
/// replaced by `_`, at most 250 characters; an empty name is `_`.
fn mlflow_key(name: &str) -> String {
    let key: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || "_-. /".contains(c) { c } else { '_' })
        .take(MLFLOW_MAX_KEY_LENGTH)
        .collect();
    if key.is_empty() { "_".into() } else { key }
}

/// `value` as MLflow's JSON: a number, or `"NaN"`, `"Infinity"`, `"-Infinity"` (what protobuf's
/// JSON mapping, and so MLflow's server, reads for the values JSON cannot write).
fn mlflow_value(value: f64) -> Json {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sink_mlflow_keys_keep_what_mlflow_takes_and_replace_the_rest() {
        assert_eq!(mlflow_key("validation_error"), "validation_error");
        assert_eq!(mlflow_key("val/top-1 err.x"), "val/top-1 err.x");
        assert_eq!(mlflow_key("b[1]:x"), "b_1__x");
        assert_eq!(mlflow_key("coût"), "co_t");
        assert_eq!(mlflow_key(""), "_");
        assert_eq!(mlflow_key(&"a".repeat(300)).len(), 250);
    }

    #[test]
    fn sink_mlflow_non_finite_values_are_mlflow_strings() {
        assert_eq!(mlflow_value(0.25), json!(0.25));
        assert_eq!(mlflow_value(f64::NAN), json!("NaN"));
        assert_eq!(mlflow_value(f64::INFINITY), json!("Infinity"));
        assert_eq!(mlflow_value(f64::NEG_INFINITY), json!("-Infinity"));
    }

    #[test]
    fn sink_mlflow_params_of_flattens_a_configuration() {
        #[derive(serde::Serialize)]
        struct Inner {
            rate: f64,
        }
        #[derive(serde::Serialize)]
        struct Config {
            name: String,
            epochs: u64,
            optim: Inner,
            layers: Vec<u32>,
        }
        let config =
            Config { name: "mlp".into(), epochs: 3, optim: Inner { rate: 0.5 }, layers: vec![64, 10] };
        let logger =
            MlflowLogger::new("http://127.0.0.1:1").unwrap().params_of(&config).unwrap().param("epochs", 4);
        let mut params: Vec<(&str, &str)> =
            logger.settings.params.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        params.sort();
        assert_eq!(params, [("epochs", "4"), ("layers", "[64,10]"), ("name", "mlp"), ("optim.rate", "0.5")]);
        let long = MlflowLogger::new("http://127.0.0.1:1").unwrap().param("x", "é".repeat(4000));
        assert!(long.settings.params[0].1.len() <= MLFLOW_MAX_PARAM_VALUE_LENGTH);
    }
}
