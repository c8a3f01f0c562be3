//! Misuse found at setup, before anything is written or trained: a model that cannot learn as
//! given, a callback that would make the replicas of a world diverge. Each error names what to
//! change ([`ConfigError::Misuse`](crate::ConfigError::Misuse)).

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::Tensor;

use crate::callback::CallbackInfo;
use crate::error::{Error, Result};

/// The model's parameters must be on a device with autodiff (`device.autodiff()`), or the first
/// backward fails, after the log directory was prepared and the callbacks set up. A model
/// without parameters has nothing to check.
pub(super) fn require_autodiff<M: Module>(model: &M) -> Result<()> {
    /// The first parameter found on a device without autodiff: its path and its device.
    #[derive(Default)]
    struct Plain {
        path: Vec<String>,
        found: Option<(String, String)>,
    }
    impl ModuleVisitor for Plain {
        fn enter_module(&mut self, name: &str, _container_type: &str) {
            self.path.push(name.to_owned());
        }
        fn exit_module(&mut self, _name: &str, _container_type: &str) {
            self.path.pop();
        }
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let device = param.lazy_device();
            if self.found.is_none() && !device.is_autodiff() {
                self.found = Some((self.path.join("."), format!("{device:?}")));
            }
        }
    }
    let mut plain = Plain::default();
    model.visit(&mut plain);
    match plain.found {
        None => Ok(()),
        Some((path, device)) => Err(Error::misuse(format!(
            "the model's parameter `{path}` is on {device}, a device without autodiff: backward needs one. Build the model on `device.autodiff()` (burn_stoker::device::cpu() and the GPU devices of burn_stoker::device already are)"
        ))),
    }
}

/// In a world of several ranks, a callback that takes a value inside the step (the batch, the
/// model's output, the loss, the gradients: any of which it may replace) must run on every
/// rank: on the chief alone, rank 0's steps would differ from the others' and the replicas
/// diverge. Refused, naming the callback and the fix.
pub(super) fn refuse_chief_only_step_events(info: &CallbackInfo<'_>, world_size: usize) -> Result<()> {
    let hooks = info.step_events;
    let taken: Vec<&str> = [
        (hooks.batch, "the batch (before_batch)"),
        (hooks.pred, "the model's output (after_pred)"),
        (hooks.loss, "the loss (before_backward)"),
        (hooks.gradients, "the gradients (after_backward)"),
    ]
    .into_iter()
    .filter_map(|(takes, what)| takes.then_some(what))
    .collect();
    if world_size < 2 || !info.chief_only || taken.is_empty() {
        return Ok(());
    }
    Err(Error::misuse(format!(
        "callback `{}` takes {} inside the step and runs on the chief only (`chief_only`, true by default): in this data-parallel world of {world_size} ranks only rank 0's steps would go through it, and the replicas would diverge. Make it run on every rank: `#[callback(..., chief_only = false)]`, `fn chief_only(&self) -> bool {{ false }}` in its `impl Callback`, or `.set_chief_only(false)` on it",
        info.name,
        taken.join(", ")
    )))
}

/// A callback that declares fetches but takes no event of a training step
/// ([`Callback::takes_training_batches`](crate::callback::Callback::takes_training_batches)
/// `false`, fastai's `run_train = False`): its values would never be handed over.
pub(super) fn refuse_fetches_outside_training(info: &CallbackInfo<'_>) -> Result<()> {
    if info.takes_training_batches || info.fetches.is_empty() {
        return Ok(());
    }
    Err(Error::misuse(format!(
        "callback `{}` declares fetches but takes no event of a training step (`takes_training_batches` is false, fastai's `run_train = False`): its values, handed over in after_step, would never reach it. Drop its fetches, or let it take the training batches",
        info.name
    )))
}
