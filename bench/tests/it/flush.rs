//! `compare` flushes subnormals on the main thread and, with the `rayon` feature, on every thread
//! of rayon's global pool, where burn's CPU kernels then run (a test binary of its own: it starts
//! the global pool).

use std::hint::black_box;

use stoker_bench::{flush_denormals, flush_denormals_everywhere};

const TINY: f32 = 1e-39;

#[test]
fn subnormals_become_zero_once_flushed() {
    assert!(TINY.is_subnormal());
    // Each in a thread of its own: the setting belongs to the thread.
    let kept = std::thread::spawn(|| black_box(TINY) * black_box(1.0_f32)).join().unwrap();
    assert_eq!(kept, TINY, "without flushing, a subnormal survives a multiplication");
    let flushed = std::thread::spawn(|| {
        assert!(flush_denormals(), "this architecture can flush subnormals");
        black_box(TINY) * black_box(1.0_f32)
    })
    .join()
    .unwrap();
    assert_eq!(flushed, 0.0, "flushed, a subnormal operand reads as zero");
}

/// Without the `rayon` feature burn's CPU kernels run on the calling thread, which is flushed.
#[cfg(not(feature = "rayon"))]
#[test]
fn the_calling_thread_flushes_subnormals() {
    std::thread::spawn(|| {
        flush_denormals_everywhere().expect("this architecture can flush subnormals");
        assert_eq!(black_box(TINY) * black_box(1.0_f32), 0.0, "the calling thread flushes");
    })
    .join()
    .unwrap();
}

/// With the `rayon` feature (`cargo test -p stoker-bench --features rayon --test it flush::`).
#[cfg(feature = "rayon")]
#[test]
fn every_thread_of_the_pool_flushes_subnormals() {
    std::thread::spawn(|| {
        flush_denormals_everywhere().expect("nothing started the global pool before");
        assert_eq!(black_box(TINY) * black_box(1.0_f32), 0.0, "the calling thread flushes");
        let results: Vec<f32> = rayon::broadcast(|_| black_box(TINY) * black_box(1.0_f32));
        assert_eq!(results.len(), rayon::current_num_threads());
        assert!(results.iter().all(|&x| x == 0.0), "every pool thread flushes: {results:?}");
        assert!(flush_denormals_everywhere().is_err(), "a second start is an error, not a silent no-op");
    })
    .join()
    .unwrap();
}
