//! index_select / index_add and gather / scatter_add over `[outer, len, inner]` views.
//! Indices were range-checked by the op layer.

use super::buffer_pool;
use crate::backend::{GatherArgs, IndexArgs};
use crate::Result;

pub fn index_select(x: &[f32], idx: &[u32], a: &IndexArgs) -> Result<Vec<f32>> {
    // The index storage may be longer than the view (a leading slice of a larger tensor).
    let idx = &idx[..a.count];
    // Every row is overwritten, so a pooled buffer needs no clearing.
    let mut out = buffer_pool::take("index_select", a.outer * a.count * a.inner)?;
    let picks = (0..a.outer).flat_map(|o| idx.iter().map(move |&i| o * a.len + i as usize));
    for (row, src) in out.chunks_exact_mut(a.inner.max(1)).zip(picks) {
        row.copy_from_slice(&x[src * a.inner..(src + 1) * a.inner]);
    }
    Ok(out)
}

pub fn index_add(grad: &[f32], idx: &[u32], a: &IndexArgs) -> Result<Vec<f32>> {
    let idx = &idx[..a.count];
    let mut out = buffer_pool::filled("index_select", a.outer * a.len * a.inner, 0.0)?;
    for o in 0..a.outer {
        for (j, &i) in idx.iter().enumerate() {
            let src = &grad[(o * a.count + j) * a.inner..][..a.inner];
            let dst = &mut out[(o * a.len + i as usize) * a.inner..][..a.inner];
            for (d, s) in dst.iter_mut().zip(src) {
                *d += s;
            }
        }
    }
    Ok(out)
}

pub fn gather(x: &[f32], idx: &[u32], a: &GatherArgs) -> Result<Vec<f32>> {
    let mut out = buffer_pool::take("gather", a.outer * a.count * a.inner)?;
    for o in 0..a.outer {
        for j in 0..a.count {
            for i in 0..a.inner {
                let at = (o * a.count + j) * a.inner + i;
                out[at] = x[(o * a.len + idx[at] as usize) * a.inner + i];
            }
        }
    }
    Ok(out)
}

pub fn scatter_add(grad: &[f32], idx: &[u32], a: &GatherArgs) -> Result<Vec<f32>> {
    let mut out = buffer_pool::filled("gather", a.outer * a.len * a.inner, 0.0)?;
    for o in 0..a.outer {
        for j in 0..a.count {
            for i in 0..a.inner {
                let at = (o * a.count + j) * a.inner + i;
                out[(o * a.len + idx[at] as usize) * a.inner + i] += grad[at];
            }
        }
    }
    Ok(out)
}
