//! The control words every exchange carries next to the gradients, summed over the ranks: what
//! each rank asks of all (stop, skip the epoch, a signal, a failure), the chief's
//! hyper-parameters and counters, and the values averaged over ranks.
//!
//! The words travel as `f64`s and are summed as `f64`s on every transport, and every control
//! word is exact for any world size up to 2^24 ranks and any counter: a word every rank
//! contributes is a count of at most 16 × the size (flags, signals, the kind of exchange), and a
//! word that must be equal on every rank (the global step, the steps per epoch, the number of
//! words) is the chief's value alone, in two 32-bit halves, the others contributing zeros, each
//! rank comparing its own with it. (Summing every rank's value and comparing with size × its own,
//! as stoker once did, rounds once the sum passes 2^53 in `f64`, or 2^24 in the `f32`s MPI then
//! carried: with 3 ranks from global step 5,592,406 on.)

/// Where each word sits, for a world of `size` ranks with `hypers` hyper-parameters and `means`
/// averaged values.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout {
    pub(crate) size: usize,
    pub(crate) hypers: usize,
    pub(crate) means: usize,
}

/// Ranks that skip the rest of the epoch.
pub(crate) const SKIP: usize = 0;
/// Ranks that received SIGINT.
pub(crate) const SIGINT: usize = 1;
/// Ranks that received SIGTERM.
pub(crate) const SIGTERM: usize = 2;
/// What kind of exchange each rank is at ([`Kind`]), summed: size × the kind when all agree.
pub(crate) const KIND: usize = 3;
/// The kind squared, summed: with [`KIND`], every rank is at the same kind exactly when the sum
/// is size × kind and this is size × kind² (ranks at 2 and 4 sum like two at 3, not their squares).
pub(crate) const KIND_SQUARED: usize = 4;
/// The chief's steps per epoch at a step's exchange (two words, see [`put_reference`]).
pub(crate) const STEPS_PER_EPOCH: usize = 5;
/// The chief's global step at a step's exchange (two words): counters that differ, as after a
/// resume from different checkpoints, stop every rank.
pub(crate) const GLOBAL_STEP: usize = 7;
/// The chief's number of words (two words): equal layouts on every rank.
pub(crate) const LEN: usize = 9;
/// At a callback's sum over ranks, the chief's number of values (two words): sums of different
/// lengths on two ranks fail instead of lining up chunk by chunk.
pub(crate) const SUM_LEN: usize = 11;
/// At an epoch's end, a checksum of the chief's parameters (two words), compared by every rank
/// with its own: replicas that drifted apart stop the world.
pub(crate) const REPLICA: usize = 13;
/// 1 where the chief put its checksum at [`REPLICA`].
pub(crate) const REPLICA_SET: usize = 15;
/// Ranks whose exchange carries gradients (MPI): a rank without any learns from it that it must
/// add zeros of the gradients' length, as a failing rank meeting the others at a step does.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) const GRADS: usize = 16;
/// Ranks whose exchange carries the chief's buffers, an epoch's end (MPI): a rank that does not
/// learns from it that it must add zeros of the buffers' length.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) const BUFFERS: usize = 17;
const FIXED: usize = 18;
/// How many values one sum over ranks for callbacks carries.
pub(crate) const USER: usize = 32;

/// The exchanges, told apart so that ranks at different ones fail loudly instead of mixing a
/// step's gradients with a callback's sums.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    // Values 1 to 4: a rank at kind k contributes k and k² (see KIND_SQUARED).
    Start = 1,
    Step = 2,
    Boundary = 3,
    Sum = 4,
}

impl Kind {
    pub(crate) fn name(value: f64) -> &'static str {
        match value as i64 {
            1 => "the start of training",
            2 => "a training step",
            3 => "the end of an epoch or of training",
            4 => "a sum over ranks asked by a callback",
            _ => "an unknown point",
        }
    }
}

/// Put `value` at `at` and `at + 1` as its high and low 32 bits: each half is an integer below
/// 2^32, exact in an `f64` and in any sum of it with zeros.
pub(crate) fn put_reference(words: &mut [f64], at: usize, value: u64) {
    words[at] = (value >> 32) as f64;
    words[at + 1] = (value & 0xFFFF_FFFF) as f64;
}

/// The value [`put_reference`] put at `at`, after the sum (`None`: the halves are not what one
/// rank's value alone sums to: more than one rank, or none, put one).
pub(crate) fn reference(words: &[f64], at: usize) -> Option<u64> {
    let half = |w: f64| ((0.0..4_294_967_296.0).contains(&w) && w.fract() == 0.0).then_some(w as u64);
    Some((half(words[at])? << 32) | half(words[at + 1])?)
}

/// Where the word "rank `rank` failed" sits (1 where it did).
pub(crate) fn failed(rank: usize) -> usize {
    FIXED + rank
}

impl Layout {
    /// The number of words.
    pub(crate) fn len(&self) -> usize {
        FIXED + 2 * self.size + self.hypers + 2 * self.means + USER
    }
    /// 1 where rank `rank` failed.
    pub(crate) fn failed(&self, rank: usize) -> usize {
        failed(rank)
    }
    /// 1 where rank `rank` asked to stop.
    pub(crate) fn stop(&self, rank: usize) -> usize {
        FIXED + self.size + rank
    }
    /// The chief's value of hyper-parameter `i` (the others contribute zero).
    pub(crate) fn hyper(&self, i: usize) -> usize {
        FIXED + 2 * self.size + i
    }
    /// The sum over ranks of averaged value `i`; the number of ranks that gave it is at
    /// `mean(i) + 1`.
    pub(crate) fn mean(&self, i: usize) -> usize {
        FIXED + 2 * self.size + self.hypers + 2 * i
    }
    /// Value `i` of a callback's sum over ranks.
    pub(crate) fn user(&self, i: usize) -> usize {
        FIXED + 2 * self.size + self.hypers + 2 * self.means + i
    }
    /// Mark `words` as rank `rank`'s words at an exchange of `kind` (the chief also puts its
    /// number of words, which every rank compares with its own).
    pub(crate) fn mark(&self, words: &mut [f64], kind: Kind, rank: usize) {
        let k = f64::from(kind as u8);
        words[KIND] = k;
        words[KIND_SQUARED] = k * k;
        if rank == 0 {
            put_reference(words, LEN, self.len() as u64);
        }
    }
    /// Whether every rank is at an exchange of `kind` with this layout (after the sum).
    pub(crate) fn same_kind(&self, words: &[f64], kind: Kind) -> bool {
        let (k, size) = (f64::from(kind as u8), self.size as f64);
        words[KIND] == k * size && words[KIND_SQUARED] == k * k * size
    }
    /// Whether the chief's number of words is this rank's (after the sum).
    pub(crate) fn same_len(&self, words: &[f64]) -> bool {
        reference(words, LEN) == Some(self.len() as u64)
    }
    /// The lowest rank that failed, if any.
    pub(crate) fn first_failed(&self, words: &[f64]) -> Option<usize> {
        (0..self.size).find(|&r| words[self.failed(r)] != 0.0)
    }
    /// The lowest rank that asked to stop, if any.
    pub(crate) fn first_stop(&self, words: &[f64]) -> Option<usize> {
        (0..self.size).find(|&r| words[self.stop(r)] != 0.0)
    }
}

/// At a step's exchange, the chief puts the counters every rank must share (the others put
/// nothing there).
pub(crate) fn put_counters(words: &mut [f64], rank: usize, steps_per_epoch: u64, global_step: u64) {
    if rank == 0 {
        put_reference(words, STEPS_PER_EPOCH, steps_per_epoch);
        put_reference(words, GLOBAL_STEP, global_step);
    }
}

/// The chief's steps per epoch and global step, after a step's sum.
pub(crate) fn chief_counters(words: &[f64]) -> (Option<u64>, Option<u64>) {
    (reference(words, STEPS_PER_EPOCH), reference(words, GLOBAL_STEP))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rank `rank`'s words at a step at `global_step`, with its stop flag set when it asks.
    fn step_words(
        layout: &Layout,
        rank: usize,
        steps_per_epoch: u64,
        global_step: u64,
        stop: bool,
    ) -> Vec<f64> {
        let mut words = vec![0.0; layout.len()];
        layout.mark(&mut words, Kind::Step, rank);
        put_counters(&mut words, rank, steps_per_epoch, global_step);
        if stop {
            words[layout.stop(rank)] = 1.0;
        }
        words
    }

    /// The element-wise sum in `f64`, in the order given (MPI's `MPI_SUM` on `MPI_DOUBLE` and the
    /// threads' chief add in an order of their own: the tests try two).
    fn summed(all: impl Iterator<Item = Vec<f64>>, len: usize) -> Vec<f64> {
        all.fold(vec![0.0; len], |mut acc, words| {
            acc.iter_mut().zip(&words).for_each(|(a, w)| *a += w);
            acc
        })
    }

    #[test]
    fn every_control_word_is_exact_for_wide_worlds_and_late_steps() {
        for size in [2, 3, 7, 256, 4096] {
            let layout = Layout { size, hypers: 3, means: 2 };
            for global_step in
                [(1 << 24) + 1, 5_592_407, (1 << 32) + 3, (1 << 52) + 5, (1 << 53) - 1, u64::MAX - 7]
            {
                let steps_per_epoch = global_step / 3 + 1;
                let ranks =
                    || (0..size).map(|r| step_words(&layout, r, steps_per_epoch, global_step, r % 3 == 1));
                for words in [summed(ranks(), layout.len()), summed(ranks().rev(), layout.len())] {
                    assert!(layout.same_kind(&words, Kind::Step), "{size} ranks at step {global_step}");
                    assert!(layout.same_len(&words), "{size} ranks at step {global_step}");
                    assert_eq!(chief_counters(&words), (Some(steps_per_epoch), Some(global_step)));
                    assert_eq!(layout.first_stop(&words), Some(1));
                    let stops = (0..size).filter(|&r| words[layout.stop(r)] == 1.0).count();
                    assert_eq!(stops, (0..size).filter(|r| r % 3 == 1).count());
                }
            }
        }
    }

    #[test]
    fn a_rank_one_step_off_sees_it_at_any_step() {
        for size in [3, 4096] {
            let layout = Layout { size, hypers: 0, means: 0 };
            for global_step in [(1u64 << 24) + 1, (1 << 52) + 1] {
                let words = summed(
                    (0..size)
                        .map(|r| step_words(&layout, r, 10, global_step + u64::from(r == size - 1), false)),
                    layout.len(),
                );
                // Only the chief's value arrives; the last rank's own is one more.
                assert_eq!(chief_counters(&words).1, Some(global_step));
                assert_ne!(chief_counters(&words).1, Some(global_step + 1));
            }
        }
    }

    #[test]
    fn ranks_at_different_kinds_or_layouts_do_not_agree() {
        let layout = Layout { size: 3, hypers: 1, means: 0 };
        let mut words = vec![0.0; layout.len()];
        for (rank, kind) in [(0, Kind::Step), (1, Kind::Step), (2, Kind::Sum)] {
            let mut own = vec![0.0; layout.len()];
            layout.mark(&mut own, kind, rank);
            words.iter_mut().zip(&own).for_each(|(a, w)| *a += w);
        }
        assert!(!layout.same_kind(&words, Kind::Step));
        let wider = Layout { size: 3, hypers: 2, means: 0 };
        assert!(
            !wider.same_len(&words),
            "a rank with one more hyper-parameter sees the chief's length differ"
        );
        assert!(layout.same_len(&words));
    }

    #[test]
    fn a_reference_put_twice_is_no_reference() {
        let mut words = vec![0.0; 2];
        put_reference(&mut words, 0, 7);
        put_reference(&mut words, 0, u64::MAX);
        assert_eq!(reference(&words, 0), Some(u64::MAX));
        words[1] += 4_294_967_295.0;
        assert_eq!(reference(&words, 0), None, "a half past 2^32 is two ranks' values");
    }

    #[test]
    fn the_layout_names_the_lowest_rank() {
        let layout = Layout { size: 3, hypers: 2, means: 1 };
        let mut words = vec![0.0; layout.len()];
        assert_eq!(layout.first_failed(&words), None);
        words[layout.failed(2)] = 1.0;
        words[layout.failed(1)] = 1.0;
        words[layout.stop(2)] = 1.0;
        assert_eq!(layout.first_failed(&words), Some(1));
        assert_eq!(layout.first_stop(&words), Some(2));
        assert_eq!(layout.mean(0), layout.user(0) - 2);
        assert_eq!(layout.user(USER - 1), layout.len() - 1);
    }
}
