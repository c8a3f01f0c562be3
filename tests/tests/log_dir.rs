//! One run at a time in a log directory: a second trainer started while a first one trains in the
//! same directory stops before training with an error naming the first; once the first ends, the
//! directory is free again.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};

use burn::nn::Linear;
use burn::optim::SgdConfig;
use burn_stoker::prelude::*;
use stoker_tests::{mse, scratch_dir, tiny_data, tiny_model};

/// Says "started" at `before_train`, then waits until told to go on.
struct Hold {
    started: Sender<()>,
    go_on: Arc<Mutex<Receiver<()>>>,
}

impl Callback<Linear> for Hold {
    fn before_train(&mut self, _ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.started.send(()).unwrap();
        self.go_on.lock().unwrap().recv().unwrap();
        Ok(())
    }
}

fn train(dir: &std::path::Path) -> burn_stoker::Result<TrainReport<Linear>> {
    let device = burn_stoker::device::cpu();
    Trainer::new(tiny_model(&device), SgdConfig::new().init(), tiny_data(4, &device))
        .default_callbacks(DefaultCallbacks::none())
        .handle_signals(false)
        .log_dir(dir)
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .map_err(burn_stoker::Error::from)
}

#[test]
fn a_second_run_in_a_held_log_directory_is_refused_naming_the_first() {
    let dir = scratch_dir("log-dir-held");
    let (started_tx, started) = channel();
    let (go_on, go_on_rx) = channel();
    let hold = Hold { started: started_tx, go_on: Arc::new(Mutex::new(go_on_rx)) };
    let first_dir = dir.clone();
    let first = std::thread::spawn(move || {
        let device = burn_stoker::device::cpu();
        Trainer::new(tiny_model(&device), SgdConfig::new().init(), tiny_data(4, &device))
            .default_callbacks(DefaultCallbacks::none())
            .handle_signals(false)
            .log_dir(&first_dir)
            .callbacks(hold)
            .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
    });
    started.recv().unwrap();
    let error = train(&dir).expect_err("the directory is held").to_string();
    assert!(error.contains("is in use by another run"), "{error}");
    assert!(error.contains(&format!("process {}", std::process::id())), "{error}");
    go_on.send(()).unwrap();
    let report = first.join().unwrap().expect("the first run is not disturbed");
    assert_eq!(report.counters.global_step(), 4);
    // Free again once the first run ended.
    assert_eq!(train(&dir).expect("a free directory").counters.global_step(), 4);
}
