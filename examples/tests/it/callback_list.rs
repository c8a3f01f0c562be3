//! The second example: tensorpack's ResNet callback list on the digits, checked end to end.

use burn_stoker::callback::Outcome;
use serde_json::Value as Json;
use stoker_examples::callback_list::{ListConfig, schedule, train_with_list};
use stoker_tests::scratch_dir;

#[test]
fn the_schedule_is_tensorpacks_scaled_to_the_run() {
    // 105 epochs: tensorpack's own points, a tenth of SGD's values for Adam.
    assert_eq!(schedule(105), vec![(0, 1e-2), (30, 1e-3), (60, 1e-4), (85, 1e-5), (95, 1e-6)]);
    // 20 epochs: after epochs 5, 11, 16 and 18.
    assert_eq!(schedule(20), vec![(0, 1e-2), (5, 1e-3), (11, 1e-4), (16, 1e-5), (18, 1e-6)]);
    // A point that falls on the epoch of the one before it, or at the end, is dropped.
    assert_eq!(schedule(3), vec![(0, 1e-2), (1, 1e-3), (2, 1e-5)]);
}

#[test]
fn the_list_trains_validates_saves_and_sends_every_epoch() {
    let dir = scratch_dir("callback-list");
    let mut config = ListConfig::new(&dir, burn_stoker::device::cpu());
    config.epochs = 4;
    config.progress_bar = false;
    let report = train_with_list(&config).expect("training succeeds");
    assert_eq!(report.outcome, Outcome::Finished);
    assert_eq!(report.counters.epoch_num(), 4);

    // Validation: top-1 and top-5 errors every epoch, top-5 never above top-1; the moving
    // averages of the training cost and error.
    let stats: Vec<Json> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("stats.json")).unwrap()).unwrap();
    assert_eq!(stats.len(), 4);
    let mut top1 = Vec::new();
    for entry in &stats {
        let (one, five) =
            (entry["val-error-top1"].as_f64().unwrap(), entry["val-error-top5"].as_f64().unwrap());
        assert!((0.0..=1.0).contains(&one) && five <= one, "{entry}");
        for key in ["cost", "train-error-top1"] {
            assert!(entry[key].is_f64(), "epoch lacks {key}: {entry}");
        }
        top1.push(one);
    }
    assert!(top1[3] < 0.15, "the MLP learns the digits: top-1 error {top1:?}");

    // SendStat ran its command once per epoch with the epoch's value.
    let sent = std::fs::read_to_string(dir.join("val-error.txt")).unwrap();
    let lines: Vec<(u64, f64)> = sent
        .lines()
        .map(|l| {
            let (epoch, value) = l.split_once(' ').unwrap();
            (epoch.parse().unwrap(), value.parse().unwrap())
        })
        .collect();
    assert_eq!(lines.len(), 4, "{sent}");
    for (i, (epoch, value)) in lines.iter().enumerate() {
        assert_eq!(*epoch, i as u64 + 1);
        assert!((value - top1[i]).abs() < 1e-9, "sent {value}, stats.json {}", top1[i]);
    }

    // The human setter's file, the checkpoints (3 kept) and the best one.
    assert_eq!(std::fs::read_to_string(dir.join("hyper.txt")).unwrap(), "learning_rate:0.01\n");
    let checkpoints = dir.join("checkpoints");
    let mut kept: Vec<String> = std::fs::read_dir(&checkpoints)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("step-") && !n.ends_with(".tmp"))
        .collect();
    kept.sort_by_key(|n| n[5..].parse::<u64>().unwrap());
    assert_eq!(kept.len(), 3, "{kept:?}");
    assert!(checkpoints.join("min-val-error-top1").is_dir());
}

/// The `step-N` checkpoints kept in `dir`, in order.
fn kept_checkpoints(dir: &std::path::Path) -> Vec<u64> {
    let mut kept: Vec<u64> = std::fs::read_dir(dir.join("checkpoints"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            name.strip_prefix("step-").and_then(|n| n.parse().ok())
        })
        .collect();
    kept.sort();
    kept
}

/// Runs the `callback_list` binary with `args` and returns its `stats.json`, one entry per epoch.
fn run_callback_list(args: &[&str]) -> Vec<Json> {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_callback_list"))
        .args(args)
        .output()
        .expect("running callback_list");
    assert!(
        output.status.success(),
        "callback_list {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let save_path = args[args.iter().position(|a| *a == "--save_path").expect("a --save_path") + 1];
    serde_json::from_str(
        &std::fs::read_to_string(std::path::Path::new(save_path).join("stats.json")).unwrap(),
    )
    .unwrap()
}

#[test]
fn cli_switches_change_what_the_run_does() {
    // neon's switches, from `burn_stoker::cli::CallbackArgs`: validation and a checkpoint every
    // 2 epochs, 1 kept, into the directory given.
    let dir = scratch_dir("cli-switches");
    let switched = dir.join("switched");
    let stats = run_callback_list(&[
        "--epochs",
        "4",
        "--eval_freq",
        "2",
        "--serialize",
        "2",
        "--history",
        "1",
        "--no_progress_bar",
        "--save_path",
        switched.to_str().unwrap(),
    ]);
    assert_eq!(stats.len(), 4, "--epochs 4");
    let validated: Vec<bool> = stats.iter().map(|e| e.get("val-error-top1").is_some()).collect();
    assert_eq!(validated, [false, true, false, true], "--eval_freq 2: {stats:?}");
    let steps_per_epoch = stats[0]["global_step"].as_u64().unwrap();
    assert_eq!(kept_checkpoints(&switched), [4 * steps_per_epoch], "--serialize 2 --history 1");

    // Without them: validation and a checkpoint every epoch, the last one kept (neon's
    // `--history` 1).
    let plain = dir.join("plain");
    let stats =
        run_callback_list(&["--epochs", "2", "--no_progress_bar", "--save_path", plain.to_str().unwrap()]);
    assert_eq!(stats.len(), 2);
    assert!(stats.iter().all(|e| e.get("val-error-top1").is_some()), "{stats:?}");
    assert_eq!(kept_checkpoints(&plain), [2 * steps_per_epoch]);
}

/// The default `SendStat` command names the log directory; a directory whose name holds a quote,
/// a command substitution and a placeholder is passed to the shell as one literal word: nothing
/// is injected and the line lands in that directory's `val-error.txt`.
#[cfg(unix)]
#[test]
fn shell_word_keeps_the_log_dir_literal_in_the_send_command() {
    let marker = format!("stoker-injected-{}", std::process::id());
    let cwd = std::env::current_dir().unwrap();
    let _ = std::fs::remove_file(cwd.join(&marker));
    let dir = scratch_dir("callback-list-quote")
        .join(format!("a' $(touch {marker}) 'b `touch {marker}` {{epoch_num}} }}{{ \"q\" \\"));
    let mut config = ListConfig::new(&dir, burn_stoker::device::cpu());
    config.epochs = 1;
    config.progress_bar = false;
    let report = train_with_list(&config).expect("training succeeds");
    assert_eq!(report.outcome, Outcome::Finished);
    let injected = cwd.join(&marker).exists();
    let _ = std::fs::remove_file(cwd.join(&marker));
    assert!(!injected, "the log directory's name ran as shell code: {} was created", marker);
    let sent =
        std::fs::read_to_string(dir.join("val-error.txt")).expect("val-error.txt in the log directory");
    let lines: Vec<&str> = sent.lines().collect();
    assert_eq!(lines.len(), 1, "{sent}");
    assert!(lines[0].starts_with("1 "), "{sent}");
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}
