//! The [`Recorder`]'s smoothed loss (fastai's `recorder.losses`) and fastai's `plot_lr_find`
//! (fastai/callback/schedule.py) over it.

use std::path::Path;

use super::super::lr_suggest::SmoothLoss;
use super::super::plot::{Mark, Plot, Series, XAxis, write_plot};
use super::{Recorder, TRAIN_COLOR};
use crate::error::Result;

/// The points fastai's `plot_lr_find(skip_end=5)` leaves out at the end (where the loss
/// diverges).
pub const LR_FIND_SKIP_END: usize = 5;

impl Recorder {
    /// The loss of every step smoothed as fastai's `Recorder` smooths it, as
    /// `(global_step, smoothed)`: fastai's `recorder.losses`, `AvgSmoothLoss(beta=0.98)` from the
    /// first step recorded (an exponential moving average from 0, debiased by `1 - 0.98^count`).
    /// [`losses`](Self::losses) are the raw ones it is computed from, which the checkpoints keep,
    /// so a resumed run's smoothed loss is the uninterrupted run's.
    pub fn smooth_losses(&self) -> Vec<(u64, f64)> {
        let mut smooth = SmoothLoss::new();
        self.losses.iter().map(|&(step, loss)| (step, smooth.add(loss))).collect()
    }

    /// The learning rate and the smoothed loss of every step whose loss arrived: fastai's
    /// `recorder.lrs` and `recorder.losses`, the loss smoothed as fastai's `Recorder` smooths it
    /// (`AvgSmoothLoss(beta=0.98)`, from the first step recorded). After a sweep of
    /// [`LrFinder`](crate::track::LrFinder) in the same run they are the finder's
    /// [`points`](crate::track::LrFinder::points).
    pub fn lr_find_points(&self) -> Vec<(f64, f64)> {
        let mut smooth = SmoothLoss::new();
        self.losses
            .iter()
            .filter_map(|&(step, loss)| {
                let at = self.lrs.binary_search_by_key(&step, |&(s, _)| s).ok()?;
                Some((self.lrs[at].1, smooth.add(loss)))
            })
            .collect()
    }

    /// Plot [`lr_find_points`](Self::lr_find_points), the smoothed loss against the learning
    /// rate on a logarithmic scale, without the last [`LR_FIND_SKIP_END`] (5) points, to a PNG
    /// file at `path`: fastai's `recorder.plot_lr_find()`.
    pub fn plot_lr_find(&self, path: impl AsRef<Path>) -> Result<()> {
        self.plot_lr_find_skipping(path, 0, LR_FIND_SKIP_END)
    }

    /// [`plot_lr_find`](Self::plot_lr_find) without the first `skip_start` points (fastai v1's
    /// `recorder.plot(skip_start=10, skip_end=5)`; v2 has only `skip_end`) and the last `skip_end`
    /// (`plot_lr_find(skip_end=0)` keeps them all). The smoothing runs over every point first, as
    /// fastai's does: the points shown keep the values they had.
    pub fn plot_lr_find_skipping(
        &self,
        path: impl AsRef<Path>,
        skip_start: usize,
        skip_end: usize,
    ) -> Result<()> {
        plot_lr_find_skipping(path.as_ref(), &self.lr_find_points(), &[], skip_start, skip_end)
    }
}

/// fastai's `plot_lr_find(skip_end=5)`: the loss against the learning rate, without the last 5
/// points, with `marks`; the curve ends at the first loss that is not a number (a NaN smoothed
/// loss stays NaN: matplotlib draws nothing from there).
pub(crate) fn plot_lr_find(path: &Path, points: &[(f64, f64)], marks: &[Mark<'_>]) -> Result<()> {
    plot_lr_find_skipping(path, points, marks, 0, LR_FIND_SKIP_END)
}

/// The points of `points` that `plot_lr_find` shows: without the first `skip_start` and the
/// last `skip_end`, and up to the first loss that is not a number.
fn shown(points: &[(f64, f64)], skip_start: usize, skip_end: usize) -> &[(f64, f64)] {
    let end = points.len().saturating_sub(skip_end);
    let shown = &points[skip_start.min(end)..end];
    &shown[..shown.iter().position(|p| p.1.is_nan()).unwrap_or(shown.len())]
}

fn plot_lr_find_skipping(
    path: &Path,
    points: &[(f64, f64)],
    marks: &[Mark<'_>],
    skip_start: usize,
    skip_end: usize,
) -> Result<()> {
    let plot = Plot {
        title: "Loss against the learning rate",
        left: Series { points: shown(points, skip_start, skip_end), color: TRAIN_COLOR, label: "loss" },
        right: None,
        x: XAxis::Log("learning rate"),
        marks,
    };
    write_plot(path, &plot)
}

#[cfg(test)]
mod tests;
