//! The sink's HTTP client: MLflow's JSON requests and the artifacts' file uploads, each tried
//! again while the server does not answer, within the request's timeout and the end's deadline.

use std::fs::File;
use std::io::{self, Seek, SeekFrom};
use std::time::{Duration, Instant};

use serde_json::{Value as Json, json};

use super::auth::Authorization;

/// The pauses before the second and the third try of a request that got no answer.
const RETRY_PAUSES: [Duration; 2] = [Duration::from_secs(1), Duration::from_secs(4)];

/// The slowest upload an artifact's timeout allows for: 1 MB/s on top of the request's timeout.
const SLOWEST_UPLOAD_BYTES_PER_SEC: f64 = 1e6;

/// A request that failed: whether the server answered (an HTTP error, an answer it could not
/// read) or not (the connection refused or dropped, the timeout reached: worth another try).
enum Failure {
    Answered(io::Error),
    Unanswered(io::Error),
}

/// What a request sends.
enum Body<'a> {
    Json(&'a str),
    /// Bytes of a content type (a multipart form).
    #[cfg_attr(not(feature = "comet"), allow(dead_code))]
    Bytes(&'a str, &'a [u8]),
    File(&'a File),
    Nothing,
}

/// The tracking server's client, on the sink's thread.
pub(in crate::monitor) struct Client {
    /// `http(s)://host:port` (no trailing slash).
    pub(super) tracking_uri: String,
    /// The HTTP client. `ureq` (default features off: plain HTTP/1.1, a few small crates; rustls
    /// with the feature `mlflow-tls`) because MLflow's API is a few blocking requests on a thread
    /// that may block: an async client would bring a runtime, and a hand-written HTTP client is
    /// what the project keeps crates for.
    agent: ureq::Agent,
    timeout: Duration,
    authorization: Option<Authorization>,
    /// How long the end of training allows, for the error past it.
    end_timeout: Duration,
    /// Once closing: when the end of training stops waiting (no request goes past it).
    pub(in crate::monitor) deadline: Option<Instant>,
    /// Whether the server answered the last request: a sink that failed on a server that
    /// does not answer does not try again to end the run.
    pub(in crate::monitor) answering: bool,
}

impl Client {
    /// A client of the server at `tracking_uri` through `agent`: `timeout` a request, `end_timeout`
    /// the end's (for its error), `authorization` with every request.
    pub(in crate::monitor) fn new(
        tracking_uri: String,
        agent: ureq::Agent,
        (timeout, end_timeout): (Duration, Duration),
        authorization: Option<Authorization>,
    ) -> Client {
        let (deadline, answering) = (None, true);
        Client { tracking_uri, agent, timeout, authorization, end_timeout, deadline, answering }
    }

    /// How long the next request may take: `timeout`, less once closing if the end's deadline
    /// comes first (`None` past it).
    fn time_left(&self, timeout: Duration) -> Option<Duration> {
        match self.deadline {
            None => Some(timeout),
            Some(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                (!left.is_zero()).then(|| left.min(timeout))
            }
        }
    }

    /// `POST {tracking_uri}/api/2.0/mlflow/{endpoint}` with `body`: MLflow's JSON answer, or an
    /// error naming the URL, the HTTP status and MLflow's `error_code` and `message`.
    pub(super) fn post(&mut self, endpoint: &str, body: &Json) -> io::Result<Json> {
        let url = format!("{}/api/2.0/mlflow/{endpoint}", self.tracking_uri);
        self.request("POST", &url, Body::Json(&body.to_string()), self.timeout)
    }

    /// `POST {tracking_uri}{path}` with the JSON `body` (another service's API, Comet's), as
    /// [`post`](Self::post).
    #[cfg_attr(not(feature = "comet"), allow(dead_code))]
    pub(in crate::monitor) fn post_json(&mut self, path: &str, body: &Json) -> io::Result<Json> {
        let url = format!("{}{path}", self.tracking_uri);
        self.request("POST", &url, Body::Json(&body.to_string()), self.timeout)
    }

    /// `POST {tracking_uri}{path_and_query}` with `bytes` of `content_type` (a multipart form),
    /// as [`post`](Self::post).
    #[cfg_attr(not(feature = "comet"), allow(dead_code))]
    pub(in crate::monitor) fn post_bytes(
        &mut self,
        path_and_query: &str,
        content_type: &str,
        bytes: &[u8],
    ) -> io::Result<Json> {
        let url = format!("{}{path_and_query}", self.tracking_uri);
        self.request("POST", &url, Body::Bytes(content_type, bytes), self.timeout)
    }

    /// `GET {tracking_uri}/api/2.0/mlflow/{endpoint_and_query}`, as [`post`](Self::post).
    pub(super) fn get(&mut self, endpoint_and_query: &str) -> io::Result<Json> {
        let url = format!("{}/api/2.0/mlflow/{endpoint_and_query}", self.tracking_uri);
        self.request("GET", &url, Body::Nothing, self.timeout)
    }

    /// `PUT {url}` with the bytes of `file` (read from its start at each try), as MLflow's
    /// artifact proxy takes an artifact. Its timeout grows with the file: the request's
    /// timeout, plus a second per MB.
    pub(super) fn put_file(&mut self, url: &str, file: &File) -> io::Result<Json> {
        let len = file.metadata()?.len();
        let timeout = self.timeout + Duration::from_secs_f64(len as f64 / SLOWEST_UPLOAD_BYTES_PER_SEC);
        self.request("PUT", url, Body::File(file), timeout)
    }

    /// One request, tried again after each of [`RETRY_PAUSES`] while the server does not answer
    /// (and the end's deadline allows).
    fn request(&mut self, method: &str, url: &str, body: Body<'_>, timeout: Duration) -> io::Result<Json> {
        let mut pauses = RETRY_PAUSES.iter();
        loop {
            let Some(timeout) = self.time_left(timeout) else {
                self.answering = false;
                let end = self.end_timeout;
                return Err(io::Error::other(format!(
                    "{method} {url}: not sent, the {end:?} the end of training allows are over"
                )));
            };
            match self.request_once(method, url, &body, timeout) {
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
                        Some(&pause) if self.time_left(timeout).is_some_and(|left| left > pause) => {
                            std::thread::sleep(pause);
                        }
                        _ => return Err(error),
                    }
                }
            }
        }
    }

    /// One try of [`request`](Self::request), within `timeout`.
    fn request_once(
        &self,
        method: &str,
        url: &str,
        body: &Body<'_>,
        timeout: Duration,
    ) -> Result<Json, Failure> {
        let fail = |what: String| io::Error::other(format!("{method} {url}: {what}"));
        let unanswered = |e: ureq::Error| failure(e, fail);
        let authorization = self.authorization.as_ref().map(Authorization::header);
        let sent = match body {
            Body::Nothing => {
                let mut request = self.agent.get(url).config().timeout_global(Some(timeout)).build();
                if let Some(authorization) = authorization {
                    request = request.header("Authorization", authorization);
                }
                request.call().map_err(unanswered)
            }
            Body::Json(text) => {
                let mut request = self.agent.post(url).config().timeout_global(Some(timeout)).build();
                if let Some(authorization) = authorization {
                    request = request.header("Authorization", authorization);
                }
                request.content_type("application/json").send(*text).map_err(unanswered)
            }
            Body::Bytes(content_type, bytes) => {
                let mut request = self.agent.post(url).config().timeout_global(Some(timeout)).build();
                if let Some(authorization) = authorization {
                    request = request.header("Authorization", authorization);
                }
                request.content_type(*content_type).send(*bytes).map_err(unanswered)
            }
            Body::File(file) => {
                let mut reader = *file;
                reader.seek(SeekFrom::Start(0)).map_err(|e| Failure::Answered(fail(e.to_string())))?;
                let mut request = self.agent.put(url).config().timeout_global(Some(timeout)).build();
                if let Some(authorization) = authorization {
                    request = request.header("Authorization", authorization);
                }
                // ureq sends the file's length as its Content-Length.
                request.content_type("application/octet-stream").send(reader).map_err(unanswered)
            }
        };
        read_answer(sent?, fail)
    }
}

/// What a request that got no HTTP answer failed with: worth another try (the connection refused
/// or dropped, the timeout reached), or lasting (TLS refused, the server's certificate among it;
/// an answer that is not HTTP), with the fix for a certificate it does not trust.
fn failure(e: ureq::Error, fail: impl Fn(String) -> io::Error) -> Failure {
    let lasting = matches!(&e, ureq::Error::Tls(_))
        || matches!(&e, ureq::Error::Io(io) if io.kind() == io::ErrorKind::InvalidData);
    #[cfg(feature = "mlflow-tls")]
    let lasting = lasting || matches!(&e, ureq::Error::Rustls(_) | ureq::Error::Pem(_));
    let mut what = e.to_string();
    if what.contains("CaUsedAsEndEntity") {
        what.push_str(
            "; the server shows a CA certificate as its own (`openssl req -x509` makes one unless given \
             `-addext basicConstraints=critical,CA:FALSE`), which rustls refuses: give the server a \
             certificate that CA signs, and trust the CA",
        );
    } else if what.contains("certificate") || what.contains("UnknownIssuer") {
        what.push_str(&format!(
            "; for a server whose certificate a private CA signed (or a self-signed one), set {} to that \
             CA's PEM file or give it to MlflowLogger::server_cert",
            super::tls::CERT_PATH_VAR
        ));
    }
    match lasting {
        true => Failure::Answered(fail(what)),
        false => Failure::Unanswered(fail(what)),
    }
}

/// The server's answer as JSON, or the error its status and body say.
fn read_answer(
    mut response: ureq::http::Response<ureq::Body>,
    fail: impl Fn(String) -> io::Error,
) -> Result<Json, Failure> {
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

/// The first 300 characters of `text`, for an error message.
pub(super) fn clip(text: &str) -> String {
    let mut clipped: String = text.chars().take(300).collect();
    if clipped.len() < text.len() {
        clipped.push('…');
    }
    clipped
}
