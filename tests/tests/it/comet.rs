//! tensorpack's `CometMLMonitor` (tensorpack/callbacks/monitor.py) as `monitor::CometMlMonitor`,
//! against a local fake of Comet's REST API v2 (`stoker_tests::comet`) that checks every
//! request's method, path, API key and body: no Comet server can run here.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use burn::nn::Linear;
use burn_stoker::monitor::{COMET_SINK_NAME, CometMlMonitor};
use burn_stoker::prelude::*;
use burn_stoker::saver::Checkpoint;
use burn_stoker::state::Image;
use serde_json::json;
use stoker_tests::comet::{EXPERIMENT_KEY, Fake};
use stoker_tests::{mse, scratch_dir, tiny_data, tiny_model};

const API_KEY: &str = "comet-test-key-123";

/// Puts `a` (the global step) after every step, `nan` once, and a 2 × 3 RGB image at each
/// epoch's end.
struct Puts;

impl Callback<Linear> for Puts {
    fn after_step(
        &mut self,
        ctx: &mut Context<'_, Linear>,
        _values: &Fetched<'_>,
    ) -> burn_stoker::Result<()> {
        let step = ctx.global_step() as f64;
        ctx.monitors().put_scalar("a", step);
        if step == 1.0 {
            ctx.monitors().put_scalar("nan", f64::NAN);
        }
        Ok(())
    }
    fn trigger_epoch(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        let pixels: Vec<u8> = (0..18).map(|i| i * 10).collect();
        ctx.monitors().put_image("img", Image { height: 2, width: 3, channels: 3, pixels });
        Ok(())
    }
}

/// Train the tiny model in `dir` for `epochs` epochs of 2 steps with `callbacks`.
fn train_in<K, C: Callbacks<Linear, K>>(
    dir: &Path,
    epochs: u64,
    callbacks: C,
    resume: bool,
) -> Result<TrainReport<Linear>, TrainError<Linear>> {
    let device = burn_stoker::device::cpu();
    Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(2, &device))
        .max_epoch(epochs)
        .learning_rate(0.1)
        .hyper_param("momentum_like", 0.5)
        .log_dir(dir)
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .auto_resume(resume)
        .callbacks(callbacks)
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
}

fn monitor(fake: &Fake, api_key: &str) -> CometMlMonitor {
    CometMlMonitor::new(&fake.url, api_key, "stoker-ws", "tiny-project")
        .unwrap()
        .experiment_name("tiny")
        .tags(["mlp", "test"])
        .param("optimizer", "sgd")
        .param("momentum_like", "given")
}

// tensorpack's CometMLMonitor: process_scalar -> log_metric(name, val, step=global_step),
// process_image -> log_image(name="{name}_step{global_step}"), the experiment's tags, end().
#[test]
fn comet_monitor_sends_what_comets_rest_api_takes() {
    let fake = Fake::start(API_KEY);
    let report = train_in(&scratch_dir("comet"), 2, (Puts, monitor(&fake, API_KEY)), false).unwrap();
    fake.assert_no_problems();
    assert!(report.writer_failures.is_empty(), "{:?}", report.writer_failures);
    let requests = fake.requests();
    // Every request carried the API key (the fake server checks it, and refuses the rest).
    assert!(requests.iter().all(|r| r.headers.get("authorization").map(String::as_str) == Some(API_KEY)));
    let paths: Vec<&str> = requests.iter().map(|r| r.path.rsplit('/').next().unwrap()).collect();
    assert_eq!(&paths[..2], ["create", "tags"], "{paths:?}");
    assert_eq!(paths.last(), Some(&"set-start-end-time"), "{paths:?}");
    assert_eq!(
        fake.to("create")[0].json(),
        json!({ "workspaceName": "stoker-ws", "projectName": "tiny-project", "experimentName": "tiny" })
    );
    assert_eq!(fake.to("tags")[0].json()["addedTags"], json!(["mlp", "test"]));
    // The parameters: the hyper-parameters' starting values, a given one winning over them.
    let params: BTreeMap<String, String> = fake
        .to("parameter")
        .iter()
        .map(|r| r.json())
        .map(|b| (b["parameterName"].as_str().unwrap().into(), b["parameterValue"].as_str().unwrap().into()))
        .collect();
    let expected: BTreeMap<String, String> =
        [("learning_rate", "0.1"), ("momentum_like", "given"), ("optimizer", "sgd")]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .into();
    assert_eq!(params, expected);
    // Each scalar at the global step it was put at, with its epoch; NaN by name.
    let metrics: Vec<_> = fake.to("metric").iter().map(|r| r.json()).collect();
    let a: Vec<(u64, u64, f64)> = metrics
        .iter()
        .filter(|m| m["metricName"] == "a")
        .map(|m| {
            (m["step"].as_u64().unwrap(), m["epoch"].as_u64().unwrap(), m["metricValue"].as_f64().unwrap())
        })
        .collect();
    assert_eq!(a, [(1, 1, 1.0), (2, 1, 2.0), (3, 2, 3.0), (4, 2, 4.0)]);
    let nan: Vec<_> =
        metrics.iter().filter(|m| m["metricName"] == "nan").map(|m| m["metricValue"].clone()).collect();
    assert_eq!(nan, [json!("NaN")]);
    // One image per epoch, named as tensorpack names it, a PNG of the image put.
    let images = fake.to("upload-asset");
    let names: Vec<(&str, &str, &str)> = images
        .iter()
        .map(|r| (r.query["fileName"].as_str(), r.query["step"].as_str(), r.query["type"].as_str()))
        .collect();
    assert_eq!(names, [("img_step2.png", "2", "image"), ("img_step4.png", "4", "image")]);
    assert!(images.iter().all(|r| r.query["experimentKey"] == EXPERIMENT_KEY));
    let body = &images[0].body;
    let start = body.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let mut reader = png::Decoder::new(std::io::Cursor::new(body[start..].to_vec())).read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut pixels).unwrap();
    assert_eq!((info.width, info.height), (3, 2));
    assert_eq!(&pixels[..info.buffer_size()], (0..18).map(|i| i * 10).collect::<Vec<u8>>());
    // The end: both times, the start no later than the end.
    let end = fake.to("set-start-end-time")[0].json();
    assert!(end["startTimeMillis"].as_i64().unwrap() <= end["endTimeMillis"].as_i64().unwrap());
}

#[test]
fn comet_monitor_refused_by_the_server_fails_alone_and_training_goes_on() {
    let fake = Fake::start(API_KEY);
    let report = train_in(&scratch_dir("comet-refused"), 1, (Puts, monitor(&fake, "a-wrong-key")), false)
        .expect("a writer's failure never stops training");
    assert_eq!(report.counters.global_step(), 2);
    let failure = report.writer_failures.iter().find(|f| f.writer == COMET_SINK_NAME);
    let failure = failure.unwrap_or_else(|| panic!("no Comet failure: {:?}", report.writer_failures));
    let message = failure.error.to_string();
    assert!(message.contains("/api/rest/v2/write/experiment/create") && message.contains("400"), "{message}");
    // Refused at the first request: nothing else was sent.
    assert_eq!(fake.requests().len(), 1);
}

/// At each epoch's end, before the checkpoint, waits until the fake server has created the
/// experiment: the checkpoint then holds its key.
struct Created(Fake);

impl<M> Callback<M> for Created {
    fn trigger_epoch(&mut self, _ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.0.to("parameter").len() < 3 {
            assert!(Instant::now() < deadline, "no experiment in 60 s");
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }
}

#[test]
fn comet_monitor_a_resumed_run_sends_to_the_same_experiment() {
    let fake = Fake::start(API_KEY);
    let dir = scratch_dir("comet-resume");
    let callbacks = || (Puts, Created(fake.clone()), ModelSaver::new(10), monitor(&fake, API_KEY));
    train_in(&dir, 1, callbacks(), false).expect("the first run trains");
    let latest = Checkpoint::latest(&dir).unwrap().expect("a checkpoint");
    assert_eq!(latest.callback_state("CometMlMonitor"), Some(&json!({ "experiment_key": EXPERIMENT_KEY })));
    let report = train_in(&dir, 2, callbacks(), true).expect("the resumed run trains");
    assert_eq!(report.counters.global_step(), 4);
    fake.assert_no_problems();
    assert_eq!(fake.to("create").len(), 1, "one experiment");
    assert_eq!(fake.to("parameter").len(), 3, "the parameters sent once");
    let steps: Vec<u64> = fake
        .to("metric")
        .iter()
        .map(|r| r.json())
        .filter(|m| m["metricName"] == "a")
        .map(|m| m["step"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, [1, 2, 3, 4]);
    // Each run ended the experiment; the resumed one sends no start time (it did not create it).
    let ends: Vec<_> = fake.to("set-start-end-time").iter().map(|r| r.json()).collect();
    assert_eq!(ends.len(), 2);
    assert!(ends[0]["startTimeMillis"].is_i64() && ends[1]["startTimeMillis"].is_null());
}
