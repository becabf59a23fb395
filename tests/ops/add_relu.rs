//! The add with a fused ReLU (`RawTensor::add_relu`, `BinaryOp::AddRelu` in the binary
//! kernels): PyTorch's `F.relu(a + b)` values and gradients (sums exactly at 0 included), the
//! fused op against `add` then `relu` on each device, CPU ↔ wgpu parity of the values and both
//! gradients (lengths that are not multiples of 4: the vec4 kernel's tail), the broadcasting
//! `binary(BinaryOp::AddRelu, ..)`, finite differences away from the kink, and bad input. The
//! kernel's layouts (offsets, strides, splats) are in `tests/ops/elementwise_paths.rs`.
//!
//! wgpu tests run on lavapipe in CI: sizes stay small.

use rumus::backend::BinaryOp;
use rumus::testing::{assert_close, grad_check, wgpu_or_skip, GradCheck};
use rumus::{Device, Error, RawTensor, Result, Shape2, Tensor};

fn devices() -> Vec<Device> {
    [Device::cpu()].into_iter().chain(wgpu_or_skip()).collect()
}

/// Deterministic data in [-2, 2); every fifth `b` is `-a`, so those sums are exactly 0.
fn operands(len: usize, seed: u64) -> (Vec<f32>, Vec<f32>) {
    let mut rng = rumus::rng::Rng::new(seed);
    let a: Vec<f32> = (0..len).map(|_| rng.uniform() * 4.0 - 2.0).collect();
    let b = a.iter().enumerate().map(|(i, &a)| if i % 5 == 2 { -a } else { rng.uniform() * 4.0 - 2.0 }).collect();
    (a, b)
}

fn pytorch_case_on(device: &Device) -> Result<()> {
    let t = |data: &[f32], shape: &[usize]| RawTensor::from_slice(data, shape, device);
    // a = torch.tensor([1.5, -2.0, 0.25, 0.5, -0.1, 3.0, -1.25, 0.0, 2.0, -0.75]).reshape(2, 5),
    // b = torch.tensor([-0.5, 1.0, -0.25, -0.5, 0.1, -4.0, 2.0, 0.0, 0.125, 0.5]).reshape(2, 5),
    // both float32 with requires_grad; p = [0.5, 1.5, -1.0, 2.0, 0.75, -0.25, 1.25, 3.0, -2.0, 1.0];
    // y = F.relu(a + b); (y * p).sum().backward(). Four sums are exactly 0: their gradient is 0.
    let a = t(&[1.5, -2.0, 0.25, 0.5, -0.1, 3.0, -1.25, 0.0, 2.0, -0.75], &[2, 5])?.requires_grad_()?;
    let b = t(&[-0.5, 1.0, -0.25, -0.5, 0.1, -4.0, 2.0, 0.0, 0.125, 0.5], &[2, 5])?.requires_grad_()?;
    let p = t(&[0.5, 1.5, -1.0, 2.0, 0.75, -0.25, 1.25, 3.0, -2.0, 1.0], &[2, 5])?;
    let y = a.add_relu(&b)?;
    assert_eq!(y.shape(), [2, 5]);
    let grads = y.mul(&p)?.sum_all()?.backward()?;
    let y_torch = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.75, 0.0, 2.125, 0.0];
    let grad_torch = [0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 1.25, 0.0, -2.0, 0.0];
    assert_eq!(y.to_vec()?, y_torch, "{device} y");
    assert_eq!(grads.get(&a).expect("a gradient of a").to_vec()?, grad_torch, "{device} a.grad");
    assert_eq!(grads.get(&b).expect("a gradient of b").to_vec()?, grad_torch, "{device} b.grad");
    Ok(())
}

#[test]
fn matches_pytorch() {
    for device in devices() {
        pytorch_case_on(&device).unwrap_or_else(|e| panic!("{device}: {e}"));
    }
}

/// Output and the gradients of both operands (of a weighted sum of the output), through
/// `add_relu` (`fused`) or `add` then `relu`; `b_grad` false leaves `b` a constant.
fn run(device: &Device, shape: &[usize], fused: bool, b_grad: bool) -> Result<Vec<Vec<f32>>> {
    let (a, b) = operands(shape.iter().product(), shape.len() as u64 + 7);
    let a = RawTensor::from_vec(a, shape, device)?.requires_grad_()?;
    let b = RawTensor::from_vec(b, shape, device)?;
    let b = if b_grad { b.requires_grad_()? } else { b };
    let y = if fused { a.add_relu(&b)? } else { a.add(&b)?.relu()? };
    let weights = RawTensor::rand_uniform(y.shape(), 0.5, 1.5, 99, device)?;
    let grads = y.mul(&weights)?.sum_all()?.backward()?;
    let mut out = vec![y.to_vec()?, grads.get(&a).expect("a gradient of a").to_vec()?];
    match grads.get(&b) {
        Some(g) if b_grad => out.push(g.to_vec()?),
        Some(_) => panic!("{device}: a gradient for a constant"),
        None => assert!(!b_grad, "{device}: no gradient of b"),
    }
    Ok(out)
}

/// One element, shorter than a quad, multiples of 4 and not (the vec4 kernel and its tail),
/// ResNet-like [n, c, h, w] with h·w = 9 and 16.
const SHAPES: [&[usize]; 7] = [&[1], &[3], &[8], &[1001], &[2, 3, 5, 7], &[2, 4, 3, 3], &[2, 8, 4, 4]];

/// The fused op against `add` then `relu` on each device: bit for bit (both compute the same
/// sum and clamp it; the gradient is masked where the output is positive, as ReLU's is where
/// its input is).
#[test]
fn fused_matches_add_then_relu() {
    for device in devices() {
        for shape in SHAPES {
            for b_grad in [true, false] {
                let fused = run(&device, shape, true, b_grad).unwrap_or_else(|e| panic!("{device} {shape:?}: {e}"));
                let apart = run(&device, shape, false, b_grad).unwrap();
                assert_eq!(fused, apart, "{device} {shape:?} b_grad {b_grad}");
            }
        }
    }
}

#[test]
fn wgpu_matches_the_cpu() {
    let Some(device) = wgpu_or_skip() else { return };
    for shape in SHAPES {
        let cpu = run(&Device::cpu(), shape, true, true).unwrap();
        let gpu = run(&device, shape, true, true).unwrap_or_else(|e| panic!("{shape:?}: {e}"));
        assert_eq!(cpu.len(), gpu.len());
        for (k, (g, c)) in gpu.iter().zip(&cpu).enumerate() {
            // One rounding of the sum each side: identical results.
            assert_close(&format!("{shape:?} result {k}"), g, c, 0.0);
        }
        // The sums exactly at 0 (every fifth from the third) are 0 with a zero gradient.
        for i in (2..gpu[0].len()).step_by(5) {
            assert_eq!([gpu[0][i], gpu[1][i], gpu[2][i]], [0.0; 3], "{shape:?} element {i}");
        }
    }
}

/// A transposed operand: the op reads it through its strides (no copy) on every device.
#[test]
fn strided_operand_matches_its_contiguous_copy() {
    for device in devices() {
        let (a, b) = operands(6 * 5, 3);
        let a = RawTensor::from_vec(a, &[6, 5], &device).unwrap();
        let b = RawTensor::from_vec(b, &[5, 6], &device).unwrap().transpose(0, 1).unwrap();
        let got = a.add_relu(&b).unwrap().to_vec().unwrap();
        let want = a.add_relu(&b.contiguous().unwrap()).unwrap().to_vec().unwrap();
        assert_eq!(got, want, "{device}");
    }
}

/// `binary(BinaryOp::AddRelu, ..)` broadcasts as every binary op does; the gradients of the
/// broadcast operand are summed over the broadcast axes, as `add` then `relu`'s.
#[test]
fn the_binary_op_broadcasts() {
    for device in devices() {
        let (a, b) = operands(4 * 6, 5);
        let a = RawTensor::from_vec(a, &[4, 6], &device).unwrap().requires_grad_().unwrap();
        let b = RawTensor::from_vec(b[..6].to_vec(), &[6], &device).unwrap().requires_grad_().unwrap();
        let grads_of = |y: RawTensor| {
            let grads = y.sum_all().unwrap().backward().unwrap();
            [y.to_vec().unwrap(), grads.get(&a).unwrap().to_vec().unwrap(), grads.get(&b).unwrap().to_vec().unwrap()]
        };
        let got = grads_of(a.binary(BinaryOp::AddRelu, &b).unwrap());
        let want = grads_of(a.add(&b).unwrap().relu().unwrap());
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_close(&format!("{device} result {k}"), g, w, 1e-6);
        }
    }
}

/// The typed wrapper keeps the per-sample shape and is the untyped op.
#[test]
fn typed_tensors_add_relu() -> Result<()> {
    let device = Device::cpu();
    let a = Tensor::<Shape2<3, 5>>::randn(2, 1, &device)?;
    let b = Tensor::<Shape2<3, 5>>::randn(2, 2, &device)?;
    let y: Tensor<Shape2<3, 5>> = a.add_relu(&b)?;
    assert_eq!(y.raw().to_vec()?, a.raw().add(b.raw())?.relu()?.to_vec()?);
    Ok(())
}

/// Finite differences with every sum at least 0.1 from the kink (a step of 1e-2 moves it
/// 2e-2 at most).
#[test]
fn gradients_match_finite_differences() {
    let device = Device::cpu();
    let (a, mut b) = operands(2 * 3 * 5, 11);
    for (b, a) in b.iter_mut().zip(&a) {
        if (a + *b).abs() < 0.1 {
            *b = 0.5 - a;
        }
    }
    let a = RawTensor::from_vec(a, &[2, 3, 5], &device).unwrap();
    let b = RawTensor::from_vec(b, &[2, 3, 5], &device).unwrap();
    let sums = a.add(&b).unwrap().to_vec().unwrap();
    assert!(sums.iter().any(|&s| s < 0.0) && sums.iter().any(|&s| s > 0.0), "both sides of the kink");
    grad_check(&[a, b], GradCheck { eps: 1e-2, tolerance: 1e-2 }, |t| t[0].add_relu(&t[1])).unwrap();
}

/// Shapes that differ are an error naming `add_relu` and both shapes, on every device;
/// another dtype and another device are the binary ops' errors.
#[test]
fn bad_input_is_an_error_naming_the_op() {
    for device in devices() {
        let a = RawTensor::zeros(&[2, 3], &device).unwrap();
        for other in [&[3][..], &[1, 3], &[3, 2], &[2, 3, 1]] {
            let b = RawTensor::zeros(other, &device).unwrap();
            match a.add_relu(&b) {
                Err(Error::Shape { op, detail }) => {
                    assert_eq!(op, "add_relu", "{device} {other:?}");
                    assert!(detail.contains("[2, 3]") && detail.contains(&format!("{other:?}")), "{device}: {detail}");
                }
                got => panic!("{device} {other:?}: expected a shape error, got {got:?}"),
            }
        }
        let ids = RawTensor::from_indices(&[1, 2, 3, 4, 5, 6], &[2, 3], &device).unwrap();
        assert!(matches!(a.add_relu(&ids), Err(Error::DType { op: "add_relu", .. })), "{device}: u32 operand");
    }
    if let Some(gpu) = wgpu_or_skip() {
        let (a, b) = (RawTensor::zeros(&[4], &Device::cpu()).unwrap(), RawTensor::zeros(&[4], &gpu).unwrap());
        assert!(matches!(a.add_relu(&b), Err(Error::DeviceMismatch { op: "add_relu", .. })), "two devices");
    }
}
