//! Rows of a matrix picked by host indices, checked on the host: how a dataset cuts a batch out
//! of samples resident on a device. Only the indices are uploaded; nothing is read back and no
//! graph is recorded.

use crate::backend::IndexArgs;
use crate::tensor::RawTensor;
use crate::{Error, Result};

impl RawTensor {
    /// Rows `indices` of the 2-D f32 tensor `self` (`[rows, per]`) as `[indices.len(), per]` on
    /// `self`'s device. An index past the last row is [`Error::IndexOutOfRange`] credited to `op`.
    pub(crate) fn select_rows(&self, op: &'static str, indices: &[usize]) -> Result<RawTensor> {
        self.check_f32(op)?;
        let &[count, per] = self.shape() else {
            return Err(Error::shape(op, format!("rows must be a matrix, not of shape {:?}", self.shape())));
        };
        let idx = indices
            .iter()
            .enumerate()
            .map(|(position, &i)| match u32::try_from(i) {
                Ok(v) if i < count => Ok(v),
                _ => Err(Error::IndexOutOfRange { op, index: i as i64, limit: count, position }),
            })
            .collect::<Result<Vec<u32>>>()?;
        let rows = self.contiguous()?;
        let idx = RawTensor::from_indices(&idx, &[idx.len()], rows.device())?;
        let args = IndexArgs { outer: 1, len: count, inner: per, count: indices.len() };
        let storage = rows.device().backend().index_select(rows.storage(), idx.storage(), &args)?;
        Ok(RawTensor::from_kernel(storage, &[indices.len(), per], rows.device()))
    }
}

#[cfg(test)]
mod tests {
    use crate::{Device, Error, RawTensor};

    #[test]
    fn picks_rows_in_the_order_asked() {
        let rows = RawTensor::from_vec((0..6).map(|v| v as f32).collect(), &[3, 2], &Device::cpu()).unwrap();
        let batch = rows.select_rows("test", &[2, 0, 2]).unwrap();
        assert_eq!(batch.shape(), &[3, 2]);
        assert_eq!(batch.to_vec().unwrap(), vec![4., 5., 0., 1., 4., 5.]);
    }

    #[test]
    fn an_index_past_the_rows_names_its_position() {
        let rows = RawTensor::zeros(&[3, 2], &Device::cpu()).unwrap();
        let err = rows.select_rows("test", &[0, 3]).unwrap_err();
        assert!(matches!(err, Error::IndexOutOfRange { op: "test", index: 3, limit: 3, position: 1 }), "{err}");
        let err = rows.select_rows("test", &[usize::MAX]).unwrap_err();
        assert!(matches!(err, Error::IndexOutOfRange { position: 0, limit: 3, .. }), "{err}");
        assert!(matches!(rows.reshape(&[6]).unwrap().select_rows("test", &[0]), Err(Error::Shape { .. })));
    }
}
