//! The README's set-up program (`cargo run --release`) trains on the real digits to at least 95%
//! validation accuracy and leaves a complete log directory.

use burn::config::Config;
use serde_json::Value as Json;
use stoker_examples::{DigitsConfig, DigitsRun, train_digits};
use stoker_tests::scratch_dir;

#[test]
fn the_digits_example_reaches_95_percent_and_writes_its_logs() {
    let dir = scratch_dir("digits");
    let config = DigitsRun::new(&dir, burn_stoker::device::cpu());
    let (report, error) = train_digits(&config).expect("training succeeds");
    assert_eq!(report.counters.epoch_num(), 30);
    assert_eq!(report.counters.global_step(), 30 * 45, "1437 training samples in batches of 32");
    assert!(error <= 0.05, "validation error {error} is above 5%");
    let saved = DigitsConfig::load(dir.join("config.json")).expect("the run saved config.json");
    assert_eq!(saved, config.config, "config.json reads back as the run's configuration");

    let stats: Vec<Json> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("stats.json")).unwrap()).unwrap();
    assert_eq!(stats.len(), 30);
    for (i, entry) in stats.iter().enumerate() {
        assert_eq!(entry["epoch_num"], Json::from(i as u64 + 1));
        for key in ["validation_error", "validation_cost", "train_cost", "train_accuracy", "learning_rate"] {
            assert!(entry[key].is_f64(), "epoch {} lacks {key}: {entry}", i + 1);
        }
    }
    // The schedule (0, 1e-2), (15, 3e-3), (25, 1e-3): each value from the epoch after its point.
    let lr: Vec<f64> = stats.iter().map(|e| e["learning_rate"].as_f64().unwrap()).collect();
    let expected: Vec<f64> = (1..=30)
        .map(|e| {
            if e <= 15 {
                1e-2
            } else if e <= 25 {
                3e-3
            } else {
                1e-3
            }
        })
        .collect();
    assert_eq!(lr, expected);

    let events: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("events.out.tfevents."))
        .collect();
    assert_eq!(events.len(), 1, "{events:?}");

    let checkpoints = dir.join("checkpoints");
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(checkpoints.join("index.json")).unwrap()).unwrap();
    assert_eq!(index["latest"], "step-1350");
    let last = burn_stoker::saver::Checkpoint::latest(&dir).unwrap().expect("a complete checkpoint");
    assert_eq!((last.epoch_num(), last.global_step()), (30, 1350));
    let mut kept: Vec<String> = std::fs::read_dir(&checkpoints)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("step-"))
        .collect();
    kept.sort();
    assert_eq!(kept, vec!["step-1260", "step-1305", "step-1350"]);
    for file in ["model.bpk", "optimizer.bpk", "trainer.json", "monitors.json", "manifest.json"] {
        assert!(checkpoints.join("step-1350").join(file).is_file(), "{file} is in the checkpoint");
    }
}
