//! Per-sample affine resampling of NCHW images, one plane per task in parallel.

use rayon::prelude::*;

use super::buffer_pool;
use crate::backend::WarpArgs;
use crate::{Error, Result};

/// The pixel of `plane [h, w]` at `(x, y)`, zero outside.
fn pixel(plane: &[f32], w: usize, h: usize, x: i64, y: i64) -> f32 {
    if x < 0 || y < 0 || x >= w as i64 || y >= h as i64 {
        0.0
    } else {
        plane[y as usize * w + x as usize]
    }
}

/// `x [n, c, h, w]` resampled through `matrices [n, 6]` (see [`WarpArgs`]). `x` may be longer
/// (the storage of a leading slice of a larger batch): only its first `n·c·h·w` values are read.
pub fn affine_warp(x: &[f32], matrices: &[f32], a: &WarpArgs) -> Result<Vec<f32>> {
    let (h, w) = (a.height, a.width);
    let plane = h * w;
    let len = [a.batch, a.channels, h, w].iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
    let x = match len.and_then(|len| x.get(..len)) {
        Some(x) => x,
        None => {
            return Err(Error::invalid(
                "affine_warp",
                format!("{} values for [{}, {}, {h}, {w}]", x.len(), a.batch, a.channels),
            ))
        }
    };
    let mut out = buffer_pool::take("affine_warp", x.len())?;
    if plane == 0 {
        return Ok(out);
    }
    out.par_chunks_mut(plane).zip(x.par_chunks(plane)).enumerate().for_each(|(i, (dst, src))| {
        let m = &matrices[(i / a.channels.max(1)) * 6..][..6];
        for (j, out) in dst.iter_mut().enumerate() {
            let (px, py) = ((j % w) as f32, (j / w) as f32);
            let sx = m[0] * px + m[1] * py + m[2];
            let sy = m[3] * px + m[4] * py + m[5];
            *out = if a.bilinear {
                let (x0, y0) = (sx.floor(), sy.floor());
                let (fx, fy) = (sx - x0, sy - y0);
                let (x0, y0) = (x0 as i64, y0 as i64);
                let top = pixel(src, w, h, x0, y0) * (1.0 - fx) + pixel(src, w, h, x0 + 1, y0) * fx;
                let bottom = pixel(src, w, h, x0, y0 + 1) * (1.0 - fx) + pixel(src, w, h, x0 + 1, y0 + 1) * fx;
                top * (1.0 - fy) + bottom * fy
            } else {
                pixel(src, w, h, (sx + 0.5).floor() as i64, (sy + 0.5).floor() as i64)
            };
        }
    });
    Ok(out)
}
