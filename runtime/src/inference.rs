//! Validation during training: tensorpack's `InferenceRunner` and its inferencers.

use crate::callback::{Callback, Context};
use crate::error::{Error, Result};
use crate::fetch::{Fetch, FetchPlan, Fetched, Outputs};
use crate::trainer::{BatchIter, TrainData};
use burn::module::Module;

/// Computes statistics over a whole pass of inference from the values of each batch.
pub trait Inferencer {
    /// The outputs this inferencer reads (copied to the host, all inferencers in one transfer).
    fn fetches(&self) -> &[Fetch];
    /// A pass begins.
    fn before_inference(&mut self);
    /// One batch's values.
    fn on_batch(&mut self, values: &Fetched<'_>) -> Result<()>;
    /// The pass ended: the named results, which go to the monitors.
    fn after_inference(&mut self) -> Vec<(String, f64)>;
}

/// The mean of scalar outputs over the batches of a pass, put as `<prefix>_<name>`
/// (tensorpack's `ScalarStats`, prefix `validation` by default). The mean of per-batch
/// accuracies is not the accuracy of the set when batches differ in size: use
/// [`ClassificationError`] for that.
#[derive(Debug, Clone)]
pub struct ScalarStats {
    fetches: Vec<Fetch>,
    prefix: String,
    sums: Vec<f64>,
    batches: u64,
}

impl ScalarStats {
    /// Average these scalar outputs.
    pub fn new(names: impl IntoIterator<Item = &'static str>) -> Self {
        let fetches: Vec<Fetch> = names.into_iter().map(Fetch::host).collect();
        ScalarStats { sums: vec![0.0; fetches.len()], fetches, prefix: "validation".into(), batches: 0 }
    }
    /// The prefix of the results' names (`validation` by default; empty for none).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }
}

impl Inferencer for ScalarStats {
    fn fetches(&self) -> &[Fetch] {
        &self.fetches
    }
    fn before_inference(&mut self) {
        self.sums.iter_mut().for_each(|s| *s = 0.0);
        self.batches = 0;
    }
    fn on_batch(&mut self, values: &Fetched<'_>) -> Result<()> {
        for (sum, fetch) in self.sums.iter_mut().zip(&self.fetches) {
            *sum += values.get::<f64>(&fetch.name)?;
        }
        self.batches += 1;
        Ok(())
    }
    fn after_inference(&mut self) -> Vec<(String, f64)> {
        let n = self.batches.max(1) as f64;
        self.fetches
            .iter()
            .zip(&self.sums)
            .map(|(fetch, sum)| {
                let name = if self.prefix.is_empty() {
                    fetch.name.to_string()
                } else {
                    format!("{}_{}", self.prefix, fetch.name)
                };
                (name, sum / n)
            })
            .collect()
    }
}

/// The true classification error of a pass, from an output holding one value per sample (1 if
/// the sample is misclassified, 0 if not): the sum over all samples divided by their number,
/// so batches of any size weigh by their size (tensorpack's `ClassificationError`). Give it a
/// "correct" vector instead and it computes the accuracy.
#[derive(Debug, Clone)]
pub struct ClassificationError {
    fetches: [Fetch; 1],
    summary_name: String,
    wrong: f64,
    total: u64,
}

impl ClassificationError {
    /// Read the per-sample vector `wrong_name`; put the result as `summary_name`
    /// (tensorpack: `incorrect_vector` and `validation_error`).
    pub fn new(wrong_name: &'static str, summary_name: impl Into<String>) -> Self {
        ClassificationError {
            fetches: [Fetch::host(wrong_name)],
            summary_name: summary_name.into(),
            wrong: 0.0,
            total: 0,
        }
    }
}

impl Inferencer for ClassificationError {
    fn fetches(&self) -> &[Fetch] {
        &self.fetches
    }
    fn before_inference(&mut self) {
        self.wrong = 0.0;
        self.total = 0;
    }
    fn on_batch(&mut self, values: &Fetched<'_>) -> Result<()> {
        let (wrong, _) = values.host(&self.fetches[0].name)?;
        self.wrong += wrong.iter().map(|&w| f64::from(w)).sum::<f64>();
        self.total += wrong.len() as u64;
        Ok(())
    }
    fn after_inference(&mut self) -> Vec<(String, f64)> {
        let error = if self.total == 0 { f64::NAN } else { self.wrong / self.total as f64 };
        vec![(self.summary_name.clone(), error)]
    }
}

/// Runs inference over another data set when triggered (every epoch by default) and puts the
/// inferencers' results to the monitors (tensorpack's `InferenceRunner`).
///
/// `forward` computes the outputs of one batch with the model in evaluation mode (`valid()`: no
/// autodiff graph); the values every inferencer reads leave the device in one transfer per batch.
pub struct InferenceRunner<D, F> {
    data: D,
    forward: F,
    inferencers: Vec<Box<dyn Inferencer>>,
    plan: FetchPlan,
    mask: u64,
    outputs: Outputs,
}

impl<D, F> InferenceRunner<D, F> {
    /// Inference over `data` with `forward`.
    pub fn new(data: D, forward: F) -> Self {
        InferenceRunner {
            data,
            forward,
            inferencers: Vec::new(),
            plan: FetchPlan::default(),
            mask: 0,
            outputs: Outputs::new(),
        }
    }
    /// Add an inferencer.
    pub fn with(mut self, inferencer: impl Inferencer + 'static) -> Self {
        self.inferencers.push(Box::new(inferencer));
        self
    }
}

impl<M, D, F> Callback<M> for InferenceRunner<D, F>
where
    M: Module,
    D: TrainData,
    F: FnMut(&M, D::Batch, &mut Outputs),
{
    fn setup(&mut self, _ctx: &mut Context<'_, M>) -> Result<()> {
        if self.inferencers.is_empty() {
            return Err(Error::msg("InferenceRunner has no inferencer: add one with .with(...)"));
        }
        for inferencer in &self.inferencers {
            for fetch in inferencer.fetches() {
                self.mask |= self.plan.declare(fetch, "InferenceRunner")?;
            }
        }
        Ok(())
    }

    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let model = ctx.model().valid();
        self.inferencers.iter_mut().for_each(|i| i.before_inference());
        let mut pass = self.data.pass();
        let mut batches = 0u64;
        while let Some(batch) = pass.next_batch() {
            self.outputs.clear();
            (self.forward)(&model, batch?, &mut self.outputs);
            if batches == 0 {
                self.plan.check_names(
                    &self.outputs,
                    &[("InferenceRunner".into(), self.mask)],
                    "its forward function",
                )?;
            }
            self.plan.fill(&self.outputs, self.mask)?;
            let values = self.plan.view();
            for inferencer in &mut self.inferencers {
                inferencer.on_batch(&values)?;
            }
            batches += 1;
        }
        if batches == 0 {
            return Err(Error::Data("InferenceRunner: the inference data produced no batch".into()));
        }
        for inferencer in &mut self.inferencers {
            for (name, value) in inferencer.after_inference() {
                ctx.monitors().put_scalar(&name, value);
            }
        }
        Ok(())
    }
}
