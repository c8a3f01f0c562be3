use super::*;
use crate::track::plot::{PLOT_MARGIN, PLOT_SIZE, range};

/// A recorder that saw `losses` at steps 1, 2, ... with the learning rates `lrs`.
fn recorded(losses: &[f64], lrs: &[f64]) -> Recorder {
    let mut recorder = Recorder::new();
    recorder.losses = losses.iter().enumerate().map(|(i, &l)| (i as u64 + 1, l)).collect();
    recorder.lrs = lrs.iter().enumerate().map(|(i, &l)| (i as u64 + 1, l)).collect();
    recorder
}

/// fastai's AvgSmoothLoss by hand, as the weighted mean it is: after n losses,
/// `Σ (1 - β) β^(n-i) xᵢ / (1 - βⁿ)`.
fn by_hand(losses: &[f64], n: usize) -> f64 {
    let beta: f64 = 0.98;
    let sum: f64 = (1..=n).map(|i| (1.0 - beta) * beta.powi((n - i) as i32) * losses[i - 1]).sum();
    sum / (1.0 - beta.powi(n as i32))
}

// fastai fastai/learner.py, Recorder.after_batch: `self.losses.append(self.smooth_loss.value)`,
// the smoothed loss of AvgSmoothLoss(beta=0.98).
#[test]
fn smooth_losses_are_fastais_debiased_moving_average() {
    let losses: Vec<f64> = (0..30).map(|i| 2.0 + (i as f64 * 0.7).sin()).collect();
    let recorder = recorded(&losses, &vec![0.1; 30]);
    let smooth = recorder.smooth_losses();
    assert_eq!(smooth.len(), 30);
    for (n, &(step, value)) in smooth.iter().enumerate() {
        assert_eq!(step, n as u64 + 1);
        let expected = by_hand(&losses, n + 1);
        assert!((value - expected).abs() < 1e-12, "step {step}: {value} vs {expected}");
    }
    // The first smoothed loss is the first loss (the debiasing).
    assert!((smooth[0].1 - losses[0]).abs() < 1e-12);
    let points = recorder.lr_find_points();
    assert!(points.iter().zip(&smooth).all(|(p, s)| p.1 == s.1));
}

/// The RGB pixels of a PNG file.
fn decode(path: &Path) -> Vec<u8> {
    let bytes = std::fs::read(path).unwrap();
    let mut reader = png::Decoder::new(std::io::Cursor::new(bytes)).read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut pixels).unwrap();
    assert_eq!((info.width, info.height), PLOT_SIZE);
    pixels.truncate(info.buffer_size());
    pixels
}

/// The pixels of `color` inside the plot's frame, as (x, y).
fn line_pixels(pixels: &[u8], color: [u8; 3]) -> Vec<(f64, f64)> {
    let (w, h, m) = (PLOT_SIZE.0, PLOT_SIZE.1, PLOT_MARGIN);
    (0..w * h)
        .filter(|&i| pixels[i as usize * 3..i as usize * 3 + 3] == color)
        .map(|i| (i % w, i / w))
        .filter(|&(x, y)| x + 2 >= m && x < w - m + 2 && y + 2 >= m && y < h - m + 2)
        .map(|(x, y)| (f64::from(x), f64::from(y)))
        .collect()
}

/// The distance from `p` to the polyline through `points`.
fn distance(p: (f64, f64), points: &[(f64, f64)]) -> f64 {
    points
        .windows(2)
        .map(|s| {
            let (a, b) = (s[0], s[1]);
            let (dx, dy) = (b.0 - a.0, b.1 - a.1);
            let t = (((p.0 - a.0) * dx + (p.1 - a.1) * dy) / (dx * dx + dy * dy)).clamp(0.0, 1.0);
            (p.0 - a.0 - t * dx).hypot(p.1 - a.1 - t * dy)
        })
        .fold(f64::INFINITY, f64::min)
}

// fastai fastai/callback/schedule.py, plot_lr_find(skip_end=5): the smoothed losses against the
// learning rates on a log axis, without the last `skip_end`; fastai v1's `skip_start` as well.
#[test]
fn plot_lr_find_draws_the_smoothed_loss_without_the_skipped_points() {
    // A sweep of 20 learning rates from 1e-5 by factors of 10^0.25; the loss falls, then the
    // last 5 diverge far above everything else, and the first 3 are far below.
    let lrs: Vec<f64> = (0..20).map(|k| 10f64.powf(-5.0 + 0.25 * k as f64)).collect();
    let mut losses: Vec<f64> = (0..20).map(|k| 3.0 - 0.1 * k as f64).collect();
    losses[..3].iter_mut().for_each(|l| *l = -50.0);
    losses[15..].iter_mut().for_each(|l| *l = 500.0);
    let recorder = recorded(&losses, &lrs);
    let points = recorder.lr_find_points();
    let dir = std::env::temp_dir().join(format!("stoker-lr-find-plot-{}", std::process::id()));
    for (skip_start, skip_end) in [(0, LR_FIND_SKIP_END), (3, 5), (3, 0)] {
        let path = dir.join(format!("lr_find-{skip_start}-{skip_end}.png"));
        if (skip_start, skip_end) == (0, LR_FIND_SKIP_END) {
            recorder.plot_lr_find(&path).unwrap();
        } else {
            recorder.plot_lr_find_skipping(&path, skip_start, skip_end).unwrap();
        }
        let shown = &points[skip_start..20 - skip_end];
        // Where the shown points are drawn: each axis spans its values and 5% more each side.
        let (x0, x1) = range(shown.iter().map(|p| p.0.log10()));
        let (y0, y1) = range(shown.iter().map(|p| p.1));
        let m = f64::from(PLOT_MARGIN);
        let (aw, ah) = (f64::from(PLOT_SIZE.0) - 2.0 * m, f64::from(PLOT_SIZE.1) - 2.0 * m);
        let at: Vec<(f64, f64)> = shown
            .iter()
            .map(|&(lr, loss)| (m + (lr.log10() - x0) / (x1 - x0) * aw, m + (y1 - loss) / (y1 - y0) * ah))
            .collect();
        let line = line_pixels(&decode(&path), TRAIN_COLOR);
        assert!(line.len() > 300, "({skip_start}, {skip_end}): {} pixels", line.len());
        for &p in &line {
            let d = distance(p, &at);
            assert!(d <= 3.5, "({skip_start}, {skip_end}): pixel {p:?} is {d:.1} off the shown points' line");
        }
        // The line reaches the first and the last point shown.
        for end in [at[0], at[at.len() - 1]] {
            let nearest =
                line.iter().map(|&p| (p.0 - end.0).hypot(p.1 - end.1)).fold(f64::INFINITY, f64::min);
            assert!(nearest <= 3.0, "({skip_start}, {skip_end}): no pixel near {end:?}");
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
