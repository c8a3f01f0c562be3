//! tensorpack's `CometMLMonitor` (feature `comet`): [`CometMlMonitor`] and the sink it
//! registers, which sends the run's scalars, images and parameters to Comet's REST API v2
//! through the MLflow writer's HTTP client (`monitor/mlflow/http.rs`).

mod sink;

use std::borrow::Cow;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde_json::{Value as Json, json};

use super::mlflow::auth::Authorization;
use super::mlflow::tls;
use crate::callback::{Callback, Context};
use crate::error::{Error, Result};
#[cfg(doc)]
use crate::state::MonitorSink;
use sink::CometSink;

/// The name of the sink [`CometMlMonitor`] registers (in
/// [`TrainReport::writer_failures`](crate::trainer::TrainReport::writer_failures)).
#[cfg_attr(docsrs, doc(cfg(feature = "comet")))]
pub const COMET_SINK_NAME: &str = "Comet";

/// Comet's own server, which [`CometMlMonitor::from_env`] sends to unless `COMET_URL` says
/// otherwise (`https://`: the feature `mlflow-tls` is needed for it).
#[cfg_attr(docsrs, doc(cfg(feature = "comet")))]
pub const COMET_DEFAULT_URL: &str = "https://www.comet.com";

/// How long one request may take, connecting included.
const TIMEOUT: Duration = Duration::from_secs(30);

/// How long the end of training waits for the sink's last requests.
const END_TIMEOUT: Duration = Duration::from_secs(10);

/// Sends the run's scalars, images and parameters to [Comet](https://www.comet.com):
/// tensorpack's `CometMLMonitor`, through Comet's REST API v2 rather than the `comet_ml` Python
/// SDK. Feature `comet` (off by default; it turns on `mlflow` for its HTTP client, ureq over
/// plain HTTP, and needs `mlflow-tls` for an `https://` server, Comet's own included).
///
/// It registers a [`MonitorSink`] at `setup`, which works on the monitors' writer thread, never
/// on the step's path. Every request carries the header `Authorization: <API key>`, as Comet's
/// REST API asks, and a JSON body (`Content-Type: application/json`) unless it uploads a file:
///
/// 1. the first time records arrive, `POST {url}/api/rest/v2/write/experiment/create`
///    (`workspaceName`, `projectName`, `experimentName`) creates the experiment, whose
///    `experimentKey` every later request names; then `write/experiment/tags` (`addedTags`)
///    when [`tags`](Self::tags) were given, and one `write/experiment/parameter`
///    (`parameterName`, `parameterValue`, `timestamp`) per parameter: the learning rate and every
///    registered hyper-parameter at their starting values, then those given with
///    [`param`](Self::param) (which win over a hyper-parameter of the same name);
/// 2. each scalar, as it is put: `write/experiment/metric` (`metricName`, `metricValue`,
///    `step` = the global step it was put at, `epoch`, `timestamp` in ms), tensorpack's
///    `log_metric(name, val, step=global_step)`; a value that is not finite is sent as the
///    string `"NaN"`, `"Infinity"` or `"-Infinity"` (JSON has no such number);
/// 3. each image: `write/experiment/upload-asset?experimentKey=…&fileName=…&step=…&type=image`,
///    a `multipart/form-data` body whose part `file` is the image as PNG, named as tensorpack
///    names it, `{name}_step{global_step}.png` (tensorpack sends JPEG);
/// 4. when training ends, `write/experiment/set-start-end-time` (`startTimeMillis` when this run
///    created the experiment, `endTimeMillis`): tensorpack's `experiment.end()`.
///
/// The endpoints and fields are those of Comet's REST API v2 write endpoints, as Comet's R SDK
/// (cometr, `R/experiment-methods.R` and `R/api.R`) and Java SDK (`ApiEndpoints.java`) call
/// them. No Comet server can run where stoker is tested: the test
/// (`it::comet::comet_monitor_sends_what_comets_rest_api_takes`) runs against a local server
/// that checks each request's method, path, API key and body, not against Comet itself.
///
/// As every writer, it runs on the chief only, never slows a step (its queue drops what a slow
/// server cannot take, counted in [`TrainReport::dropped`](crate::trainer::TrainReport::dropped)),
/// and a server that fails never stops training: the first error is reported once, the sink is
/// disabled, and [`TrainReport::writer_failures`](crate::trainer::TrainReport::writer_failures)
/// names it ([`COMET_SINK_NAME`]) with the URL and the HTTP status. A request that got no answer
/// is tried twice more, as the MLflow writer's are.
///
/// The experiment's key is in the callback's state of every checkpoint: a resumed run sends to
/// the same experiment, without creating one or sending the tags and parameters again.
///
/// ```
/// use burn_stoker::monitor::CometMlMonitor;
///
/// let comet = CometMlMonitor::new("http://127.0.0.1:5010", "my-api-key", "my-workspace", "digits")?
///     .experiment_name("mlp-64")
///     .tags(["mlp", "digits"])
///     .param("hidden", 64);
/// # let _ = comet;
/// # Ok::<(), burn_stoker::Error>(())
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "comet")))]
#[derive(Debug)]
#[doc(alias = "CometMLMonitor")]
pub struct CometMlMonitor {
    settings: Settings,
    link: Arc<Mutex<Link>>,
}
crate::kind::kind!(CometMlMonitor);

/// What the sink is made with.
#[derive(Debug, Clone)]
struct Settings {
    /// `http(s)://host:port`, no trailing slash.
    url: String,
    api_key: Authorization,
    workspace: String,
    project: String,
    experiment_name: Option<String>,
    tags: Vec<String>,
    /// The parameters given with `param`, in order.
    params: Vec<(String, String)>,
    trust: tls::Trust,
}

/// What the callback and its sink share: the experiment's key, once created (or restored).
#[derive(Debug, Default)]
struct Link {
    experiment_key: Option<String>,
}

impl CometMlMonitor {
    /// Send to the Comet server at `url` (`http://`; `https://` with the feature `mlflow-tls`)
    /// with `api_key`, into the project `project` of the workspace `workspace`. An `https://`
    /// URL without `mlflow-tls`, or a URL of another scheme, is an error.
    pub fn new(
        url: impl Into<String>,
        api_key: impl Into<String>,
        workspace: impl Into<String>,
        project: impl Into<String>,
    ) -> Result<Self> {
        let url = url.into();
        if let Some(what) = tls::check_uri(&url, cfg!(feature = "mlflow-tls")) {
            return Err(Error::invalid(format!("Comet URL `{url}`: {what}")));
        }
        Ok(CometMlMonitor {
            settings: Settings {
                url: url.trim_end_matches('/').to_string(),
                api_key: Authorization::raw(api_key.into()),
                workspace: workspace.into(),
                project: project.into(),
                experiment_name: None,
                tags: Vec::new(),
                params: Vec::new(),
                trust: tls::Trust::from_env(),
            },
            link: Arc::new(Mutex::new(Link::default())),
        })
    }

    /// From the variables Comet's SDKs read: `COMET_API_KEY`, `COMET_WORKSPACE`,
    /// `COMET_PROJECT_NAME` (each required), and the server from `COMET_URL`
    /// ([`COMET_DEFAULT_URL`] when unset).
    pub fn from_env() -> Result<Self> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let required =
            |name: &str| var(name).ok_or_else(|| Error::invalid(format!("Comet: {name} is not set")));
        let url = var("COMET_URL").unwrap_or_else(|| COMET_DEFAULT_URL.to_string());
        Self::new(
            url,
            required("COMET_API_KEY")?,
            required("COMET_WORKSPACE")?,
            required("COMET_PROJECT_NAME")?,
        )
    }

    /// The experiment's name (`experimentName`); none by default (Comet names it).
    pub fn experiment_name(mut self, name: impl Into<String>) -> Self {
        self.settings.experiment_name = Some(name.into());
        self
    }

    /// The experiment's tags (tensorpack's `tags`), added when it is created.
    pub fn tags<S: Into<String>>(mut self, tags: impl IntoIterator<Item = S>) -> Self {
        self.settings.tags.extend(tags.into_iter().map(Into::into));
        self
    }

    /// A parameter of the run, sent once when the experiment is created; a second value for the
    /// same name replaces the first.
    pub fn param(mut self, name: &str, value: impl ToString) -> Self {
        let value = value.to_string();
        match self.settings.params.iter_mut().find(|(n, _)| n == name) {
            Some(param) => param.1 = value,
            None => self.settings.params.push((name.to_string(), value)),
        }
        self
    }

    fn link(&self) -> MutexGuard<'_, Link> {
        self.link.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<M> Callback<M> for CometMlMonitor {
    fn name(&self) -> Cow<'static, str> {
        crate::kind::name_of::<Self>()
    }

    fn save_state(&self) -> Result<Option<Json>> {
        Ok(Some(json!({ "experiment_key": self.link().experiment_key })))
    }

    fn load_state(&mut self, state: Json) -> Result<()> {
        self.link().experiment_key = match state.get("experiment_key") {
            None | Some(Json::Null) => None,
            Some(Json::String(key)) => Some(key.clone()),
            Some(other) => {
                return Err(Error::bad_state(format!(
                    "the saved state of CometMlMonitor is malformed: experiment_key {other} is not a string"
                )));
            }
        };
        Ok(())
    }

    /// Registers the sink, with the hyper-parameters' starting values among the parameters.
    fn setup(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let hyper = ctx.hyper();
        let mut params: Vec<(String, String)> = hyper
            .names()
            .filter_map(|name| Some((name.to_string(), hyper.get(name)?.to_string())))
            .filter(|(name, _)| !self.settings.params.iter().any(|(given, _)| given == name))
            .collect();
        params.extend(self.settings.params.iter().cloned());
        let settings = Settings { params, ..self.settings.clone() };
        let sink = CometSink::new(settings, Arc::clone(&self.link))?;
        ctx.monitors().add_sink(sink);
        Ok(())
    }
}
