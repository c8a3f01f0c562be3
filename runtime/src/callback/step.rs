//! The events inside a step: the batch before the step (fastai's `before_batch`), the model's
//! output before the loss (`after_pred`), the loss before backward, the gradients before the
//! optimizer.

use std::any::{Any, type_name};
use std::cell::RefCell;

use burn::optim::GradientsParams;
use burn::tensor::Tensor;

use crate::error::{Error, Result};
use crate::fetch::{OutputTensor, Outputs};

/// Which events inside a step a callback takes
/// ([`Callback::step_events`](crate::callback::Callback::step_events)). Combine them with
/// [`and`](Self::and): `StepEvents::BATCH.and(StepEvents::LOSS)`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StepEvents {
    /// [`Callback::before_batch`](crate::callback::Callback::before_batch): the batch, before the step
    /// function runs on it (and each batch of a validation pass).
    pub batch: bool,
    /// [`Callback::after_pred`](crate::callback::Callback::after_pred): the model's output, before the
    /// loss (handed over by [`Step::pred`](crate::trainer::Step::pred)).
    pub pred: bool,
    /// [`Callback::before_backward`](crate::callback::Callback::before_backward): the loss, before backward.
    pub loss: bool,
    /// [`Callback::after_backward`](crate::callback::Callback::after_backward): the gradients, before the
    /// optimizer.
    pub gradients: bool,
}

impl StepEvents {
    /// None.
    pub const NONE: StepEvents = StepEvents { batch: false, pred: false, loss: false, gradients: false };
    /// The batch only.
    pub const BATCH: StepEvents = StepEvents { batch: true, ..StepEvents::NONE };
    /// The model's output only.
    pub const PRED: StepEvents = StepEvents { pred: true, ..StepEvents::NONE };
    /// The loss only.
    pub const LOSS: StepEvents = StepEvents { loss: true, ..StepEvents::NONE };
    /// The gradients only.
    pub const GRADIENTS: StepEvents = StepEvents { gradients: true, ..StepEvents::NONE };

    /// The events of both.
    pub const fn and(self, other: StepEvents) -> StepEvents {
        StepEvents {
            batch: self.batch || other.batch,
            pred: self.pred || other.pred,
            loss: self.loss || other.loss,
            gradients: self.gradients || other.gradients,
        }
    }
}

/// A value of the step whose type only the user's code knows (the batch, the model's output),
/// read and replaced by its type: an `Option<T>` in a `RefCell`, seen as `dyn Any`, present from
/// the slot's creation to its end.
struct Erased<'a> {
    value: &'a RefCell<dyn Any>,
    type_name: &'static str,
    /// What the value is, for the messages: "the batch", "the model's output".
    what: &'static str,
}

impl<'a> Erased<'a> {
    fn new<T: 'static>(value: &'a RefCell<Option<T>>, what: &'static str) -> Self {
        Erased { value, type_name: type_name::<T>(), what }
    }
    fn is<T: 'static>(&self) -> bool {
        self.value.borrow().is::<Option<T>>()
    }
    /// `f` on the value, taken out and put back (replaced by what `f` returns).
    fn update<T: 'static>(&self, f: impl FnOnce(T) -> T) -> Result<()> {
        let mut value = self.value.borrow_mut();
        let slot = value.downcast_mut::<Option<T>>().ok_or_else(|| self.mismatch::<T>())?;
        let taken = slot.take().expect("the slot holds its value between events");
        *slot = Some(f(taken));
        Ok(())
    }
    fn with<T: 'static, R>(&self, f: impl FnOnce(&T) -> R) -> Result<R> {
        let value = self.value.borrow();
        let slot = value.downcast_ref::<Option<T>>().ok_or_else(|| self.mismatch::<T>())?;
        Ok(f(slot.as_ref().expect("the slot holds its value between events")))
    }
    fn set<T: 'static>(&self, new: T) -> Result<()> {
        let mut value = self.value.borrow_mut();
        let slot = value.downcast_mut::<Option<T>>().ok_or_else(|| self.mismatch::<T>())?;
        *slot = Some(new);
        Ok(())
    }
    #[cold]
    fn mismatch<T>(&self) -> Error {
        Error::fetch(format!("{} is a `{}`, not a `{}`", self.what, self.type_name, type_name::<T>()))
    }
}

impl std::fmt::Debug for Erased<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Erased").field("type_name", &self.type_name).finish_non_exhaustive()
    }
}

/// Reading and replacing an erased value by its type: the same methods for the batch and the
/// model's output.
macro_rules! erased_methods {
    ($what:literal, $T:ident) => {
        /// Whether the value is a `T`.
        pub fn is<$T: 'static>(&self) -> bool {
            self.slot.is::<$T>()
        }
        /// The value's type, as [`std::any::type_name`] writes it.
        pub fn type_name(&self) -> &'static str {
            self.slot.type_name
        }
        #[doc = concat!("A copy of ", $what, " (burn tensors clone cheaply); an error when it is not a `T`.")]
        pub fn get<$T: Clone + 'static>(&self) -> Result<$T> {
            self.slot.with(<$T>::clone)
        }
        #[doc = concat!("`f` on ", $what, ", borrowed; an error when it is not a `T`.")]
        pub fn with<$T: 'static, R>(&self, f: impl FnOnce(&$T) -> R) -> Result<R> {
            self.slot.with(f)
        }
        #[doc = concat!("Replace ", $what, "; an error when it is not a `T` (the replacement has the type of the value).")]
        pub fn set<$T: 'static>(&self, value: $T) -> Result<()> {
            self.slot.set(value)
        }
        #[doc = concat!("Replace ", $what, " by `f` of it (taken by value); an error when it is not a `T`.")]
        pub fn update<$T: 'static>(&self, f: impl FnOnce($T) -> $T) -> Result<()> {
            self.slot.update(f)
        }
    };
}

/// The batch about to be run, handed to
/// [`Callback::before_batch`](crate::callback::Callback::before_batch) (fastai's `before_batch`:
/// MixUp, CutMix, label smoothing, data-side transforms): read it and replace it by its type, the
/// step function's batch type (`(Tensor<2>, Tensor<1, Int>)`...). The step function runs on what
/// the last callback left; during a validation pass, so does the
/// [`InferenceRunner`](crate::inference::InferenceRunner)'s forward function.
///
/// ```
/// use burn::tensor::Tensor;
/// use burn_stoker::callback::StepBatch;
///
/// // Scale the inputs of a `(inputs, targets)` batch.
/// fn scale(batch: &StepBatch<'_>) -> burn_stoker::Result<()> {
///     batch.update(|(x, y): (Tensor<2>, Tensor<2>)| (x * 0.5, y))
/// }
/// # let _ = scale;
/// ```
#[derive(Debug)]
pub struct StepBatch<'a> {
    slot: Erased<'a>,
}

impl<'a> StepBatch<'a> {
    pub(crate) fn new<B: 'static>(batch: &'a RefCell<Option<B>>) -> Self {
        StepBatch { slot: Erased::new(batch, "the batch") }
    }
    erased_methods!("the batch", B);
}

/// The model's output in the step being run, handed to
/// [`Callback::after_pred`](crate::callback::Callback::after_pred) (fastai's `after_pred`) when the
/// step function hands it over with [`Step::pred`](crate::trainer::Step::pred): read it and
/// replace it by its type; the loss is computed from what the last callback left.
#[derive(Debug)]
pub struct StepPred<'a> {
    slot: Erased<'a>,
}

impl<'a> StepPred<'a> {
    pub(crate) fn new<T: 'static>(pred: &'a RefCell<Option<T>>) -> Self {
        StepPred { slot: Erased::new(pred, "the model's output") }
    }
    erased_methods!("the model's output", T);
}

/// The loss of the step being run, handed to
/// [`Callback::before_backward`](crate::callback::Callback::before_backward): read it, replace it (the
/// replacement is what backward differentiates and what the `"loss"` output holds), and read the step's other
/// outputs (an RNN's activations for an activation penalty).
#[derive(Debug)]
pub struct StepLoss<'a> {
    pub(crate) loss: RefCell<Option<Tensor<1>>>,
    pub(crate) outputs: &'a Outputs,
}

impl StepLoss<'_> {
    /// The loss as it stands (a rank-1 tensor of one element, on the autodiff graph).
    pub fn get(&self) -> Tensor<1> {
        self.loss.borrow().clone().expect("the loss is present during before_backward")
    }
    /// Replace the loss.
    pub fn set(&self, loss: Tensor<1>) {
        *self.loss.borrow_mut() = Some(loss);
    }
    /// Change the loss with `f` (e.g. `|loss| loss + penalty`).
    pub fn update(&self, f: impl FnOnce(Tensor<1>) -> Tensor<1>) {
        let mut slot = self.loss.borrow_mut();
        let loss = slot.take().expect("the loss is present during before_backward");
        *slot = Some(f(loss));
    }
    /// A named output the step put (with the autodiff graph, so a penalty on it trains).
    pub fn output(&self, name: &str) -> Option<&OutputTensor> {
        self.outputs.get(name)
    }
}

/// The gradients of the step being run, handed to
/// [`Callback::after_backward`](crate::callback::Callback::after_backward). A callback may change them, or
/// take them away: when no gradients are left after every callback, the trainer skips the optimizer for this
/// step (gradient accumulation).
#[derive(Debug)]
pub struct StepGradients {
    pub(crate) grads: RefCell<Option<GradientsParams>>,
}

impl StepGradients {
    /// Whether gradients are present (a previous callback may have taken them).
    pub fn is_present(&self) -> bool {
        self.grads.borrow().is_some()
    }
    /// Take the gradients out; unless some callback puts gradients back, the optimizer does not
    /// run at this step.
    pub fn take(&self) -> Option<GradientsParams> {
        self.grads.borrow_mut().take()
    }
    /// Put gradients (back) for the optimizer.
    pub fn set(&self, grads: GradientsParams) {
        *self.grads.borrow_mut() = Some(grads);
    }
    /// Change the gradients in place with `f`, if present.
    pub fn update(&self, f: impl FnOnce(GradientsParams) -> GradientsParams) {
        let mut slot = self.grads.borrow_mut();
        if let Some(grads) = slot.take() {
            *slot = Some(f(grads));
        }
    }
}
