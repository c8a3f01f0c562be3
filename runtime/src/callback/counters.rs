//! The trainer's counters.

/// The trainer's counters. `epoch_num` is 1-based; `global_step` counts finished steps (inside
/// `after_step` and `trigger_step` it already counts the step that just ran); `local_step` counts
/// the finished steps of the current epoch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub(crate) epoch_num: u64,
    pub(crate) global_step: u64,
    pub(crate) local_step: u64,
    pub(crate) starting_epoch: u64,
    pub(crate) max_epoch: u64,
    pub(crate) steps_per_epoch: u64,
}

impl Counters {
    /// The current epoch, 1-based; in `trigger_epoch`, the epoch that just finished. 0 before the first epoch.
    pub fn epoch_num(&self) -> u64 {
        self.epoch_num
    }
    /// Finished steps since the run (or the resumed run's first run) began.
    pub fn global_step(&self) -> u64 {
        self.global_step
    }
    /// Finished steps in the current epoch.
    pub fn local_step(&self) -> u64 {
        self.local_step
    }
    /// The first epoch this run trains (greater than 1 on resume).
    pub fn starting_epoch(&self) -> u64 {
        self.starting_epoch
    }
    /// The last epoch.
    pub fn max_epoch(&self) -> u64 {
        self.max_epoch
    }
    /// Steps in each epoch.
    pub fn steps_per_epoch(&self) -> u64 {
        self.steps_per_epoch
    }
    /// The global step the run ends at if no epoch is cut short: `global_step` plus the steps
    /// left in the current epoch and in the epochs after it. It holds from `before_epoch` to
    /// `trigger_epoch` of every epoch, whatever `global_step` started at (a fresh run from
    /// `starting_epoch` > 1 starts at 0); before the first epoch it assumes the run starts at an
    /// epoch's beginning (a run resumed mid-epoch learns its first step only at `before_epoch`).
    pub fn last_step(&self) -> u64 {
        let spe = self.steps_per_epoch;
        let left_in_epoch =
            if self.epoch_num < self.starting_epoch { 0 } else { spe.saturating_sub(self.local_step) };
        let epochs_after = self.max_epoch.saturating_sub(self.epoch_num);
        self.global_step + left_in_epoch + epochs_after * spe
    }
    /// The counters as they were before the step that just ran.
    pub fn before_step(&self) -> Counters {
        Counters {
            global_step: self.global_step.saturating_sub(1),
            local_step: self.local_step.saturating_sub(1),
            ..*self
        }
    }
    /// The number the step about to run will have (`global_step + 1`), as seen from `before_step`.
    pub fn next_step(&self) -> u64 {
        self.global_step + 1
    }
}

/// The counters as they were before the step that just ran ([`Counters::before_step`]), for
/// the `#[enable_if]` predicates that generated code evaluates in `after_step`: it keeps the
/// answer of before the step, as `EnableCallbackIf` does.
#[doc(hidden)]
pub fn counters_before_step(counters: &Counters) -> Counters {
    counters.before_step()
}
