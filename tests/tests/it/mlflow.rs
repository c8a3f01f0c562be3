//! `burn_stoker::monitor::MlflowLogger` (feature `mlflow`) against a fake MLflow tracking server
//! (`stoker_tests::mlflow`), and against a real one, over http and https (`real`). The example's
//! `--mlflow` is tested in `examples/tests/it/sink.rs`.

mod real;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use burn::nn::Linear;
use burn_stoker::monitor::{MLFLOW_MAX_METRICS_PER_BATCH, MLFLOW_SINK_NAME, MlflowLogger};
use burn_stoker::prelude::*;
use burn_stoker::saver::Checkpoint;
use serde_json::{Value as Json, json};
use stoker_tests::mlflow::{Fake, Mode, RUN_ID, calls};
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
    for uri in ["ftp://127.0.0.1:5000", "127.0.0.1:5000", "http://", "https://"] {
        let error = MlflowLogger::new(uri).expect_err(uri).to_string();
        assert!(error.contains(uri), "{error}");
    }
    assert!(MlflowLogger::new("http://127.0.0.1:5000/").is_ok());
    assert_eq!(MLFLOW_MAX_METRICS_PER_BATCH, 1000);
}

/// At `after_train` (every step is over), notes how many requests the fake server had answered,
/// then releases what it holds.
struct ReleaseAtEnd {
    fake: Fake,
    answered: Arc<AtomicUsize>,
}

impl<M> Callback<M> for ReleaseAtEnd {
    fn after_train(&mut self, _ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        self.answered.store(self.fake.answered(), Ordering::SeqCst);
        self.fake.release();
        Ok(())
    }
}

/// Train the tiny model in `dir` for `epochs` epochs of `steps` steps with `callbacks`.
fn train_in<K, C: Callbacks<Linear, K>>(
    dir: &Path,
    steps: usize,
    epochs: u64,
    callbacks: C,
    resume: bool,
) -> Result<TrainReport<Linear>, TrainError<Linear>> {
    let device = burn_stoker::device::cpu();
    Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(steps, &device))
        .max_epoch(epochs)
        .log_dir(dir)
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .auto_resume(resume)
        .callbacks(callbacks)
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
}

/// What `report` says the MLflow writer's full queue dropped (panics when it dropped nothing).
fn dropped_by_mlflow(report: &TrainReport<Linear>) -> u64 {
    let dropped = report.dropped.iter().find(|d| d.queue == MLFLOW_SINK_NAME);
    dropped.unwrap_or_else(|| panic!("the MLflow writer dropped nothing: {:?}", report.dropped)).dropped
}

#[test]
fn sink_mlflow_a_slow_server_never_slows_training_what_it_cannot_take_is_dropped_and_counted() {
    // The server answers runs/create, then holds the first log-batch (the params) until every
    // step is over: a training that waited for the writer could only go on once that request
    // timed out (20 s here), failing the writer.
    let fake = Fake::start(Mode::HoldLogBatch);
    let answered = Arc::new(AtomicUsize::new(usize::MAX));
    let release = ReleaseAtEnd { fake: fake.clone(), answered: Arc::clone(&answered) };
    let logger =
        MlflowLogger::new(&fake.uri).unwrap().param("optimizer", "sgd").timeout(Duration::from_secs(20));
    let (steps, epochs) = (200, 3);
    let dir = scratch_dir("sink-mlflow-slow");
    let report = train_in(&dir, steps, epochs, (Scalars::default(), logger, release), false)
        .expect("training succeeds");
    assert_eq!(
        answered.load(Ordering::SeqCst),
        1,
        "every step ran while the server had answered runs/create only"
    );
    assert!(report.writer_failures.is_empty(), "{:?}", report.writer_failures);
    let dropped = dropped_by_mlflow(&report);
    // Nothing lost silently: each step's metrics reached the server, or the batch holding them
    // is in the count (a step put one batch).
    let total = steps as u64 * epochs;
    let sent: BTreeSet<u64> =
        fake.metrics().iter().filter(|(k, ..)| k == "a").map(|&(_, step, _)| step).collect();
    assert!(
        sent.len() as u64 + dropped >= total,
        "{} steps sent, {dropped} batches dropped, of {total}",
        sent.len()
    );
    assert!((sent.len() as u64) < total, "every step was sent: nothing was dropped");
    assert_eq!(fake.params().get("optimizer").map(String::as_str), Some("sgd"));
    assert_eq!(fake.bodies("runs/update").last().map(|b| b["status"].clone()), Some(json!("FINISHED")));
    fake.assert_no_problems();
}

#[test]
fn sink_mlflow_a_server_that_never_answers_never_stalls_training_and_the_end_waits_a_bounded_time() {
    let fake = Fake::start(Mode::Silent);
    // Its first request (runs/create) is never answered: the writer waits on it for 10 s, the
    // end of training for 1 s.
    let logger = MlflowLogger::new(&fake.uri)
        .unwrap()
        .timeout(Duration::from_secs(10))
        .end_timeout(Duration::from_secs(1));
    let dir = scratch_dir("sink-mlflow-silent");
    let report = train_in(&dir, 200, 3, (Scalars::default(), logger), false).expect("training succeeds");
    // Training never waited for it: its queue filled and dropped.
    assert!(dropped_by_mlflow(&report) > 0);
    assert_eq!(report.writer_failures.len(), 1, "{:?}", report.writer_failures);
    let failure = &report.writer_failures[0];
    assert_eq!(failure.writer, MLFLOW_SINK_NAME, "{failure}");
    let error = failure.error.to_string();
    assert!(error.contains("after training ended"), "not the end's bounded wait: {error}");
}

/// At each epoch's end, before the checkpoint, waits until the fake server has received a
/// `runs/log-batch` (the params', sent once the run was created): the checkpoint then knows the run.
struct RunCreated(Fake);

impl<M> Callback<M> for RunCreated {
    fn trigger_epoch(&mut self, _ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.0.bodies("runs/log-batch").is_empty() {
            assert!(Instant::now() < deadline, "no runs/log-batch in 60 s: {:?}", calls(&self.0));
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }
}

#[test]
fn sink_mlflow_a_resumed_run_logs_into_the_same_mlflow_run() {
    let fake = Fake::start(Mode::Healthy);
    let dir = scratch_dir("sink-mlflow-resume");
    let callbacks = || {
        let logger = MlflowLogger::new(&fake.uri).unwrap().param("optimizer", "sgd");
        (Scalars::default(), RunCreated(fake.clone()), ModelSaver::new(10), logger)
    };
    train_in(&dir, 4, 2, callbacks(), false).expect("the first run trains");
    let report = train_in(&dir, 4, 3, callbacks(), true).expect("the resumed run trains");
    assert_eq!(report.counters.global_step(), 12);
    let calls = calls(&fake);
    assert_eq!(fake.bodies("runs/create").len(), 1, "a second MLflow run: {calls:?}");
    let statuses: Vec<Json> = fake.bodies("runs/update").iter().map(|b| b["status"].clone()).collect();
    assert_eq!(statuses, [json!("FINISHED"), json!("RUNNING"), json!("FINISHED")], "{calls:?}");
    // The resumed epoch's metrics went into the run (the fake refuses another run id).
    let steps: BTreeSet<u64> = fake.metrics().iter().filter(|(k, ..)| k == "a").map(|&(_, s, _)| s).collect();
    assert_eq!(steps, (1..=12).collect(), "{calls:?}");
    let latest = Checkpoint::latest(&dir).unwrap().expect("a checkpoint");
    assert_eq!(latest.callback_state("MlflowLogger"), Some(&json!({ "run_id": RUN_ID })));
    fake.assert_no_problems();
}

/// MLflow's environment variables, as its own client reads them: `MLFLOW_TRACKING_URI` when no
/// URI is given (`MlflowLogger::from_env`), a bearer token from `MLFLOW_TRACKING_TOKEN`, basic
/// auth from `MLFLOW_TRACKING_USERNAME` and `MLFLOW_TRACKING_PASSWORD` (before the token). Every
/// request reaches the fake server with the header. The variables are set for a copy of this
/// test run in a child process (setting them in this process would race the other tests); the
/// fake server runs here.
#[test]
fn sink_mlflow_reads_the_uri_and_the_credentials_from_mlflows_environment_variables() {
    const CHILD: &str = "STOKER_TEST_MLFLOW_ENV_CHILD";
    if std::env::var_os(CHILD).is_some() {
        let device = burn_stoker::device::cpu();
        let logger = MlflowLogger::from_env().expect("MLFLOW_TRACKING_URI is set");
        Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(2, &device))
            .max_epoch(1)
            .log_dir(scratch_dir("sink-mlflow-env"))
            .default_callbacks(DefaultCallbacks::none())
            .callbacks((Scalars::default(), logger))
            .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
            .expect("training succeeds");
        return;
    }
    let name = "sink_mlflow_reads_the_uri_and_the_credentials_from_mlflows_environment_variables";
    let run_child = |uri: Option<&str>, vars: &[(&str, &str)]| {
        let mut child = std::process::Command::new(std::env::current_exe().unwrap());
        child
            .args(["--exact", &stoker_tests::test_path(module_path!(), name), "--nocapture"])
            .env(CHILD, "1");
        for var in [
            "MLFLOW_TRACKING_URI",
            "MLFLOW_TRACKING_TOKEN",
            "MLFLOW_TRACKING_USERNAME",
            "MLFLOW_TRACKING_PASSWORD",
        ] {
            child.env_remove(var);
        }
        if let Some(uri) = uri {
            child.env("MLFLOW_TRACKING_URI", uri);
        }
        child.envs(vars.iter().copied());
        let out = child.output().unwrap();
        let text =
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (out.status.success() && text.contains("1 passed"), text)
    };
    let headers = |fake: &Fake| -> BTreeSet<Option<String>> {
        fake.requests().into_iter().map(|r| r.authorization).collect()
    };

    let fake = Fake::start(Mode::Healthy);
    let (ok, text) = run_child(Some(&fake.uri), &[("MLFLOW_TRACKING_TOKEN", "s3cret-t0ken")]);
    assert!(ok, "{text}");
    fake.assert_no_problems();
    assert!(fake.requests().len() >= 3, "runs/create, log-batch, runs/update: {:?}", calls(&fake));
    assert_eq!(headers(&fake), BTreeSet::from([Some("Bearer s3cret-t0ken".to_string())]));

    let fake = Fake::start(Mode::Healthy);
    let basic = [
        ("MLFLOW_TRACKING_USERNAME", "alice"),
        ("MLFLOW_TRACKING_PASSWORD", "open sesame"),
        ("MLFLOW_TRACKING_TOKEN", "ignored"),
    ];
    let (ok, text) = run_child(Some(&fake.uri), &basic);
    assert!(ok, "{text}");
    // base64("alice:open sesame"), as Python's base64.b64encode gives it.
    assert_eq!(headers(&fake), BTreeSet::from([Some("Basic YWxpY2U6b3BlbiBzZXNhbWU=".to_string())]));

    let fake = Fake::start(Mode::Healthy);
    let (ok, text) = run_child(Some(&fake.uri), &[]);
    assert!(ok, "{text}");
    assert_eq!(headers(&fake), BTreeSet::from([None]), "no credentials, no header");

    let (ok, text) = run_child(None, &[]);
    assert!(!ok && text.contains("MLFLOW_TRACKING_URI is not set"), "{text}");
}
