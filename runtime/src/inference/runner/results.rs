//! The end of an inference pass: the device totals read in one transfer, the partial sums
//! combined over the ranks, a pass cut short reported.

use std::sync::atomic::Ordering;

use burn::module::Module;
use burn::tensor::Tensor;

use super::Inference;
use crate::callback::{Context, PassEnd};
use crate::error::{Error, Result};

/// One inferencer's values on the device during a pass: the running total of its batch sums,
/// or, for one that [joins them](super::Inferencer::concatenates_on_device), its batches'
/// values, joined once at the pass's end.
pub(super) struct DeviceTotal {
    joins: bool,
    total: Option<Tensor<1>>,
    parts: Vec<Tensor<1>>,
}

impl DeviceTotal {
    pub(super) fn new(joins: bool) -> Self {
        DeviceTotal { joins, total: None, parts: Vec::new() }
    }
    pub(super) fn clear(&mut self) {
        self.total = None;
        self.parts.clear();
    }
    /// One batch's values: added to the total, or kept after the others.
    pub(super) fn add(&mut self, values: Tensor<1>) {
        if self.joins {
            self.parts.push(values);
            return;
        }
        self.total = Some(match self.total.take() {
            Some(running) => running + values,
            None => values,
        });
    }
    /// The pass's total (or its values end to end), leaving this empty; `None` after no batch.
    fn take(&mut self) -> Option<Tensor<1>> {
        match self.joins {
            false => self.total.take(),
            true if self.parts.is_empty() => None,
            true => Some(crate::fetch::joined(&mut self.parts)),
        }
    }
}

impl Inference {
    /// After a pass's last batch: the device totals read, the counts, then the results put (or
    /// combined over the ranks; or dropped after a signal). A pass that a cancel ended (a
    /// callback's `CancelValid`, fastai's `ShortEpochCallback`) puts the results of its batches.
    pub(super) fn end_pass<M: Module>(&mut self, ctx: &mut Context<'_, M>, end: PassEnd) -> Result<()> {
        let PassEnd { batches, cut_short, cancelled } = end;
        let transfers = self.transfers_at_start;
        let device_reads = self.read_totals()?;
        let counts = &self.counts.0;
        if cut_short.is_none() && !cancelled {
            counts.passes.fetch_add(1, Ordering::Relaxed);
        }
        counts.batches.fetch_add(batches, Ordering::Relaxed);
        counts.transfers.fetch_add(self.plan.transfers() - transfers + device_reads, Ordering::Relaxed);
        if self.data_parallel {
            return self.combine(ctx, batches, cut_short);
        }
        if let Some(signal) = cut_short {
            self.report_cut_short(ctx, signal, batches);
            return Ok(());
        }
        if batches == 0 {
            return Err(Error::data("InferenceRunner: the inference data produced no batch"));
        }
        for inferencer in &mut self.inferencers {
            for (name, value) in inferencer.after_inference() {
                ctx.monitors().put_scalar(&name, value);
            }
            for (name, image) in inferencer.images() {
                ctx.monitors().put_image(&name, image);
            }
        }
        Ok(())
    }

    /// The pass's device totals, every inferencer's in one transfer, handed to each; returns the
    /// number of transfers (0 when no inferencer sums on the device or the pass had no batch).
    pub(super) fn read_totals(&mut self) -> Result<u64> {
        let mut lengths = Vec::new();
        let mut parts = Vec::new();
        for (k, total) in self.totals.iter_mut().enumerate() {
            if let Some(total) = total.take() {
                lengths.push((k, total.dims()[0]));
                parts.push(total);
            }
        }
        // A pass whose joined values are all empty (batches of no sample) still reads nothing.
        if parts.iter().all(|part| part.dims()[0] == 0) {
            for (k, _) in lengths {
                self.inferencers[k].device_sums(&[])?;
            }
            return Ok(0);
        }
        if parts.is_empty() {
            return Ok(0);
        }
        let data = crate::fetch::read_now(crate::fetch::joined(&mut parts));
        let values: Vec<f64> = data.iter::<f32>().map(f64::from).collect();
        let mut rest = &values[..];
        for (k, n) in lengths {
            let (sums, tail) = rest.split_at(n);
            self.inferencers[k].device_sums(sums)?;
            rest = tail;
        }
        Ok(1)
    }

    /// A pass cut short by a signal: its partial results are dropped (the inferencers' state is
    /// reset at the next pass), and the log says so.
    #[cold]
    pub(super) fn report_cut_short<M>(&mut self, ctx: &Context<'_, M>, signal: &str, batches: u64) {
        let names: Vec<String> =
            self.inferencers.iter_mut().flat_map(|i| i.after_inference()).map(|(name, _)| name).collect();
        crate::logging::warn!(bare:
            "InferenceRunner: {signal} received: the inference pass of epoch {} (global step {}) stopped after {batches} batches; its results ({}) are not written",
            ctx.epoch_num(),
            ctx.global_step(),
            names.join(", ")
        );
    }

    /// After a data-parallel pass: the inferencers' partial sums summed over the ranks (one
    /// [`Context::sum_over_ranks`]), handed back, and the results put on the chief alone.
    ///
    /// The values: how many values every rank sends (so ranks whose inferencers differ fail
    /// instead of mixing), this rank's batches, whether a signal cut this rank's pass short, then
    /// each inferencer's partial sums in turn. A pass cut short on any rank puts nothing on any.
    pub(super) fn combine<M: Module>(
        &mut self,
        ctx: &mut Context<'_, M>,
        batches: u64,
        cut_short: Option<&'static str>,
    ) -> Result<()> {
        let mut values = vec![0.0, batches as f64, f64::from(u8::from(cut_short.is_some()))];
        let mut lengths = Vec::with_capacity(self.inferencers.len());
        for inferencer in &self.inferencers {
            let partial = inferencer.partial().ok_or_else(|| {
                Error::invalid(format!(
                    "a data-parallel InferenceRunner: `{}` gave partial sums at setup and none after a pass",
                    inferencer.name()
                ))
            })?;
            lengths.push(partial.len());
            values.extend(partial);
        }
        // Each gathering inferencer's list length, in this rank's slot of `world_size` slots.
        let (size, rank) = (ctx.world_size(), ctx.rank());
        for inferencer in &self.inferencers {
            if let Some(own) = inferencer.gathered() {
                let mut slots = vec![0.0; size];
                slots[rank] = own.len() as f64;
                values.extend(slots);
            }
        }
        values[0] = values.len() as f64;
        let expected = values[0] * ctx.world_size() as f64;
        ctx.sum_over_ranks(&mut values)?;
        if values[0] != expected {
            return Err(Error::ranks_differ(format!(
                "a data-parallel InferenceRunner: the ranks' inferencers gave different numbers of partial sums (this rank {}, {} over {} ranks): every rank must build the same runner",
                expected / ctx.world_size() as f64,
                values[0],
                ctx.world_size()
            )));
        }
        if values[2] > 0.0 {
            if ctx.is_chief() {
                let signal = cut_short.or_else(|| ctx.signal_received()).unwrap_or("a signal");
                self.report_cut_short(ctx, signal, batches);
            }
            return Ok(());
        }
        if values[1] == 0.0 {
            return Err(Error::data("InferenceRunner: the inference data produced no batch on any rank"));
        }
        let mut rest = &values[3..];
        for (inferencer, len) in self.inferencers.iter_mut().zip(lengths) {
            let (summed, tail) = rest.split_at(len);
            inferencer.merge(summed)?;
            rest = tail;
        }
        self.gather(ctx, rest)?;
        let chief = ctx.is_chief();
        for inferencer in &mut self.inferencers {
            let results = inferencer.after_inference();
            let images = inferencer.images();
            if chief {
                for (name, value) in results {
                    ctx.monitors().put_scalar(&name, value);
                }
                for (name, image) in images {
                    ctx.monitors().put_image(&name, image);
                }
            }
        }
        Ok(())
    }

    /// The values the inferencers gather ([`Inferencer::gathered`](super::Inferencer::gathered))
    /// joined over the ranks: `lengths` holds, for each gathering inferencer in turn, the length
    /// of each rank's list (summed over the ranks in the first exchange, each rank filling its
    /// own slot); a second [`Context::sum_over_ranks`] of every rank's values, each in its
    /// place and zeros elsewhere, joins them exactly (a value plus zeros is itself). No
    /// exchange when no inferencer gathers.
    fn gather<M: Module>(&mut self, ctx: &mut Context<'_, M>, lengths: &[f64]) -> Result<()> {
        let (size, rank) = (ctx.world_size(), ctx.rank());
        let gathering: Vec<usize> =
            (0..self.inferencers.len()).filter(|&k| self.inferencers[k].gathered().is_some()).collect();
        if gathering.is_empty() {
            return Ok(());
        }
        let per_rank: Vec<&[f64]> = lengths.chunks(size).collect();
        let total: f64 = lengths.iter().sum();
        let mut values = vec![0.0; total as usize];
        let mut start = 0;
        for (&k, counts) in gathering.iter().zip(&per_rank) {
            let own = self.inferencers[k].gathered().unwrap_or_default();
            let offset = start + counts[..rank].iter().sum::<f64>() as usize;
            values[offset..offset + own.len()].copy_from_slice(&own);
            start += counts.iter().sum::<f64>() as usize;
        }
        ctx.sum_over_ranks(&mut values)?;
        let mut rest = &values[..];
        for (&k, counts) in gathering.iter().zip(&per_rank) {
            let (all, tail) = rest.split_at(counts.iter().sum::<f64>() as usize);
            self.inferencers[k].merge_gathered(all)?;
            rest = tail;
        }
        Ok(())
    }
}
