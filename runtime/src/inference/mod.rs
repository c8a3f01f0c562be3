//! Validation during training: tensorpack's `InferenceRunner` and its inferencers.
//!
//! An [`InferenceRunner`] runs the model over another data set when triggered (every epoch by
//! default), hands each batch's values to its [`Inferencer`]s — all of them in one pass over the
//! data, with one device-to-host transfer per batch for all their values — and puts their results
//! to the monitors. The inferencers: [`ScalarStats`] (means over datapoints), [`ClassificationError`]
//! (the true error of the set), [`BinaryClassificationStats`] (precision, recall, F1),
//! [`MultiLabelStats`] (neon's per-class statistics), [`TopKAccuracy`], [`MulticlassStats`] (the
//! confusion matrix, with precision, recall and F1 macro, micro and weighted, and its image),
//! [`Auroc`] (binary and one-vs-rest), or one of the user's. The classification metrics count on
//! the device and leave it once per pass, as scikit-learn computes them (its `zero_division`
//! default, its tie-breaking).
//!
//! A runner given to [`Trainer::test`](crate::trainer::Trainer::test) evaluates a test set once
//! training ends (Lightning's `trainer.test`, Keras's `evaluate`): give its inferencers the
//! prefix `test`.
//!
//! In a data-parallel world the runner validates on the chief alone, over the whole set; with
//! [`InferenceRunner::data_parallel`] (tensorpack's `DataParallelInferenceRunner`) every rank
//! runs its shard, the inferencers' partial sums ([`Inferencer::partial`], [`Inferencer::merge`])
//! are added up over the ranks, and the chief reports the statistics of the whole set.
//!
//! One file per concept: the trait (`inferencer`), each inferencer (`scalar_stats`,
//! `classification`, `multi_label`, `multiclass`, `auroc`), what the multiclass ones compute on
//! the device (`classes`) and the runner (`runner`).

mod auroc;
mod classes;
mod classification;
mod inferencer;
mod multi_label;
mod multiclass;
mod runner;
mod scalar_stats;

pub use auroc::Auroc;
pub use classification::{BinaryClassificationStats, ClassificationError};
pub use inferencer::Inferencer;
pub use multi_label::MultiLabelStats;
pub use multiclass::{MulticlassStats, TopKAccuracy};
pub use runner::{ForwardOutput, InferenceCounts, InferenceForward, InferenceRunner, PredThenScore};
pub use scalar_stats::ScalarStats;

use crate::error::{Error, Result};

/// `<prefix>_<name>`, or `name` without a prefix.
pub(super) fn prefixed(prefix: &str, name: &str) -> String {
    if prefix.is_empty() { name.to_string() } else { format!("{prefix}_{name}") }
}

/// A 0/1 value of `name`, or the error saying it is neither.
pub(super) fn bit(value: f32, owner: &str, name: &str) -> Result<bool> {
    if value == 1.0 {
        Ok(true)
    } else if value == 0.0 {
        Ok(false)
    } else {
        Err(Error::fetch(format!("{owner}: `{name}` holds {value}, not 0 or 1")))
    }
}

/// `summed`'s length is `expected`, or the error saying what [`Inferencer::merge`] received.
pub(super) fn merged_len(owner: &str, summed: &[f64], expected: usize) -> Result<()> {
    if summed.len() == expected {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{owner}: merge received {} summed values, not the {expected} its partial sums hold",
            summed.len()
        )))
    }
}

/// `numerator / denominator`, 0 when the denominator is 0.
pub(super) fn ratio_or_zero(numerator: u64, denominator: u64) -> f64 {
    if denominator == 0 { 0.0 } else { numerator as f64 / denominator as f64 }
}

#[cfg(test)]
mod tests {
    use burn::tensor::{Tensor, TensorData};

    use super::*;
    use crate::fetch::{FetchPlan, Fetched, Outputs};

    /// Batch `i` of a small pass (sizes 3, 1, 2, 2): every output the built-in inferencers read.
    fn batch(i: usize) -> (Outputs, usize) {
        let device = crate::device::cpu();
        let n = [3, 1, 2, 2][i];
        let bits = |seed: usize, len: usize| -> Vec<f32> {
            (0..len).map(|j| (j * 7 + seed * 3 + j / 2).is_multiple_of(3) as u8 as f32).collect()
        };
        let vector = |values: Vec<f32>| Tensor::<1>::from_data(TensorData::new(values, [n]), &device);
        let matrix = |values: Vec<f32>| Tensor::<2>::from_data(TensorData::new(values, [n, 2]), &device);
        let mut out = Outputs::new();
        out.put("cost", Tensor::<1>::from_data(TensorData::new(vec![0.25 + i as f32 * 0.7], [1]), &device));
        out.put("wrong", vector(bits(i, n)));
        out.put("pred", vector(bits(i + 1, n)));
        out.put("label", vector(bits(i + 2, n)));
        out.put("predicted", matrix(bits(i + 3, 2 * n)));
        out.put("labels", matrix(bits(i + 4, 2 * n)));
        (out, n)
    }

    /// One pass of `inferencer` over `batches`.
    fn pass(inferencer: &mut dyn Inferencer, batches: &[usize]) {
        let mut plan = FetchPlan::default();
        let mut mask = 0;
        for fetch in inferencer.fetches() {
            mask |= plan.declare(fetch, "test").unwrap();
        }
        inferencer.before_inference();
        for &i in batches {
            let (outputs, n) = batch(i);
            plan.fill(&outputs, mask, 0).unwrap();
            inferencer.set_batch_size(n);
            inferencer.on_batch(&plan.view()).unwrap();
        }
    }

    /// One pass adding the batches' sums up on the device, as the runner does for the
    /// inferencers whose `sums_on_device` says so, with one read at the end.
    fn device_pass(inferencer: &mut dyn Inferencer, batches: &[usize]) {
        assert!(inferencer.sums_on_device());
        inferencer.before_inference();
        let mut total: Option<Tensor<1>> = None;
        for &i in batches {
            let (outputs, n) = batch(i);
            inferencer.set_batch_size(n);
            let sums = inferencer.batch_sums(&outputs).unwrap();
            total = Some(match total {
                Some(total) if inferencer.concatenates_on_device() => Tensor::cat(vec![total, sums], 0),
                Some(total) => total + sums,
                None => sums,
            });
        }
        let sums: Vec<f64> = total.unwrap().into_data().iter::<f32>().map(f64::from).collect();
        inferencer.device_sums(&sums).unwrap();
    }

    fn device_equals_host<I: Inferencer + Clone>(inferencer: I) {
        let (mut host, mut device) = (inferencer.clone(), inferencer);
        pass(&mut host, &[0, 1, 2, 3]);
        device_pass(&mut device, &[0, 1, 2, 3]);
        assert_eq!(device.partial().map(|p| p.len()), host.partial().map(|p| p.len()));
        for ((name, on_device), (_, on_host)) in device.after_inference().iter().zip(host.after_inference()) {
            assert!(
                (on_device - on_host).abs() < 1e-6 || (on_device.is_nan() && on_host.is_nan()),
                "{name}: {on_device} on the device, {on_host} on the host"
            );
        }
    }

    #[test]
    fn the_sums_added_on_the_device_give_what_the_host_path_gives() {
        device_equals_host(ScalarStats::new(["cost"]));
        device_equals_host(ClassificationError::new("wrong", "validation_error"));
        device_equals_host(TopKAccuracy::new("predicted", "labels", 1));
        device_equals_host(MulticlassStats::new("predicted", "labels", 2));
        device_equals_host(MulticlassStats::new("pred", "label", 2));
        device_equals_host(Auroc::binary("pred", "label"));
        device_equals_host(Auroc::one_vs_rest("predicted", "labels", 2));
        assert!(!BinaryClassificationStats::new("pred", "label").sums_on_device());
    }

    /// The pass over every batch, and the passes over two parts merged, give the same results.
    fn halves_merge_into_the_whole<I: Inferencer + Clone>(inferencer: I) {
        let mut whole = inferencer.clone();
        pass(&mut whole, &[0, 1, 2, 3]);
        let expected = whole.after_inference();
        let (mut even, mut odd, mut merged) = (inferencer.clone(), inferencer.clone(), inferencer);
        pass(&mut even, &[0, 2]);
        pass(&mut odd, &[1, 3]);
        let gathered = even.gathered().map(|even| [even, odd.gathered().unwrap()].concat());
        let (even, odd) = (even.partial().unwrap(), odd.partial().unwrap());
        assert_eq!(even.len(), odd.len());
        let summed: Vec<f64> = even.iter().zip(&odd).map(|(a, b)| a + b).collect();
        merged.before_inference();
        merged.merge(&summed).unwrap();
        if let Some(all) = gathered {
            merged.merge_gathered(&all).unwrap();
        }
        let got = merged.after_inference();
        assert_eq!(got.len(), expected.len());
        for ((name, value), (expected_name, expected_value)) in got.iter().zip(&expected) {
            assert_eq!(name, expected_name);
            assert!(
                (value - expected_value).abs() < 1e-12 || (value.is_nan() && expected_value.is_nan()),
                "{name}: {value} merged, {expected_value} whole"
            );
        }
        let wrong = if summed.is_empty() { vec![1.0] } else { summed[1..].to_vec() };
        assert!(merged.merge(&wrong).is_err(), "a sum of the wrong length is refused");
    }

    #[test]
    fn every_built_in_inferencers_partial_sums_merge_into_the_whole_pass() {
        halves_merge_into_the_whole(ScalarStats::new(["cost"]));
        halves_merge_into_the_whole(ClassificationError::new("wrong", "validation_error"));
        halves_merge_into_the_whole(BinaryClassificationStats::new("pred", "label"));
        halves_merge_into_the_whole(MultiLabelStats::new("predicted", "labels", ["a", "b"]));
        halves_merge_into_the_whole(
            MultiLabelStats::new("predicted", "labels", ["a", "b"]).mean_over_batches(true),
        );
        halves_merge_into_the_whole(MultiLabelStats::new("predicted", "labels", ["a", "b"]).argmax(true));
        halves_merge_into_the_whole(TopKAccuracy::new("predicted", "labels", 1));
        halves_merge_into_the_whole(MulticlassStats::new("predicted", "labels", 2));
        halves_merge_into_the_whole(Auroc::binary("pred", "label"));
        halves_merge_into_the_whole(Auroc::one_vs_rest("predicted", "labels", 2));
    }

    struct Opaque;

    impl Inferencer for Opaque {
        fn fetches(&self) -> &[crate::fetch::Fetch] {
            &[]
        }
        fn before_inference(&mut self) {}
        fn on_batch(&mut self, _values: &Fetched<'_>) -> Result<()> {
            Ok(())
        }
        fn after_inference(&mut self) -> Vec<(String, f64)> {
            Vec::new()
        }
    }

    #[test]
    fn an_inferencer_gives_no_partial_sums_and_refuses_a_merge_by_default() {
        assert_eq!(Opaque.partial(), None);
        let error = Opaque.merge(&[1.0]).unwrap_err().to_string();
        assert!(error.starts_with("Opaque: ") && error.contains("Inferencer::merge"), "{error}");
    }
}
