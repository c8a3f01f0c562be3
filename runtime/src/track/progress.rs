//! The progress bar.

use std::fmt::Write as _;

use crate::callback::{Callback, Context, Counters};
use crate::error::Result;
use crate::fetch::{Fetch, Fetched};
use crate::monitor::printer::format_scalar;

/// A progress bar per epoch on stderr (indicatif), with steps/s and the time left in the epoch;
/// quiet when stderr is not a terminal. On by default.
///
/// With [`show`](Self::show), it also shows the latest values of some fetched scalars, fetched
/// every `refresh_every` steps (20 by default) as **deferred** fetches
/// ([`Fetch::deferred`]): the read never makes the step wait for the device, and the values
/// show one step later, which a progress bar does not notice.
#[derive(Debug)]
pub struct ProgressBar {
    fetches: Vec<Fetch>,
    refresh_every: u64,
    bar: Option<indicatif::ProgressBar>,
    message: String,
}
crate::kind::kind!(ProgressBar);

impl Default for ProgressBar {
    fn default() -> Self {
        ProgressBar::new()
    }
}

impl ProgressBar {
    /// A bar showing no fetched values.
    pub fn new() -> Self {
        ProgressBar { fetches: Vec::new(), refresh_every: 20, bar: None, message: String::new() }
    }
    /// Show these scalar outputs of the step.
    pub fn show(mut self, names: impl IntoIterator<Item = &'static str>) -> Self {
        self.fetches = names.into_iter().map(Fetch::deferred).collect();
        self
    }
    /// Fetch the shown values every `k` steps (at least 1).
    pub fn refresh_every(mut self, k: u64) -> Self {
        self.refresh_every = k.max(1);
        self
    }
}

impl<M> Callback<M> for ProgressBar {
    fn fetches(&self) -> &[Fetch] {
        &self.fetches
    }
    fn wants_fetch(&self, counters: &Counters) -> bool {
        counters.next_step().is_multiple_of(self.refresh_every)
    }
    fn before_epoch(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let counters = ctx.counters();
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(counters.steps_per_epoch()),
            indicatif::ProgressDrawTarget::stderr(),
        );
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{prefix} [{bar:30}] {pos}/{len} [{elapsed_precise}<{eta_precise}, {per_sec}] {msg}",
            )
            .expect("a valid template")
            .progress_chars("=> "),
        );
        bar.set_prefix(format!("epoch {}/{}", counters.epoch_num(), counters.max_epoch()));
        self.bar = Some(bar);
        Ok(())
    }
    fn fetched(&mut self, _ctx: &mut Context<'_, M>, values: &Fetched<'_>) -> Result<()> {
        self.message.clear();
        for fetch in &self.fetches {
            let value = values.get::<f32>(&fetch.name)?;
            let _ = write!(self.message, "{}={} ", fetch.name, format_scalar(f64::from(value)));
        }
        if let Some(bar) = &self.bar {
            bar.set_message(self.message.trim_end().to_string());
        }
        Ok(())
    }
    fn trigger_step(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
        Ok(())
    }
    fn after_epoch(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        if let Some(bar) = self.bar.take() {
            bar.finish();
        }
        Ok(())
    }
    fn after_train(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        if let Some(bar) = self.bar.take() {
            bar.abandon();
        }
        Ok(())
    }
}
