//! `burn_stoker::monitor::MlflowLogger` (feature `mlflow`) against a fake MLflow tracking server
//! (`stoker_tests::mlflow`), and, ignored by default, against a real one. The example's `--mlflow`
//! is tested in `examples/tests/it/sink.rs`.

use burn::nn::Linear;
use burn_stoker::monitor::{MLFLOW_MAX_METRICS_PER_BATCH, MlflowLogger};
use burn_stoker::prelude::*;
use serde_json::{Value as Json, json};
use stoker_tests::mlflow::{Fake, Mode};
use stoker_tests::{mse, scratch_dir, tiny_data, tiny_model};

/// Puts `a` and `b` after every step, and stops or fails at the end of epoch `at` when told.
#[derive(Debug, Default)]
struct Scalars {
    stop_at: Option<u64>,
    fail_at: Option<u64>,
}

#[callback]
impl Scalars {
    #[on(after_step)]
    fn put(&mut self, ctx: &mut Context<'_, Linear>) {
        let step = ctx.global_step() as f64;
        ctx.monitors().put_scalar("a", step);
        // A name MLflow refuses as it is: the sink makes it a valid key.
        ctx.monitors().put_scalar("b[1]:x", -step);
    }

    #[on(trigger_epoch)]
    fn end(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        if self.stop_at == Some(ctx.epoch_num()) {
            ctx.request_stop("enough");
        }
        if self.fail_at == Some(ctx.epoch_num()) {
            return Err(burn_stoker::Error::msg("a callback failed"));
        }
        Ok(())
    }
}

/// Train the tiny model for 3 epochs of 4 steps with `scalars` and an MLflow logger sending
/// batches of at most `max_batch` metrics to `fake`.
fn train_tiny(
    fake: &Fake,
    scalars: Scalars,
    max_batch: usize,
) -> Result<TrainReport<Linear>, TrainError<Linear>> {
    let device = burn_stoker::device::cpu();
    let logger = MlflowLogger::new(&fake.uri)
        .expect("an http URI")
        .experiment_id("12")
        .run_name("tiny")
        .param("optimizer", "sgd")
        .max_batch(max_batch);
    Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(4, &device))
        .max_epoch(3)
        .log_dir(scratch_dir("sink-mlflow-tiny"))
        .default_callbacks(DefaultCallbacks::none())
        .callbacks((scalars, logger))
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
}

#[test]
fn sink_mlflow_splits_full_batches_and_sanitizes_keys() {
    let fake = Fake::start(Mode::Healthy);
    train_tiny(&fake, Scalars::default(), 5).expect("training succeeds");
    fake.assert_no_problems();
    let create = &fake.bodies("runs/create")[0];
    assert_eq!((create["experiment_id"].as_str(), create["run_name"].as_str()), (Some("12"), Some("tiny")));
    assert_eq!(fake.params().get("optimizer").map(String::as_str), Some("sgd"));
    // 12 steps, 2 scalars each, in order, none lost, no batch over 5.
    let expected: Vec<(String, u64, f64)> = (1..=12u64)
        .flat_map(|s| [("a".to_string(), s, s as f64), ("b_1__x".to_string(), s, -(s as f64))])
        .collect();
    assert_eq!(fake.metrics(), expected);
    let sizes: Vec<usize> = fake
        .bodies("runs/log-batch")
        .iter()
        .filter_map(|b| b["metrics"].as_array().map(Vec::len))
        .filter(|&n| n > 0)
        .collect();
    assert!(sizes.iter().all(|&n| n <= 5), "{sizes:?}");
    // A full batch goes at once; what is left goes at the epoch's end: 8 per epoch = 5 + 3.
    assert_eq!(sizes, [5, 3, 5, 3, 5, 3], "{sizes:?}");
    assert_eq!(fake.bodies("runs/update")[0]["status"], "FINISHED");
}

#[test]
fn sink_mlflow_run_status_follows_how_training_ended() {
    // A requested stop is a finished run (EarlyStopping ends runs this way).
    let fake = Fake::start(Mode::Healthy);
    let report = train_tiny(&fake, Scalars { stop_at: Some(1), ..Scalars::default() }, 1000).expect("a stop");
    assert!(matches!(report.outcome, Outcome::Stopped(_)), "{:?}", report.outcome);
    assert_eq!(fake.bodies("runs/update")[0]["status"], "FINISHED");
    fake.assert_no_problems();

    // An error that ends training early is a failed run, and the metrics before it are there.
    let fake = Fake::start(Mode::Healthy);
    let error =
        train_tiny(&fake, Scalars { fail_at: Some(2), ..Scalars::default() }, 1000).expect_err("an error");
    assert!(error.to_string().contains("a callback failed"), "{error}");
    assert_eq!(fake.bodies("runs/update")[0]["status"], "FAILED");
    assert_eq!(fake.metrics().len(), 2 * 8, "the 8 steps before the error, 2 scalars each");
    fake.assert_no_problems();
}

#[test]
fn sink_mlflow_refuses_a_uri_it_cannot_reach() {
    for uri in ["https://mlflow.example.com", "ftp://127.0.0.1:5000", "127.0.0.1:5000", "http://"] {
        let error = MlflowLogger::new(uri).expect_err(uri).to_string();
        assert!(error.contains(uri), "{error}");
    }
    assert!(MlflowLogger::new("http://127.0.0.1:5000/").is_ok());
    assert_eq!(MLFLOW_MAX_METRICS_PER_BATCH, 1000);
}

/// `GET {uri}/api/2.0/mlflow/{endpoint}` on a real MLflow server, as JSON.
fn get(uri: &str, endpoint: &str) -> Json {
    let url = format!("{uri}/api/2.0/mlflow/{endpoint}");
    let text = ureq::get(&url)
        .call()
        .unwrap_or_else(|e| panic!("GET {url}: {e}"))
        .body_mut()
        .read_to_string()
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("GET {url}: {e}: {text}"))
}

/// Against a real MLflow tracking server, not run by default (CI has none: installing MLflow
/// and starting its server take minutes). Checked by hand with MLflow 3.17.2
/// (`pip install mlflow`, `mlflow server --host 127.0.0.1 --port 5077`), then
/// `STOKER_MLFLOW_URI=http://127.0.0.1:5077 cargo test --release -p stoker-tests --test it mlflow:: -- --ignored`.
#[test]
#[ignore = "needs a real MLflow server: set STOKER_MLFLOW_URI=http://HOST:PORT and pass --ignored"]
fn sink_mlflow_real_server_has_every_metric_param_and_the_status() {
    let uri = std::env::var("STOKER_MLFLOW_URI")
        .expect("STOKER_MLFLOW_URI=http://HOST:PORT of a running MLflow server");
    let name = format!("stoker-sink-test-{}-{}", std::process::id(), now_ms());
    let device = burn_stoker::device::cpu();
    let logger = MlflowLogger::new(&uri).unwrap().run_name(&name).param("optimizer", "sgd").max_batch(5);
    Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(4, &device))
        .max_epoch(3)
        .log_dir(scratch_dir("sink-mlflow-real"))
        .default_callbacks(DefaultCallbacks::none())
        .callbacks((Scalars::default(), logger))
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .expect("training succeeds");

    let filter = format!("attributes.run_name = '{name}'");
    let url = format!("{uri}/api/2.0/mlflow/runs/search");
    let found: Json = serde_json::from_str(
        &ureq::post(&url)
            .content_type("application/json")
            .send(json!({ "experiment_ids": ["0"], "filter": filter }).to_string())
            .unwrap_or_else(|e| panic!("POST {url}: {e}"))
            .body_mut()
            .read_to_string()
            .unwrap(),
    )
    .unwrap();
    let runs = found["runs"].as_array().cloned().unwrap_or_default();
    assert_eq!(runs.len(), 1, "one run named {name}: {found}");
    let info = &runs[0]["info"];
    assert_eq!(info["status"], "FINISHED", "{info}");
    let id = info["run_id"].as_str().unwrap();
    let params = runs[0]["data"]["params"].as_array().cloned().unwrap_or_default();
    assert!(params.contains(&json!({ "key": "optimizer", "value": "sgd" })), "{params:?}");
    for (key, sign) in [("a", 1.0), ("b_1__x", -1.0)] {
        let history = get(&uri, &format!("metrics/get-history?run_id={id}&metric_key={key}"));
        let mut got: Vec<(u64, f64)> = history["metrics"]
            .as_array()
            .unwrap_or_else(|| panic!("{key}: {history}"))
            .iter()
            .map(|m| (m["step"].as_u64().unwrap_or(0), m["value"].as_f64().unwrap()))
            .collect();
        got.sort_by_key(|&(step, _)| step);
        let expected: Vec<(u64, f64)> = (1..=12u64).map(|s| (s, sign * s as f64)).collect();
        assert_eq!(got, expected, "{key}");
    }
}

fn now_ms() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()
}
