//! fastai's suggestions from a learning-rate sweep (`callback/schedule.py`): `valley` (its
//! default), `slide`, `minimum` and `steep`, and the smoothed loss they read (`AvgSmoothLoss`).

/// fastai's `AvgSmoothLoss(beta=0.98)`, the `Recorder`'s smoothed loss: an exponential moving
/// average of the losses, `val = lerp(loss, val, beta)` from 0, debiased by `1 - beta^count`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct SmoothLoss {
    count: i32,
    val: f64,
}

/// fastai's `beta` for the smoothed loss.
pub(crate) const SMOOTH_BETA: f64 = 0.98;

impl SmoothLoss {
    /// Nothing seen yet.
    pub(crate) fn new() -> Self {
        SmoothLoss { count: 0, val: 0.0 }
    }
    /// Add a loss; the smoothed value after it.
    pub(crate) fn add(&mut self, loss: f64) -> f64 {
        self.count += 1;
        // torch.lerp(loss, val, beta) = loss + beta * (val - loss)
        self.val = loss + SMOOTH_BETA * (self.val - loss);
        self.val / (1.0 - SMOOTH_BETA.powi(self.count))
    }
}

/// How to suggest a learning rate from a sweep's losses: fastai's `SuggestionMethod`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suggestion {
    /// fastai's default, `valley`: the longest run of decreasing losses (a longest decreasing
    /// subsequence), and the learning rate half of its length past its first third.
    Valley,
    /// `slide(lr_diff=15, thresh=0.005)`: from the end, slide a window of 15 points to the left
    /// until the loss's gradient at its two ends differs by at most 0.005.
    Slide,
    /// `minimum`: a tenth of the learning rate of the lowest loss.
    Minimum,
    /// `steep`: the learning rate where the loss falls fastest against its logarithm.
    Steep,
}

/// A suggested learning rate, and the point fastai marks on the plot for it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SuggestedLr {
    /// The suggested learning rate.
    pub lr: f64,
    /// The point marked, `(learning rate, loss)` (for `Minimum`, the minimum itself, ten times
    /// the suggestion).
    pub point: (f64, f64),
}

impl Suggestion {
    /// Every method, in fastai's order.
    pub const ALL: [Suggestion; 4] =
        [Suggestion::Valley, Suggestion::Slide, Suggestion::Minimum, Suggestion::Steep];

    /// fastai's name of the method.
    pub fn name(self) -> &'static str {
        match self {
            Suggestion::Valley => "valley",
            Suggestion::Slide => "slide",
            Suggestion::Minimum => "minimum",
            Suggestion::Steep => "steep",
        }
    }

    /// The suggestion from `lrs` and their (smoothed) `losses`, as fastai's function computes it
    /// on the points it is given; `None` when there are too few (fewer than 2, or than 16 for
    /// `Slide`, where fastai's own fails).
    pub fn suggest(self, lrs: &[f64], losses: &[f64]) -> Option<SuggestedLr> {
        let n = lrs.len().min(losses.len());
        let (lrs, losses) = (&lrs[..n], &losses[..n]);
        match self {
            _ if n < 2 => None,
            Suggestion::Valley => Some(valley(lrs, losses)),
            Suggestion::Slide => slide(lrs, losses),
            Suggestion::Minimum => {
                let i = arg_min(losses.iter().copied());
                Some(SuggestedLr { lr: lrs[i] / 10.0, point: (lrs[i], losses[i]) })
            }
            Suggestion::Steep => {
                let grads = (1..n).map(|i| (losses[i] - losses[i - 1]) / (lrs[i].ln() - lrs[i - 1].ln()));
                let i = arg_min(grads);
                Some(SuggestedLr { lr: lrs[i], point: (lrs[i], losses[i]) })
            }
        }
    }
}

/// The index of the first smallest value (torch's `argmin`; NaN never smallest).
fn arg_min(values: impl Iterator<Item = f64>) -> usize {
    let mut best = (0, f64::INFINITY);
    for (i, v) in values.enumerate() {
        if v < best.1 || i == 0 {
            best = (i, v);
        }
    }
    best.0
}

/// fastai's `valley`, with its indexing as written: the start it computes is one before the
/// valley's first point, and an index of -1 reads the last point (Python's negative index).
fn valley(lrs: &[f64], losses: &[f64]) -> SuggestedLr {
    let n = losses.len();
    let (mut max_start, mut max_end) = (0i64, 0usize);
    let mut lds = vec![1i64; n];
    for i in 1..n {
        for j in 0..i {
            if losses[i] < losses[j] && lds[i] < lds[j] + 1 {
                lds[i] = lds[j] + 1;
            }
            if lds[max_end] < lds[i] {
                max_end = i;
                max_start = max_end as i64 - lds[max_end];
            }
        }
    }
    let sections = (max_end as i64 - max_start) as f64 / 3.0;
    let idx = max_start + sections as i64 + (sections / 2.0) as i64;
    let idx = if idx < 0 { (n as i64 + idx) as usize } else { idx as usize };
    SuggestedLr { lr: lrs[idx], point: (lrs[idx], losses[idx]) }
}

/// fastai's `slide(lr_diff=15, thresh=0.005, adjust_value=1)`, on numpy's `gradient` (central
/// differences inside, one-sided at the ends) and `interp`.
fn slide(lrs: &[f64], losses: &[f64]) -> Option<SuggestedLr> {
    const LR_DIFF: usize = 15;
    const THRESH: f64 = 0.005;
    let n = losses.len();
    if n < LR_DIFF + 1 {
        return None;
    }
    let grad = |i: usize| match i {
        0 => losses[1] - losses[0],
        _ if i == n - 1 => losses[n - 1] - losses[n - 2],
        _ => (losses[i + 1] - losses[i - 1]) / 2.0,
    };
    // Python's r_idx = -1 and l_idx = r_idx - lr_diff, as positions from the start.
    let (mut r, mut l) = (n as i64 - 1, n as i64 - 1 - LR_DIFF as i64);
    let mut local_min_lr = lrs[l as usize];
    while l >= 0 && (grad(r as usize) - grad(l as usize)).abs() > THRESH {
        local_min_lr = lrs[l as usize];
        r -= 1;
        l -= 1;
    }
    let loss = interp(local_min_lr.log10(), lrs, losses);
    Some(SuggestedLr { lr: local_min_lr, point: (local_min_lr, loss) })
}

/// numpy's `interp(log10(x), log10(lrs), losses)`, at `at` = `log10(x)`.
fn interp(at: f64, lrs: &[f64], losses: &[f64]) -> f64 {
    let xs: Vec<f64> = lrs.iter().map(|lr| lr.log10()).collect();
    let last = xs.len() - 1;
    if at <= xs[0] {
        return losses[0];
    }
    if at >= xs[last] {
        return losses[last];
    }
    let j = xs.iter().rposition(|&x| x <= at).unwrap_or(0).min(last - 1);
    let t = (at - xs[j]) / (xs[j + 1] - xs[j]);
    losses[j] + t * (losses[j + 1] - losses[j])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sweep of 40 learning rates from 1e-7 towards 10, and a loss that falls, flattens and
    /// rises.
    fn sweep() -> (Vec<f64>, Vec<f64>) {
        let lrs = (0..40).map(|i| 1e-7 * (10.0f64 / 1e-7).powf(f64::from(i) / 40.0)).collect();
        let losses = (0..40)
            .map(|i| {
                let i = f64::from(i);
                1.0 - 0.5 / (1.0 + (-(i - 15.0) / 2.0).exp()) + 0.002 * (i - 32.0).max(0.0).powi(2)
            })
            .collect();
        (lrs, losses)
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * b.abs().max(1e-300)
    }

    /// The values fastai's four functions (`callback/schedule.py`, run with numpy in place of
    /// torch) return on `sweep()`.
    #[test]
    fn each_method_gives_fastais_suggestion() {
        let (lrs, losses) = sweep();
        let fastai = [
            (Suggestion::Valley, 9.999999999999999e-05, (9.999999999999999e-05, 0.75)),
            (Suggestion::Slide, 6.309573444801932e-06, (6.309573444801932e-06, 0.9762870634112166)),
            (Suggestion::Minimum, 0.025118864315095822, (0.25118864315095824, 0.5001017134890275)),
            (Suggestion::Steep, 6.309573444801929e-05, (6.309573444801929e-05, 0.8112296656009272)),
        ];
        for (method, lr, (x, y)) in fastai {
            let got = method.suggest(&lrs, &losses).unwrap();
            assert!(
                close(got.lr, lr) && close(got.point.0, x) && close(got.point.1, y),
                "{method:?}: {got:?}"
            );
        }
    }

    #[test]
    fn valley_keeps_fastais_indexing() {
        // By hand: the longest decreasing run is 5, 4, 3, 2, 1 (indices 0 to 4, length 5); fastai's
        // start is 4 - 5 = -1, a third of 5 is 1.67: -1 + 1 + 0 = index 0.
        let lrs = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0];
        let got = Suggestion::Valley.suggest(&lrs, &[5.0, 4.0, 3.0, 2.0, 1.0, 2.0, 3.0]).unwrap();
        assert_eq!(got, SuggestedLr { lr: 1.0, point: (1.0, 5.0) });
        // A run of 2 (2, 1): start -1, a third of 2 is 0.67: -1 + 0 + 0 = -1, Python's last point.
        let got = Suggestion::Valley.suggest(&lrs[..4], &[2.0, 1.0, 3.0, 4.0]).unwrap();
        assert_eq!(got, SuggestedLr { lr: 4.0, point: (4.0, 4.0) });
    }

    #[test]
    fn too_few_points_suggest_nothing() {
        assert_eq!(Suggestion::Valley.suggest(&[1.0], &[1.0]), None);
        let (lrs, losses) = sweep();
        assert_eq!(Suggestion::Slide.suggest(&lrs[..15], &losses[..15]), None);
        assert!(Suggestion::Slide.suggest(&lrs[..16], &losses[..16]).is_some());
    }

    #[test]
    fn the_smoothed_loss_is_fastais_debiased_average() {
        // By hand, beta 0.98: val 0.02 -> 1.0; val 0.8 + 0.98 (0.02 - 0.8) = 0.0356 -> 0.0356 / 0.0396.
        let mut smooth = SmoothLoss::new();
        assert!((smooth.add(1.0) - 1.0).abs() < 1e-15);
        assert!((smooth.add(0.8) - 0.0356 / 0.0396).abs() < 1e-14);
    }
}
