//! Where an axis's ticks go and how their numbers read.

/// The ticks of an axis over `lo..=hi`: the multiples of a round step (1, 2 or 5 times a power of
/// ten; at least 1 when `whole`, as for steps) inside the range, at most about `most` of them;
/// with the step.
pub(crate) fn ticks(lo: f64, hi: f64, most: usize, whole: bool) -> (Vec<f64>, f64) {
    let span = hi - lo;
    if !(span > 0.0 && span.is_finite()) {
        return (vec![lo], 1.0);
    }
    let raw = span / most.max(1) as f64;
    let magnitude = 10f64.powf(raw.log10().floor());
    let mut step = [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * magnitude).find(|&s| s >= raw).unwrap_or(raw);
    if whole {
        step = step.max(1.0);
    }
    // A thousandth of a step of slack, so that a bound that is a multiple gets its tick.
    let first = (lo / step - 1e-3).ceil() as i64;
    let last = (hi / step + 1e-3).floor() as i64;
    ((first..=last).map(|k| k as f64 * step).collect(), step)
}

/// The number of a tick at `value` on an axis whose ticks are `step` apart and reach `largest`
/// (in absolute value): as many decimals as the step needs, or powers of ten (`2.5e-4`) when
/// the numbers are below a thousandth or reach a million.
pub(crate) fn tick_text(value: f64, step: f64, largest: f64) -> String {
    let step_exp = step.log10().floor() as i32;
    // A tick at zero computed as 3 × 0.1 - 0.3 reads 0.
    let value = if value.abs() < step * 1e-6 { 0.0 } else { value };
    if (1e-3..1e6).contains(&largest) {
        let decimals = (-step_exp).max(0) as usize;
        format!("{value:.decimals$}")
    } else if value == 0.0 {
        "0".to_string()
    } else {
        let decimals = (largest.log10().floor() as i32 - step_exp).clamp(0, 4) as usize;
        format!("{value:.decimals$e}")
    }
}

/// The number of a tick of a logarithmic axis at the logarithm `exponent` (a whole number): the
/// power of ten it stands for, as `0.001`, `1`, `100`, or `1e-7`, `1e4` beyond a thousandth and a
/// thousand.
pub(crate) fn power_text(exponent: f64) -> String {
    let k = exponent.round() as i32;
    match k {
        -3..=-1 => format!("{:.*}", (-k) as usize, 10f64.powi(k)),
        0..=3 => format!("{}", 10i64.pow(k as u32)),
        _ => format!("1e{k}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(lo: f64, hi: f64, most: usize, whole: bool) -> Vec<String> {
        let (ticks, step) = ticks(lo, hi, most, whole);
        let largest = ticks.iter().fold(0f64, |m, t| m.max(t.abs()));
        ticks.iter().map(|&t| tick_text(t, step, largest)).collect()
    }

    #[test]
    fn ticks_are_round_multiples_inside_the_range() {
        assert_eq!(texts(0.0, 9.0, 6, false), ["0", "2", "4", "6", "8"]);
        assert_eq!(texts(1.0, 10.0, 10, true), ["1", "2", "3", "4", "5", "6", "7", "8", "9", "10"]);
        // Steps are whole: 3 steps get 3 ticks, never 1.5.
        assert_eq!(texts(1.0, 3.0, 10, true), ["1", "2", "3"]);
        assert_eq!(texts(0.05, 0.15, 6, false), ["0.06", "0.08", "0.10", "0.12", "0.14"]);
        assert_eq!(texts(-0.3, 0.3, 6, false), ["-0.3", "-0.2", "-0.1", "0.0", "0.1", "0.2", "0.3"]);
        assert_eq!(texts(1e-5, 5e-5, 5, false), ["1e-5", "2e-5", "3e-5", "4e-5", "5e-5"]);
        assert_eq!(
            texts(1.0e-4, 1.1e-4, 5, false),
            ["1.00e-4", "1.02e-4", "1.04e-4", "1.06e-4", "1.08e-4", "1.10e-4"]
        );
        assert_eq!(texts(0.0, 3e6, 6, false), ["0", "5.0e5", "1.0e6", "1.5e6", "2.0e6", "2.5e6", "3.0e6"]);
    }

    #[test]
    fn a_logarithmic_axis_reads_powers_of_ten() {
        let texts: Vec<String> = (-7..=1).map(|k| power_text(f64::from(k))).collect();
        assert_eq!(texts, ["1e-7", "1e-6", "1e-5", "1e-4", "0.001", "0.01", "0.1", "1", "10"]);
        assert_eq!(power_text(4.0), "1e4");
    }

    #[test]
    fn an_empty_range_has_one_tick() {
        assert_eq!(ticks(2.0, 2.0, 6, false).0, [2.0]);
        assert_eq!(ticks(f64::NAN, 1.0, 6, false).0.len(), 1);
    }
}
