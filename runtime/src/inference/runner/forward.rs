//! What an [`InferenceRunner`](super::InferenceRunner) runs on each batch: one forward function
//! (`|model, batch, out|`), or a prediction and a scoring function with fastai's `after_pred`
//! between them ([`PredThenScore`]).

use super::ForwardOutput;
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
    /// The model's output between the two parts of a forward function in two parts (`()` for
    /// one in one part).
    type Pred: 'static;
    /// The first part: the model's output on the batch, for fastai's `after_pred`; `None` for a
    /// forward function in one part, which computes nothing here.
    fn predict(&mut self, model: &M, batch: &B) -> Option<Self::Pred>;
    /// The second part, or the whole forward function: the batch's outputs into `out`, from the
    /// model's output `pred` (after `after_pred`) when there is one.
    fn score(&mut self, model: &M, pred: Option<Self::Pred>, batch: B, out: &mut Outputs) -> Self::Output;
}

impl<M, B, F, R> InferenceForward<M, B> for F
where
    F: FnMut(&M, B, &mut Outputs) -> R,
    R: ForwardOutput,
{
    type Output = R;
    type Pred = ();
    fn predict(&mut self, _model: &M, _batch: &B) -> Option<()> {
        None
    }
    fn score(&mut self, model: &M, _pred: Option<()>, batch: B, out: &mut Outputs) -> R {
        self(model, batch, out)
    }
}

/// A forward function in two parts, so that fastai's `after_pred` is delivered between them
/// during validation, as during training: `predict` computes the model's output from the batch,
/// the callbacks that take the model's output
/// ([`StepEvents::pred`](crate::callback::StepEvents::pred)) read and may replace it in
/// `after_pred` (with [`Context::training`](crate::callback::Context::training) `false`), and `score` puts the outputs from what they
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
    type Pred = T;
    fn predict(&mut self, model: &M, batch: &B) -> Option<T> {
        Some((self.predict)(model, batch))
    }
    fn score(&mut self, model: &M, pred: Option<T>, batch: B, out: &mut Outputs) -> R {
        let pred = pred.unwrap_or_else(|| (self.predict)(model, &batch));
        (self.score)(pred, batch, out)
    }
}
