//! A real MLflow tracking server for the tests, started once per test binary (`mlflow server`,
//! installed with pip into the tests' virtual environment by `.ci/run`), with a TLS door in
//! front of it whose self-signed certificate the test trusts; and MLflow's own Python client to
//! read the runs back. `mlflow_serve.py` and `mlflow_read.py` beside this file say what they do.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value as Json;

/// The supervisor: the certificate, the server, the TLS door, the watchdog.
const SERVE: &str = include_str!("mlflow_serve.py");
/// The reader, with MLflow's client.
const READ: &str = include_str!("mlflow_read.py");

/// How long the server may take to answer its first `/health` (it took 5 to 25 s on a busy
/// 2-core machine).
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// The running server, shared by the tests of the binary.
#[derive(Debug)]
pub struct Server {
    /// `http://127.0.0.1:PORT`.
    pub uri: String,
    /// `https://127.0.0.1:TLS_PORT`: the same server behind a TLS door.
    pub tls_uri: String,
    /// The door's self-signed certificate (PEM), the CA to trust.
    pub ca: PathBuf,
    /// The folder of the server's store, artifacts, certificate and log.
    pub dir: PathBuf,
}

/// The server, started by the first caller. It runs until the test binary ends, however it ends
/// (a panic, a signal): its supervisor watches the binary's process and then ends the server's
/// whole process group and removes its folder. Panics, with the server's log, when it does not
/// answer within 2 minutes or when `python3 -m mlflow` is missing.
pub fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(start)
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port()
}

fn start() -> Server {
    let dir = std::env::temp_dir().join(format!("stoker-test-mlflow-server-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the server's folder");
    let script = dir.join("mlflow_serve.py");
    std::fs::write(&script, SERVE).expect("writing the supervisor's script");
    let (port, tls_port) = (free_port(), free_port());
    let started = Instant::now();
    let mut supervisor = Command::new("python3")
        .arg(&script)
        .arg(&dir)
        .args([port.to_string(), tls_port.to_string(), std::process::id().to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("supervisor.log")).expect("the supervisor's log"))
        .spawn()
        .expect("python3 (the tests' virtual environment first on PATH, .ci/run makes it)");
    let server = Server {
        uri: format!("http://127.0.0.1:{port}"),
        tls_uri: format!("https://127.0.0.1:{tls_port}"),
        ca: dir.join("ca.pem"),
        dir,
    };
    let log = |server: &Server| {
        let read = |name: &str| std::fs::read_to_string(server.dir.join(name)).unwrap_or_default();
        format!("supervisor: {}\nserver: {}", read("supervisor.log"), read("server.log"))
    };
    loop {
        if let Ok(Some(status)) = supervisor.try_wait() {
            panic!(
                "the MLflow server's supervisor ended ({status}); is mlflow installed (.ci/run)?\n{}",
                log(&server)
            );
        }
        let tls_open = TcpStream::connect(("127.0.0.1", tls_port)).is_ok();
        if tls_open && server.ca.exists() && healthy(&server.uri) {
            break;
        }
        assert!(
            started.elapsed() < START_TIMEOUT,
            "the MLflow server did not answer in 2 min\n{}",
            log(&server)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!(
        "mlflow server: answering after {:.1} s at {} and {}",
        started.elapsed().as_secs_f64(),
        server.uri,
        server.tls_uri
    );
    server
}

fn healthy(uri: &str) -> bool {
    let agent: ureq::Agent =
        ureq::Agent::config_builder().timeout_global(Some(Duration::from_secs(2))).build().into();
    agent.get(&format!("{uri}/health")).call().is_ok_and(|r| r.status().is_success())
}

/// Every run named `run_name` in the default experiment of the server at `uri`, read with
/// MLflow's Python client: `[{run_id, status, params, metrics: {key: [[step, value]...]},
/// artifacts: [path...]}]`; the first run's artifact folder `checkpoints` is downloaded into
/// `download`. `ca`, when given, is the client's `MLFLOW_TRACKING_SERVER_CERT_PATH`.
pub fn read_runs(uri: &str, run_name: &str, download: &Path, ca: Option<&Path>) -> Vec<Json> {
    let mut command = Command::new("python3");
    command.args(["-c", READ, uri, run_name]).arg(download);
    command.env_remove("MLFLOW_TRACKING_SERVER_CERT_PATH");
    if let Some(ca) = ca {
        command.env("MLFLOW_TRACKING_SERVER_CERT_PATH", ca);
    }
    let out = command.output().expect("python3 with mlflow");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "reading the runs with MLflow's client failed: {}{}",
        text,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str::<Json>(&text)
        .unwrap_or_else(|e| panic!("MLflow's client printed no JSON ({e}): {text}"))
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Waits until the server at `uri` has a run named `run_name` in the default experiment (at
/// most a minute).
pub fn wait_for_run(uri: &str, run_name: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let body = serde_json::json!({ "experiment_ids": ["0"], "filter": format!("attributes.run_name = '{run_name}'") });
    loop {
        let found = ureq::post(&format!("{uri}/api/2.0/mlflow/runs/search"))
            .content_type("application/json")
            .send(body.to_string())
            .ok()
            .and_then(|mut r| r.body_mut().read_to_string().ok())
            .and_then(|text| serde_json::from_str::<Json>(&text).ok())
            .is_some_and(|found| found["runs"].as_array().is_some_and(|runs| !runs.is_empty()));
        if found {
            return;
        }
        assert!(Instant::now() < deadline, "no run named {run_name} on {uri} after a minute");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The artifact paths under `path` of the run named `run_name` (the first found) on the server
/// at `uri`, through MLflow's REST API (`artifacts/list`); empty while there is no such run.
pub fn artifact_paths(uri: &str, run_name: &str, path: &str) -> Vec<String> {
    let body = serde_json::json!({ "experiment_ids": ["0"], "filter": format!("attributes.run_name = '{run_name}'") });
    let read = |request: Result<ureq::http::Response<ureq::Body>, ureq::Error>| {
        request
            .ok()
            .and_then(|mut r| r.body_mut().read_to_string().ok())
            .and_then(|t| serde_json::from_str::<Json>(&t).ok())
    };
    let found = read(
        ureq::post(&format!("{uri}/api/2.0/mlflow/runs/search"))
            .content_type("application/json")
            .send(body.to_string()),
    );
    let Some(id) = found.as_ref().and_then(|f| f["runs"][0]["info"]["run_id"].as_str()) else {
        return Vec::new();
    };
    let listed =
        read(ureq::get(&format!("{uri}/api/2.0/mlflow/artifacts/list?run_id={id}&path={path}")).call());
    let files = listed.as_ref().and_then(|l| l["files"].as_array().cloned()).unwrap_or_default();
    files.iter().filter_map(|f| f["path"].as_str().map(str::to_string)).collect()
}
