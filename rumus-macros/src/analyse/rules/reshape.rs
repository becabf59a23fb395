//! `Flatten` and `Reshape`: the same elements in another shape.

use crate::analyse::plan::{Layer, LayerKind};
use crate::analyse::walk::{err, numel, Ctx, Site};
use crate::parse::Result;
use crate::spec::{fmt_shape, Shape, MAX_DIM};

pub fn flatten(s: &Site, _: &mut Ctx) -> Result<Layer> {
    let (call, shape) = (s.call, s.shape());
    let n = numel(shape);
    if n > MAX_DIM as u128 {
        return Err(err(
            call,
            format!("{call} would produce {n} features from {}, more than rumus supports (2^31)", fmt_shape(shape)),
        ));
    }
    Ok(Layer { shows_from: true, ..s.layer(LayerKind::Flatten, vec![n as usize]) })
}

pub fn reshape(s: &Site, _: &mut Ctx) -> Result<Layer> {
    let (call, b, prod) = (s.call, s.args, s.input);
    let dims = b.dims("shape").unwrap_or(&[]);
    let have = numel(&prod.shape);
    if dims.iter().filter(|d| **d == -1).count() > 1 || dims.contains(&0) || dims.is_empty() {
        return Err(err(
            call,
            format!("{call}: the target shape must be positive sizes, with at most one -1 to infer"),
        ));
    }
    let known: u128 = dims.iter().filter(|d| **d > 0).fold(1u128, |a, d| a.saturating_mul(*d as u128));
    let infer_ok = known != 0 && have.is_multiple_of(known);
    let out: Shape = if dims.contains(&-1) {
        if !infer_ok {
            return Err(err(
                call,
                format!(
                    "{call} needs a multiple of {known} elements, but {}\nhint: the known sizes must divide {have}",
                    prod.got_elements()
                ),
            ));
        }
        dims.iter().map(|d| if *d == -1 { (have / known) as usize } else { *d as usize }).collect()
    } else {
        dims.iter().map(|d| *d as usize).collect()
    };
    let want = numel(&out);
    if want != have {
        return Err(err(
            call,
            format!(
                "{call} needs {want} elements, but {}\nhint: the target shape must hold exactly {have} elements",
                prod.got_elements()
            ),
        ));
    }
    let display = format!("Reshape{}", fmt_shape(&out).replace('[', "(").replace(']', ")"));
    Ok(Layer { shows_from: true, display, ..s.layer(LayerKind::Reshape { shape: out.clone() }, out) })
}
