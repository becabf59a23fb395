//! Finite-difference gradient checking and test helpers, for rumus's own tests and for users'
//! custom ops. Compiled with the `testing` feature (enable it in `[dev-dependencies]`).

use crate::{Error, RawTensor, Result};

/// Settings of [`grad_check`].
#[derive(Clone, Copy, Debug)]
pub struct GradCheck {
    /// Step of the central difference.
    pub eps: f32,
    /// Allowed `|numeric - analytic|` per element, scaled by `max(1, |analytic|)`.
    pub tolerance: f32,
}

impl Default for GradCheck {
    /// The ops run in f32. With `eps = 1e-2` the central difference's truncation error is
    /// `O(eps²) ≈ 1e-4` and its rounding error about `f32::EPSILON·|f|/eps ≈ 1e-5·|f|`, so a
    /// tolerance of `5e-3` catches every wrong derivative (errors of order 1) while leaving room
    /// for f32 noise on losses of magnitude up to ~100.
    fn default() -> Self {
        GradCheck { eps: 1e-2, tolerance: 5e-3 }
    }
}

/// Compares autograd's gradients of `f` with central differences, for every element of every
/// input. `f` may return any shape: it is reduced with fixed pseudo-random weights so every
/// output element matters (a plain sum would hide softmax's gradient).
pub fn grad_check(
    inputs: &[RawTensor],
    settings: GradCheck,
    f: impl Fn(&[RawTensor]) -> Result<RawTensor>,
) -> Result<()> {
    let leaves = inputs.iter().map(|t| t.requires_grad_()).collect::<Result<Vec<_>>>()?;
    let output = f(&leaves)?;
    let weights = RawTensor::rand_uniform(output.shape(), 0.5, 1.5, 0x5eed, output.device())?;
    let loss = |out: &RawTensor| -> Result<f64> {
        let (o, w) = (out.to_vec()?, weights.to_vec()?);
        Ok(o.iter().zip(&w).map(|(&o, &w)| o as f64 * w as f64).sum())
    };
    let grads = output.mul(&weights)?.sum_all()?.backward()?;
    for (which, (input, leaf)) in inputs.iter().zip(&leaves).enumerate() {
        let analytic = match grads.get(leaf) {
            Some(g) => g.to_vec()?,
            None => vec![0.0; input.numel()],
        };
        let base = input.contiguous()?.to_vec()?;
        for i in 0..base.len() {
            let shifted = |delta: f32| -> Result<f64> {
                let mut data = base.clone();
                data[i] += delta;
                let mut probe: Vec<RawTensor> = inputs.to_vec();
                probe[which] = RawTensor::from_vec(data, input.shape(), input.device())?;
                loss(&crate::no_grad(|| f(&probe))?)
            };
            let numeric = (shifted(settings.eps)? - shifted(-settings.eps)?) / (2.0 * settings.eps as f64);
            let a = analytic[i] as f64;
            if !numeric.is_finite() || (numeric - a).abs() > settings.tolerance as f64 * a.abs().max(1.0) {
                return Err(Error::Autograd(format!(
                    "gradient check failed for input {which} {:?} at element {i}: analytic {a}, numeric {numeric}",
                    input.shape()
                )));
            }
        }
    }
    Ok(())
}

/// Asserts that `got` matches `want` element by element within `tol`, scaled by
/// `max(1, |want|)` (NaN matches NaN), naming `what` and the first element that does not.
pub fn assert_close(what: &str, got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "{what}: length {} vs {}", got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g - w).abs() <= tol * w.abs().max(1.0) || (g.is_nan() && w.is_nan()) || g == w;
        assert!(ok, "{what}: element {i} of {}: got {g}, want {w}", got.len());
    }
}

/// The wgpu device for a test, or `None` when there is no adapter: then it prints a loud
/// `SKIPPED` line (straight to stderr, past the test harness's capture) and the test should
/// return. With `RUMUS_REQUIRE_WGPU=1` (CI) a missing adapter fails the test instead. On a GPU
/// it waits for the start-up warm-up, so tests check the kernels a warm process runs, not the
/// warm-up's stand-ins (those have tests of their own).
pub fn wgpu_or_skip() -> Option<crate::Device> {
    match crate::Device::wgpu() {
        Ok(device) => {
            device.wait_for_kernels().expect("the start-up warm-up finishes");
            Some(device)
        }
        Err(e) => {
            if std::env::var("RUMUS_REQUIRE_WGPU").as_deref() == Ok("1") {
                panic!("RUMUS_REQUIRE_WGPU=1 but there is no wgpu adapter: {e}");
            }
            let notice = format!("\n**********\nSKIPPED: no wgpu adapter ({e})\n**********\n");
            let _ = std::io::Write::write_all(&mut std::io::stderr(), notice.as_bytes());
            None
        }
    }
}

/// Dynamic loss scaling's fused unscale-and-check, the crate-internal op that
/// [`LossScaler`](crate::optim::LossScaler) runs on every gradient, exposed for tests of the op
/// and its kernels: `grad · inv_scale` as a new contiguous tensor of `grad`'s shape (any layout
/// is read), and `found` (a one-element u32 tensor from [`non_finite_flag`] on `grad`'s device)
/// set to a nonzero value, in place, when some element of `grad` is NaN or infinite or its
/// product overflows; left as it was otherwise. Outside autograd. A `grad` not f32, a `found`
/// not a contiguous one-element u32 tensor or on another device, or an `inv_scale` NaN or
/// infinite is an error, never a panic.
pub fn unscale_grad(grad: &RawTensor, inv_scale: f32, found: &RawTensor) -> Result<RawTensor> {
    crate::ops::unscale_grad(grad, inv_scale, found)
}

/// A zeroed non-finite flag on `device` for [`unscale_grad`] (one u32; read it with
/// [`RawTensor::to_vec_u32`]).
pub fn non_finite_flag(device: &crate::Device) -> Result<RawTensor> {
    crate::ops::grad_unscale::non_finite_flag(device)
}
