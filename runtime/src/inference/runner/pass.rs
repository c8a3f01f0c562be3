//! An [`InferenceRunner`](super::InferenceRunner)'s pass as the trainer runs it: the data, the
//! forward function and the inferencers handed over ([`Pass`]), and one pass's batches, each
//! taken through the stages the trainer delivers fastai's batch events between (`Batches`).

use std::any::Any;
use std::cell::RefCell;

use burn::module::Module;

use super::batch_size::inferred_batch_size;
use super::{ForwardOutput, Inference, InferenceForward};
use crate::callback::{Context, PassEnd, StepBatch, StepPred, ValidationBatches, ValidationPass};
use crate::error::Result;
use crate::fetch::Outputs;
use crate::trainer::{BatchIter, TrainData};

/// What a runner hands the trainer for a pass, and takes back after it.
pub(super) struct Pass<D, F> {
    pub(super) data: D,
    pub(super) forward: F,
    pub(super) inference: Inference,
}

impl<M, D, F> ValidationPass<M> for Pass<D, F>
where
    M: Module,
    D: TrainData + 'static,
    F: InferenceForward<M, D::Batch> + 'static,
{
    fn batches<'a>(&'a mut self, ctx: &mut Context<'_, M>) -> Box<dyn ValidationBatches + 'a>
    where
        M: 'a,
    {
        let inference = &mut self.inference;
        inference.inferencers.iter_mut().for_each(|i| i.before_inference());
        inference.totals.iter_mut().for_each(super::DeviceTotal::clear);
        inference.transfers_at_start = inference.plan.transfers();
        Box::new(Batches {
            iter: self.data.pass(),
            forward: &mut self.forward,
            model: ctx.model().valid(),
            batch: RefCell::new(None),
            pred: RefCell::new(None),
            returned: None,
            inference,
            batches: 0,
        })
    }

    fn end(&mut self, ctx: &mut Context<'_, M>, end: PassEnd) -> Result<()> {
        self.inference.end_pass(ctx, end)
    }

    fn may_be_short(&self) -> bool {
        !self.inference.data_parallel
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// One pass's batches: the pass over the data, the model in evaluation mode, the batch and the
/// model's output of the batch being run (in slots the batch events read and replace).
struct Batches<'a, I, F, M, B, P> {
    iter: I,
    forward: &'a mut F,
    model: M,
    batch: RefCell<Option<B>>,
    pred: RefCell<Option<P>>,
    /// The batch size the forward function returned.
    returned: Option<usize>,
    inference: &'a mut Inference,
    /// The batches the inferencers took.
    batches: u64,
}

impl<I, F, M, B, P> ValidationBatches for Batches<'_, I, F, M, B, P>
where
    I: BatchIter<B>,
    F: InferenceForward<M, B, Pred = P>,
    B: 'static,
    P: 'static,
{
    fn next(&mut self) -> Option<Result<()>> {
        let batch = match self.iter.next_batch()? {
            Ok(batch) => batch,
            Err(error) => return Some(Err(error)),
        };
        self.inference.outputs.clear();
        *self.batch.get_mut() = Some(batch);
        *self.pred.get_mut() = None;
        Some(Ok(()))
    }

    fn batch(&self) -> StepBatch<'_> {
        StepBatch::new(&self.batch)
    }

    fn predict(&mut self) -> Option<StepPred<'_>> {
        let batch = self.batch.get_mut().as_ref().expect("a batch was taken");
        let pred = self.forward.predict(&self.model, batch)?;
        *self.pred.get_mut() = Some(pred);
        Some(StepPred::new(&self.pred))
    }

    fn score(&mut self) -> Result<()> {
        let batch = self.batch.get_mut().take().expect("a batch was taken");
        let pred = self.pred.get_mut().take();
        let outputs = &mut self.inference.outputs;
        self.returned = self.forward.score(&self.model, pred, batch, outputs).batch_size();
        Ok(())
    }

    fn outputs(&mut self) -> &mut Outputs {
        &mut self.inference.outputs
    }

    fn infer(&mut self) -> Result<()> {
        let run = &mut *self.inference;
        if self.batches == 0 {
            run.plan.check_names(
                &run.outputs,
                &[("InferenceRunner".into(), run.mask)],
                "its forward function",
            )?;
        }
        let batch_size = match self.returned {
            Some(size) => Some(size),
            None if run.needs_batch_size => {
                Some(inferred_batch_size(&run.outputs, &mut run.per_sample, &run.inferencers)?)
            }
            None => None,
        };
        // The host inferencers' values in one transfer; nothing when every inferencer sums on
        // the device.
        if run.host_mask != 0 {
            run.plan.fill(&run.outputs, run.host_mask, self.batches)?;
        }
        let values = run.plan.view();
        for ((inferencer, &on_device), total) in
            run.inferencers.iter_mut().zip(&run.on_device).zip(&mut run.totals)
        {
            if let Some(size) = batch_size {
                inferencer.set_batch_size(size);
            }
            if on_device {
                total.add(inferencer.batch_sums(&run.outputs)?);
            } else {
                inferencer.on_batch(&values)?;
            }
        }
        self.batches += 1;
        Ok(())
    }

    fn length(&self) -> Option<u64> {
        self.iter.batches_hint()
    }
}
