//! The host's free memory and the process's resident memory.

use sysinfo::{MemoryRefreshKind, Pid, ProcessRefreshKind, ProcessesToUpdate, System};

use crate::callback::{Callback, Context};
use crate::error::Result;

const GB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Puts the host's memory each time it is triggered (every epoch by default), as tensorpack's
/// `HostMemoryTracker` does, plus the training process's own:
///
/// - `HostFreeMemory (GB)`: the memory available to new allocations without swapping (Linux's
///   `MemAvailable`), tensorpack's scalar;
/// - `HostProcessRSS (GB)`: this process's resident set size.
///
/// GB are 2³⁰ bytes, as in tensorpack. It also writes the free memory once to stderr before
/// training. Reading them costs a few small reads of `/proc` per trigger, nothing per step. It
/// runs on every worker in data-parallel training (not `chief_only`), as in tensorpack.
///
/// Exists with the `sys-metrics` feature only (`burn-stoker = { features = ["sys-metrics"] }`),
/// which compiles sysinfo and nvml-wrapper.
///
/// ```
/// use burn_stoker::{track::HostMemoryTracker, trigger::PeriodicTrigger};
///
/// let every_epoch = HostMemoryTracker::new();
/// let every_1000_steps = PeriodicTrigger::new(HostMemoryTracker::new()).every_k_steps(1000);
/// # let _ = (every_epoch, every_1000_steps);
/// ```
#[derive(Debug, Default)]
pub struct HostMemoryTracker {
    system: Option<System>,
    pid: Option<Pid>,
}
crate::kind::kind!(HostMemoryTracker);

impl HostMemoryTracker {
    /// The name of the scalar of the host's free memory.
    pub const FREE: &'static str = "HostFreeMemory (GB)";
    /// The name of the scalar of the process's resident memory.
    pub const PROCESS_RSS: &'static str = "HostProcessRSS (GB)";

    /// A tracker of both.
    pub fn new() -> Self {
        HostMemoryTracker::default()
    }

    /// The free memory and the process's resident set size, in bytes (the second when known).
    fn read(&mut self) -> (u64, Option<u64>) {
        let system = self.system.get_or_insert_with(System::new);
        system.refresh_memory_specifics(MemoryRefreshKind::nothing().with_ram());
        let rss = self.pid.and_then(|pid| {
            system.refresh_processes_specifics(
                ProcessesToUpdate::Some(&[pid]),
                false,
                ProcessRefreshKind::nothing().with_memory().without_tasks(),
            );
            system.process(pid).map(sysinfo::Process::memory)
        });
        (system.available_memory(), rss)
    }
}

impl<M> Callback<M> for HostMemoryTracker {
    /// Every rank (as in tensorpack): each rank reports its own host's memory.
    fn chief_only(&self) -> bool {
        false
    }
    fn setup(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        self.system = Some(System::new());
        self.pid = sysinfo::get_current_pid().ok();
        Ok(())
    }
    fn before_train(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        let (free, _) = self.read();
        crate::logging::info!("HostMemoryTracker: {:.2} GB of RAM free before training", free as f64 / GB);
        Ok(())
    }
    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let (free, rss) = self.read();
        ctx.monitors().put_scalar(Self::FREE, free as f64 / GB);
        if let Some(rss) = rss {
            ctx.monitors().put_scalar(Self::PROCESS_RSS, rss as f64 / GB);
        }
        Ok(())
    }
}
