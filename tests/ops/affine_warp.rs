//! The per-sample affine warp of image batches (data augmentation): integer maps (shifts,
//! mirrors) are exact against hand-computed references in both modes, bilinear reads against a
//! hand-computed half-pixel shift, the CPU against wgpu on strided inputs, and bad input as
//! errors.

use rumus::testing::{assert_close, wgpu_or_skip};
use rumus::{Device, Error, Interpolation, RawTensor, Result};

const SHAPE: [usize; 4] = [2, 3, 4, 5];

/// `0, 1, 2, ...` in `[2, 3, 4, 5]`, plus one so that zero fill is told apart.
fn ramp(device: &Device) -> Result<RawTensor> {
    let n: usize = SHAPE.iter().product();
    RawTensor::from_vec((1..=n).map(|v| v as f32).collect(), &SHAPE, device)
}

/// The reference: output pixel (x, y) of sample i reads `source(i, x, y)` or zero outside.
fn reference(x: &[f32], source: impl Fn(usize, i64, i64) -> (i64, i64)) -> Vec<f32> {
    let [n, c, h, w] = SHAPE;
    let mut out = Vec::new();
    for i in 0..n {
        for ch in 0..c {
            for y in 0..h as i64 {
                for xx in 0..w as i64 {
                    let (sx, sy) = source(i, xx, y);
                    let inside = (0..w as i64).contains(&sx) && (0..h as i64).contains(&sy);
                    out.push(if inside { x[((i * c + ch) * h + sy as usize) * w + sx as usize] } else { 0.0 });
                }
            }
        }
    }
    out
}

fn check_exact(device: &Device) -> Result<()> {
    let x = ramp(device)?;
    let host = x.to_vec()?;
    // Sample 0 shifted right by 2 and up by 1 (reads x - 2, y + 1); sample 1 mirrored and
    // shifted down by 1 (reads 4 - x, y - 1).
    let maps = [[1.0, 0.0, -2.0, 0.0, 1.0, 1.0], [-1.0, 0.0, 4.0, 0.0, 1.0, -1.0]];
    let want = reference(&host, |i, x, y| if i == 0 { (x - 2, y + 1) } else { (4 - x, y - 1) });
    for mode in [Interpolation::Nearest, Interpolation::Bilinear] {
        let got = x.affine_warp(&maps, mode)?.to_vec()?;
        assert_eq!(got, want, "{mode:?} on {device}");
    }
    // Bilinear half-pixel shift to the right: each pixel averages itself and its right
    // neighbour (zero past the last column).
    let half = [[1.0, 0.0, 0.5, 0.0, 1.0, 0.0]; 2];
    let got = x.affine_warp(&half, Interpolation::Bilinear)?.to_vec()?;
    let (a, b) = (reference(&host, |_, x, y| (x, y)), reference(&host, |_, x, y| (x + 1, y)));
    let want: Vec<f32> = a.iter().zip(&b).map(|(a, b)| 0.5 * a + 0.5 * b).collect();
    assert_close(&format!("half-pixel shift on {device}"), &got, &want, 1e-6);
    // Nearest rounds half-way sources up: 0.5 reads the right neighbour.
    let got = x.affine_warp(&half, Interpolation::Nearest)?.to_vec()?;
    assert_eq!(got, b, "nearest half-way on {device}");
    // An empty batch is an empty batch.
    let empty = RawTensor::zeros(&[0, 3, 4, 5], device)?;
    assert_eq!(empty.affine_warp(&[], Interpolation::Bilinear)?.shape(), [0, 3, 4, 5]);
    Ok(())
}

#[test]
fn integer_maps_are_exact_on_the_cpu() -> Result<()> {
    check_exact(&Device::cpu())
}

#[test]
fn integer_maps_are_exact_on_wgpu() -> Result<()> {
    let Some(gpu) = wgpu_or_skip() else { return Ok(()) };
    check_exact(&gpu)
}

/// Rotations, scales and shears with coefficients that are multiples of 1/8 (so that both
/// devices compute the same source positions), on a transposed view.
#[test]
fn the_warp_agrees_between_cpu_and_wgpu_on_views() -> Result<()> {
    let Some(gpu) = wgpu_or_skip() else { return Ok(()) };
    let cpu = Device::cpu();
    let stored = RawTensor::randn(&[3, 2, 9, 7], 0.0, 1.0, 5, &cpu)?;
    let maps = [
        [0.875, -0.5, 2.25, 0.5, 0.875, -1.125],
        [1.25, 0.125, -0.75, -0.25, 0.75, 1.5],
        [-1.0, 0.0, 8.0, 0.0, 1.0, 0.0],
    ];
    for mode in [Interpolation::Nearest, Interpolation::Bilinear] {
        let run = |device: &Device| -> Result<Vec<f32>> {
            stored.to_device(device)?.transpose(-1, -2)?.affine_warp(&maps, mode)?.to_vec()
        };
        let (a, b) = (run(&cpu)?, run(&gpu)?);
        assert!(a.iter().any(|v| *v != 0.0), "the maps read inside the image");
        assert_close(&format!("{mode:?} warp, cpu vs wgpu"), &b, &a, 1e-5);
    }
    Ok(())
}

#[test]
fn bad_input_is_an_error() -> Result<()> {
    let cpu = Device::cpu();
    let x = ramp(&cpu)?;
    let id = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0];
    let shape = |r: Result<RawTensor>| matches!(r, Err(Error::Shape { op: "affine_warp", .. }));
    let invalid = |r: Result<RawTensor>| matches!(r, Err(Error::InvalidArgument { op: "affine_warp", .. }));
    assert!(shape(x.affine_warp(&[id], Interpolation::Nearest)), "one map for two samples");
    assert!(shape(x.reshape(&[6, 4, 5])?.affine_warp(&[id; 6], Interpolation::Nearest)), "rank 3");
    let mut nan = id;
    nan[2] = f32::NAN;
    assert!(invalid(x.affine_warp(&[id, nan], Interpolation::Bilinear)), "NaN coefficient");
    nan[2] = f32::INFINITY;
    assert!(invalid(x.affine_warp(&[nan, id], Interpolation::Bilinear)), "infinite coefficient");
    assert!(invalid(x.requires_grad_()?.affine_warp(&[id, id], Interpolation::Nearest)), "requires grad");
    let ids = RawTensor::from_indices(&[0; 4], &[1, 1, 2, 2], &cpu)?;
    assert!(matches!(ids.affine_warp(&[id], Interpolation::Nearest), Err(Error::DType { .. })));
    Ok(())
}
