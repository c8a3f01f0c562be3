//! Training data: what the trainer takes batches from ([`TrainData`]), with its two built-in
//! sources, a burn data loader and a `Vec` of batches.

use std::sync::Arc;

use burn::data::dataloader::{DataLoader, DataLoaderIterator};

use crate::error::{Error, Result};

/// Training data: anything that yields batches, epoch after epoch.
pub trait TrainData {
    /// What one step consumes. `'static` (owned tensors and values, as burn's batches are), so
    /// that a `before_batch` callback can read and replace it by its type
    /// ([`StepBatch`](crate::callback::StepBatch)).
    type Batch: 'static;
    /// One pass over the data.
    type Iter<'a>: BatchIter<Self::Batch>
    where
        Self: 'a;
    /// Start a pass.
    fn pass(&self) -> Self::Iter<'_>;
}

/// One pass over [`TrainData`].
pub trait BatchIter<B> {
    /// The next batch, `None` at the end of the pass.
    fn next_batch(&mut self) -> Option<Result<B>>;
    /// The number of batches in a pass, when known (asked after the first batch).
    fn batches_hint(&self) -> Option<u64>;
}

/// A burn data loader is training data; its number of batches per pass is worked out from its
/// progress after the first batch (all batches but the last have the same size).
impl<B: 'static> TrainData for Arc<dyn DataLoader<B>> {
    type Batch = B;
    type Iter<'a>
        = Box<dyn DataLoaderIterator<B> + 'a>
    where
        Self: 'a;
    fn pass(&self) -> Self::Iter<'_> {
        DataLoader::iter(self.as_ref())
    }
}

impl<B> BatchIter<B> for Box<dyn DataLoaderIterator<B> + '_> {
    fn next_batch(&mut self) -> Option<Result<B>> {
        self.next().map(|r| {
            r.map_err(|e| Error::Data {
                message: format!("the data loader failed: {e}"),
                source: Some(Box::new(e)),
            })
        })
    }
    fn batches_hint(&self) -> Option<u64> {
        let progress = self.progress();
        (progress.items_processed > 0).then(|| progress.items_total.div_ceil(progress.items_processed) as u64)
    }
}

/// Batches held in memory are training data (each pass clones them; burn tensors clone cheaply).
impl<B: Clone + 'static> TrainData for Vec<B> {
    type Batch = B;
    type Iter<'a>
        = VecBatches<'a, B>
    where
        Self: 'a;
    fn pass(&self) -> Self::Iter<'_> {
        VecBatches { batches: self, next: 0 }
    }
}

/// A pass over a `Vec` of batches.
#[derive(Debug)]
pub struct VecBatches<'a, B> {
    batches: &'a [B],
    next: usize,
}

impl<B: Clone> BatchIter<B> for VecBatches<'_, B> {
    fn next_batch(&mut self) -> Option<Result<B>> {
        let batch = self.batches.get(self.next)?.clone();
        self.next += 1;
        Some(Ok(batch))
    }
    fn batches_hint(&self) -> Option<u64> {
        Some(self.batches.len() as u64)
    }
}
