//! What one checkpoint of the monitors writes and how long it takes, at 10 thousand and 1 million
//! recorded steps (one scalar per step, a row of `stats.json` each, the checkpoint before it 1000
//! steps earlier): with the histories whole in every checkpoint (`inline`, what every checkpoint
//! held before the journal) and with them in the run's journal beside the checkpoints
//! (`journal`), where a checkpoint appends what is new and holds the journal's mark.
//!
//! `cargo run --release -p stoker-bench --bin history -- [rounds]`

use stoker_bench::median;

fn main() {
    let rounds: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(5);
    let dir = std::env::temp_dir().join(format!("stoker-history-bench-{}", std::process::id()));
    println!("| recorded steps | checkpoint | bytes written | time (median of {rounds}) |");
    println!("|---:|---|---:|---:|");
    for steps in [10_000u64, 1_000_000] {
        for journal in [false, true] {
            let mut times = Vec::new();
            let mut bytes = 0;
            for round in 0..rounds {
                let _ = std::fs::remove_dir_all(&dir);
                let path = journal.then(|| dir.join(format!("monitors-{round}.jsonl")));
                let (written, time) = burn_stoker::bench_support::time_monitors_checkpoint(steps, 1000, path)
                    .expect("a checkpoint of the monitors");
                bytes = written;
                times.push(time.as_secs_f64());
            }
            let name = if journal { "journal" } else { "inline" };
            println!("| {steps} | {name} | {bytes} | {:.3} ms |", median(times) * 1e3);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
