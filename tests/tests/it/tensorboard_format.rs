//! TensorBoard's *HParams* tab for a training run, read by TensorBoard's own backend: the
//! writer's event file seen as a user sees it. The event file's encoding, record by record, is
//! tested beside the writer (`runtime/src/monitor/tensorboard/tests.rs`).

use stoker_tests::scratch_dir;

/// What TensorBoard's *HParams* tab reads from `dir`: `tests/python/read_hparams.py` asks the
/// hparams plugin's backend for the experiment and the session groups, as the tab does.
/// (TensorBoard takes a directory whose name holds `tfevents` for an event file: these tests'
/// directories are named without it.)
fn read_hparams(dir: &std::path::Path) -> serde_json::Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/read_hparams.py");
    let output = std::process::Command::new("python3").arg(script).arg(dir).output().expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{script} failed (TensorBoard: `python3 -m pip install tensorboard`):\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// A training run with the default TensorBoard writer: the session holds the learning rate,
/// the registered hyper-parameters and the writer's own `hparams`, the metrics' last values,
/// and ends with `STATUS_SUCCESS`; a run a callback's error ended ends with `STATUS_FAILURE`.
#[test]
fn writer_tensorboard_hparams_of_a_training_run_in_the_hparams_tab() {
    use burn::nn::Linear;
    use burn_stoker::monitor::TensorBoardWriter;
    use burn_stoker::prelude::*;
    use stoker_tests::{mse, tiny_data, tiny_model};

    /// Puts `step_value` = global step at every step; fails at step `fail_at`.
    struct Put {
        fail_at: u64,
    }
    impl Callback<Linear> for Put {
        fn trigger_step(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
            if ctx.global_step() == self.fail_at {
                return Err(burn_stoker::Error::msg("a callback failed"));
            }
            let step = ctx.global_step() as f64;
            ctx.monitors().put_scalar("step_value", step);
            Ok(())
        }
    }
    let run = |name: &str, fail_at: u64| {
        let dir = scratch_dir(name);
        let device = burn_stoker::device::cpu();
        let tensorboard =
            TensorBoardWriter::new().hparams([("optimizer", "sgd".into()), ("batch_size", 4u32.into())]);
        let defaults = DefaultCallbacks { tensorboard: Some(tensorboard), ..DefaultCallbacks::none() };
        let result =
            Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(2, &device))
                .max_epoch(2)
                .learning_rate(0.05)
                .hyper_param("weight_decay", 1e-4)
                .log_dir(&dir)
                .default_callbacks(defaults)
                .callbacks(Put { fail_at })
                .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch));
        (result.is_ok(), read_hparams(&dir))
    };
    let (ok, read) = run("hparams-run", u64::MAX);
    assert!(ok);
    let [session] = read["sessions"].as_array().unwrap().as_slice() else { panic!("one session: {read}") };
    assert_eq!(
        session["hparams"],
        serde_json::json!({"learning_rate": 0.05, "weight_decay": 1e-4, "optimizer": "sgd", "batch_size": 4.0}),
        "{read}"
    );
    assert_eq!(session["metrics"]["step_value"], serde_json::json!(4.0), "the last value: {read}");
    assert_eq!(session["status"], "STATUS_SUCCESS", "{read}");
    let metrics = read["experiment"]["metrics"].as_array().unwrap();
    assert!(metrics.contains(&serde_json::json!("step_value")), "{read}");

    let (ok, read) = run("hparams-failed", 3);
    assert!(!ok);
    assert_eq!(read["sessions"][0]["status"], "STATUS_FAILURE", "{read}");
    assert_eq!(read["sessions"][0]["metrics"]["step_value"], serde_json::json!(2.0), "{read}");
}
