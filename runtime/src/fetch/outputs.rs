//! What a step produces: its named tensors ([`Outputs`]), each a float tensor of rank 1 to 4
//! ([`OutputTensor`]).

use burn::tensor::Tensor;

/// A float tensor of rank 1 to 4 produced by a step, type-erased over its rank.
#[derive(Debug, Clone)]
pub enum OutputTensor {
    /// Rank 1 (a scalar is a rank-1 tensor of one element).
    Rank1(Tensor<1>),
    /// Rank 2.
    Rank2(Tensor<2>),
    /// Rank 3.
    Rank3(Tensor<3>),
    /// Rank 4.
    Rank4(Tensor<4>),
}

macro_rules! output_tensor_ranks {
    ($($rank:literal => $variant:ident),*) => {
        $(
            impl From<Tensor<$rank>> for OutputTensor {
                fn from(tensor: Tensor<$rank>) -> Self {
                    OutputTensor::$variant(tensor)
                }
            }
        )*

        impl OutputTensor {
            /// The tensor's rank.
            pub fn rank(&self) -> usize {
                match self { $(OutputTensor::$variant(_) => $rank,)* }
            }

            /// The tensor's shape.
            pub fn dims(&self) -> Vec<usize> {
                match self { $(OutputTensor::$variant(tensor) => tensor.dims().to_vec(),)* }
            }

            /// Append the tensor's shape to `dims` (no allocation once `dims` has room).
            pub(crate) fn extend_dims(&self, dims: &mut Vec<usize>) {
                match self { $(OutputTensor::$variant(tensor) => dims.extend_from_slice(&tensor.dims()),)* }
            }

            /// The number of elements.
            pub fn num_elements(&self) -> usize {
                match self { $(OutputTensor::$variant(tensor) => tensor.dims().iter().product(),)* }
            }

            /// The tensor flattened to rank 1, detached from the autodiff graph (no data moves).
            pub fn flat(&self) -> Tensor<1> {
                let n = self.num_elements();
                match self {
                    $(OutputTensor::$variant(tensor) => tensor.clone().detach().reshape([n]),)*
                }
            }
        }
    };
}

output_tensor_ranks!(1 => Rank1, 2 => Rank2, 3 => Rank3, 4 => Rank4);

/// The named tensors one step (or one inference batch) produced. Reused from step to step: putting
/// the same number of outputs each step allocates nothing.
#[derive(Debug, Default)]
pub struct Outputs {
    entries: Vec<(&'static str, OutputTensor)>,
}

impl Outputs {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Put a named tensor; a second put of the same name replaces the first.
    pub fn put(&mut self, name: &'static str, tensor: impl Into<OutputTensor>) {
        let tensor = tensor.into();
        match self.entries.iter_mut().find(|(n, _)| *n == name) {
            Some(entry) => entry.1 = tensor,
            None => self.entries.push((name, tensor)),
        }
    }

    /// The tensor named `name`, if this step produced it.
    pub fn get(&self, name: &str) -> Option<&OutputTensor> {
        self.entries.iter().find(|(n, _)| *n == name).map(|(_, t)| t)
    }

    /// The names produced, in the order they were put.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.entries.iter().map(|(n, _)| *n)
    }

    /// Remove every output, keeping the storage.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// The output at `index` in the order they were put, with its name.
    #[inline]
    pub(super) fn at(&self, index: usize) -> Option<(&'static str, &OutputTensor)> {
        self.entries.get(index).map(|(name, tensor)| (*name, tensor))
    }

    /// Where the output named `name` is in the order they were put.
    #[inline]
    pub(super) fn position(&self, name: &str) -> Option<usize> {
        self.entries.iter().position(|(n, _)| *n == name)
    }

    /// The names produced, for a message: "`a`, `b`", or "nothing".
    pub(super) fn names_list(&self) -> String {
        let names: Vec<String> = self.names().map(|n| format!("`{n}`")).collect();
        if names.is_empty() { "nothing".into() } else { names.join(", ") }
    }
}
