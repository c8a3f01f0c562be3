//! The MPI transport's engine (`mpi.rs` is the transport): this process's MPI world through rsmpi (the `mpi` crate) over the
//! system's MPI library (OpenMPI on Debian: `apt-get install libopenmpi-dev openmpi-bin
//! libclang-dev`), started with `mpirun -n N program`.
//!
//! A program run without `mpirun` is a world of one rank (MPI's singleton initialization).

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};

use mpi::Threading;
use mpi::collective::SystemOperation;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator, CommunicatorCollectives};

use crate::error::{Error, Result};

/// The most elements one `MPI_Allreduce` call takes: MPI counts are C `int`s.
const MAX_COUNT: usize = 1 << 30;

/// The `f32`s this process has given to MPI's element-wise sums so far: its share of what the
/// exchanges send, which the tests read (`bench_support::mpi_floats_reduced`).
static FLOATS_REDUCED: AtomicU64 = AtomicU64::new(0);

/// The `f32`s this process has given to MPI's sums so far (see [`FLOATS_REDUCED`]).
pub(crate) fn floats_reduced() -> u64 {
    FLOATS_REDUCED.load(Ordering::Relaxed)
}

/// This process's MPI world (rsmpi over OpenMPI).
///
/// MPI is finalized (`MPI_Finalize`) when the process exits (an `atexit` handler), not when this
/// is dropped: `MPI_Finalize` waits for `mpirun`, and `mpirun`, told to stop the job (SIGINT),
/// signals the ranks and kills them a second later. A rank that finalized when its trainer
/// returned would be killed there, before the program's own code after training (writing its
/// results, printing the outcome) ran. MPI cannot be initialized again in this process.
///
/// `Send` but not `Sync`: MPI is initialized with `MPI_THREAD_SERIALIZED`, so the calls may come
/// from any one thread at a time, which `&self` methods on a value that cannot be shared between
/// threads guarantee.
pub(crate) struct MpiComm {
    /// `MPI_COMM_WORLD`.
    world: SimpleCommunicator,
    /// This rank's number in the world.
    rank: usize,
    /// The number of ranks.
    size: usize,
    /// Not `Sync`: MPI calls are serialized by ownership.
    _not_sync: PhantomData<Cell<()>>,
}

// SAFETY: MPI is initialized with `MPI_THREAD_SERIALIZED` or more (`init` refuses less), so its
// calls may come from any thread, one at a time. An `MpiComm` is not `Sync`, so the one thread
// that owns it makes them; moving it to another thread moves that ownership. (rsmpi's
// communicator holds OpenMPI's `MPI_Comm`, a raw pointer, hence no automatic `Send`.)
unsafe impl Send for MpiComm {}

impl MpiComm {
    /// Initialize MPI (once per process) with `MPI_THREAD_SERIALIZED`.
    ///
    /// # Errors
    ///
    /// When MPI was already initialized in this process (by an earlier `MpiComm`, even one
    /// dropped since, or by other code), or when the library cannot serialize calls from several
    /// threads.
    pub(crate) fn init() -> Result<MpiComm> {
        let (universe, threading) =
            mpi::initialize_with_threading(Threading::Serialized).ok_or_else(|| {
                Error::transport("MPI was already initialized in this process (MPI starts once per process)")
            })?;
        if threading < Threading::Serialized {
            return Err(Error::transport(format!(
                "the MPI library supports only {threading:?} threading, stoker needs Serialized"
            )));
        }
        let world = universe.world();
        let rank = usize::try_from(world.rank()).expect("an MPI rank is not negative");
        let size = usize::try_from(world.size()).expect("an MPI world size is positive");
        // MPI_COMM_WORLD lives as long as MPI; MPI ends when the process exits.
        std::mem::forget(universe);
        // SAFETY: registering a plain `extern "C"` function that takes nothing.
        if unsafe { atexit(finalize_at_exit) } != 0 {
            return Err(Error::transport("registering MPI's finalization at exit failed"));
        }
        Ok(MpiComm { world, rank, size, _not_sync: PhantomData })
    }

    /// This process's rank in the world, `0..size()`.
    pub(crate) fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks in the world.
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// Element-wise sums over all ranks in one round trip: the `f32`s of `send` into `recv` (the
    /// gradients: one `MPI_Allreduce`, one per 2^30 elements beyond that) and, overlapped with
    /// them (`MPI_Iallreduce`), the `f64`s of `words_send` into `words` (the control words,
    /// summed as `f64`s: a count or a value only one rank contributes arrives exact).
    ///
    /// Every rank must call it, with the same lengths, in the same order relative to its other
    /// collective calls; an MPI error aborts the world (MPI's default error handler).
    ///
    /// # Panics
    ///
    /// When `send` and `recv`, or `words_send` and `words`, differ in length.
    pub(crate) fn all_reduce_sums(
        &self,
        (send, recv): (&[f32], &mut [f32]),
        (words_send, words): (&[f64], &mut [f64]),
    ) {
        check_lengths(send, recv);
        check_lengths(words_send, words);
        assert!(
            words.len() <= MAX_COUNT,
            "all_reduce_sums: {} words are more than one MPI call takes",
            words.len()
        );
        mpi::request::scope(|scope| {
            let words =
                self.world.immediate_all_reduce_into(scope, words_send, words, SystemOperation::sum());
            self.all_reduce_floats(send, recv);
            words.wait();
        });
    }

    /// The words' sum alone, in the non-blocking call [`all_reduce_sums`](Self::all_reduce_sums)
    /// makes for them (a blocking call would not match it), waited for. A rank without gradients
    /// sends its words first and learns from their sum what else it must add, with
    /// [`all_reduce_floats`](Self::all_reduce_floats): together they match another rank's
    /// `all_reduce_sums` whose `f32`s are as many.
    ///
    /// # Panics
    ///
    /// When `send` and `recv` differ in length, or hold more than 2^30 elements.
    pub(crate) fn all_reduce_words_first(&self, send: &[f64], recv: &mut [f64]) {
        check_lengths(send, recv);
        assert!(
            send.len() <= MAX_COUNT,
            "all_reduce_words_first: {} words are more than one MPI call takes",
            send.len()
        );
        mpi::request::scope(|scope| {
            self.world.immediate_all_reduce_into(scope, send, recv, SystemOperation::sum()).wait();
        });
    }

    /// `send` summed into `recv` over the ranks, in the blocking calls of at most [`MAX_COUNT`]
    /// elements each that [`all_reduce_sums`](Self::all_reduce_sums) makes for its `f32`s.
    ///
    /// # Panics
    ///
    /// When `send` and `recv` differ in length.
    pub(crate) fn all_reduce_floats(&self, send: &[f32], recv: &mut [f32]) {
        check_lengths(send, recv);
        FLOATS_REDUCED.fetch_add(send.len() as u64, Ordering::Relaxed);
        for (send, recv) in send.chunks(MAX_COUNT).zip(recv.chunks_mut(MAX_COUNT)) {
            self.world.all_reduce_into(send, recv, SystemOperation::sum());
        }
    }

    /// Element-wise sum over all ranks of `send` into `recv`, `f64`s only: the small exchanges
    /// of a fixed length (the layout every rank checks before the first large one).
    ///
    /// # Panics
    ///
    /// When `send` and `recv` differ in length, or hold more than 2^30 elements.
    pub(crate) fn all_reduce_words(&self, send: &[f64], recv: &mut [f64]) {
        check_lengths(send, recv);
        assert!(
            send.len() <= MAX_COUNT,
            "all_reduce_words: {} words are more than one MPI call takes",
            send.len()
        );
        self.world.all_reduce_into(send, recv, SystemOperation::sum());
    }

    /// End every rank of the world now (`MPI_Abort`) with `code`, after logging `message` as an
    /// error (flushed: the process ends without unwinding). `mpirun` then kills the other ranks
    /// and exits with `code`.
    pub(crate) fn abort(&self, code: i32, message: &str) -> ! {
        crate::logging::error!("{message}");
        crate::logging::flush();
        crate::signal::kill_helpers();
        self.world.abort(code)
    }
}

unsafe extern "C" {
    /// The C library's `atexit` (standard C, on every platform MPI runs on).
    fn atexit(function: extern "C" fn()) -> std::ffi::c_int;
}

/// `MPI_Finalize`, once, when the process exits (unless MPI already ended, by an abort).
extern "C" fn finalize_at_exit() {
    if !mpi::is_finalized() {
        // SAFETY: MPI was initialized by `MpiComm::init`, and nothing runs MPI calls at exit.
        unsafe {
            mpi::ffi::MPI_Finalize();
        }
    }
}

/// Panics unless the two buffers of an all-reduce have the same length (rsmpi does not check: MPI
/// would write `send.len()` elements into `recv` whatever its length).
fn check_lengths<T>(send: &[T], recv: &[T]) {
    assert_eq!(
        send.len(),
        recv.len(),
        "all_reduce_sums: the send buffer holds {} {} elements, the receive buffer {}",
        send.len(),
        std::any::type_name::<T>(),
        recv.len()
    );
}

impl std::fmt::Debug for MpiComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiComm").field("rank", &self.rank).field("size", &self.size).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole life of MPI in one test (MPI starts once per process): a world of one rank when
    /// the test binary runs alone (MPI's singleton start), of N under `mpirun -n N`.
    #[test]
    fn one_world_per_process_sums_over_the_ranks() {
        let comm = MpiComm::init().expect("MPI starts");
        assert!(comm.rank() < comm.size());
        let again = MpiComm::init().expect_err("a second start fails");
        assert!(again.to_string().contains("already initialized"), "{again}");

        let len = 1000;
        let send: Vec<f32> = (0..len).map(|i| (comm.rank() + 1) as f32 * i as f32).collect();
        let mut recv = vec![f32::NAN; len];
        let words_send = [
            1.0,
            (comm.rank() as f64 + 1.0) * 0.1,
            if comm.rank() == 0 { 12_345_678.901_234_5 } else { 0.0 },
        ];
        let mut words = [f64::NAN; 3];
        comm.all_reduce_sums((&send, &mut recv), (&words_send, &mut words));
        let ranks = (comm.size() * (comm.size() + 1) / 2) as f32;
        for (i, v) in recv.iter().enumerate() {
            assert_eq!(*v, ranks * i as f32);
        }
        assert_eq!(words[0], comm.size() as f64, "a count arrives exact");
        assert!((words[1] - f64::from(ranks) * 0.1).abs() < 1e-12, "values are summed as f64s: {}", words[1]);
        assert_eq!(words[2], 12_345_678.901_234_5, "a value only the chief gives arrives bit for bit");
        let mut again = [0.0; 3];
        comm.all_reduce_words(&words_send, &mut again);
        assert_eq!(again, words);
        drop(comm);
        assert!(!mpi::is_finalized(), "MPI ends when the process exits, not with the comm");
        assert!(MpiComm::init().is_err(), "MPI cannot start again in this process");
    }

    #[test]
    #[should_panic(expected = "all_reduce_sums: the send buffer holds 2 f32 elements")]
    fn different_lengths_panic_before_any_mpi_call() {
        // No MPI call happens: the length check comes first, so this needs no MpiComm of its own.
        check_lengths(&[0.0f32; 2], &[0.0; 3]);
    }
}
