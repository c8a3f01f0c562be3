//! What an [`InferenceRunner`](super::InferenceRunner) runs on each batch: one forward function
//! (`|model, batch, out|`), or a prediction and a scoring function with fastai's `after_pred`
//! between them ([`PredThenScore`]).

use super::ForwardOutput;
use crate::callback::Context;
use crate::error::Result;
use crate::fetch::Outputs;

/// What an [`InferenceRunner`](super::InferenceRunner) runs on one batch of model `M` and batch
/// type `B`: implemented for every `FnMut(&M, B, &mut Outputs) -> R` (the forward function of
/// [`InferenceRunner::new`](super::InferenceRunner::new)) and for [`PredThenScore`]
/// ([`InferenceRunner::pred_then_score`](super::InferenceRunner::pred_then_score)).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an inference forward function for this model and batch",
    label = "expected `|model: &Model, batch: Batch, out: &mut Outputs| ...` returning `()` or a `usize`",
    note = "the model is the trainer's model type, the batch the validation data's batch type; annotate the closure's parameters"
)]
pub trait InferenceForward<M, B> {
    /// What the batch's run returns: `()` or the batch size.
    type Output: ForwardOutput;
    /// Run one batch: its outputs into `out`. `ctx` delivers the events inside the batch.
    fn run_batch(
        &mut self,
        model: &M,
        batch: B,
        out: &mut Outputs,
        ctx: &mut Context<'_, M>,
    ) -> Result<Self::Output>;
}

impl<M, B, F, R> InferenceForward<M, B> for F
where
    F: FnMut(&M, B, &mut Outputs) -> R,
    R: ForwardOutput,
{
    type Output = R;
    fn run_batch(&mut self, model: &M, batch: B, out: &mut Outputs, _ctx: &mut Context<'_, M>) -> Result<R> {
        Ok(self(model, batch, out))
    }
}

/// A forward function in two parts, so that fastai's `after_pred` is delivered between them
/// during validation, as during training: `predict` computes the model's output from the batch,
/// the callbacks that take the model's output
/// ([`StepHooks::pred`](crate::callback::StepHooks::pred)) read and may replace it in
/// `after_pred` (with [`Context::training`] `false`), and `score` puts the outputs from what they
/// left and the batch (the targets). Made by
/// [`InferenceRunner::pred_then_score`](super::InferenceRunner::pred_then_score).
#[derive(Debug, Clone)]
pub struct PredThenScore<P, S> {
    pub(super) predict: P,
    pub(super) score: S,
}

impl<M, B, P, S, T, R> InferenceForward<M, B> for PredThenScore<P, S>
where
    P: FnMut(&M, &B) -> T,
    S: FnMut(T, B, &mut Outputs) -> R,
    T: 'static,
    R: ForwardOutput,
{
    type Output = R;
    fn run_batch(&mut self, model: &M, batch: B, out: &mut Outputs, ctx: &mut Context<'_, M>) -> Result<R> {
        let pred = ctx.after_pred((self.predict)(model, &batch))?;
        Ok((self.score)(pred, batch, out))
    }
}
