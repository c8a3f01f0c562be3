//! The state a [`Context`](crate::callback::Context) exposes, one layer below the callbacks: the monitor
//! store ([`Monitors`]), the hyper-parameters ([`HyperParams`]), what to keep of the checkpoints
//! ([`KeepPolicy`]), how state is written to disk (the crate-private `json_f64` and `write_atomic`), and the
//! files of a log directory opened so that nothing planted there is followed, waited on or read
//! without bound (`log_file`), the
//! bounded queues of the background writers ([`WriterQueue`], [`WriterFailure`],
//! [`DroppedWork`]), and the scalar a saver or an early stop watches for its best value (the
//! crate-private `Watched`).
//!
//! Nothing here knows about callbacks: the modules above (`callback`, `monitor`, `param`,
//! `saver`, ...) use this one, never the reverse (`python3 bench/tools/module_graph.py` checks it).

mod clock;
mod direction;
mod hyper;
mod journal;
mod keep;
mod leftovers;
mod log_file;
mod monitors;
mod persist;
mod queue;
mod record;
mod watched;

pub use clock::{Clock, ManualClock, MonotonicClock};
pub use direction::Direction;
pub use hyper::{HyperParams, LEARNING_RATE, SharedParam};
pub use journal::JOURNAL_DIR;
pub(crate) use journal::{
    Journal, Mark, entries as journal_entries, is_missing_or_mismatched as journal_missing_or_mismatched,
    push_line as push_journal_line,
};
pub use keep::KeepPolicy;
pub(crate) use keep::{CHECKPOINTS, TRAINER, check_copy_name};
pub(crate) use leftovers::{
    host_name, is_leftover, leftover_of, move_aside, remove_leftover_temporaries, temporary_name,
};
pub(crate) use log_file::{
    LengthRead, MAX_INDEX_BYTES, MAX_STATS_BYTES, open_own, read_bounded, read_exact_len,
    read_own_text_bounded, read_text_bounded, warn_if_shared,
};
pub use monitors::{Better, MonitorSink, Monitors};
pub(crate) use monitors::{ReadJournal, journal_name};
pub(crate) use persist::{create_dir_all_synced, sync_dir, write_new_file};
pub(crate) use persist::{json_f64, parse_f64, write_atomic};
pub(crate) use queue::{BoundedSender, bounded};
pub use queue::{DroppedWork, MONITOR_QUEUE_CAPACITY, WriterFailure, WriterQueue};
pub use record::{EpochStats, Histogram, Image, Record, StatsRow, Value};
pub(crate) use watched::Watched;
