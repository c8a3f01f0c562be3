//! fastai's [`ShortEpochCallback`]: train (and validate) on a small part of each epoch.

use crate::callback::{Callback, Context};
use crate::error::{Cancel, Error, Result};
use crate::fetch::Fetched;

/// Fits only a part of each epoch, then cancels the rest: fastai's
/// `ShortEpochCallback(pct=0.01, short_valid=True)`, for trying a pipeline end to end quickly.
///
/// fastai's rule, after each batch of 0-based index `iter` among the `n_iter` batches of the
/// epoch (or of the validation pass): go on while `iter / n_iter < pct`; at the first batch where
/// it is not, cancel. So the batches run are those up to the first index that reaches `pct` of
/// the epoch, that one included (`pct = 0.25` of 10 batches: indices 0 to 3, four batches;
/// `pct = 0.2`: three, as 2 / 10 reaches 0.2).
///
/// - **Training**: at `after_step`, `Flow::CancelTrain` (fastai's `CancelTrainException`): the
///   callbacks after this one miss that step's `after_step` and `trigger_step`, every callback
///   receives `after_cancel_train`, then the epoch ends as usual (`after_epoch`, `trigger_epoch`,
///   where it is validated). The step counts.
/// - **Validation**, with `short_valid` (the default): an
///   [`InferenceRunner`](crate::inference::InferenceRunner)'s pass stops by the same rule over the
///   validation batches and puts the results of the batches it ran; it is then cancelled as with
///   `Flow::CancelValid` (fastai's `CancelValidException`): every callback receives
///   `after_cancel_validate`, then `after_validate`. A validating callback of one's own runs its
///   whole pass.
///
/// `n_iter` is the trainer's steps per epoch and the validation data's number of batches (a
/// validation set of unknown length runs whole). Cancels are fastai's, so this is refused in
/// data-parallel training, as every cancel is.
///
/// ```
/// use burn_stoker::stop::ShortEpochCallback;
///
/// // fastai: learn.fit(1, cbs=ShortEpochCallback(pct=0.1, short_valid=False))
/// let short = ShortEpochCallback::new().pct(0.1).short_valid(false);
/// # let _ = short;
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ShortEpochCallback {
    pct: f64,
    short_valid: bool,
}
crate::kind::kind!(ShortEpochCallback);

impl Default for ShortEpochCallback {
    fn default() -> Self {
        ShortEpochCallback { pct: 0.01, short_valid: true }
    }
}

impl ShortEpochCallback {
    /// fastai's defaults: `pct = 0.01`, `short_valid = true`.
    pub fn new() -> Self {
        ShortEpochCallback::default()
    }
    /// The share of each epoch to train (0.01 by default), from 0 to 1.
    pub fn pct(mut self, pct: f64) -> Self {
        self.pct = pct;
        self
    }
    /// Whether validation passes are cut by the same rule (yes by default).
    pub fn short_valid(mut self, short_valid: bool) -> Self {
        self.short_valid = short_valid;
        self
    }
}

/// fastai's `ShortEpochCallback.after_batch`: whether the batch of 0-based index `iter` among
/// `n_iter` ends the epoch (or the pass), `iter / n_iter >= pct`. Never when `n_iter` is unknown.
pub(crate) fn short_epoch_ends(pct: f64, iter: u64, n_iter: Option<u64>) -> bool {
    n_iter.is_some_and(|n| n > 0 && iter as f64 / n as f64 >= pct)
}

impl<M> Callback<M> for ShortEpochCallback {
    fn setup(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        if !(0.0..=1.0).contains(&self.pct) {
            return Err(Error::invalid(format!(
                "ShortEpochCallback: pct must be between 0 and 1, got {}",
                self.pct
            )));
        }
        Ok(())
    }

    fn after_step(&mut self, ctx: &mut Context<'_, M>, _values: &Fetched<'_>) -> Result<()> {
        let n_iter = Some(ctx.counters().steps_per_epoch);
        if short_epoch_ends(self.pct, ctx.step_index(), n_iter) {
            return ctx.cancel(Cancel::Train);
        }
        Ok(())
    }

    fn before_validate(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if self.short_valid {
            ctx.shorten_validation(self.pct);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fastais_rule_ends_at_the_first_index_that_reaches_pct() {
        let batches =
            |pct: f64, n: u64| (0..n).find(|&i| short_epoch_ends(pct, i, Some(n))).map_or(n, |i| i + 1);
        assert_eq!(batches(0.25, 10), 4);
        assert_eq!(batches(0.2, 10), 3);
        assert_eq!(batches(0.01, 10), 2);
        assert_eq!(batches(0.01, 100), 2, "1 / 100 reaches 0.01");
        assert_eq!(batches(0.01, 1000), 11);
        assert_eq!(batches(0.0, 10), 1);
        assert_eq!(batches(1.0, 10), 10, "never: 9 / 10 < 1");
        assert!(!short_epoch_ends(0.0, 0, None), "an unknown length runs whole");
    }
}
