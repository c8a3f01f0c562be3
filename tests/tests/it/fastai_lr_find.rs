//! fastai's `LRFinder` and `lr_find` (`callback/schedule.py`) against its rules and hand
//! computations: the exponential schedule, the stop on divergence of the smoothed loss, the
//! weights and the optimizer put back, the plot.

use std::sync::{Arc, Mutex};

use burn::nn::Linear;
use burn::optim::AdamConfig;
use burn_stoker::Error;
use burn_stoker::prelude::*;
use burn_stoker::track::{LR_FIND_PLOT, LrFinder, Recorder, Suggestion};
use stoker_tests::{mse, scratch_dir, tiny_data, tiny_model, weights};

/// fastai's `SchedExp(start, end)` at `pos`.
fn sched_exp(start: f64, end: f64, pos: f64) -> f64 {
    start * (end / start).powf(pos)
}

/// fastai's `AvgSmoothLoss(beta=0.98)` over `losses`, written out: `val = lerp(loss, val, beta)`,
/// the value `val / (1 - beta^count)`.
fn smoothed(losses: &[f64]) -> Vec<f64> {
    let (beta, mut val) = (0.98f64, 0.0f64);
    (1..=losses.len() as i32)
        .zip(losses)
        .map(|(count, &loss)| {
            val = loss + beta * (val - loss);
            val / (1.0 - beta.powi(count))
        })
        .collect()
}

/// fastai's `LRFinder.after_batch` over smoothed losses: the index of the step that stops the
/// sweep (`smooth > 4 * best` after `best` takes this step's value, or `train_iter >= num_it`).
fn fastai_stop(smooth: &[f64], num_it: usize) -> usize {
    let mut best = f64::INFINITY;
    for (i, &s) in smooth.iter().enumerate() {
        if s < best {
            best = s;
        }
        if s > 4.0 * best || i + 1 >= num_it {
            return i;
        }
    }
    smooth.len() - 1
}

/// The optimizer's number of state tensors at `before_train`, at each `after_step`, and at
/// `after_train` (registered after the finder: it sees what the finder put back), and the
/// learning rate there.
#[derive(Default, Clone)]
struct OptimizerState(Arc<Mutex<Vec<(String, usize, f64)>>>);

impl Callback<Linear> for OptimizerState {
    fn before_train(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.note("before_train", ctx)
    }
    fn trigger_step(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.note("trigger_step", ctx)
    }
    fn after_train(&mut self, ctx: &mut Context<'_, Linear>) -> burn_stoker::Result<()> {
        self.note("after_train", ctx)
    }
}

impl OptimizerState {
    fn note(&self, at: &str, ctx: &Context<'_, Linear>) -> burn_stoker::Result<()> {
        let tensors = ctx.optimizer().to_record().len();
        self.0.lock().unwrap().push((at.to_string(), tensors, ctx.learning_rate()));
        Ok(())
    }
}

#[test]
fn fastai_lr_find_schedule_is_exponential_stops_at_num_it_and_puts_back_weights_and_optimizer() {
    let device = burn_stoker::device::cpu();
    let model = tiny_model(&device);
    let before = weights(&model);
    let dir = scratch_dir("fastai-lr-find");
    let mut finder = LrFinder::new().num_it(10).stop_div(false);
    let mut recorder = Recorder::new().plots(false);
    let state = OptimizerState::default();
    let report = Trainer::new(model, AdamConfig::new().init(), tiny_data(3, &device))
        .max_epoch(u64::MAX)
        .learning_rate(0.25)
        .log_dir(&dir)
        .default_callbacks(DefaultCallbacks::none())
        .callbacks((&mut recorder, &mut finder, state.clone()))
        .train(|model: &Linear, batch, _step: &mut Step<'_>| mse(model, batch))
        .map_err(Error::from)
        .unwrap();
    // 10 steps (4 epochs of 3), then fastai's CancelFitException.
    assert_eq!(report.counters.global_step(), 10);
    assert_eq!(report.counters.epoch_num(), 4);
    match &report.outcome {
        Outcome::Stopped(reason) => {
            assert_eq!(reason, "cancelled by `LrFinder` in after_step (Flow::CancelFit)")
        }
        other => panic!("expected a stop, got {other:?}"),
    }
    // The learning rate of step i is SchedExp(1e-7, 10) at i / 10: 1e-7, 1e-6.2, ..., 10^0.
    let lrs: Vec<f64> = finder.points().iter().map(|p| p.0).collect();
    let by_hand: Vec<f64> = (0..10).map(|i| sched_exp(1e-7, 10.0, f64::from(i) / 10.0)).collect();
    assert_eq!(lrs, by_hand);
    assert_eq!(lrs[0], 1e-7);
    assert!((lrs[5] - 1e-3).abs() < 1e-15, "1e-7 * (1e8)^0.5 = 1e-3: {}", lrs[5]);
    assert_eq!(finder.lr_at(10), sched_exp(1e-7, 10.0, 1.0));
    // The Recorder in the run saw the same learning rates and, smoothed, the same losses.
    assert_eq!(recorder.lr_find_points(), finder.points());
    let raw: Vec<f64> = recorder.losses().iter().map(|&(_, loss)| loss).collect();
    let smooth: Vec<f64> = finder.points().iter().map(|p| p.1).collect();
    assert_eq!(smooth, smoothed(&raw));
    // Put back: the weights, the optimizer (Adam had state during the sweep, none before), the
    // learning rate.
    assert_eq!(weights(&report.model), before);
    let notes = state.0.lock().unwrap().clone();
    assert_eq!(notes.first().map(|n| (n.0.as_str(), n.1, n.2)), Some(("before_train", 0, 0.25)));
    assert!(notes.iter().any(|n| n.0 == "trigger_step" && n.1 > 0), "{notes:?}");
    assert_eq!(notes.last().map(|n| (n.0.as_str(), n.1, n.2)), Some(("after_train", 0, 0.25)));
    // The plot of the loss against the learning rate.
    let png = std::fs::read(dir.join(LR_FIND_PLOT)).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
}

/// A step whose loss is `losses[global_step]` (a zero gradient: the weights never move).
fn sweep_with_losses(losses: Vec<f32>, finder: &mut LrFinder<Linear>) -> TrainReport<Linear> {
    let device = burn_stoker::device::cpu();
    Trainer::new(tiny_model(&device), burn::optim::SgdConfig::new().init(), tiny_data(4, &device))
        .max_epoch(u64::MAX)
        .log_dir(scratch_dir("fastai-lr-find-div"))
        .default_callbacks(DefaultCallbacks::none())
        .callbacks(finder)
        .train(move |model: &Linear, batch, step: &mut Step<'_>| {
            let at = step.counters().global_step() as usize;
            mse(model, batch) * 0.0 + losses[at]
        })
        .map_err(Error::from)
        .unwrap()
}

#[test]
fn fastai_lr_find_stops_at_the_first_step_where_the_smoothed_loss_exceeds_four_times_the_best() {
    // A loss that falls, then explodes.
    let losses: Vec<f32> =
        vec![1.0, 0.9, 0.8, 0.7, 0.7, 0.8, 1.5, 4.0, 12.0, 40.0, 120.0, 400.0, 1e3, 1e4, 1e5];
    let as_f64: Vec<f64> = losses.iter().map(|&l| f64::from(l)).collect();
    let smooth = smoothed(&as_f64);
    let stop = fastai_stop(&smooth, 100);
    // By hand from the smoothed values (1, 0.949, 0.899, 0.847, 0.817, 0.814, 0.918, 1.331,
    // 2.614, 6.702, ...): the best is step 5's, 0.814; step 9's 6.702 is the first above 4 times
    // it, 3.255.
    assert_eq!(stop, 9, "{smooth:?}");
    assert!(smooth[8] <= 4.0 * smooth[5] && smooth[9] > 4.0 * smooth[5]);
    let mut finder = LrFinder::new();
    let report = sweep_with_losses(losses.clone(), &mut finder);
    assert_eq!(report.counters.global_step(), stop as u64 + 1, "it stops at that step");
    let got: Vec<f64> = finder.points().iter().map(|p| p.1).collect();
    assert_eq!(got, smooth[..=stop]);
    // Without stop_div, the sweep goes on to num_it.
    let mut finder = LrFinder::new().stop_div(false).num_it(14);
    let report = sweep_with_losses(losses, &mut finder);
    assert_eq!(report.counters.global_step(), 14);
}

/// fastai callback/schedule.py, LRFinder.after_batch: `smooth_loss > 4*best_loss` is false for a
/// NaN, so the sweep runs on to `num_it`; `lr_find` cuts the points at the first NaN.
#[test]
fn fastai_lr_find_runs_on_to_num_it_past_a_nan_loss_and_num_it_is_at_least_six() {
    let mut finder = LrFinder::new().num_it(12);
    let mut losses = vec![1.0, 0.9, 0.8, 0.7, 0.6, 0.5, f32::NAN];
    losses.extend([0.5; 6]);
    let report = sweep_with_losses(losses, &mut finder);
    assert_eq!(report.counters.global_step(), 12, "on to num_it past the NaN");
    let points = finder.points();
    assert_eq!(points.len(), 12);
    assert!(points[..6].iter().all(|p| p.1.is_finite()) && points[6..].iter().all(|p| p.1.is_nan()));
    // The suggestions read the points before the NaN (12 points: from 1 to 6, cut at 6).
    let (lrs, smooth): (Vec<f64>, Vec<f64>) = points[1..6].iter().copied().unzip();
    for method in Suggestion::ALL {
        assert_eq!(finder.suggest(method), method.suggest(&lrs, &smooth), "{method:?}");
    }
    let mut finder = LrFinder::new().num_it(2).stop_div(false);
    let report = sweep_with_losses(vec![1.0; 10], &mut finder);
    assert_eq!(report.counters.global_step(), 6, "fastai: if num_it < 6: num_it = 6");
}

#[test]
fn fastai_lr_find_suggestions_read_the_points_lr_find_gives_them() {
    // 40 steps: fastai passes recorder.lrs[num_it//10:-5] (here num_it 40: from 4 to 35).
    let losses: Vec<f32> = (0..40).map(|i| 2.0 - (i as f32) * 0.01).collect();
    let mut finder = LrFinder::new().num_it(40).stop_div(false);
    sweep_with_losses(losses, &mut finder);
    let points = finder.points();
    assert_eq!(points.len(), 40);
    let (lrs, smooth): (Vec<f64>, Vec<f64>) = points[4..35].iter().copied().unzip();
    for method in Suggestion::ALL {
        assert_eq!(finder.suggest(method), method.suggest(&lrs, &smooth), "{method:?}");
    }
    // The smoothed loss keeps falling: the minimum is the last point kept, a tenth of its lr.
    let minimum = finder.suggest(Suggestion::Minimum).unwrap();
    assert_eq!(minimum.point, points[34]);
    assert_eq!(minimum.lr, points[34].0 / 10.0);
}
