//! Shapes, strides and offsets: how a tensor's elements sit in its storage.

use crate::{Error, Result};

/// Shape, element strides and starting offset of a tensor view into its storage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    shape: Vec<usize>,
    strides: Vec<usize>,
    offset: usize,
}

/// Row-major strides for `shape`.
pub fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1];
    }
    strides
}

/// Number of elements of `shape`.
pub fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

impl Layout {
    pub fn contiguous(shape: &[usize]) -> Self {
        Layout { strides: contiguous_strides(shape), shape: shape.to_vec(), offset: 0 }
    }

    pub fn new(shape: Vec<usize>, strides: Vec<usize>, offset: usize) -> Self {
        Layout { shape, strides, offset }
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn strides(&self) -> &[usize] {
        &self.strides
    }

    pub fn offset(&self) -> usize {
        self.offset
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    pub fn numel(&self) -> usize {
        numel(&self.shape)
    }

    /// True when the elements are stored row-major without gaps (offset may be non-zero).
    pub fn is_contiguous(&self) -> bool {
        let mut expected = 1;
        for (&dim, &stride) in self.shape.iter().zip(&self.strides).rev() {
            if dim != 1 && stride != expected {
                return false;
            }
            expected *= dim;
        }
        true
    }

    /// Same elements viewed with axes reordered.
    pub fn permute(&self, axes: &[usize]) -> Result<Self> {
        let rank = self.rank();
        let mut seen = vec![false; rank];
        if axes.len() != rank || axes.iter().any(|&a| a >= rank || std::mem::replace(&mut seen[a], true)) {
            return Err(Error::invalid(
                "permute",
                format!("axes {axes:?} are not a permutation of 0..{rank} for shape {:?}", self.shape),
            ));
        }
        Ok(Layout {
            shape: axes.iter().map(|&a| self.shape[a]).collect(),
            strides: axes.iter().map(|&a| self.strides[a]).collect(),
            offset: self.offset,
        })
    }

    /// A sub-range `start..end` along `axis`, sharing storage.
    pub fn narrow(&self, axis: usize, start: usize, end: usize) -> Result<Self> {
        if axis >= self.rank() || start > end || end > self.shape[axis] {
            return Err(Error::invalid(
                "slice",
                format!("range {start}..{end} on axis {axis} is out of bounds for shape {:?}", self.shape),
            ));
        }
        let mut shape = self.shape.clone();
        shape[axis] = end - start;
        Ok(Layout { shape, strides: self.strides.clone(), offset: self.offset + start * self.strides[axis] })
    }

    /// View with `shape`, broadcasting size-1 (or missing leading) axes with stride 0.
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<Self> {
        if shape.len() < self.rank() {
            return Err(Error::shape(
                "broadcast",
                format!("cannot broadcast {:?} to lower rank {:?}", self.shape, shape),
            ));
        }
        let lead = shape.len() - self.rank();
        let mut strides = vec![0; shape.len()];
        for (i, &target) in shape.iter().enumerate().skip(lead) {
            let dim = self.shape[i - lead];
            if dim == target {
                strides[i] = self.strides[i - lead];
            } else if dim != 1 {
                return Err(Error::shape("broadcast", format!("cannot broadcast {:?} to {:?}", self.shape, shape)));
            }
        }
        Ok(Layout { shape: shape.to_vec(), strides, offset: self.offset })
    }
}

/// NumPy broadcasting of two shapes; `op` names the caller in the error.
pub fn broadcast_shapes(op: &'static str, lhs: &[usize], rhs: &[usize]) -> Result<Vec<usize>> {
    let rank = lhs.len().max(rhs.len());
    let mut out = vec![0; rank];
    for i in 0..rank {
        let l = if i + lhs.len() >= rank { lhs[i + lhs.len() - rank] } else { 1 };
        let r = if i + rhs.len() >= rank { rhs[i + rhs.len() - rank] } else { 1 };
        out[i] = match (l, r) {
            (a, b) if a == b => a,
            (1, b) => b,
            (a, 1) => a,
            _ => {
                return Err(Error::shape(
                    op,
                    format!("lhs {lhs:?} rhs {rhs:?}: dims {l} and {r} at axis {i} cannot be broadcast"),
                ))
            }
        };
    }
    Ok(out)
}

/// Resolves a possibly negative axis against `rank`.
pub fn resolve_axis(op: &'static str, axis: isize, rank: usize) -> Result<usize> {
    let resolved = if axis < 0 { axis + rank as isize } else { axis };
    if resolved < 0 || resolved as usize >= rank.max(1) {
        return Err(Error::invalid(op, format!("axis {axis} is out of range for rank {rank}")));
    }
    Ok(resolved as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting_follows_numpy() {
        assert_eq!(broadcast_shapes("add", &[3, 1, 5], &[4, 1]).unwrap(), vec![3, 4, 5]);
        assert!(broadcast_shapes("add", &[3, 2], &[3]).is_err());
    }

    #[test]
    fn permuted_layout_is_not_contiguous() {
        let l = Layout::contiguous(&[2, 3]);
        assert!(l.is_contiguous());
        let t = l.permute(&[1, 0]).unwrap();
        assert_eq!(t.shape(), &[3, 2]);
        assert_eq!(t.strides(), &[1, 3]);
        assert!(!t.is_contiguous());
        assert!(l.permute(&[0, 0]).is_err());
    }
}
