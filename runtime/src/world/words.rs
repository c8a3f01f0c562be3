//! The control words every exchange carries next to the gradients, summed over the ranks: what
//! each rank asks of all (stop, skip the epoch, a signal, a failure), the chief's
//! hyper-parameters, and the values averaged over ranks.
//!
//! Over MPI the words travel in the gradients' `f32` buffer: each `f64` is split into three
//! `f32`s whose sum is the value exactly, so a value only the chief contributes (the others add
//! zeros) arrives bit for bit.

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
/// The sum of the ranks' steps per epoch (checked against size × the chief's).
pub(crate) const STEPS_PER_EPOCH: usize = 3;
/// What kind of exchange each rank is at ([`Kind`]), summed: size × the kind when all agree.
pub(crate) const KIND: usize = 4;
/// The kind squared, summed: with [`KIND`], every rank is at the same kind exactly when the sum
/// is size × kind and this is size × kind² (ranks at 2 and 4 sum like two at 3, not their squares).
pub(crate) const KIND_SQUARED: usize = 5;
/// The global step at a step's exchange (its sum checked against size × this rank's: counters
/// that differ, as after a resume from different checkpoints, stop every rank).
pub(crate) const GLOBAL_STEP: usize = 6;
/// The number of words, summed: equal layouts on every rank.
pub(crate) const LEN: usize = 7;
const FIXED: usize = 8;
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
    /// Mark `words` as this rank's words at an exchange of `kind`.
    pub(crate) fn mark(&self, words: &mut [f64], kind: Kind) {
        let k = f64::from(kind as u8);
        words[KIND] = k;
        words[KIND_SQUARED] = k * k;
        words[LEN] = self.len() as f64;
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

/// The number of `f32`s `words` words take in an MPI buffer.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) fn encoded_len(words: usize) -> usize {
    3 * words
}

/// Split each word into three `f32`s (high, middle, low parts) whose sum in `f64` is the word.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) fn encode(words: &[f64], out: &mut [f32]) {
    debug_assert_eq!(out.len(), encoded_len(words.len()));
    for (word, out) in words.iter().zip(out.chunks_exact_mut(3)) {
        let high = *word as f32;
        if !word.is_finite() || !high.is_finite() {
            out.copy_from_slice(&[high, 0.0, 0.0]);
            continue;
        }
        let rest = word - f64::from(high);
        let middle = rest as f32;
        let low = (rest - f64::from(middle)) as f32;
        out.copy_from_slice(&[high, middle, low]);
    }
}

/// The words back from their summed parts.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) fn decode(parts: &[f32], words: &mut [f64]) {
    debug_assert_eq!(parts.len(), encoded_len(words.len()));
    for (word, part) in words.iter_mut().zip(parts.chunks_exact(3)) {
        *word = if part[0].is_finite() {
            (f64::from(part[0]) + f64::from(part[1])) + f64::from(part[2])
        } else {
            f64::from(part[0])
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_word_survives_its_split_exactly() {
        let words = [0.1, 1e-3 / 3.0, 123_456.789_012_345, -7.25e-9, 0.0, 3.0, f64::INFINITY, 1e300];
        let mut parts = vec![0.0; encoded_len(words.len())];
        encode(&words, &mut parts);
        let mut back = [0.0; 8];
        decode(&parts, &mut back);
        for (a, b) in words.iter().zip(&back) {
            if a.abs() < 1e38 {
                assert_eq!(a.to_bits(), b.to_bits(), "{a} came back as {b}");
            }
        }
        assert_eq!(back[6], f64::INFINITY);
    }

    #[test]
    fn summing_zeros_into_a_split_word_keeps_it() {
        let word = [0.012_345_678_901_234_5];
        let mut parts = vec![0.0; 3];
        encode(&word, &mut parts);
        let zeros = [0.0f32; 3];
        let summed: Vec<f32> = parts.iter().zip(&zeros).map(|(a, b)| a + b).collect();
        let mut back = [0.0];
        decode(&summed, &mut back);
        assert_eq!(back[0].to_bits(), word[0].to_bits());
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
