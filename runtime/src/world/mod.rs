//! Data-parallel training: a world of ranks that average their gradients every step.

pub(crate) mod flat;
#[cfg(feature = "mpi")]
pub(crate) mod mpi;
