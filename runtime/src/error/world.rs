//! [`WorldError`]: the ranks of a data-parallel world that cannot go on together.

/// Why the ranks of a data-parallel world cannot go on together: what
/// [`Error::World`](crate::Error::World) holds. The error a rank itself ended with is an
/// [`Error::Rank`](crate::Error::Rank), naming it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorldError {
    /// Another rank failed (or left the world), so this rank stopped at the same step boundary as
    /// every other; that rank's own error tells why.
    #[error("rank {rank} of the data-parallel world failed, so every rank stopped")]
    RankFailed {
        /// The rank that failed first (the lowest one when several failed at the same step).
        rank: usize,
    },
    /// The ranks do not line up: another model or other hyper-parameters, another point of
    /// the loop, another number of values in a sum, another checkpoint to resume from, or
    /// replicas whose weights drifted apart. The message says what differs and on which rank.
    #[error("{0}")]
    Mismatch(String),
    /// The transport could not be set up (MPI initialized twice, without the threading stoker
    /// needs), or was given no device.
    #[error("{0}")]
    Transport(String),
}
