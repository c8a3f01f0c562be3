//! A model's buffers: its float tensors that no gradient updates. burn's `RunningState`
//! (BatchNorm's running mean and variance) is the one that changes during training; a frozen
//! parameter is one too, and stays as it is.
//!
//! The policy in a world, as PyTorch DDP's `broadcast_buffers` has it: each rank owns its
//! buffers and updates them from its own batches (a replica made in this process gets running
//! states of its own: `threads`' `copy_params`, as a clone of a burn module shares its
//! `RunningState`s, one value behind a lock); at each epoch's end the chief's buffers travel in the epoch's
//! last exchange and replace every other rank's, before the replicas are compared. Between two
//! epochs' ends a rank's running statistics are its own shard's; at an epoch's end, and in every
//! checkpoint (the chief writes them), they are the chief's.
//!
//! A `RunningState` keeps its last update aside (per thread) until the next forward reads it:
//! [`sync`] folds it in, so that what is read, compared or saved is the value the next forward
//! would use.

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::tensor::Tensor;

use super::flat::{copy_out, like, tensor_from};

/// Whether a float tensor of the model is a buffer: it takes no gradient.
fn is_buffer<const D: usize>(tensor: &Tensor<D>) -> bool {
    !tensor.is_require_grad()
}

/// Every `RunningState`'s pending update folded into its value (burn does it in `valid`).
pub(crate) fn sync<M: Module>(model: &M) {
    drop(model.valid());
}

/// The number of elements of the model's buffers.
pub(crate) fn len<M: Module>(model: &M) -> usize {
    /// Counts the buffers' elements.
    struct Len(usize);
    impl ModuleVisitor for Len {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            if is_buffer(&param.val()) {
                self.0 += param.lazy_shape().num_elements();
            }
        }
    }
    let mut len = Len(0);
    model.visit(&mut len);
    len.0
}

/// The buffers' values, in visit order, into `out` (resized to [`len`]), read to the host.
pub(crate) fn read<M: Module>(model: &M, out: &mut Vec<f32>) {
    /// Appends each buffer's values.
    struct Read<'a>(&'a mut Vec<f32>);
    impl ModuleVisitor for Read<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let value = param.val();
            if is_buffer(&value) {
                let start = self.0.len();
                self.0.resize(start + value.shape().num_elements(), 0.0);
                copy_out(value.into_data(), &mut self.0[start..]);
            }
        }
    }
    out.clear();
    model.visit(&mut Read(out));
}

/// The model's running states set to `values` (the layout of [`read`]), in place: a
/// `RunningState` is shared by the model's clones, so the mapped clone, dropped here, sets the
/// model's own. A frozen parameter is left as it is (the replicas' comparison sees one that
/// differs).
pub(crate) fn write<M: Module>(model: &M, values: &[f32]) {
    /// Replaces each buffer with its slice of `values`.
    struct Write<'a> {
        values: &'a [f32],
        offset: usize,
    }
    impl ModuleMapper for Write<'_> {
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
            let (id, old, mapper) = param.consume();
            if !is_buffer(&old) {
                return Param::from_mapped_value(id, old, mapper);
            }
            let len = old.shape().num_elements();
            let values = &self.values[self.offset..self.offset + len];
            self.offset += len;
            let new = tensor_from::<D>(values, old.shape(), old.dtype(), &old.device());
            Param::from_mapped_value(id, like(&old, new, id), mapper)
        }
    }
    drop(model.clone().map(&mut Write { values, offset: 0 }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::nn::{BatchNorm, BatchNormConfig, Linear, LinearConfig};

    /// A linear layer and a BatchNorm after it.
    #[derive(Module, Debug)]
    struct Net {
        linear: Linear,
        norm: BatchNorm,
    }

    fn net() -> Net {
        let device = crate::device::cpu();
        Net { linear: LinearConfig::new(3, 2).init(&device), norm: BatchNormConfig::new(2).init(&device) }
    }

    /// One training forward: BatchNorm updates its running statistics.
    fn forward(net: &Net, shift: f32) {
        let device = crate::device::cpu();
        let x = Tensor::<2>::from_data([[1.0 + shift, 2.0, 3.0], [0.5, -1.0, shift]], &device);
        let out = net.norm.forward(net.linear.forward(x).unsqueeze_dim::<3>(2));
        drop(out);
    }

    #[test]
    fn running_statistics_are_the_buffers_and_round_trip() {
        let net = net();
        // BatchNorm's running mean and variance, 2 each; the linear layer's weights are not.
        assert_eq!(len(&net), 4);
        forward(&net, 1.0);
        sync(&net);
        let mut values = Vec::new();
        read(&net, &mut values);
        assert_ne!(values, vec![0.0, 0.0, 1.0, 1.0], "the forward moved the running statistics");
        write(&net, &[0.5, -0.0, 2.0, 3.0]);
        read(&net, &mut values);
        assert_eq!(
            values.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            [0.5f32, -0.0, 2.0, 3.0].map(f32::to_bits)
        );
    }

    #[test]
    fn a_peers_replica_does_not_share_the_running_statistics() {
        let net = net();
        let shared = net.clone();
        let owned = super::super::threads::copy_params(&net);
        forward(&net, 2.0);
        sync(&net);
        let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
        read(&net, &mut a);
        read(&shared, &mut b);
        read(&owned, &mut c);
        assert_eq!(a, b, "burn's clone shares the running statistics");
        assert_eq!(c, vec![0.0, 0.0, 1.0, 1.0], "the owned replica kept its own, untouched");
    }

    #[test]
    fn sync_folds_the_last_update_in() {
        let net = net();
        forward(&net, 1.0);
        forward(&net, 3.0);
        let mut before = Vec::new();
        read(&net, &mut before);
        sync(&net);
        let mut after = Vec::new();
        read(&net, &mut after);
        assert_ne!(before, after, "the second forward's update waited aside until the sync");
    }
}
