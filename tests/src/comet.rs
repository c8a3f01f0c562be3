//! A fake Comet server for the tests of `burn_stoker::monitor::CometMlMonitor`
//! (`tests/tests/it/comet.rs`): a `TcpListener` on 127.0.0.1 in a thread of the test that parses
//! each HTTP/1.1 request, checks its method, path, `Authorization` header (the API key) and body
//! against Comet's REST API v2 write endpoints (as Comet's R SDK cometr, `R/experiment-methods.R`
//! and `R/api.R`, and its Java SDK, `ApiEndpoints.java`, call them), records it and answers.
//! It is not Comet: no Comet server can run here.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::{Value as Json, json};

/// The experiment key the fake server gives the experiment it creates.
pub const EXPERIMENT_KEY: &str = "0f3e9a2b7c5d4e1f8a6b3c2d1e0f9a8b";

/// Where Comet's write endpoints are.
pub const WRITE: &str = "/api/rest/v2/write/experiment";

/// One request the fake server received.
#[derive(Debug, Clone)]
pub struct Request {
    /// `POST`, `GET`...
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// The query's fields, decoded.
    pub query: BTreeMap<String, String>,
    /// The headers, their names in lower case.
    pub headers: BTreeMap<String, String>,
    /// The body's bytes.
    pub body: Vec<u8>,
}

impl Request {
    /// The body as JSON (`Null` when it is not).
    pub fn json(&self) -> Json {
        serde_json::from_slice(&self.body).unwrap_or(Json::Null)
    }
}

/// A fake Comet server on 127.0.0.1 that expects the API key `api_key`.
#[derive(Clone)]
pub struct Fake {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    requests: Arc<Mutex<Vec<Request>>>,
    problems: Arc<Mutex<Vec<String>>>,
}

impl Fake {
    /// Start a server on a free port, in a thread of this process, expecting `api_key`.
    pub fn start(api_key: &str) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding 127.0.0.1:0");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let fake = Fake {
            url,
            requests: Arc::new(Mutex::new(Vec::new())),
            problems: Arc::new(Mutex::new(Vec::new())),
        };
        let (server, api_key) = (fake.clone(), api_key.to_string());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                if let Err(problem) = serve(stream, &api_key, &server) {
                    server.problems.lock().unwrap().push(problem);
                }
            }
        });
        fake
    }

    /// Every request received, in order.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }

    /// The requests to `{WRITE}/{endpoint}`, in order.
    pub fn to(&self, endpoint: &str) -> Vec<Request> {
        let path = format!("{WRITE}/{endpoint}");
        self.requests().into_iter().filter(|r| r.path == path).collect()
    }

    /// Panics with what Comet would have refused, if anything.
    pub fn assert_no_problems(&self) {
        let problems = self.problems.lock().unwrap();
        assert!(problems.is_empty(), "the fake Comet server found problems: {problems:#?}");
    }
}

/// Read one request, check it, record it, answer it, close the connection.
fn serve(stream: TcpStream, api_key: &str, fake: &Fake) -> Result<(), String> {
    let mut reader = BufReader::new(stream.try_clone().map_err(|e| e.to_string())?);
    let mut line = String::new();
    reader.read_line(&mut line).map_err(|e| e.to_string())?;
    let mut parts = line.split_whitespace();
    let (Some(method), Some(target), Some("HTTP/1.1")) = (parts.next(), parts.next(), parts.next()) else {
        return Err(format!("not an HTTP/1.1 request line: {line:?}"));
    };
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let query: BTreeMap<String, String> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
        .map(|(k, v)| (decode(k), decode(v)))
        .collect();
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
    let length: usize =
        headers.get("content-length").map_or(Ok(0), |l| l.parse()).map_err(|e| format!("{e}"))?;
    let mut body = vec![0; length];
    reader.read_exact(&mut body).map_err(|e| e.to_string())?;
    let request = Request { method: method.into(), path: path.into(), query, headers, body };
    let problems = check(&request, api_key);
    fake.requests.lock().unwrap().push(request.clone());
    let (status, answer) = if !problems.is_empty() {
        (400, json!({ "msg": problems.join("; "), "code": 400 }))
    } else if request.path == format!("{WRITE}/create") {
        let body = request.json();
        (
            200,
            json!({
                "experimentKey": EXPERIMENT_KEY,
                "workspaceName": body["workspaceName"],
                "projectName": body["projectName"],
                "link": format!("{}/{}/{EXPERIMENT_KEY}", body["workspaceName"], body["projectName"]),
            }),
        )
    } else {
        (200, json!({ "msg": "ok" }))
    };
    let answer = answer.to_string();
    let reason = if status == 200 { "OK" } else { "BAD REQUEST" };
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
        answer.len()
    )
    .map_err(|e| e.to_string())?;
    stream.flush().map_err(|e| e.to_string())?;
    if problems.is_empty() { Ok(()) } else { Err(problems.join("; ")) }
}

/// A JSON field a request must hold, and what its value must be.
type Field = (&'static str, fn(&Json) -> bool);

/// What Comet would refuse in `request`.
fn check(request: &Request, api_key: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let at = &request.path;
    if request.method != "POST" {
        problems.push(format!("{} {at}: every write endpoint used is a POST", request.method));
    }
    if request.headers.get("authorization").map(String::as_str) != Some(api_key) {
        problems
            .push(format!("{at}: Authorization {:?}, not the API key", request.headers.get("authorization")));
    }
    let Some(endpoint) = at.strip_prefix(&format!("{WRITE}/")) else {
        problems.push(format!("{at}: not a write endpoint"));
        return problems;
    };
    if endpoint == "upload-asset" {
        let content_type = request.headers.get("content-type").cloned().unwrap_or_default();
        let Some(boundary) = content_type.strip_prefix("multipart/form-data; boundary=") else {
            problems.push(format!("{at}: content-type {content_type:?}, not multipart/form-data"));
            return problems;
        };
        for field in ["experimentKey", "fileName", "step", "type"] {
            if !request.query.contains_key(field) {
                problems.push(format!("{at}: no {field} in the query"));
            }
        }
        if request.query.get("experimentKey").map(String::as_str) != Some(EXPERIMENT_KEY) {
            problems.push(format!("{at}: experimentKey {:?}", request.query.get("experimentKey")));
        }
        let head = format!("--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"");
        let tail = format!("\r\n--{boundary}--\r\n");
        if !request.body.starts_with(head.as_bytes()) || !request.body.ends_with(tail.as_bytes()) {
            problems.push(format!("{at}: not a multipart body of one part `file`"));
        }
        return problems;
    }
    if !request.headers.get("content-type").is_some_and(|t| t.starts_with("application/json")) {
        problems.push(format!(
            "{at}: content-type {:?}, not application/json",
            request.headers.get("content-type")
        ));
    }
    let body = request.json();
    let fields: &[Field] = match endpoint {
        "create" => &[("workspaceName", Json::is_string), ("projectName", Json::is_string)],
        "tags" => &[("experimentKey", Json::is_string), ("addedTags", Json::is_array)],
        "parameter" => &[
            ("experimentKey", Json::is_string),
            ("parameterName", Json::is_string),
            ("parameterValue", Json::is_string),
            ("timestamp", Json::is_i64),
        ],
        "metric" => &[
            ("experimentKey", Json::is_string),
            ("metricName", Json::is_string),
            ("metricValue", |v| v.is_number() || v.is_string()),
            ("step", Json::is_u64),
            ("epoch", Json::is_u64),
            ("timestamp", Json::is_i64),
        ],
        "set-start-end-time" => &[("experimentKey", Json::is_string), ("endTimeMillis", Json::is_i64)],
        other => {
            problems.push(format!("{at}: no endpoint {other}"));
            return problems;
        }
    };
    for (field, valid) in fields {
        if !valid(&body[field]) {
            problems.push(format!("{at}: {field} is {}", body[field]));
        }
    }
    if endpoint != "create" && body["experimentKey"] != json!(EXPERIMENT_KEY) {
        problems.push(format!("{at}: experimentKey {}", body["experimentKey"]));
    }
    problems
}

/// A query field, percent-decoded.
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(&text[i + 1..i + 3], 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
