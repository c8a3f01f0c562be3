//! The sink behind [`MlflowLogger`](super::MlflowLogger): MLflow's REST API 2.0 over HTTP/1.1
//! (TLS with the feature `mlflow-tls`), on the monitors' writer thread.

use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::artifacts::{CheckpointArtifacts, Uploads};
use super::http::{Client, clip};

use serde_json::{Value as Json, json};

use crate::error::Result;
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
    /// `http(s)://host:port` (no trailing slash).
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
    /// Which certificates an `https://` server may show.
    pub(super) trust: super::tls::Trust,
    /// Which best checkpoints go to the run's artifacts.
    pub(super) checkpoint_artifacts: CheckpointArtifacts,
}

/// The writer behind [`MlflowLogger`](super::MlflowLogger): talks to the tracking server on the
/// monitors' writer thread, registered by the callback at `setup`.
pub(super) struct MlflowSink {
    settings: Settings,
    client: Client,
    /// The run, once created.
    run_id: Option<String>,
    /// Metrics not sent yet, as MLflow's JSON.
    pending: Vec<Json>,
    /// Whether `runs/update` was sent.
    ended: bool,
    /// The best checkpoints uploaded.
    uploads: Uploads,
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
    /// The sink for `settings`, its agent built now (an error when the CA certificate file it
    /// names cannot be read); the best checkpoint copies, when it uploads them, in `checkpoints`.
    pub(super) fn new(
        settings: Settings,
        link: Arc<Mutex<RunLink>>,
        checkpoints: PathBuf,
    ) -> Result<MlflowSink> {
        let agent = super::tls::agent(&settings.trust, settings.timeout)?;
        let timeouts = (settings.timeout, settings.end_timeout);
        let client =
            Client::new(settings.tracking_uri.clone(), agent, timeouts, settings.authorization.clone());
        let mut uploads = Uploads::new(settings.checkpoint_artifacts);
        uploads.dir = Some(checkpoints);
        let (run_id, pending, ended) = (None, Vec::new(), false);
        Ok(MlflowSink { settings, client, run_id, pending, ended, uploads, link })
    }

    fn link(&self) -> MutexGuard<'_, RunLink> {
        self.link.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The run's id, the first time continuing the run a resumed checkpoint names (set
    /// `RUNNING` again), or else creating the run and logging the params.
    fn run_id(&mut self) -> io::Result<String> {
        if let Some(id) = &self.run_id {
            return Ok(id.clone());
        }
        let resumed = self.link().run_id.clone();
        if let Some(id) = resumed {
            self.client.post("runs/update", &json!({ "run_id": id, "status": "RUNNING" }))?;
            self.run_id = Some(id.clone());
            return Ok(id);
        }
        let created = self.client.post(
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
                self.client.tracking_uri,
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
            self.client.post("runs/log-batch", batch)?;
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
            self.client.post("runs/log-batch", &batch)?;
            self.pending.drain(..n);
        }
        Ok(())
    }

    /// End the run with `status`.
    fn end(&mut self, status: RunStatus) -> io::Result<()> {
        let id = self.run_id()?;
        self.ended = true;
        self.client
            .post("runs/update", &json!({ "run_id": id, "status": status.as_str(), "end_time": now_ms() }))
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

    /// Send what is left; upload the best checkpoints that changed with
    /// [`CheckpointArtifacts::EachBest`].
    fn end_epoch(&mut self, _stats: &EpochStats) -> io::Result<()> {
        self.send(true)?;
        if self.uploads.policy == CheckpointArtifacts::EachBest {
            let id = self.run_id()?;
            self.uploads.upload_changed(&mut self.client, &id, false);
        }
        Ok(())
    }

    /// Nothing: the writer thread flushes after every batch of records (one per event, so one
    /// per step for scalars put at every step); the metrics go at the epoch's end instead, or
    /// when a batch is full.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// Send what is left and end the run, within the end's time
    /// ([`close_timeout`](MonitorSink::close_timeout), from now).
    /// With [`checkpoint_artifacts`](super::MlflowLogger::checkpoint_artifacts) on, the best
    /// checkpoints that changed are uploaded before the run ends, and an upload that failed
    /// (now or earlier) is the error returned once the run is ended.
    fn close(&mut self) -> io::Result<()> {
        self.client.deadline = Some(Instant::now() + self.settings.end_timeout);
        self.send(true)?;
        if self.uploads.policy != CheckpointArtifacts::Off {
            let id = self.run_id()?;
            self.uploads.upload_changed(&mut self.client, &id, true);
        }
        let status = self.link().status.unwrap_or(RunStatus::Finished);
        self.end(status)?;
        match self.uploads.failed.take() {
            Some(error) => {
                Err(io::Error::new(error.kind(), format!("the best checkpoint's upload: {error}")))
            }
            None => Ok(()),
        }
    }
}

impl Drop for MlflowSink {
    /// A sink dropped before it ended its run failed: end the run as `FAILED` (best effort, when
    /// the server answered the last request), so that MLflow does not show it running forever
    /// with half its metrics.
    fn drop(&mut self) {
        if self.run_id.is_some()
            && !self.ended
            && self.client.answering
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
