//! Debugging callbacks: numerics checks ([`TerminateOnNaN`] on the loss, [`CheckNumerics`] on
//! the weights), step outputs processed, printed or
//! dumped along with the step ([`ProcessTensors`], [`TensorPrinter`], [`DumpTensors`] to `.npz`,
//! [`DumpTensorAsImage`] to PNG and TensorBoard), the model's parameters as images
//! ([`DumpParamAsImage`]), a file-triggered pause with a prompt ([`InjectShell`]), a step
//! watchdog ([`StepTimeout`]), helper threads and processes that live as long as training
//! ([`StartProcOrThread`]), and callbacks made of closures ([`CallbackFactory`]).

mod dump;
mod factory;
mod image;
mod npz;
mod numerics;
mod param_image;
mod process;
mod shell;
mod shell_input;
mod startable;
mod tensors;
mod timeout;

pub use dump::DumpTensors;
pub use factory::CallbackFactory;
pub use image::DumpTensorAsImage;
pub use numerics::CheckNumerics;
pub use param_image::DumpParamAsImage;
pub use process::{ProcessTensors, TensorPrinter};
pub use shell::{INJECT_SHELL_FILE, InjectShell};
pub use startable::{StartProcOrThread, StopFlag};
pub use tensors::{HostTensor, TensorValues};
pub use timeout::{StepTimeout, TimeoutAction};

use std::num::NonZeroU64;

use crate::callback::{Callback, Context, Order, Period};
use crate::error::Result;
use crate::fetch::{Fetch, Fetched};

/// Stops training at the first step whose loss is NaN or infinite (Keras's `TerminateOnNaN`,
/// tensorpack's `CheckNumerics` on the loss): the run ends cleanly at that step's boundary with
/// [`Outcome::NonFinite`](crate::callback::Outcome::NonFinite), after `after_train`, and returns
/// the model. No checkpoint is written from that step on (a saver's request at that boundary is
/// dropped, with a note on stderr), so the last good checkpoint stays the latest and
/// [`Trainer::auto_resume`](crate::trainer::Trainer::auto_resume) continues from it. It fetches the
/// loss every `every_k_steps` steps (every step by default): one device-to-host transfer of one
/// number, shared with any other fetch.
///
/// The other callbacks still see the rest of that step (its `after_step` and `trigger_step`), as
/// after any stop. Before, stoker ended such a run with an error; Keras and fastai stop it.
///
/// Its numeric order is fastai's `TerminateOnNaNCallback`'s, -9 ([`Order::value`]): unless a
/// constraint says otherwise, it checks the loss before the callbacks at the default 0 record it.
/// (fastai's raises `CancelFitException`, so the callbacks after it miss that `after_batch`; this
/// one stops at the step's boundary, so that the stop is reported as
/// [`Outcome::NonFinite`](crate::callback::Outcome::NonFinite). A callback returning
/// [`Flow::CancelFit`](crate::callback::Flow::CancelFit) has fastai's behaviour.)
///
/// Without it, the trainer still refuses to write a checkpoint of a non-finite loss or
/// non-finite weights (it checks them when a checkpoint is due) and stops the same way there, so
/// a run that diverged stops at its next checkpoint at the latest.
///
/// In data-parallel training it runs on every rank: the loss it checks is the local replica's, and
/// a non-finite loss on any rank poisons the averaged gradients of all.
///
/// ```
/// use burn_stoker::debug::TerminateOnNaN;
/// let check = TerminateOnNaN::new().every_k_steps(10);
/// # let _ = check;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TerminateOnNaN {
    period: Period,
}
crate::kind::kind!(TerminateOnNaN);

impl Default for TerminateOnNaN {
    fn default() -> Self {
        TerminateOnNaN::new()
    }
}

impl TerminateOnNaN {
    /// Check every step.
    pub fn new() -> Self {
        TerminateOnNaN { period: Period::every_k_steps(NonZeroU64::MIN) }
    }
    /// Check every `k` steps instead (at least 1).
    pub fn every_k_steps(mut self, k: u64) -> Self {
        self.period = Period::every_k_steps(NonZeroU64::new(k).unwrap_or(NonZeroU64::MIN));
        self
    }
}

static LOSS: [Fetch; 1] = [Fetch::host("loss")];

impl<M> Callback<M> for TerminateOnNaN {
    /// Every rank: each checks its own replica's loss.
    fn chief_only(&self) -> bool {
        false
    }
    fn fetches(&self) -> &[Fetch] {
        &LOSS
    }
    /// fastai's `order = -9`.
    fn order(&self) -> Order {
        Order::none().value(-9)
    }
    fn wants_fetch(&self, counters: &crate::callback::Counters) -> bool {
        self.period.steps_divide(counters.next_step())
    }
    fn after_step(&mut self, ctx: &mut Context<'_, M>, values: &Fetched<'_>) -> Result<()> {
        if !self.period.steps_divide(ctx.global_step()) {
            return Ok(());
        }
        let (loss, _) = values.host("loss")?;
        if let Some(bad) = loss.iter().find(|v| !v.is_finite()) {
            let reason =
                format!("the loss is {bad} at global step {} (epoch {})", ctx.global_step(), ctx.epoch_num());
            crate::logging::error!(
                "TerminateOnNaN: {reason}: training stops at this step, without its checkpoint"
            );
            ctx.stop_non_finite(reason);
        }
        Ok(())
    }
}
