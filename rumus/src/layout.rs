//! Shapes, strides and offsets: how a tensor's elements sit in its storage.

use crate::{Error, Result};

/// Shape, element strides and starting offset of a tensor view into its storage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    shape: Vec<usize>,
    strides: Vec<usize>,
    offset: usize,
}

/// The most elements a tensor may hold (2^40, 4 TiB of f32), and the bound on the product of
/// its non-zero dimensions, so that every stride, offset and element index fits a `usize` (and
/// an `isize`) with room to spare. Larger shapes are refused by [`checked_numel`].
pub const MAX_ELEMENTS: usize = 1 << 40;

/// Number of elements of `shape`, or `Error::Shape` naming `op` when the product of its non-zero
/// dimensions overflows or exceeds [`MAX_ELEMENTS`]. Every shape a tensor is built with passes
/// through here, which makes the strides and offsets of its layouts overflow-free.
///
/// ```
/// use rumus::layout::checked_numel;
/// use rumus::Error;
///
/// assert_eq!(checked_numel("demo", &[2, 3, 4])?, 24);
/// assert_eq!(checked_numel("demo", &[0, 1 << 20])?, 0); // empty
/// let huge = checked_numel("demo", &[1 << 30, 1 << 30, 2]);
/// assert!(matches!(huge, Err(Error::Shape { op: "demo", .. })));
/// # Ok::<(), rumus::Error>(())
/// ```
pub fn checked_numel(op: &'static str, shape: &[usize]) -> Result<usize> {
    let mut product: usize = 1;
    let mut empty = false;
    for &dim in shape {
        if dim == 0 {
            empty = true;
            continue;
        }
        product = product.checked_mul(dim).filter(|&p| p <= MAX_ELEMENTS).ok_or_else(|| too_large(op, shape))?;
    }
    Ok(if empty { 0 } else { product })
}

fn too_large(op: &'static str, shape: &[usize]) -> Error {
    Error::shape(op, format!("shape {shape:?} has more than {MAX_ELEMENTS} elements (the limit is 2^40)"))
}

/// `a * b` or `Error::Shape` naming `op` and `what` on overflow.
pub fn checked_mul(op: &'static str, what: &str, a: usize, b: usize) -> Result<usize> {
    a.checked_mul(b).ok_or_else(|| Error::shape(op, format!("{what}: {a} * {b} overflows")))
}

/// `a + b` or `Error::Shape` naming `op` and `what` on overflow.
pub fn checked_add(op: &'static str, what: &str, a: usize, b: usize) -> Result<usize> {
    a.checked_add(b).ok_or_else(|| Error::shape(op, format!("{what}: {a} + {b} overflows")))
}

/// Row-major strides for `shape` (saturating: shapes that passed [`checked_numel`] never get
/// near the limit).
pub fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1].saturating_mul(shape[i + 1]);
    }
    strides
}

/// Number of elements of `shape`, saturating at `usize::MAX` (a count that can never match a
/// buffer); validate shapes with [`checked_numel`].
pub fn numel(shape: &[usize]) -> usize {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d)).unwrap_or(if shape.contains(&0) {
        0
    } else {
        usize::MAX
    })
}

impl Layout {
    /// Row-major strides for `shape`, offset 0. Does not check the element count (see
    /// [`checked_numel`]).
    pub fn contiguous(shape: &[usize]) -> Self {
        Layout { strides: contiguous_strides(shape), shape: shape.to_vec(), offset: 0 }
    }

    /// A strided view: one stride per axis, a shape within [`MAX_ELEMENTS`], and a last element
    /// (`offset + Σ (dim-1)·stride`) that fits a `usize`; anything else is an error.
    pub fn new(shape: Vec<usize>, strides: Vec<usize>, offset: usize) -> Result<Self> {
        if shape.len() != strides.len() {
            return Err(Error::shape("layout", format!("shape {shape:?} and strides {strides:?} differ in rank")));
        }
        checked_numel("layout", &shape)?;
        let layout = Layout { shape, strides, offset };
        if layout.numel() > 0 && layout.max_index().is_none() {
            return Err(Error::shape("layout", format!("{layout:?} addresses elements beyond usize")));
        }
        Ok(layout)
    }

    /// Size of each axis, outermost first.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Step in elements (not bytes) between neighbours along each axis; 0 on broadcast axes.
    pub fn strides(&self) -> &[usize] {
        &self.strides
    }

    /// Index of the first element in the storage, in elements.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Number of axes (0 for a scalar).
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements addressed (the product of the shape; 1 for a scalar).
    pub fn numel(&self) -> usize {
        numel(&self.shape)
    }

    /// The largest storage index this layout addresses, or `None` when it has no elements or
    /// that index does not fit a `usize`.
    pub fn max_index(&self) -> Option<usize> {
        if self.shape.contains(&0) {
            return None;
        }
        self.shape
            .iter()
            .zip(&self.strides)
            .try_fold(self.offset, |at, (&dim, &stride)| at.checked_add((dim - 1).checked_mul(stride)?))
    }

    /// True when the elements are stored row-major without gaps (offset may be non-zero).
    pub fn is_contiguous(&self) -> bool {
        let mut expected = 1;
        for (&dim, &stride) in self.shape.iter().zip(&self.strides).rev() {
            if dim != 1 && stride != expected {
                return false;
            }
            expected = expected.saturating_mul(dim);
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
        let skip = checked_mul("slice", "offset", start, self.strides[axis])?;
        let offset = checked_add("slice", "offset", self.offset, skip)?;
        Ok(Layout { shape, strides: self.strides.clone(), offset })
    }

    /// View with `shape`, broadcasting size-1 (or missing leading) axes with stride 0.
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<Self> {
        if shape.len() < self.rank() {
            return Err(Error::shape(
                "broadcast",
                format!("cannot broadcast {:?} to lower rank {:?}", self.shape, shape),
            ));
        }
        checked_numel("broadcast", shape)?;
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
    checked_numel(op, &out)?;
    Ok(out)
}

/// Resolves a possibly negative axis against `rank`: `-rank..rank`, so a rank-0 tensor has no
/// axis at all.
pub fn resolve_axis(op: &'static str, axis: isize, rank: usize) -> Result<usize> {
    let signed_rank = isize::try_from(rank).unwrap_or(isize::MAX);
    let resolved = if axis < 0 { axis.checked_add(signed_rank) } else { Some(axis) };
    match resolved {
        Some(a) if a >= 0 && a < signed_rank => Ok(a as usize),
        _ => Err(Error::invalid(op, format!("axis {axis} is out of range for rank {rank}"))),
    }
}

/// Resolves several axes (see [`resolve_axis`]); an axis named twice is an error, as in PyTorch.
/// Returned in the order given.
pub fn resolve_axes(op: &'static str, axes: &[isize], rank: usize) -> Result<Vec<usize>> {
    let mut resolved = Vec::with_capacity(axes.len());
    for &axis in axes {
        let a = resolve_axis(op, axis, rank)?;
        if resolved.contains(&a) {
            return Err(Error::invalid(op, format!("axis {a} appears more than once in {axes:?}")));
        }
        resolved.push(a);
    }
    Ok(resolved)
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
    fn invalid_layouts_cannot_be_built() {
        assert!(Layout::new(vec![2, 3], vec![3], 0).is_err());
        assert!(Layout::new(vec![1 << 32, 1 << 32], vec![1, 1], 0).is_err());
        assert!(Layout::new(vec![2, 2], vec![usize::MAX, 1], 0).is_err());
        assert!(Layout::new(vec![2], vec![1], usize::MAX).is_err());
        let l = Layout::new(vec![2, 3], vec![1, 2], 5).unwrap();
        assert_eq!(l.max_index(), Some(10));
        assert_eq!(Layout::new(vec![0, 3], vec![usize::MAX, 1], usize::MAX).unwrap().max_index(), None);
        assert!(l.narrow(1, 1, 3).is_ok());
        assert!(l.narrow(1, 2, 4).is_err());
    }

    #[test]
    fn checked_numel_bounds_nonzero_dims_and_resolve_axis_every_rank() {
        assert_eq!(checked_numel("t", &[]).unwrap(), 1);
        assert_eq!(checked_numel("t", &[0, MAX_ELEMENTS]).unwrap(), 0);
        assert!(checked_numel("t", &[0, MAX_ELEMENTS, 2]).is_err());
        assert!(checked_numel("t", &[(1 << 62) + 1, 4]).is_err());
        assert!(resolve_axis("t", 0, 0).is_err());
        assert!(resolve_axis("t", -1, 0).is_err());
        assert_eq!(resolve_axis("t", -1, 3).unwrap(), 2);
        assert!(resolve_axis("t", isize::MIN, 3).is_err());
        assert!(resolve_axes("t", &[1, -2], 3).is_err());
        assert_eq!(resolve_axes("t", &[2, 0], 3).unwrap(), vec![2, 0]);
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
