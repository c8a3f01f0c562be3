//! The run's hyper-parameters: the learning rate and the values registered by name.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};

/// The name of the built-in learning rate.
pub const LEARNING_RATE: &str = "learning_rate";

type Getter = Arc<dyn Fn() -> f64 + Send + Sync>;
type Setter = Arc<dyn Fn(f64) + Send + Sync>;

/// Where a named hyper-parameter's value lives.
#[derive(Clone)]
enum Slot {
    /// In the trainer.
    Value(f64),
    /// In an object of the user's, through a getter and a setter.
    Accessor { get: Getter, set: Setter },
}

impl Slot {
    fn get(&self) -> f64 {
        match self {
            Slot::Value(v) => *v,
            Slot::Accessor { get, .. } => get(),
        }
    }
    fn set(&mut self, value: f64) {
        match self {
            Slot::Value(v) => *v = value,
            Slot::Accessor { set, .. } => set(value),
        }
    }
}

impl PartialEq for Slot {
    /// Plain values compare by value; accessors by identity (the same getter and setter).
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Slot::Value(a), Slot::Value(b)) => a == b,
            (Slot::Accessor { get: g1, set: s1 }, Slot::Accessor { get: g2, set: s2 }) => {
                Arc::ptr_eq(g1, g2) && Arc::ptr_eq(s1, s2)
            }
            _ => false,
        }
    }
}

impl fmt::Debug for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Slot::Value(v) => write!(f, "{v:?}"),
            Slot::Accessor { get, .. } => write!(f, "{:?} (getter and setter)", get()),
        }
    }
}

/// The run's hyper-parameters: the learning rate, built in, and any other registered by name —
/// a plain value ([`register`](Self::register)) or a value held elsewhere and reached through a
/// getter and a setter ([`register_fn`](Self::register_fn),
/// [`register_shared`](Self::register_shared)), like tensorpack's `ObjAttrParam`.
///
/// Every kind is read with [`get`](Self::get), written with [`set`](Self::set), listed by
/// [`names`](Self::names), saved in checkpoints and restored on resume (the restored value goes
/// through the setter). The training step reads them through [`Step::hyper`](crate::trainer::Step::hyper).
///
/// Cloning shares the getters and setters; two `HyperParams` are equal when their learning rates
/// and plain values are equal and their accessors are the same closures.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use burn_stoker::state::HyperParams;
///
/// // A dropout rate read by a data pipeline on other threads.
/// let dropout = Arc::new(AtomicU64::new(0.5f64.to_bits()));
/// let mut hyper = HyperParams::new(1e-3);
/// hyper.register("weight_decay", 1e-4);
/// hyper.register_fn(
///     "dropout",
///     { let d = dropout.clone(); move || f64::from_bits(d.load(Ordering::Relaxed)) },
///     { let d = dropout.clone(); move |v: f64| d.store(v.to_bits(), Ordering::Relaxed) },
/// );
/// hyper.set("dropout", 0.25)?;
/// assert_eq!(f64::from_bits(dropout.load(Ordering::Relaxed)), 0.25);
/// assert_eq!(hyper.get("dropout"), Some(0.25));
/// assert_eq!(hyper.names().collect::<Vec<_>>(), ["learning_rate", "weight_decay", "dropout"]);
/// # Ok::<(), burn_stoker::Error>(())
/// ```
#[derive(Clone, PartialEq)]
pub struct HyperParams {
    learning_rate: f64,
    named: Vec<(Cow<'static, str>, Slot)>,
}

impl fmt::Debug for HyperParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("HyperParams");
        s.field(LEARNING_RATE, &self.learning_rate);
        for (name, slot) in &self.named {
            s.field(name, slot);
        }
        s.finish()
    }
}

impl HyperParams {
    /// A learning rate and nothing else.
    pub fn new(learning_rate: f64) -> Self {
        HyperParams { learning_rate, named: Vec::new() }
    }
    /// The learning rate the optimizer uses at the next step.
    #[inline]
    pub fn learning_rate(&self) -> f64 {
        self.learning_rate
    }
    /// Set the learning rate.
    pub fn set_learning_rate(&mut self, value: f64) {
        self.learning_rate = value;
    }

    fn insert(&mut self, name: Cow<'static, str>, slot: Slot) {
        match self.named.iter_mut().find(|(n, _)| *n == name) {
            Some(entry) => entry.1 = slot,
            None => self.named.push((name, slot)),
        }
    }

    /// Register a hyper-parameter `name` held here, with its initial value. Registering a name
    /// again replaces its registration (an accessor registered under it is dropped);
    /// `"learning_rate"` sets the learning rate.
    pub fn register(&mut self, name: impl Into<Cow<'static, str>>, value: f64) {
        let name = name.into();
        if name == LEARNING_RATE {
            self.learning_rate = value;
        } else {
            self.insert(name, Slot::Value(value));
        }
    }

    /// Register a hyper-parameter `name` that lives in an object of yours (tensorpack's
    /// `ObjAttrParam`): [`get`](Self::get) calls `get`, [`set`](Self::set) calls `set`, at the
    /// moments a callback (or a checkpoint's restore) reads or writes it — between steps. The
    /// value is never copied: what `get` returns is the value. Registering a name again replaces
    /// its registration.
    ///
    /// The closures are `Send + Sync` so that the value can be shared with a data pipeline's
    /// threads (an `Arc<AtomicU64>` holding `f64` bits, a `Mutex`; [`SharedParam`] is one).
    ///
    /// # Panics
    /// If `name` is `"learning_rate"`: the built-in learning rate is held by the trainer, which
    /// hands it to the optimizer at every step.
    pub fn register_fn(
        &mut self,
        name: impl Into<Cow<'static, str>>,
        get: impl Fn() -> f64 + Send + Sync + 'static,
        set: impl Fn(f64) + Send + Sync + 'static,
    ) {
        let name = name.into();
        assert!(
            name != LEARNING_RATE,
            "`learning_rate` is built in and cannot be registered with a getter and a setter; set it with `set_learning_rate` or a setter callback"
        );
        self.insert(name, Slot::Accessor { get: Arc::new(get), set: Arc::new(set) });
    }

    /// Register a hyper-parameter `name` held in `param`: a [`register_fn`](Self::register_fn)
    /// with `param`'s own getter and setter. Every clone of `param` sees the value.
    ///
    /// # Panics
    /// If `name` is `"learning_rate"`.
    pub fn register_shared(&mut self, name: impl Into<Cow<'static, str>>, param: &SharedParam) {
        let (getter, setter) = (param.clone(), param.clone());
        self.register_fn(name, move || getter.get(), move |v| setter.set(v));
    }

    /// The value of `name` (`"learning_rate"` or a registered name).
    pub fn get(&self, name: &str) -> Option<f64> {
        if name == LEARNING_RATE {
            return Some(self.learning_rate);
        }
        self.named.iter().find(|(n, _)| n == name).map(|(_, slot)| slot.get())
    }
    /// Set `name`; an unknown name is an error listing the known ones, and so is a value that is
    /// not finite.
    pub fn set(&mut self, name: &str, value: f64) -> Result<()> {
        if !value.is_finite() {
            return Err(Error::hyper_param(format!("hyper-parameter `{name}` cannot be set to {value}")));
        }
        if name == LEARNING_RATE {
            self.learning_rate = value;
            return Ok(());
        }
        match self.named.iter_mut().find(|(n, _)| n == name) {
            Some(entry) => {
                entry.1.set(value);
                Ok(())
            }
            None => Err(self.unknown(name)),
        }
    }
    /// Every name, the learning rate first, then in the order of registration.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        std::iter::once(LEARNING_RATE).chain(self.named.iter().map(|(n, _)| &**n))
    }
    /// Whether `name` is held through a getter and a setter rather than here.
    pub fn is_external(&self, name: &str) -> bool {
        self.named.iter().any(|(n, slot)| n == name && matches!(slot, Slot::Accessor { .. }))
    }

    pub(crate) fn unknown(&self, name: &str) -> Error {
        Error::hyper_param(format!(
            "unknown hyper-parameter `{name}`; known: {}",
            self.names().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
        ))
    }
}

/// A hyper-parameter value shared between the trainer and the code that uses it — a data
/// pipeline's threads, the training step, a model's dropout: an `f64` behind an `Arc`, read and
/// written atomically. Clones share the value. Register it with
/// [`Trainer::hyper_param_shared`](crate::trainer::Trainer::hyper_param_shared) (or
/// [`HyperParams::register_shared`]); then every setter callback can drive it by name, and
/// checkpoints save and restore it.
///
/// ```
/// # use burn_stoker::prelude::*;
/// # use burn_stoker::state::SharedParam;
/// # use burn::nn::{Linear, LinearConfig};
/// # use burn::optim::AdamConfig;
/// # use burn::tensor::Tensor;
/// # let device = burn_stoker::device::cpu();
/// # let model: Linear = LinearConfig::new(4, 1).init(&device);
/// # let batches = vec![(Tensor::<2>::ones([8, 4], &device), Tensor::<2>::zeros([8, 1], &device))];
/// let noise = SharedParam::new(0.3);
/// let in_step = noise.clone();
/// Trainer::new(model, AdamConfig::new().init(), batches)
///     .max_epoch(10)
///     .log_dir(std::env::temp_dir().join(format!("stoker-doc-shared-{}", std::process::id())))
///     .default_callbacks(DefaultCallbacks::none())
///     .hyper_param_shared("input_noise", &noise)
///     .callbacks(ScheduledHyperParamSetter::new("input_noise", [(0, 0.3), (10, 0.0)]).linear())
///     .train(move |model: &Linear, (x, y): (Tensor<2>, Tensor<2>), _step: &mut Step<'_>| {
///         let x = x.clone() + x.ones_like().mul_scalar(in_step.get() as f32);
///         (model.forward(x) - y).powi_scalar(2).mean()
///     })?;
/// assert_eq!(noise.get(), 0.0);
/// # Ok::<(), burn_stoker::Error>(())
/// ```
#[derive(Clone)]
pub struct SharedParam(Arc<AtomicU64>);

impl SharedParam {
    /// A shared value, initially `value`.
    pub fn new(value: f64) -> Self {
        SharedParam(Arc::new(AtomicU64::new(value.to_bits())))
    }
    /// The value.
    #[inline]
    pub fn get(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::Relaxed))
    }
    /// Set the value (every clone sees it).
    #[inline]
    pub fn set(&self, value: f64) {
        self.0.store(value.to_bits(), Ordering::Relaxed);
    }
}

impl fmt::Debug for SharedParam {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("SharedParam").field(&self.get()).finish()
    }
}
