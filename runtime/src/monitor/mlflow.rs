//! The MLflow tracking-server writer (feature `mlflow`): [`MlflowLogger`] and the sink it
//! registers, which speaks MLflow's REST API 2.0 over HTTP/1.1 (over TLS with the feature
//! `mlflow-tls`), and uploads the best checkpoint as an artifact when asked.

mod artifacts;
pub(super) mod auth;
pub(super) mod http;
mod sink;
pub(super) mod tls;

use std::borrow::Cow;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::{Value as Json, json};

pub use artifacts::CheckpointArtifacts;
pub use sink::MLFLOW_SINK_NAME;
use sink::{MlflowSink, RunLink, RunStatus, Settings, mlflow_key};

use crate::callback::{Callback, Context, Outcome};
use crate::error::{Error, Result};
#[cfg(doc)]
use crate::state::MonitorSink;

/// The most metrics MLflow takes in one `runs/log-batch` request: [`MlflowLogger`]'s largest and
/// default [`max_batch`](MlflowLogger::max_batch).
#[cfg_attr(docsrs, doc(cfg(feature = "mlflow")))]
pub const MLFLOW_MAX_METRICS_PER_BATCH: usize = 1000;

/// The longest param value MLflow takes (MLflow 2.x; 1.x took 500).
const MLFLOW_MAX_PARAM_VALUE_LENGTH: usize = 6000;

/// How long one request may take by default, connecting included.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the end of training waits by default for the sink's last requests.
const DEFAULT_END_TIMEOUT: Duration = Duration::from_secs(10);

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
/// # A slow or unreachable server
///
/// The sink never slows a step. Its queue (256 batches of records, one per event that put
/// something) is one that drops rather than waits: when the server is too slow for the run,
/// what does not fit is dropped and counted, with one warning on stderr naming the writer
/// ([`MLFLOW_SINK_NAME`]), and the run's [`TrainReport::dropped`](crate::trainer::TrainReport::dropped)
/// gives the count. A request that got no answer (the connection refused or dropped, the
/// [`timeout`](MlflowLogger::timeout) reached) is tried twice more, after 1 s and 4 s, on the
/// writer's thread. When training ends, the sink has [`end_timeout`](MlflowLogger::end_timeout)
/// (10 s by default) to send what is left and end the run; past it the run is reported with
/// the writer failed and the sink's thread is left to end on its own.
///
/// A tracker that fails (down, refusing a request) never stops training: as with every monitor
/// writer, the first error is reported once on stderr, the sink is disabled for the rest of the
/// run, and [`TrainReport::writer_failures`](crate::trainer::TrainReport::writer_failures)
/// names it ([`MLFLOW_SINK_NAME`]) with the error: the URL, the HTTP status and MLflow's
/// `error_code` and `message`. The run it had created is then ended as `FAILED` (best effort,
/// when the server answers at all), since its metrics are incomplete.
///
/// # Resuming
///
/// The MLflow run's id is part of the callback's state in every checkpoint: a run resumed from
/// it logs into the same MLflow run (`runs/update` sets it `RUNNING` again; no second
/// `runs/create`, and the params are not sent again), as MLflow's own
/// `mlflow.start_run(run_id=...)` does. The steps replayed since the checkpoint are logged a
/// second time at the same steps. A checkpoint taken before the server had answered
/// `runs/create` holds no id: a run resumed from it creates a new MLflow run.
///
/// # Credentials
///
/// As MLflow's own client, the logger reads MLflow's environment variables when it is made
/// ([`new`](MlflowLogger::new), [`from_env`](MlflowLogger::from_env)) and sends with every
/// request the header `Authorization: Basic <base64 of user:password>` when
/// `MLFLOW_TRACKING_USERNAME` and `MLFLOW_TRACKING_PASSWORD` are both set, else
/// `Authorization: Bearer <token>` when `MLFLOW_TRACKING_TOKEN` is set; none otherwise. Over
/// plain HTTP they travel in clear text: give them only to a server on the same machine, or
/// over HTTPS (below). The logger's `Debug` never shows them.
///
/// # HTTPS
///
/// With the feature `mlflow-tls` (off by default: it brings rustls and ring, whose C and
/// assembly `cc` compiles), the tracking URI may be `https://`. The server's certificate is
/// checked against Mozilla's root certificates (webpki-roots, the bundle MLflow's Python client
/// trusts through certifi), or, for a server whose certificate a private CA signed (or a
/// self-signed one), against only the certificates of the PEM file
/// `MLFLOW_TRACKING_SERVER_CERT_PATH` names, as MLflow's client reads it, or
/// [`server_cert`](MlflowLogger::server_cert) gives. `MLFLOW_TRACKING_INSECURE_TLS=true` turns
/// the check off (with a warning). The file is read at `setup`: one that cannot be read or holds
/// no certificate is an error there, naming it. rustls refuses a CA certificate as the server's
/// own (`CaUsedAsEndEntity`; `openssl req -x509` makes one unless given
/// `-addext basicConstraints=critical,CA:FALSE`): give the server a certificate the CA signs.
///
/// Without the feature, an `https://` URI is an error from [`new`](MlflowLogger::new) that
/// names the feature. Another way then is a local forwarder that adds the TLS, given by its
/// `http://` address: an SSH tunnel to the server's own plain-HTTP port
/// (`ssh -N -L 5000:127.0.0.1:5000 tracking-host`, then `http://127.0.0.1:5000`), or a TLS
/// client proxy such as stunnel (client mode).
///
/// Any other tracker (a database, a message queue...) plugs in the same way this type does:
/// implement [`MonitorSink`] and register it from a callback's `setup` with
/// [`Monitors::add_sink`](crate::state::Monitors::add_sink). Weights & Biases reads the
/// TensorBoard event files stoker writes (`wandb sync --sync-tensorboard <log dir>`).
///
/// # The best checkpoint as an artifact
///
/// With [`checkpoint_artifacts`](MlflowLogger::checkpoint_artifacts) (off by default, as
/// Lightning's `log_model`: a checkpoint can weigh gigabytes), the complete copies that
/// [`MinSaver`](crate::saver::MinSaver) and [`MaxSaver`](crate::saver::MaxSaver) keep in
/// `<log dir>/checkpoints/<copy name>/` are uploaded to the MLflow run's artifacts, every file of
/// the copy (`model.bpk`, which plain burn loads, the optimizer, the trainer's state, the
/// manifest) under `checkpoints/<copy name>/`, replacing the previous upload:
/// [`AtEnd`](CheckpointArtifacts::AtEnd) when training ends,
/// [`EachBest`](CheckpointArtifacts::EachBest) also at the end of each epoch after a copy
/// changed. The upload runs on the sink's thread, never on the step's path: `PUT
/// /api/2.0/mlflow-artifacts/artifacts/<run's artifact path>/checkpoints/...` per file, MLflow's
/// artifact proxy, which `mlflow server` serves by default (`--artifacts-destination` says where
/// it stores them); a run whose artifact store the server does not serve (`s3://...` given as
/// `--default-artifact-root`, or `--no-serve-artifacts`) is an error naming it. An upload that
/// fails does not stop the metrics: it is logged once, and when training ends it is the sink's
/// entry in [`TrainReport::writer_failures`](crate::trainer::TrainReport::writer_failures). A
/// file's upload may take the [`timeout`](MlflowLogger::timeout) plus a second per MB; the last
/// uploads count in the [`end_timeout`](MlflowLogger::end_timeout): raise it for a large model.
/// A resumed run uploads the copies once more (the first time it looks), into the same run.
/// While a copy uploads, the records wait in the sink's queue as behind a slow server (above):
/// what does not fit is dropped and counted.
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
#[doc(alias = "MLFlowLogger")]
pub struct MlflowLogger {
    settings: Settings,
    /// What the callback and its sink share: the run's id and the status decided in
    /// `after_train`.
    link: Arc<Mutex<RunLink>>,
}
crate::kind::kind!(MlflowLogger);

impl MlflowLogger {
    /// Log to the MLflow tracking server at `tracking_uri` (`http://host:port`, as
    /// `mlflow server` prints it, or `https://...` with the feature `mlflow-tls`), in the
    /// default experiment (`"0"`), as a run named `"stoker"`.
    ///
    /// Any other URI is an error naming it; `https://` without the feature is one naming the
    /// feature (see [HTTPS](MlflowLogger#https)).
    ///
    /// The credentials and the certificate to trust come from MLflow's environment variables,
    /// read here (see [Credentials](MlflowLogger#credentials) and [HTTPS](MlflowLogger#https)).
    pub fn new(tracking_uri: impl Into<String>) -> Result<Self> {
        let uri = tracking_uri.into();
        if let Some(what) = tls::check_uri(&uri, cfg!(feature = "mlflow-tls")) {
            return Err(Error::invalid(format!("MLflow tracking URI `{uri}`: {what}")));
        }
        Ok(MlflowLogger {
            settings: Settings {
                tracking_uri: uri.trim_end_matches('/').to_string(),
                experiment_id: "0".into(),
                run_name: "stoker".into(),
                params: Vec::new(),
                max_batch: MLFLOW_MAX_METRICS_PER_BATCH,
                timeout: DEFAULT_TIMEOUT,
                end_timeout: DEFAULT_END_TIMEOUT,
                authorization: auth::Authorization::from_env(),
                trust: tls::Trust::from_env(),
                checkpoint_artifacts: CheckpointArtifacts::Off,
            },
            link: Arc::new(Mutex::new(RunLink::default())),
        })
    }

    /// Log to the tracking server `MLFLOW_TRACKING_URI` names, as MLflow's own client does when
    /// given no URI; an error when it is unset or empty. Otherwise [`new`](Self::new).
    ///
    /// ```
    /// use burn_stoker::monitor::MlflowLogger;
    ///
    /// // With `MLFLOW_TRACKING_URI=http://127.0.0.1:5000` in the environment:
    /// match MlflowLogger::from_env() {
    ///     Ok(logger) => drop(logger),
    ///     Err(e) => assert!(e.to_string().contains("MLFLOW_TRACKING_URI"), "{e}"),
    /// }
    /// ```
    pub fn from_env() -> Result<Self> {
        match std::env::var("MLFLOW_TRACKING_URI") {
            Ok(uri) if !uri.is_empty() => Self::new(uri),
            _ => Err(Error::invalid(
                "MLflow: MLFLOW_TRACKING_URI is not set: set it to the tracking server's http:// (or https://) address, \
                 or give the address to MlflowLogger::new",
            )),
        }
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
    /// request is tried again (twice, see [A slow or unreachable
    /// server](MlflowLogger#a-slow-or-unreachable-server)), then fails, and with it the sink.
    /// Training does not wait for it meanwhile.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.settings.timeout = timeout;
        self
    }

    /// How long the end of training waits for the sink to send what is left and end the run
    /// (10 s by default): past it the sink is reported failed in
    /// [`TrainReport::writer_failures`](crate::trainer::TrainReport::writer_failures), what it had
    /// not sent is lost, and training's end goes on without it.
    pub fn end_timeout(mut self, timeout: Duration) -> Self {
        self.settings.end_timeout = timeout;
        self
    }

    /// Trust only the certificates of the PEM file at `path` (a private CA's, or a self-signed
    /// server's own) for an `https://` tracking server, in place of Mozilla's roots: what
    /// `MLFLOW_TRACKING_SERVER_CERT_PATH` does, which this replaces. Read at `setup`. Feature
    /// `mlflow-tls`.
    ///
    /// ```
    /// # #[cfg(feature = "mlflow-tls")] {
    /// use burn_stoker::monitor::MlflowLogger;
    /// let mlflow = MlflowLogger::new("https://mlflow.internal:8443")?.server_cert("/etc/ssl/mlflow-ca.pem");
    /// # let _ = mlflow;
    /// # }
    /// # Ok::<(), burn_stoker::Error>(())
    /// ```
    #[cfg(feature = "mlflow-tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "mlflow-tls")))]
    pub fn server_cert(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.settings.trust.cert_path = Some(path.into());
        self
    }

    /// Upload the best checkpoint copies ([`MinSaver`](crate::saver::MinSaver),
    /// [`MaxSaver`](crate::saver::MaxSaver)) to the run's artifacts: at the end, or each time
    /// one changed ([`CheckpointArtifacts`]; [`Off`](CheckpointArtifacts::Off) by default). See
    /// [The best checkpoint as an artifact](MlflowLogger#the-best-checkpoint-as-an-artifact).
    ///
    /// ```
    /// use burn_stoker::monitor::{CheckpointArtifacts, MlflowLogger};
    /// use burn_stoker::saver::MinSaver;
    /// let mlflow = MlflowLogger::new("http://127.0.0.1:5000")?.checkpoint_artifacts(CheckpointArtifacts::EachBest);
    /// let best = MinSaver::new("validation_error"); // its copy goes to checkpoints/min-validation_error/
    /// # let _ = (mlflow, best);
    /// # Ok::<(), burn_stoker::Error>(())
    /// ```
    pub fn checkpoint_artifacts(mut self, which: CheckpointArtifacts) -> Self {
        self.settings.checkpoint_artifacts = which;
        self
    }

    fn link(&self) -> MutexGuard<'_, RunLink> {
        self.link.lock().unwrap_or_else(PoisonError::into_inner)
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

/// Registers the sink at `setup`, decides the run's status in `after_train`, and keeps the
/// MLflow run's id in checkpoints.
impl<M> Callback<M> for MlflowLogger {
    fn name(&self) -> Cow<'static, str> {
        crate::kind::name_of::<Self>()
    }

    /// `{"run_id": ...}`: the MLflow run's id, `null` until the server has answered `runs/create`.
    fn save_state(&self) -> Result<Option<Json>> {
        Ok(Some(json!({ "run_id": self.link().run_id })))
    }

    /// Continue the MLflow run the checkpoint names. Called right after `setup`, before any record
    /// reaches the sink (the trainer publishes what setup put only after the states are loaded).
    fn load_state(&mut self, state: Json) -> Result<()> {
        let run_id = match state.get("run_id") {
            None | Some(Json::Null) => None,
            Some(Json::String(id)) => Some(id.clone()),
            Some(other) => {
                return Err(Error::bad_state(format!(
                    "the saved state of MlflowLogger is malformed: run_id {other} is not a string"
                )));
            }
        };
        self.link().run_id = run_id;
        Ok(())
    }

    fn setup(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        // A new training: nothing of an earlier one with this logger carries over.
        *self.link() = RunLink::default();
        let checkpoints = ctx.log_dir().join(crate::state::CHECKPOINTS);
        let sink = MlflowSink::new(self.settings.clone(), Arc::clone(&self.link), checkpoints)?;
        ctx.monitors().add_sink(sink);
        Ok(())
    }

    fn after_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let status = match ctx.outcome() {
            Some(Outcome::Finished | Outcome::Stopped(_)) => RunStatus::Finished,
            Some(Outcome::Interrupted { .. }) => RunStatus::Killed,
            Some(Outcome::NonFinite { .. } | Outcome::Failed) | None => RunStatus::Failed,
        };
        self.link().status = Some(status);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
