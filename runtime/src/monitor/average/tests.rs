//! Unit tests of the averages' arithmetic.

use std::collections::VecDeque;

use super::accumulators::{Ema, Window};
use super::averages::Averages;

#[test]
fn the_zero_debiased_ema_starts_at_the_first_sample() {
    let mut ema = Ema::default();
    ema.add(0.5, 4.0);
    assert_eq!(ema.value(0.5), Some(4.0));
    ema.add(0.5, 1.0);
    // (0.25 * 4 + 0.5 * 1) / (1 - 0.25) = 1.5 / 0.75
    assert_eq!(ema.value(0.5), Some(2.0));
}

#[test]
fn the_window_keeps_the_last_samples_of_each_name() {
    let mut windows = vec![VecDeque::new(), VecDeque::new()];
    Averages::fold(&Window { size: 2 }, &mut windows, &[1.0, 10.0, 2.0, 20.0, 3.0, 30.0]);
    assert_eq!(windows, vec![VecDeque::from([2.0, 3.0]), VecDeque::from([20.0, 30.0])]);
}
