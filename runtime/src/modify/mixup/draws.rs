//! What [`MixUp`](super::MixUp) draws: each sample's λ from Beta(α, α) and the shuffle that
//! pairs the samples, from a generator seeded by the seed, the rank and the global step (as the
//! devices are seeded before each step, `trainer/draws.rs`, with a salt of its own).

use super::Mix;

/// The salt that sets MixUp's draws apart from the devices' seeds of the same step (`trainer/draws.rs`).
const SALT: u64 = 0x6d69_7875_705f_6c61; // "mixup_la"

/// SplitMix64's increment.
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// SplitMix64's finalizer.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// SplitMix64: a small generator whose every seed is a good one.
pub(super) struct Generator(u64);

impl Generator {
    /// The generator of rank `rank`'s draws at global step `step` of a run seeded with `seed`.
    /// SplitMix64's finalizer over the three, so that neighbouring steps and ranks draw unrelated
    /// numbers.
    pub(super) fn for_step(seed: u64, rank: usize, step: u64) -> Self {
        let start = mix(mix(mix((seed ^ SALT).wrapping_add(GOLDEN)) ^ (rank as u64).wrapping_add(GOLDEN))
            ^ step.wrapping_add(GOLDEN));
        Generator(start)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN);
        mix(self.0)
    }

    /// Uniform on [0, 1), 53 bits.
    fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform on (0, 1]: never 0, so that its logarithm is finite.
    fn uniform_open(&mut self) -> f64 {
        1.0 - self.uniform()
    }

    /// A standard normal draw (Box–Muller, one of the pair).
    fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform_open(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    /// The logarithm of a Gamma(`shape`, 1) draw: Marsaglia and Tsang's method, with the boost
    /// `Gamma(a) = Gamma(a + 1) · U^(1/a)` below 1 (kept in logarithms, where a small α's draws
    /// would underflow).
    fn ln_gamma(&mut self, shape: f64) -> f64 {
        if shape < 1.0 {
            let boost = self.uniform_open().ln() / shape;
            return self.ln_gamma(shape + 1.0) + boost;
        }
        let d = shape - 1.0 / 3.0;
        let c = 1.0 / (9.0 * d).sqrt();
        loop {
            let x = self.normal();
            let v = (1.0 + c * x).powi(3);
            if v <= 0.0 {
                continue;
            }
            let u = self.uniform_open();
            if u < 1.0 - 0.0331 * x.powi(4) || u.ln() < 0.5 * x * x + d * (1.0 - v + v.ln()) {
                return d.ln() + v.ln();
            }
        }
    }

    /// A Beta(α, α) draw, `X / (X + Y)` of two Gamma(α) draws.
    pub(super) fn beta(&mut self, alpha: f64) -> f64 {
        let (x, y) = (self.ln_gamma(alpha), self.ln_gamma(alpha));
        1.0 / (1.0 + (y - x).exp())
    }

    /// A uniform permutation of `0..n` (Fisher–Yates).
    pub(super) fn permutation(&mut self, n: usize) -> Vec<i64> {
        let mut order: Vec<i64> = (0..n as i64).collect();
        for i in (1..n).rev() {
            let j = ((self.uniform() * (i + 1) as f64) as usize).min(i);
            order.swap(i, j);
        }
        order
    }
}

/// One batch's draws for `n` samples, as fastai's `MixUp.before_batch` makes them: λ per sample
/// from Beta(α, α), kept at `max(λ, 1 - λ)` (its `torch.stack([lam, 1-lam], 1).max(1)`), then the
/// shuffle (`torch.randperm`).
pub(super) fn draw(alpha: f64, seed: u64, rank: usize, step: u64, n: usize) -> Mix {
    let mut generator = Generator::for_step(seed, rank, step);
    let lam = (0..n).map(|_| generator.beta(alpha)).map(|l| l.max(1.0 - l) as f32).collect();
    Mix { lam, partners: generator.permutation(n) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Mean and variance of `n` draws of Beta(α, α) before the max.
    fn moments(alpha: f64, n: usize) -> (f64, f64) {
        let mut generator = Generator::for_step(7, 0, 0);
        let draws: Vec<f64> = (0..n).map(|_| generator.beta(alpha)).collect();
        let mean = draws.iter().sum::<f64>() / n as f64;
        let var = draws.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / n as f64;
        (mean, var)
    }

    // torch.distributions.Beta(α, α), which fastai's MixHandler draws from
    // (fastai/callback/mixup.py): mean 1/2, variance 1 / (4 (2α + 1)).
    #[test]
    fn beta_draws_have_the_distributions_moments() {
        for alpha in [0.1, 0.4, 1.0, 2.0, 10.0] {
            let (mean, var) = moments(alpha, 40_000);
            let expected = 1.0 / (4.0 * (2.0 * alpha + 1.0));
            assert!((mean - 0.5).abs() < 0.01, "α = {alpha}: mean {mean}");
            assert!(
                (var - expected).abs() < 0.05 * expected,
                "α = {alpha}: variance {var}, expected {expected}"
            );
        }
    }

    // Beta(1, 1) is uniform: the Kolmogorov–Smirnov distance of 20 000 draws to U(0, 1) stays
    // under the 1% critical value 1.63 / √n.
    #[test]
    fn beta_of_one_is_uniform() {
        let n = 20_000;
        let mut generator = Generator::for_step(11, 0, 3);
        let mut draws: Vec<f64> = (0..n).map(|_| generator.beta(1.0)).collect();
        draws.sort_by(f64::total_cmp);
        let distance = draws
            .iter()
            .enumerate()
            .map(|(i, &d)| (d - i as f64 / n as f64).abs().max(((i + 1) as f64 / n as f64 - d).abs()))
            .fold(0.0, f64::max);
        assert!(distance < 1.63 / (n as f64).sqrt(), "KS distance {distance}");
    }

    // fastai keeps max(λ, 1 - λ): every λ in [1/2, 1]; with α = 1 it is uniform there (mean 3/4).
    #[test]
    fn kept_lambdas_are_the_larger_half() {
        let draws: Vec<f32> = (0..2_000).flat_map(|step| draw(1.0, 5, 0, step, 8).lam).collect();
        assert!(draws.iter().all(|&l| (0.5..=1.0).contains(&l)));
        let mean = draws.iter().map(|&l| f64::from(l)).sum::<f64>() / draws.len() as f64;
        assert!((mean - 0.75).abs() < 0.01, "mean {mean}");
    }

    #[test]
    fn draws_repeat_by_seed_rank_and_step_and_differ_otherwise() {
        let a = draw(0.4, 42, 0, 9, 16);
        assert_eq!(a, draw(0.4, 42, 0, 9, 16));
        assert_ne!(a, draw(0.4, 43, 0, 9, 16));
        assert_ne!(a, draw(0.4, 42, 1, 9, 16));
        assert_ne!(a, draw(0.4, 42, 0, 10, 16));
        let mut sorted = a.partners.clone();
        sorted.sort();
        assert_eq!(sorted, (0..16).collect::<Vec<i64>>(), "a permutation");
    }

    // Every position of a shuffle of 4 is equally likely to receive each sample.
    #[test]
    fn permutations_are_uniform() {
        let mut counts = [[0u32; 4]; 4];
        let trials = 40_000;
        for step in 0..trials {
            for (i, &j) in Generator::for_step(3, 0, step).permutation(4).iter().enumerate() {
                counts[i][j as usize] += 1;
            }
        }
        let expected = trials as f64 / 4.0;
        for row in counts {
            for count in row {
                assert!((f64::from(count) - expected).abs() < 0.03 * expected, "{counts:?}");
            }
        }
    }
}
