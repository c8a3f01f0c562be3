//! The body both averages share: sampling, reports, suffix, one accumulator per output, and
//! their callback methods.

use std::borrow::Cow;

use serde_json::{Map, Value as Json};

use super::accumulators::Average;
use super::sampler::{Sampler, values_of};
use crate::callback::{Context, Counters};
use crate::error::{Error, Result, setting_error};
use crate::fetch::Fetched;

/// When the averages are put to the monitors.
#[derive(Debug, Clone, Copy)]
pub(super) struct Reports {
    pub(super) at_epoch_end: bool,
    pub(super) every_k_steps: Option<u64>,
    /// The global step of the last report (not to put the same values twice at one step).
    pub(super) last: Option<u64>,
}

impl Reports {
    fn check(&self, owner: &str) -> Result<()> {
        match self.every_k_steps {
            Some(0) => Err(setting_error(owner, "report_every_k_steps", "at least 1", 0)),
            _ => Ok(()),
        }
    }
}

/// The body both averages share: sampling, reports, suffix, one accumulator per output, and
/// their callback methods.
#[derive(Debug)]
pub(super) struct Averages<A: Average> {
    pub(super) average: A,
    pub(super) sampler: Sampler,
    pub(super) reports: Reports,
    pub(super) suffix: String,
    accs: Vec<A::Acc>,
}

impl<A: Average> Averages<A> {
    pub(super) fn new<S: Into<String>>(
        average: A,
        names: impl IntoIterator<Item = S>,
        reports: Reports,
        suffix: &str,
    ) -> Self {
        Averages {
            average,
            sampler: Sampler::new(A::OWNER, names),
            reports,
            suffix: suffix.into(),
            accs: Vec::new(),
        }
    }

    /// Accumulate `values` (one value per output per sampled step, step after step).
    pub(super) fn fold(average: &A, accs: &mut [A::Acc], values: &[f64]) {
        if accs.is_empty() {
            return;
        }
        for step in values.chunks(accs.len()) {
            for (acc, &x) in accs.iter_mut().zip(step) {
                average.add(acc, x);
            }
        }
    }

    pub(super) fn report<M>(&mut self, ctx: &mut Context<'_, M>) {
        let step = ctx.global_step();
        if self.reports.last == Some(step) && self.sampler.pending.is_empty() {
            return;
        }
        let values = self.sampler.host_values(true);
        Self::fold(&self.average, &mut self.accs, &values);
        self.reports.last = Some(step);
        let monitors = ctx.monitors();
        for (name, acc) in self.sampler.names().zip(&self.accs) {
            if let Some(value) = self.average.value(acc) {
                monitors.put_scalar(&format!("{name}{}", self.suffix), value);
            }
        }
    }

    pub(super) fn values(&self) -> Vec<(&str, Option<f64>)> {
        self.sampler.names().zip(&self.accs).map(|(n, a)| (n, self.average.value(a))).collect()
    }

    pub(super) fn name(&self) -> Cow<'static, str> {
        Cow::Owned(format!("{}({})", A::OWNER, self.sampler.names().collect::<Vec<_>>().join(",")))
    }

    pub(super) fn wants_fetch(&self, counters: &Counters) -> bool {
        self.sampler.due(counters.next_step())
    }

    pub(super) fn save_state(&self) -> Result<Option<Json>> {
        // Include the samples still on the device without taking them: the state saved is the
        // state after every step so far.
        let mut accs = self.accs.clone();
        Self::fold(&self.average, &mut accs, &values_of(self.sampler.pending.clone()));
        let state: Map<String, Json> =
            self.sampler.names().zip(&accs).map(|(n, a)| (n.to_string(), self.average.save(a))).collect();
        Ok(Some(Json::Object(state)))
    }

    pub(super) fn load_state(&mut self, state: Json) -> Result<()> {
        let bad =
            |name: &str| Error::bad_state(format!("{}: the saved state of `{name}` is malformed", A::OWNER));
        let Json::Object(state) = state else { return Err(bad(A::STATE)) };
        let names: Vec<String> = self.sampler.names().map(str::to_string).collect();
        self.accs = vec![self.average.empty(); names.len()];
        for (name, saved) in &state {
            let Some(index) = names.iter().position(|n| n == name) else {
                crate::logging::warn!(
                    "{}: the checkpoint averages `{name}`, which this run does not; ignored",
                    A::OWNER
                );
                continue;
            };
            self.accs[index] = self.average.load(saved).ok_or_else(|| bad(name))?;
        }
        Ok(())
    }

    pub(super) fn setup(&mut self) -> Result<()> {
        self.average.check_first()?;
        self.sampler.check()?;
        self.reports.check(self.sampler.owner)?;
        self.average.check_last()?;
        if self.accs.len() != self.sampler.fetches.len() {
            self.accs = vec![self.average.empty(); self.sampler.fetches.len()];
        }
        Ok(())
    }

    pub(super) fn after_step(&mut self, global_step: u64, values: &Fetched<'_>) -> Result<()> {
        if self.sampler.sample(values, global_step)? {
            let values = self.sampler.host_values(true);
            Self::fold(&self.average, &mut self.accs, &values);
        }
        Ok(())
    }

    pub(super) fn trigger_step<M>(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if self.reports.every_k_steps.is_some_and(|k| ctx.global_step().is_multiple_of(k)) {
            self.report(ctx);
        }
        Ok(())
    }

    pub(super) fn trigger_epoch<M>(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        if self.reports.at_epoch_end {
            self.report(ctx);
        }
        Ok(())
    }
}
