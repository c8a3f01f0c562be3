//! What a monitor receives: one record per `put_*` call, stamped with the trainer's counters.

use std::sync::Arc;

/// An image handed to [`Monitors::put_image`](super::Monitors::put_image): 8-bit pixels, row-major,
/// `channels` interleaved values per pixel (1 = grey, 3 = RGB, 4 = RGBA).
#[derive(Debug, Clone, PartialEq)]
pub struct Image {
    /// Height in pixels.
    pub height: u32,
    /// Width in pixels.
    pub width: u32,
    /// Values per pixel: 1 (grey), 3 (RGB) or 4 (RGBA).
    pub channels: u8,
    /// `height * width * channels` bytes, row after row.
    pub pixels: Vec<u8>,
}

/// A histogram in TensorBoard's layout: `buckets[i]` values fell in `(limits[i-1], limits[i]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    /// Smallest value seen.
    pub min: f64,
    /// Largest value seen.
    pub max: f64,
    /// Number of values.
    pub num: f64,
    /// Sum of the values.
    pub sum: f64,
    /// Sum of the squares of the values.
    pub sum_squares: f64,
    /// Right edge of each bucket, increasing.
    pub bucket_limits: Vec<f64>,
    /// Count in each bucket, as many as `bucket_limits`.
    pub bucket_counts: Vec<f64>,
}

/// The value of a [`Record`].
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A scalar (`put_scalar`).
    Scalar(f64),
    /// An image (`put_image`).
    Image(Arc<Image>),
    /// A histogram (`put_histogram`).
    Histogram(Arc<Histogram>),
    /// A text (`put_text`).
    Text(Arc<str>),
}

/// One monitored datum: a name, a value, and when it was put.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// The name (TensorBoard's tag), e.g. `"validation_error"`.
    pub name: Arc<str>,
    /// The value.
    pub value: Value,
    /// The trainer's `global_step` when it was put.
    pub global_step: u64,
    /// The trainer's `epoch_num` when it was put.
    pub epoch_num: u64,
    /// Seconds since the Unix epoch when it was put.
    pub wall_time: f64,
}

/// The scalars of one epoch, as a line of `stats.json`: the last value of each scalar put during
/// the epoch, with the counters when it ended.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EpochStats {
    /// The epoch (1-based).
    pub epoch_num: u64,
    /// The global step when the epoch ended.
    pub global_step: u64,
    /// Each scalar's last value in the epoch, by name.
    pub scalars: std::collections::BTreeMap<String, f64>,
}
