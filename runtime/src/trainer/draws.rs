//! What a step draws at random (dropout's masks) repeats after a resume: with
//! [`Trainer::seed`](super::Trainer::seed), the generator of the model's devices is seeded before
//! every step from the seed, the rank and the global step. burn does not expose a generator's
//! state, so no checkpoint could hold it; seeded per step, a resumed run's step `n` draws what the
//! uninterrupted run's step `n` drew, whatever came before.
//!
//! burn's generators are process-wide (one per backend, not one per device or thread), and so is
//! its autodiff graph's bookkeeping: the ranks of a threads world would draw from one generator
//! in the order their threads reach it, and a model with dropout ended with one of two sets of
//! weights from run to run even with every draw seeded per rank (its forward and backward passes
//! overlapping the other rank's; the same runs on one core, or with the passes taking turns,
//! always ended with the same one). There, each rank holds [`DRAWS`] from seeding its step until
//! its backward returned (dropping the last step's outputs included), and again for its
//! optimizer's step: the ranks' autodiff work takes turns, their exchanges still overlap.

use std::sync::{Mutex, MutexGuard, PoisonError};

use burn::tensor::Device;

/// Held by one rank of a threads world from seeding its step to the end of its backward (see
/// the module's doc).
static DRAWS: Mutex<()> = Mutex::new(());

/// The seed of every step of one rank, and the devices it seeds.
pub(crate) struct StepSeeds {
    seed: u64,
    rank: u64,
    devices: Vec<Device>,
    /// Whether other ranks draw from this process's generators (a threads world).
    shared: bool,
}

impl StepSeeds {
    /// The seeds of rank `rank`'s steps from `seed`, for the model's `devices`; `shared`: other
    /// ranks of the world run in this process.
    pub(super) fn new(seed: u64, rank: usize, devices: Vec<Device>, shared: bool) -> Self {
        StepSeeds { seed, rank: rank as u64, devices, shared }
    }

    /// Seed the devices for global step `step` (the step about to run, counted from 0). When
    /// other ranks share the generators, the returned guard holds them until it is dropped,
    /// after the step's backward.
    #[inline]
    pub(super) fn before_step(&self, step: u64) -> Option<MutexGuard<'static, ()>> {
        let turn = self.turn();
        let seed = step_seed(self.seed, self.rank, step);
        for device in &self.devices {
            device.seed(seed);
        }
        turn
    }

    /// This rank's turn at burn's process-wide state, held until dropped, when other ranks
    /// share it (the optimizer's step takes one too: it replaces the parameters' autodiff
    /// leaves).
    #[inline]
    pub(super) fn turn(&self) -> Option<MutexGuard<'static, ()>> {
        self.shared.then(|| DRAWS.lock().unwrap_or_else(PoisonError::into_inner))
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
