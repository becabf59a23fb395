//! Issue #32's cheaper backward and read-backs: a sum's gradient is a broadcast view (reshaped as
//! a view too), a binary op's backward skips operands that do not require grad, leaf gradients
//! are still contiguous, and read-backs of varying sizes through reused staging buffers return
//! exactly what was written. Values on both devices against the closed form.

use rumus::testing::{assert_close, wgpu_or_skip};
use rumus::{no_grad, Device, RawTensor, Result};

fn devices() -> Vec<Device> {
    let mut devices = vec![Device::cpu()];
    devices.extend(wgpu_or_skip());
    devices
}

/// `d/dx sum(softmax(x) * g)` row by row: `y * (g - sum(y * g))`.
fn softmax_product_grad(x: &[f32], g: &[f32], cols: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(x.len());
    for (xr, gr) in x.chunks(cols).zip(g.chunks(cols)) {
        let max = xr.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let e: Vec<f32> = xr.iter().map(|v| (v - max).exp()).collect();
        let total: f32 = e.iter().sum();
        let y: Vec<f32> = e.iter().map(|v| v / total).collect();
        let dot: f32 = y.iter().zip(gr).map(|(a, b)| a * b).sum();
        out.extend(y.iter().zip(gr).map(|(yi, gi)| yi * (gi - dot)));
    }
    out
}

#[test]
fn a_sum_gradient_reaches_softmax_through_views_with_the_right_values() -> Result<()> {
    let (rows, cols) = (5, 7);
    let x: Vec<f32> = (0..rows * cols).map(|i| ((i * 37) % 11) as f32 / 4.0 - 1.0).collect();
    let g: Vec<f32> = (0..rows * cols).map(|i| ((i * 13) % 9) as f32 / 3.0 - 1.5).collect();
    let want = softmax_product_grad(&x, &g, cols);
    for device in devices() {
        let xt = RawTensor::from_slice(&x, &[rows, cols], &device)?.requires_grad_()?;
        let gt = RawTensor::from_slice(&g, &[rows, cols], &device)?;
        let grads = xt.softmax(-1)?.mul(&gt)?.sum_all()?.backward()?;
        let dx = grads.get(&xt).expect("x requires grad");
        assert_close(&device.name(), &dx.to_vec()?, &want, 1e-5);
        // `g` is data: its gradient is neither kept nor computed.
        assert!(grads.get(&gt).is_none(), "{}: a gradient for data", device.name());
    }
    Ok(())
}

#[test]
fn leaf_gradients_of_a_sum_are_contiguous_ones() -> Result<()> {
    for device in devices() {
        let x = RawTensor::from_slice(&[1.0, -2.0, 3.0, 0.5, 4.0, -1.0], &[2, 3], &device)?.requires_grad_()?;
        let grads = x.sum_all()?.backward()?;
        let dx = grads.get(&x).expect("x requires grad");
        assert!(dx.is_contiguous(), "{}: a leaf gradient is a view", device.name());
        assert_eq!(dx.shape(), &[2, 3]);
        assert_eq!(dx.to_vec()?, vec![1.0; 6]);
        // Both operands require grad: each gets the other's values.
        let (a, b) = (x.clone(), RawTensor::from_slice(&[2.0; 6], &[2, 3], &device)?.requires_grad_()?);
        let grads = a.mul(&b)?.sum_all()?.backward()?;
        assert_eq!(grads.get(&a).expect("a requires grad").to_vec()?, vec![2.0; 6]);
        assert_eq!(grads.get(&b).expect("b requires grad").to_vec()?, vec![1.0, -2.0, 3.0, 0.5, 4.0, -1.0]);
    }
    Ok(())
}

#[test]
fn a_repeated_scalar_reshapes_as_a_view_with_every_element() -> Result<()> {
    for device in devices() {
        let s = RawTensor::from_slice(&[2.5], &[], &device)?;
        let wide = s.broadcast_to(&[3, 4])?.reshape(&[2, 6])?;
        assert!(!wide.is_contiguous(), "{}: the reshape copied", device.name());
        assert_eq!(wide.to_vec()?, vec![2.5; 12]);
        assert_eq!(wide.reshape(&[12])?.contiguous()?.to_vec()?, vec![2.5; 12]);
        // A computation over the view sees every element.
        assert_eq!(no_grad(|| wide.mul(&RawTensor::ones(&[2, 6], &device)?)?.sum_all())?.item()?, 30.0);
    }
    Ok(())
}

#[test]
fn read_backs_of_varying_sizes_return_what_was_written() -> Result<()> {
    let Some(gpu) = wgpu_or_skip() else { return Ok(()) };
    // Large, small, middle and tiny reads in turn, so staging buffers are reused at other sizes.
    for len in [5000usize, 3, 1000, 1, 4096, 2] {
        let data: Vec<f32> = (0..len).map(|i| (i as f32 * 0.25) - len as f32).collect();
        let t = RawTensor::from_slice(&data, &[len], &gpu)?;
        let doubled = no_grad(|| t.add(&t))?;
        let want: Vec<f32> = data.iter().map(|v| v * 2.0).collect();
        assert_eq!(doubled.to_vec()?, want, "a read of {len}");
        assert_eq!(t.narrow(0, len - 1, len)?.to_vec()?, vec![data[len - 1]], "the last of {len}");
    }
    Ok(())
}
