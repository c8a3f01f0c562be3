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

/// The scalars of one epoch: the last value of each scalar put during the epoch, with the
/// counters when it ended (what the scalar printer prints and the CSV file holds; `stats.json`
/// holds [`StatsRow`]s).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EpochStats {
    /// The epoch (1-based).
    pub epoch_num: u64,
    /// The global step when the epoch ended.
    pub global_step: u64,
    /// Each scalar's last value in the epoch, by name.
    pub scalars: std::collections::BTreeMap<String, f64>,
}

/// One row of `stats.json`, in tensorpack's layout (its `JSONWriter`): the last value of each
/// scalar put since the previous row, with the counters when the row was made.
///
/// The trainer makes a row after `before_train`, after the callbacks' `trigger_step` at every
/// step where some scalar was put (except the last step of an epoch, whose scalars join the next
/// row), after `trigger_epoch`, and after `after_train`; a row is made only when some scalar was
/// put. A row made at the same `epoch_num` and `global_step` as the row before it (the scalars
/// `after_train` puts, those a resumed run puts in `before_train`) is merged into that one: the
/// file stays grouped by global step, each row's values the last ones put.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StatsRow {
    /// The trainer's `epoch_num` when the row was made (1-based; in `before_train`, the epoch
    /// before the run's first).
    pub epoch_num: u64,
    /// The trainer's `global_step` when the row was made.
    pub global_step: u64,
    /// Each scalar's last value since the previous row, by name.
    pub scalars: std::collections::BTreeMap<String, f64>,
}

impl StatsRow {
    /// Whether `other` belongs to the same row: made at the same epoch and global step.
    pub fn same_moment(&self, other: &StatsRow) -> bool {
        self.epoch_num == other.epoch_num && self.global_step == other.global_step
    }

    /// Append `row` to `rows`, merged into the last row when made at the same epoch and global
    /// step (its values replace that row's values of the same name). Returns whether it merged.
    pub fn append(rows: &mut Vec<StatsRow>, row: StatsRow) -> bool {
        match rows.last_mut() {
            Some(last) if last.same_moment(&row) => {
                last.scalars.extend(row.scalars);
                true
            }
            _ => {
                rows.push(row);
                false
            }
        }
    }
}
