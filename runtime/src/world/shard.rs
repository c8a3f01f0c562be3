//! Each rank's shard of the training data: disjoint, and the same number of batches on every
//! rank, so that every rank takes the same steps.

use std::sync::Arc;

use burn::data::dataloader::DataLoader;

/// Data that can be split among the ranks of a world.
///
/// Every rank gets the same number of items (the remainder, fewer than the world's size, is
/// left out), so every rank takes the same number of steps per epoch; the trainer checks this at
/// every step and stops with an error naming the difference otherwise.
pub trait Shard: Sized {
    /// Rank `rank`'s part of `size` disjoint parts.
    fn shard(self, rank: usize, size: usize) -> Self;
}

/// Batches held in memory: rank `r` takes batches `r`, `r + size`, `r + 2 size`... so that the
/// ranks' first batches together are the single-device run's first `size` batches.
impl<B> Shard for Vec<B> {
    fn shard(self, rank: usize, size: usize) -> Self {
        assert!(rank < size, "rank {rank} is outside a world of {size}");
        let per_rank = self.len() / size;
        self.into_iter().skip(rank).step_by(size).take(per_rank).collect()
    }
}

/// A burn data loader: rank `r` takes the `r`-th contiguous run of `len / size` items (burn's
/// `DataLoader::slice`), batched and shuffled as the loader was built to.
impl<B: 'static> Shard for Arc<dyn DataLoader<B>> {
    fn shard(self, rank: usize, size: usize) -> Self {
        assert!(rank < size, "rank {rank} is outside a world of {size}");
        let per_rank = self.num_items() / size;
        self.slice(rank * per_rank, (rank + 1) * per_rank)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_are_dealt_round_robin_and_evenly() {
        let data: Vec<u32> = (0..7).collect();
        assert_eq!(data.clone().shard(0, 2), vec![0, 2, 4]);
        assert_eq!(data.clone().shard(1, 2), vec![1, 3, 5]);
        assert_eq!(data.clone().shard(2, 3), vec![2, 5]);
        assert_eq!(data.shard(0, 1), (0..7).collect::<Vec<_>>());
    }
}
