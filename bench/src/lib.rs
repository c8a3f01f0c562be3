//! Shared pieces of stoker's benchmarks: the generated callbacks (see `tools/generate.py`) and
//! small statistics helpers.

pub mod generated;

/// The median of `values` (the upper one of an even count).
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
