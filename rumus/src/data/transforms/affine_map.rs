//! A 2-D affine map in pixel coordinates, kept in f64 while transforms are composed.

/// `(x, y) ↦ (a·x + b·y + c, d·x + e·y + f)`, x the column and y the row.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct AffineMap(pub(crate) [f64; 6]);

impl AffineMap {
    /// The map that leaves every point in place.
    pub(crate) const IDENTITY: AffineMap = AffineMap([1.0, 0.0, 0.0, 0.0, 1.0, 0.0]);

    /// A shift by `(dx, dy)`.
    pub(crate) fn translation(dx: f64, dy: f64) -> AffineMap {
        AffineMap([1.0, 0.0, dx, 0.0, 1.0, dy])
    }

    /// `self ∘ other`: `other` first, then `self`.
    pub(crate) fn after(&self, other: &AffineMap) -> AffineMap {
        let [a, b, c, d, e, f] = self.0;
        let [p, q, r, s, t, u] = other.0;
        AffineMap([a * p + b * s, a * q + b * t, a * r + b * u + c, d * p + e * s, d * q + e * t, d * r + e * u + f])
    }

    /// The inverse map, or `None` when the linear part is singular.
    pub(crate) fn inverse(&self) -> Option<AffineMap> {
        let [a, b, c, d, e, f] = self.0;
        let det = a * e - b * d;
        if det.abs() < 1e-12 || !det.is_finite() {
            return None;
        }
        let (ia, ib, id, ie) = (e / det, -b / det, -d / det, a / det);
        Some(AffineMap([ia, ib, -(ia * c + ib * f), id, ie, -(id * c + ie * f)]))
    }

    /// The coefficients in f32, as the warp kernel reads them.
    pub(crate) fn to_f32(self) -> [f32; 6] {
        self.0.map(|v| v as f32)
    }
}

#[cfg(test)]
mod tests {
    use super::AffineMap;

    #[test]
    fn composition_and_inverse() {
        let m = AffineMap([0.8, -0.6, 3.0, 0.6, 0.8, -2.0]);
        let inv = m.inverse().expect("invertible");
        for (x, y) in [m.after(&inv), inv.after(&m)].map(|i| (i.0, AffineMap::IDENTITY.0)) {
            for (a, b) in x.iter().zip(y) {
                assert!((a - b).abs() < 1e-12, "{x:?}");
            }
        }
        let t = AffineMap::translation(2.0, 5.0).after(&AffineMap::translation(-1.0, 1.0));
        assert_eq!(t, AffineMap::translation(1.0, 6.0));
        assert!(AffineMap([1.0, 2.0, 0.0, 2.0, 4.0, 0.0]).inverse().is_none());
    }
}
