//! Copies of a tensor's values that autograd does not see: writing new values into a tensor in
//! place (`Param::assign`, restoring weights) and a copy with storage of its own (weight
//! snapshots). Both run the device's strided copy; nothing crosses to the host.

use crate::tensor::RawTensor;
use crate::{Error, Result};

impl RawTensor {
    /// Overwrites the elements of `self` with those of `value` (same shape, dtype and device; any
    /// layouts): every tensor sharing `self`'s storage sees the new values.
    pub(crate) fn assign_from(&self, op: &'static str, value: &RawTensor) -> Result<()> {
        if value.shape() != self.shape() {
            return Err(Error::shape(
                op,
                format!("destination has shape {:?}, value has shape {:?}", self.shape(), value.shape()),
            ));
        }
        if value.dtype() != self.dtype() {
            return Err(Error::DType { op, expected: self.dtype().name(), got: value.dtype().name() });
        }
        self.check_same_device(op, value)?;
        self.device().backend().copy_strided(value.storage(), value.layout(), self.storage(), self.layout())
    }

    /// The f32 values of `self` in a contiguous tensor with storage of its own, detached from the
    /// graph: later in-place updates of `self` leave the copy as it was.
    pub(crate) fn detached_copy(&self) -> Result<RawTensor> {
        self.check_f32("detached_copy")?;
        Ok(RawTensor::from_kernel(self.copied_storage("detached_copy")?, self.shape(), self.device()))
    }
}

#[cfg(test)]
mod tests {
    use crate::{Device, Error, RawTensor};

    #[test]
    fn assign_writes_through_every_view_of_the_storage() {
        let cpu = Device::cpu();
        let dst = RawTensor::zeros(&[2, 3], &cpu).unwrap();
        let alias = dst.reshape(&[6]).unwrap();
        let src = RawTensor::from_vec(vec![1., 2., 3., 4., 5., 6.], &[3, 2], &cpu).unwrap();
        dst.assign_from("test", &src.transpose(0, 1).unwrap()).unwrap();
        assert_eq!(alias.to_vec().unwrap(), vec![1., 3., 5., 2., 4., 6.]);
    }

    #[test]
    fn assign_refuses_another_shape_or_dtype() {
        let cpu = Device::cpu();
        let dst = RawTensor::zeros(&[2, 2], &cpu).unwrap();
        let err = dst.assign_from("test", &RawTensor::zeros(&[4], &cpu).unwrap()).unwrap_err();
        assert!(matches!(err, Error::Shape { op: "test", .. }), "{err}");
        let idx = RawTensor::from_indices(&[0, 1, 2, 3], &[2, 2], &cpu).unwrap();
        let err = dst.assign_from("test", &idx).unwrap_err();
        assert!(matches!(err, Error::DType { op: "test", expected: "f32", got: "u32" }), "{err}");
    }

    #[test]
    fn detached_copy_keeps_the_values_it_was_taken_with() {
        let cpu = Device::cpu();
        let t = RawTensor::from_vec(vec![1., 2., 3., 4.], &[2, 2], &cpu).unwrap();
        let copy = t.transpose(0, 1).unwrap().detached_copy().unwrap();
        t.assign_from("test", &RawTensor::zeros(&[2, 2], &cpu).unwrap()).unwrap();
        assert_eq!(copy.to_vec().unwrap(), vec![1., 3., 2., 4.]);
        assert!(copy.is_contiguous() && !copy.requires_grad());
    }
}
