//! The integration tests of stoker, one binary (each file a module): fewer binaries to link, each
//! linking burn. `signals.rs` stays a binary of its own: it raises signals in its own process, which
//! would reach every trainer running in the same process.

// `tests/ui/pass/renamed_crate.rs` names the runtime `::renamed`: an extern prelude name, which only
// the crate root can give.
extern crate burn_stoker as renamed;

mod batch_events;
#[cfg(feature = "hdf5")]
mod callback_data;
mod catalogue;
mod checkpoint;
mod comet;
mod counters;
mod debug;
mod deferred;
mod docs;
mod dsl;
mod embedding;
mod errors;
mod families;
mod fastai_cancels;
mod fastai_flags;
mod fastai_loop;
mod fastai_lr_find;
mod fastai_scopes;
mod inference;
mod lifecycle;
mod log_dir;
mod logging;
mod matrix;
mod metrics;
mod misuse;
mod mixup;
mod mlflow;
mod modify;
mod monitor_catalogue;
mod monitors;
mod neon_defaults;
mod param;
mod resume;
mod resume_guards;
mod rollback;
mod seed;
mod stop;
mod summary;
mod tensorboard_format;
mod track;
mod ui;
mod ui_pass;
mod validation_phase;
mod world;
mod world_inference;
mod world_mpi;
