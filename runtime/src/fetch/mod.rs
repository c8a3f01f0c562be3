//! Named values computed along with a training step, and their trip to the callbacks that asked.
//!
//! The training step puts named tensors into [`Outputs`] (the loss is always there as `"loss"`).
//! Callbacks declare what they may want with [`Callback::fetches`](crate::callback::Callback::fetches) and
//! say at each step whether they want it now with
//! [`Callback::wants_fetch`](crate::callback::Callback::wants_fetch). After the step the trainer copies the
//! host values every interested callback asked for to the host in **one** transfer, hands device
//! tensors over as they are, and on a step where nobody asked it transfers nothing.
//!
//! A **deferred** fetch ([`Fetch::deferred`], `#[fetch("cost", deferred)]`) is a host value read
//! back without making the step wait for the device: the trainer keeps the step's tensors, reads
//! them back with a burn `Transaction` executed asynchronously, and goes on with the next step;
//! the values reach the callbacks that asked in the [`fetched`](crate::callback::Callback::fetched)
//! event of a later step, each step's with the step it belongs to ([`Fetched::step`]). At most
//! one read is in flight; the steps that ask meanwhile, or sooner than
//! [`Trainer::deferred_read_interval`](crate::trainer::Trainer::deferred_read_interval) after
//! the last read started, join the next read (on a CPU backend, where a read costs nothing, each
//! step's values arrive at the next step). Before each epoch's `after_epoch`, before a checkpoint
//! and before `after_train` the trainer reads and waits for every step's values and delivers
//! them, so an epoch's values stay in that epoch, a checkpoint holds what its callbacks received
//! and a resumed run receives none twice.

// The files, in the order a value travels: what a step produces (`outputs`), what a callback
// declares it may fetch (`declare`), the plan that resolves the declarations to slots of the one
// transfer and fills them (`plan`), the deferred reads it owns (`deferred`, one read in `read`),
// and the view a callback receives with the types a value is handed over as (`view`).
mod declare;
mod deferred;
mod outputs;
mod plan;
mod read;
mod view;

pub use declare::{Fetch, FetchKind};
pub use outputs::{OutputTensor, Outputs};
pub(crate) use plan::{FetchPlan, joined, read_now};
pub use view::{FetchValue, Fetched};
