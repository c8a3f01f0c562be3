//! What a step draws at random (dropout's masks) repeats after a resume: with
//! [`Trainer::seed`](super::Trainer::seed), the generator of the model's devices is seeded before
//! every step from the seed, the rank and the global step. burn does not expose a generator's
//! state, so no checkpoint could hold it; seeded per step, a resumed run's step `n` draws what the
//! uninterrupted run's step `n` drew, whatever came before.
//!
//! burn's generators are process-wide (one per backend, not one per device or thread): in a
//! threads world the ranks take turns at them (`world/turns.rs`), each seeding its own steps.

use burn::tensor::Device;

/// The seed of every step of one rank, and the devices it seeds.
pub(crate) struct StepSeeds {
    seed: u64,
    rank: u64,
    devices: Vec<Device>,
}

impl StepSeeds {
    /// The seeds of rank `rank`'s steps from `seed`, for the model's `devices`.
    pub(super) fn new(seed: u64, rank: usize, devices: Vec<Device>) -> Self {
        StepSeeds { seed, rank: rank as u64, devices }
    }

    /// Seed the devices for global step `step` (the step about to run, counted from 0).
    #[inline]
    pub(super) fn before_step(&self, step: u64) {
        let seed = step_seed(self.seed, self.rank, step);
        for device in &self.devices {
            device.seed(seed);
        }
    }
}

/// The seed of `step` on `rank`: SplitMix64's finalizer over the three, so that neighbouring
/// steps and ranks get unrelated seeds.
fn step_seed(seed: u64, rank: u64, step: u64) -> u64 {
    let mix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;
    mix(mix(mix(seed.wrapping_add(GOLDEN)) ^ rank.wrapping_add(GOLDEN)) ^ step.wrapping_add(GOLDEN))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_differ_by_seed_rank_and_step_and_repeat() {
        let a = step_seed(42, 0, 7);
        assert_eq!(a, step_seed(42, 0, 7));
        assert_ne!(a, step_seed(43, 0, 7));
        assert_ne!(a, step_seed(42, 1, 7));
        assert_ne!(a, step_seed(42, 0, 8));
        // Seed and rank do not trade places.
        assert_ne!(step_seed(1, 2, 3), step_seed(2, 1, 3));
    }
}
