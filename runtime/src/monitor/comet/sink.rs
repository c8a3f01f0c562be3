//! The sink behind [`CometMlMonitor`](super::CometMlMonitor): Comet's REST API v2 write
//! endpoints, on the monitors' writer thread.

use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value as Json, json};

use super::super::mlflow::http::Client;
use super::super::png::encode_png;
use super::{COMET_SINK_NAME, END_TIMEOUT, Link, Settings, TIMEOUT};
use crate::error::Result;
use crate::state::{Image, MonitorSink, Record, Value};

/// Where Comet's write endpoints are, under the server's URL.
const WRITE: &str = "/api/rest/v2/write/experiment";

/// The sink: the client, the experiment once created.
pub(super) struct CometSink {
    settings: Settings,
    client: Client,
    /// The experiment's key, once created or restored.
    key: Option<String>,
    /// When this sink created the experiment (ms since the Unix epoch); `None` for a resumed one.
    started: Option<i64>,
    /// Whether the experiment's end was sent.
    ended: bool,
    link: Arc<Mutex<Link>>,
}

impl std::fmt::Debug for CometSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CometSink")
            .field("url", &self.settings.url)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl CometSink {
    /// The sink for `settings`, its agent built now.
    pub(super) fn new(settings: Settings, link: Arc<Mutex<Link>>) -> Result<CometSink> {
        let agent = super::tls::agent(&settings.trust, TIMEOUT)?;
        let client =
            Client::new(settings.url.clone(), agent, (TIMEOUT, END_TIMEOUT), Some(settings.api_key.clone()));
        Ok(CometSink { settings, client, key: None, started: None, ended: false, link })
    }

    fn link(&self) -> MutexGuard<'_, Link> {
        self.link.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The experiment's key: the one a resumed checkpoint names, or a new experiment's, whose
    /// tags and parameters are sent once it is created.
    fn key(&mut self) -> io::Result<String> {
        if let Some(key) = &self.key {
            return Ok(key.clone());
        }
        let restored = self.link().experiment_key.clone();
        if let Some(key) = restored {
            self.key = Some(key.clone());
            return Ok(key);
        }
        let mut create = json!({
            "workspaceName": self.settings.workspace,
            "projectName": self.settings.project,
        });
        if let Some(name) = &self.settings.experiment_name {
            create["experimentName"] = json!(name);
        }
        self.started = Some(now_ms());
        let answer = self.client.post_json(&format!("{WRITE}/create"), &create)?;
        let key = answer["experimentKey"].as_str().map(str::to_string).ok_or_else(|| {
            io::Error::other(format!("{WRITE}/create: no experimentKey in the answer {answer}"))
        })?;
        self.link().experiment_key = Some(key.clone());
        self.key = Some(key.clone());
        if !self.settings.tags.is_empty() {
            let tags = json!({ "experimentKey": key, "addedTags": self.settings.tags });
            self.client.post_json(&format!("{WRITE}/tags"), &tags)?;
        }
        for (name, value) in self.settings.params.clone() {
            let param = json!({
                "experimentKey": key,
                "parameterName": name,
                "parameterValue": value,
                "timestamp": now_ms(),
            });
            self.client.post_json(&format!("{WRITE}/parameter"), &param)?;
        }
        Ok(key)
    }

    /// tensorpack's `log_metric(name, val, step=global_step)`.
    fn metric(&mut self, key: &str, record: &Record, value: f64) -> io::Result<()> {
        let metric = json!({
            "experimentKey": key,
            "metricName": &*record.name,
            "metricValue": metric_value(value),
            "step": record.global_step,
            "epoch": record.epoch_num,
            "timestamp": (record.wall_time * 1000.0).round() as i64,
        });
        self.client.post_json(&format!("{WRITE}/metric"), &metric).map(drop)
    }

    /// tensorpack's `log_image(name="{name}_step{global_step}")`: the image as PNG, uploaded
    /// as an asset of type `image`.
    fn image(&mut self, key: &str, record: &Record, image: &Image) -> io::Result<()> {
        let png =
            encode_png(image).map_err(|e| io::Error::other(format!("the image {}: {e}", record.name)))?;
        let file_name = format!("{}_step{}.png", record.name, record.global_step);
        let boundary = format!("stoker-comet-{:x}", now_ms());
        let body = multipart(&boundary, &file_name, &png);
        let query = format!(
            "experimentKey={}&fileName={}&step={}&type=image",
            percent(key),
            percent(&file_name),
            record.global_step
        );
        let content_type = format!("multipart/form-data; boundary={boundary}");
        self.client.post_bytes(&format!("{WRITE}/upload-asset?{query}"), &content_type, &body).map(drop)
    }

    /// tensorpack's `experiment.end()`: the experiment's end time (and its start, when this run
    /// created it).
    fn end(&mut self) -> io::Result<()> {
        self.ended = true;
        let Some(key) = self.key.clone() else { return Ok(()) };
        let mut times = json!({ "experimentKey": key, "endTimeMillis": now_ms() });
        if let Some(started) = self.started {
            times["startTimeMillis"] = json!(started);
        }
        self.client.post_json(&format!("{WRITE}/set-start-end-time"), &times).map(drop)
    }
}

impl MonitorSink for CometSink {
    fn name(&self) -> &str {
        COMET_SINK_NAME
    }

    /// A server's pace never sets the steps': what a full queue cannot take is dropped and counted.
    fn drops_when_full(&self) -> bool {
        true
    }

    fn close_timeout(&self) -> Option<Duration> {
        Some(END_TIMEOUT)
    }

    fn write(&mut self, records: &[Record]) -> io::Result<()> {
        let key = self.key()?;
        for record in records {
            match &record.value {
                Value::Scalar(value) => self.metric(&key, record, *value)?,
                Value::Image(image) => self.image(&key, record, image)?,
                Value::Histogram(_) | Value::Text(_) => {}
            }
        }
        Ok(())
    }

    /// Nothing: every record is sent as it is written.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn close(&mut self) -> io::Result<()> {
        self.client.deadline = Some(Instant::now() + END_TIMEOUT);
        self.end()
    }
}

/// A metric's value as JSON: the number, or the name of a value JSON cannot hold.
fn metric_value(value: f64) -> Json {
    match value {
        v if v.is_nan() => json!("NaN"),
        v if v == f64::INFINITY => json!("Infinity"),
        v if v == f64::NEG_INFINITY => json!("-Infinity"),
        v => json!(v),
    }
}

/// A `multipart/form-data` body of one part, `file`, holding `bytes` named `file_name`.
fn multipart(boundary: &str, file_name: &str, bytes: &[u8]) -> Vec<u8> {
    let quoted = file_name.replace(['"', '\r', '\n'], "_");
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{quoted}\"\r\nContent-Type: image/png\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    body
}

/// `text` percent-encoded for a URL's query (RFC 3986: only the unreserved characters kept).
fn percent(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => char::from(b).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Milliseconds since the Unix epoch.
fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_keep_only_unreserved_characters() {
        assert_eq!(percent("top-1 [val]/x.png"), "top-1%20%5Bval%5D%2Fx.png");
    }

    #[test]
    fn a_multipart_body_holds_the_file_between_its_boundaries() {
        let body = multipart("b0", "a\"b.png", &[1, 2, 3]);
        let text = String::from_utf8_lossy(&body);
        assert!(
            text.starts_with(
                "--b0\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a_b.png\"\r\n"
            )
        );
        assert!(body.ends_with(b"\x01\x02\x03\r\n--b0--\r\n"));
        let at = body.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        assert_eq!(&body[at..at + 3], &[1, 2, 3]);
    }

    #[test]
    fn values_json_cannot_hold_are_named() {
        assert_eq!(metric_value(f64::NAN), json!("NaN"));
        assert_eq!(metric_value(f64::NEG_INFINITY), json!("-Infinity"));
        assert_eq!(metric_value(0.25), json!(0.25));
    }
}
