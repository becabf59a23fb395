//! Parameters and buffers: named tensors a module owns and that optimizers or statistics update
//! in place.

use crate::{Error, RawTensor, Result};

/// A trainable parameter (a leaf that requires grad) or a buffer (e.g. batch-norm running stats).
/// Clones share the tensor; updates are visible through every clone.
#[derive(Clone, Debug)]
pub struct Param {
    tensor: RawTensor,
    trainable: bool,
}

impl Param {
    /// A trainable parameter initialised with `value`.
    pub fn new(value: RawTensor) -> Result<Self> {
        Ok(Param { tensor: value.detach().contiguous()?.requires_grad_()?, trainable: true })
    }

    /// A non-trainable buffer initialised with `value`.
    pub fn buffer(value: RawTensor) -> Result<Self> {
        Ok(Param { tensor: value.detach().contiguous()?, trainable: false })
    }

    /// The tensor to compute with (a leaf; gradients are reported for it).
    pub fn tensor(&self) -> &RawTensor {
        &self.tensor
    }

    /// True for trained weights; false for buffers such as BatchNorm's running statistics, which
    /// no optimizer, weight decay or clipping touches.
    pub fn is_trainable(&self) -> bool {
        self.trainable
    }

    /// Shape of the tensor, as saved in checkpoints.
    pub fn shape(&self) -> &[usize] {
        self.tensor.shape()
    }

    /// Overwrites the values in place with `value` (same shape; any device — it is moved).
    pub fn assign(&self, value: &RawTensor) -> Result<()> {
        if value.shape() != self.shape() {
            return Err(Error::shape(
                "Param::assign",
                format!("parameter has shape {:?}, value has shape {:?}", self.shape(), value.shape()),
            ));
        }
        let value = value.to_device(self.tensor.device())?.contiguous()?;
        self.tensor.assign_from("Param::assign", &value)
    }

    /// Whether `self` and `other` are one tensor (clones of one parameter, or a tied weight):
    /// they share storage, so updating one updates the other.
    pub fn same_tensor(&self, other: &Param) -> bool {
        self.tensor.id() == other.tensor.id() || self.tensor.storage().same_memory(other.tensor.storage())
    }

    /// The current values on the host.
    pub fn to_vec(&self) -> Result<Vec<f32>> {
        self.tensor.to_vec()
    }
}

/// The entries of `params` that an update may touch: trainable, each tensor once (the first
/// name of a tied weight), so optimizers and clipping never see a tensor twice.
pub(crate) fn unique_trainable(params: &[(String, Param)]) -> Vec<&(String, Param)> {
    let mut out: Vec<&(String, Param)> = Vec::new();
    for entry in params.iter().filter(|(_, p)| p.is_trainable()) {
        if !out.iter().any(|(_, seen)| seen.same_tensor(&entry.1)) {
            out.push(entry);
        }
    }
    out
}
