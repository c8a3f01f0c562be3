//! neon's `HistCallback` in the callback data: the histograms of the weights and biases, binned as neon's
//! backends bin them (`Tensor.hist`: 64 bins of `rint(log2(|x|))` from -48).

use burn::module::Module;

use crate::monitor::hist::selected_parameters;

/// neon's `be.hist_bins`.
pub(super) const BINS: usize = 64;
/// neon's `be.hist_offset`: the lower edge of the second bin is `offset + 1`.
pub(super) const OFFSET: i32 = -48;

/// What `hist/` holds: when a column is written, and which parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct HistSetting {
    /// neon's `plot_per_mini`: a column per minibatch (`time_markers = "minibatch"`), else per
    /// epoch.
    pub(super) per_minibatch: bool,
    /// neon's `filter_key`: the parameters whose path contains one of these.
    pub(super) filter: Vec<String>,
}

impl HistSetting {
    /// The histogram of every selected parameter of `model`, by name (one transfer).
    pub(super) fn columns<M: Module>(&self, model: &M) -> Vec<(String, [i32; BINS])> {
        selected_parameters(model, Some(&self.filter))
            .into_iter()
            .map(|(name, values)| (name, neon_histogram(&values)))
            .collect()
    }
    /// The names of the datasets (the selected parameters' paths).
    pub(super) fn names<M: Module>(&self, model: &M) -> Vec<String> {
        self.columns(model).into_iter().map(|(name, _)| name).collect()
    }
}

/// neon's `Tensor.hist`: `numpy.histogram(rint(log2(|x|)), bins)` with the edges `-inf, -47,
/// -46, ..., 16` (`arange(65) + offset`, the first one `-inf`): bin 0 holds the values below
/// 2^-47.5 and the zeros, bin `i` those whose rounded exponent is `i - 48`, the last bin is closed
/// (exponent 15 or 16); larger values and NaN are not counted.
pub(super) fn neon_histogram(values: &[f32]) -> [i32; BINS] {
    let mut counts = [0i32; BINS];
    for &v in values {
        let exponent = v.abs().log2().round_ties_even();
        if exponent.is_nan() {
            continue;
        }
        // The first bin runs from -inf to the second bin's lower edge, offset + 1.
        let bin = if exponent < (OFFSET + 1) as f32 {
            0
        } else if exponent <= (OFFSET + BINS as i32) as f32 {
            ((exponent as i32 - OFFSET) as usize).min(BINS - 1)
        } else {
            continue;
        };
        counts[bin] += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_binned_by_their_rounded_exponent_as_neon_bins_them() {
        // 0 and 2^-60 in bin 0; 1 (exponent 0) in bin 48; 3 (log2 1.58 -> 2) in bin 50; 2^-47
        // in bin 1; 2^15 and 2^16 in the last bin; 2^17 and NaN nowhere; negatives by |x|.
        let values =
            [0.0, 2f32.powi(-60), 1.0, -3.0, 2f32.powi(-47), 2f32.powi(15), 65536.0, 131072.0, f32::NAN];
        let counts = neon_histogram(&values);
        let mut expected = [0i32; BINS];
        expected[0] = 2;
        expected[48] = 1;
        expected[50] = 1;
        expected[1] = 1;
        expected[63] = 2;
        assert_eq!(counts, expected);
    }
}
