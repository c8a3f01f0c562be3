//! The cost of the MPI transport's per-step collective: one `MPI_Allreduce` (sum) of an f32
//! buffer of 1, 4 and 16 MiB (a model's gradients flattened), the call `MpiComm::all_reduce_sum`
//! makes. Each round starts after a barrier; a round's time is the slowest rank's; the table shows
//! the median over the rounds, on rank 0.
//!
//! ```text
//! cargo build --release -p stoker-bench --features mpi --bin allreduce
//! mpirun --allow-run-as-root --oversubscribe -n 2 target/release/allreduce [rounds]
//! ```

use std::time::Instant;

use mpi::collective::SystemOperation;
use mpi::traits::{Communicator, CommunicatorCollectives};
use stoker_bench::median;

/// Buffer sizes in MiB.
const SIZES_MIB: [usize; 3] = [1, 4, 16];
/// Untimed calls per size before the timed rounds.
const WARMUP: usize = 3;

fn main() {
    let rounds: usize =
        std::env::args().nth(1).map(|arg| arg.parse().expect("rounds: a positive integer")).unwrap_or(30);
    let universe = mpi::initialize().expect("MPI initializes once");
    let world = universe.world();
    let rank = world.rank();
    let size = world.size();
    if rank == 0 {
        println!("MPI_Allreduce (sum, f32), {size} ranks, median of {rounds} rounds (slowest rank each)");
        println!("| buffer | elements | time (ms) | µs per MiB | µs per MB | algorithm bandwidth (GB/s) |");
        println!("|---|---|---|---|---|---|");
    }
    for mib in SIZES_MIB {
        let len = mib * (1 << 20) / 4;
        let send = vec![(rank + 1) as f32; len];
        let mut recv = vec![0.0f32; len];
        let mut times = Vec::with_capacity(rounds);
        for round in 0..WARMUP + rounds {
            world.barrier();
            let start = Instant::now();
            world.all_reduce_into(&send[..], &mut recv[..], SystemOperation::sum());
            let local = start.elapsed().as_secs_f64();
            let mut slowest = 0.0f64;
            world.all_reduce_into(&local, &mut slowest, SystemOperation::max());
            if round >= WARMUP {
                times.push(slowest);
            }
        }
        let expected = (size * (size + 1) / 2) as f32;
        assert!(recv.iter().all(|&v| v == expected), "rank {rank}: the sum is wrong");
        if rank == 0 {
            let seconds = median(times);
            let bytes = (len * 4) as f64;
            println!(
                "| {mib} MiB | {len} | {:.3} | {:.0} | {:.0} | {:.2} |",
                seconds * 1e3,
                seconds * 1e6 / mib as f64,
                seconds * 1e6 / (bytes / 1e6),
                bytes / seconds / 1e9,
            );
        }
    }
}
