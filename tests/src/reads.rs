//! Device-to-host reads counted where they happen, not where the trainer says it makes them.
//!
//! burn 0.22's `Tensor` is fixed to its `Dispatch` backend, a closed enum of burn's own backends:
//! a counting wrapper backend cannot be slipped under a `Tensor`. What every synchronous read has
//! in common is its last step: `Tensor::into_data` / `to_data` / `into_scalar` (any kind: float,
//! int, bool), `Transaction::execute`, and the fallbacks inside burn's own operations (a sort
//! without a device kernel, a transfer between backends) all block on the read's future with
//! `cubecl_environment::future::block_on` (through `burn_std::reader::try_read_sync` or directly).
//! With cubecl-environment's `tracing` feature (this crate turns it on), that function opens a
//! `tracing` span each time it is called, and [`count_reads`] counts those spans on the calling
//! thread. The count therefore sees every read made on the thread, by the trainer, its callbacks,
//! validation, the NaN check or a checkpoint's writer, whoever made it.
//!
//! What it cannot see: a read made with `Tensor::into_data_async` and polled by an executor other
//! than burn's `block_on` (nothing in stoker does), and reads made on another thread (the ranks of
//! a threads world each run on their own thread).

use std::cell::Cell;
use std::sync::Once;

use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};

thread_local! {
    /// The reads counted on this thread, while a [`count_reads`] is running on it.
    static READS: Cell<Option<u64>> = const { Cell::new(None) };
}

/// Whether `metadata` is the span of cubecl-environment's `block_on`, where every synchronous
/// read of a tensor ends.
fn is_read(metadata: &Metadata<'_>) -> bool {
    metadata.name() == "block_on" && metadata.target().starts_with("cubecl_environment::future")
}

/// The process-wide `tracing` subscriber: interested in the read span only, it counts each one
/// opened on a thread inside [`count_reads`].
struct ReadCounter;

impl Subscriber for ReadCounter {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        if is_read(metadata) { Interest::always() } else { Interest::never() }
    }

    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        is_read(metadata)
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        if is_read(span.metadata()) {
            READS.with(|reads| reads.set(reads.get().map(|n| n + 1)));
        }
        Id::from_u64(1)
    }

    fn record(&self, _span: &Id, _values: &Record<'_>) {}

    fn record_follows_from(&self, _span: &Id, _follows: &Id) {}

    fn event(&self, _event: &Event<'_>) {}

    fn enter(&self, _span: &Id) {}

    fn exit(&self, _span: &Id) {}
}

/// Installs [`ReadCounter`] as the process's `tracing` subscriber, once, and checks that burn's
/// read path is instrumented: one read of a tensor must count as one.
fn install() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        tracing::subscriber::set_global_default(ReadCounter).expect(
            "stoker_tests::reads counts reads with the process's tracing subscriber, and another one is installed",
        );
    });
}

/// Runs `f` and returns what it returned with the number of device-to-host reads made on this
/// thread meanwhile (see the module's documentation for what counts).
///
/// Panics if burn's read path is not instrumented in this build (a read of a test tensor must
/// count as exactly one), so that a count of 0 always means "no read".
pub fn count_reads<R>(f: impl FnOnce() -> R) -> (R, u64) {
    install();
    let probe = burn::tensor::Tensor::<1>::from_floats([1.0], &burn_stoker::device::cpu());
    let ((), probe_reads) = count_on_this_thread(|| {
        probe.into_data();
    });
    assert_eq!(
        probe_reads, 1,
        "one read of a tensor counted as {probe_reads}: burn's read path (cubecl-environment's `block_on`) is not instrumented as this counter expects; is cubecl-environment's `tracing` feature on, and tracing's trace level compiled in?"
    );
    count_on_this_thread(f)
}

fn count_on_this_thread<R>(f: impl FnOnce() -> R) -> (R, u64) {
    /// Stops counting on this thread, also when `f` panics.
    struct Counting;
    impl Drop for Counting {
        fn drop(&mut self) {
            READS.with(|reads| reads.set(None));
        }
    }
    let outer = READS.with(|reads| reads.replace(Some(0)));
    assert!(outer.is_none(), "count_reads does not nest");
    let counting = Counting;
    let result = f();
    let reads = READS.with(|reads| reads.get()).expect("set above");
    drop(counting);
    (result, reads)
}
