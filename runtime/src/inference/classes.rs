//! What the multiclass inferencers ([`TopKAccuracy`](super::TopKAccuracy),
//! [`MulticlassStats`](super::MulticlassStats), [`Auroc`](super::Auroc)) compute on the device
//! from a batch's outputs: a class per sample as a one-hot row, from class indices or from
//! scores (the first largest, as NumPy's `argmax`), the rank of the label among the scores. Every
//! operation is element-wise, a comparison, a row sum or a product of 0/1 matrices: the counts
//! are exact in `f32` (below 2²⁴ per pass) whatever order the device adds in, so the results do
//! not change from run to run.

use burn::tensor::{Int, Tensor, TensorData};

use crate::error::{Error, Result};
use crate::fetch::{Fetched, OutputTensor, Outputs};

/// The output `name` of this batch, or the error naming `owner`.
pub(super) fn output<'a>(outputs: &'a Outputs, owner: &str, name: &str) -> Result<&'a OutputTensor> {
    outputs.get(name).ok_or_else(|| Error::fetch(format!("{owner}: `{name}` was not produced by this batch")))
}

/// `tensor` as a `[n, classes]` matrix, detached, or the error saying its shape is not one.
pub(super) fn matrix(tensor: &OutputTensor, classes: usize, owner: &str, name: &str) -> Result<Tensor<2>> {
    match tensor {
        OutputTensor::Rank2(t) if t.dims()[1] == classes => Ok(t.clone().detach()),
        other => Err(Error::fetch(format!(
            "{owner}: `{name}` has shape {:?}, not [batch, {classes}] (a score per class)",
            other.dims()
        ))),
    }
}

/// `[[0, 1, ..., classes - 1]]` repeated over `n` rows, as floats.
fn class_row(n: usize, classes: usize, like: &Tensor<2>) -> Tensor<2> {
    Tensor::<1, Int>::arange(0..classes as i64, &like.device())
        .float()
        .reshape([1, classes])
        .expand([n, classes])
}

/// The one-hot row of each sample's first largest score (NumPy's `argmax`: the lowest class
/// among ties). A row of NaNs has no class: a row of zeros.
pub(super) fn first_max(scores: Tensor<2>) -> Tensor<2> {
    let [n, classes] = scores.dims();
    let max = scores.clone().max_dim(1).expand([n, classes]);
    let is_max = scores.clone().equal(max).float();
    // classes - j where the row is largest, 0 elsewhere: the largest is the first such class.
    let weight = (class_row(n, classes, &scores) * -1.0 + classes as f64) * is_max.clone();
    let top = weight.clone().max_dim(1).expand([n, classes]);
    weight.equal(top).float() * is_max
}

/// Each sample's class as a one-hot row `[n, classes]`: from class indices (`[n]`, `0.0` to
/// `classes - 1`; another value gives a row of zeros) or from a row per sample (`[n, classes]`:
/// scores or a one-hot label, the first largest).
pub(super) fn one_hot(tensor: &OutputTensor, classes: usize, owner: &str, name: &str) -> Result<Tensor<2>> {
    match tensor {
        OutputTensor::Rank1(indices) => {
            let n = indices.dims()[0];
            let indices = indices.clone().detach().reshape([n, 1]).expand([n, classes]);
            let row = class_row(n, classes, &indices);
            Ok(indices.equal(row).float())
        }
        OutputTensor::Rank2(_) => Ok(first_max(matrix(tensor, classes, owner, name)?)),
        other => Err(Error::fetch(format!(
            "{owner}: `{name}` has shape {:?}: give a class index per sample ([batch]) or a row per sample ([batch, {classes}])",
            other.dims()
        ))),
    }
}

/// Each sample's class index `[n, 1]` from its one-hot row (0 for a row of zeros).
pub(super) fn index_of(one_hot: Tensor<2>) -> Tensor<2> {
    let [n, classes] = one_hot.dims();
    let row = class_row(n, classes, &one_hot);
    (one_hot * row).sum_dim(1)
}

/// How many samples have their label among the `k` best scores, as scikit-learn's
/// `top_k_accuracy_score` ranks them: the label's place is the number of classes that score
/// higher, plus those that score the same and come after it (a stable sort, reversed), and a hit
/// is a place below `k`.
pub(super) fn top_k_hits(scores: Tensor<2>, label: Tensor<2>, k: usize) -> Tensor<1> {
    let [n, classes] = scores.dims();
    let index = index_of(label.clone()).expand([n, classes]);
    let own = (scores.clone() * label).sum_dim(1).expand([n, classes]);
    let above = scores.clone().greater(own.clone()).float();
    let after = class_row(n, classes, &scores).greater(index).float();
    let tied_after = scores.equal(own).float() * after;
    let place = (above + tied_after).sum_dim(1);
    place.lower_elem(k as f64).float().sum()
}

/// The outputs `names` of a batch rebuilt from their host copies (on the CPU): what the host path
/// of an inferencer that sums on the device ([`Inferencer::on_batch`](super::Inferencer::on_batch))
/// hands to its device code.
pub(super) fn rebuilt(values: &Fetched<'_>, names: &[&'static str], owner: &str) -> Result<Outputs> {
    let device = crate::device::cpu();
    let mut outputs = Outputs::new();
    for &name in names {
        let (data, shape) = values.host(name)?;
        let data = TensorData::new(data.to_vec(), shape.to_vec());
        let tensor: OutputTensor = match shape.len() {
            1 => Tensor::<1>::from_data(data, &device).into(),
            2 => Tensor::<2>::from_data(data, &device).into(),
            _ => {
                return Err(Error::fetch(format!(
                    "{owner}: `{name}` has shape {shape:?}: give a vector or a matrix"
                )));
            }
        };
        outputs.put(name, tensor);
    }
    Ok(outputs)
}

/// A tensor read back to the host (the host path's, on the CPU).
pub(super) fn host_values(tensor: Tensor<1>) -> Vec<f64> {
    crate::fetch::read_now(tensor).iter::<f32>().map(f64::from).collect()
}
