//! The MLflow tracking-server writer (feature `mlflow`): [`MlflowLogger`] and the sink it
//! registers, which speaks MLflow's REST API 2.0 over plain HTTP/1.1.

mod auth;
mod sink;

use std::borrow::Cow;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::{Value as Json, json};

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
/// plain HTTP they travel in clear text: give them only to a server on the same machine or a
/// forwarder that adds TLS (below). The logger's `Debug` never shows them.
///
/// # Plain HTTP only
///
/// The sink speaks plain HTTP/1.1 (through `ureq`, built without TLS): TLS would bring a C-compiled cryptography crate (`ring`) into the build. To reach a server
/// behind `https://`, either
///
/// - run a local forwarder that adds the TLS and give its `http://` address: an SSH tunnel to the
///   server's own plain-HTTP port (`ssh -N -L 5000:127.0.0.1:5000 tracking-host`, then
///   `http://127.0.0.1:5000`), or a TLS client proxy such as stunnel (client mode) or a local
///   nginx whose `proxy_pass` is the `https://` URL;
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
    /// `mlflow server` prints it), in the default experiment (`"0"`), as a run named `"stoker"`.
    ///
    /// Only plain `http://` is supported (see [Plain HTTP only](MlflowLogger#plain-http-only)
    /// for an `https://` server). Any other URI is an error naming it.
    ///
    /// The credentials come from MLflow's environment variables, read here (see
    /// [Credentials](MlflowLogger#credentials)).
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
                end_timeout: DEFAULT_END_TIMEOUT,
                authorization: auth::Authorization::from_env(),
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
            _ => Err(Error::msg(
                "MLflow: MLFLOW_TRACKING_URI is not set: set it to the tracking server's http:// address, \
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
        Cow::Borrowed("MlflowLogger")
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
                return Err(Error::checkpoint(format!(
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
        let sink = MlflowSink::new(self.settings.clone(), Arc::clone(&self.link));
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
