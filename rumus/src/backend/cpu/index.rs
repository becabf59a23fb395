//! index_select / index_add and gather / scatter_add over `[outer, len, inner]` views.
//! Indices were range-checked by the op layer.

use super::pool;
use crate::backend::{GatherArgs, IndexArgs};

pub fn index_select(x: &[f32], idx: &[u32], a: &IndexArgs) -> Vec<f32> {
    // The index storage may be longer than the view (a leading slice of a larger tensor).
    let idx = &idx[..a.count];
    let mut out = Vec::with_capacity(a.outer * a.count * a.inner);
    for o in 0..a.outer {
        for &i in idx {
            let start = (o * a.len + i as usize) * a.inner;
            out.extend_from_slice(&x[start..start + a.inner]);
        }
    }
    out
}

pub fn index_add(grad: &[f32], idx: &[u32], a: &IndexArgs) -> Vec<f32> {
    let idx = &idx[..a.count];
    let mut out = pool::filled(a.outer * a.len * a.inner, 0.0);
    for o in 0..a.outer {
        for (j, &i) in idx.iter().enumerate() {
            let src = &grad[(o * a.count + j) * a.inner..][..a.inner];
            let dst = &mut out[(o * a.len + i as usize) * a.inner..][..a.inner];
            for (d, s) in dst.iter_mut().zip(src) {
                *d += s;
            }
        }
    }
    out
}

pub fn gather(x: &[f32], idx: &[u32], a: &GatherArgs) -> Vec<f32> {
    let mut out = pool::take(a.outer * a.count * a.inner);
    for o in 0..a.outer {
        for j in 0..a.count {
            for i in 0..a.inner {
                let at = (o * a.count + j) * a.inner + i;
                out[at] = x[(o * a.len + idx[at] as usize) * a.inner + i];
            }
        }
    }
    out
}

pub fn scatter_add(grad: &[f32], idx: &[u32], a: &GatherArgs) -> Vec<f32> {
    let mut out = pool::filled(a.outer * a.len * a.inner, 0.0);
    for o in 0..a.outer {
        for j in 0..a.count {
            for i in 0..a.inner {
                let at = (o * a.count + j) * a.inner + i;
                out[(o * a.len + idx[at] as usize) * a.inner + i] += grad[at];
            }
        }
    }
    out
}
