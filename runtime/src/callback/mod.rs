//! The callback trait, its events, the context a callback sees, and composition with order.
//!
//! One file per concept, from the bottom up: [`event`](Event) (the events, listed once),
//! `step` (the events inside a step: [`StepBatch`], [`StepPred`], [`StepLoss`], [`StepGradients`],
//! [`StepEvents`]),
//! `counters` ([`Counters`]), `context` ([`Context`] over the trainer's state), `order`
//! ([`Order`] and its topological sort), `base` (the [`Callback`] trait, [`Flow`], delivery) and
//! `set` ([`Callbacks`]: tuples, `Vec`s, `Option`s of callbacks), `validation` (what a callback
//! asks of the loop at once, [`Context::cancel`] and [`Context::request_validation`], recorded as
//! values, and the validation pass it hands the trainer), `named` ([`Named`]: any
//! callback under a name of its own, [`CallbackExt::named`]), `chief_only` ([`ChiefOnly`]: any
//! callback on the chief alone or on every rank, [`CallbackExt::set_chief_only`]), `forward` (the non-event methods
//! passed on to a wrapped callback, written once for every wrapper).

mod base;
mod chief_only;
mod context;
mod counters;
mod event;
mod forward;
mod named;
mod order;
mod outcome;
mod period;
pub(crate) mod set;
pub(crate) mod state;
mod step;
mod validation;

pub use crate::error::Cancel;
pub use base::{Callback, CallbackReturn, Flow, deliver};
pub use chief_only::ChiefOnly;
pub use context::Context;
pub(crate) use context::{
    CheckpointRequest, Control, PassEnd, Raised, TrainState, ValidationBatches, ValidationPass,
};
pub use counters::{Counters, counters_before_step};
pub(crate) use event::for_each_event;
pub use event::{Event, Phase};
pub(crate) use forward::forward_methods;
pub(crate) use named::type_part;
pub use named::{CallbackExt, Named};
pub use order::{Order, resolve_order, short_type_name};
pub use outcome::Outcome;
pub(crate) use outcome::StopReason;
pub use period::{Period, PeriodSetting};
pub use set::{CallbackInfo, Callbacks, OneCallback, StateOp};

pub use step::{StepBatch, StepEvents, StepGradients, StepLoss, StepPred};
