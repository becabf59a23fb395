//! Value tests and finite-difference gradient checks for the elementwise, reduction, matmul,
//! view and softmax ops on the CPU backend.

use rumus::testing::{grad_check, GradCheck};
use rumus::{Device, RawTensor, Result};

fn t(data: &[f32], shape: &[usize]) -> RawTensor {
    RawTensor::from_slice(data, shape, &Device::cpu()).unwrap()
}

fn randn(shape: &[usize], seed: u64) -> RawTensor {
    RawTensor::randn(shape, 0.0, 1.0, seed, &Device::cpu()).unwrap()
}

fn assert_close(got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "length differs: {got:?} vs {want:?}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol * w.abs().max(1.0), "element {i}: got {g}, want {w}");
    }
}

#[test]
fn unary_values_match_hand_computed() -> Result<()> {
    let x = t(&[-2.0, -0.5, 0.0, 1.0, 3.0], &[5]);
    assert_close(&x.relu()?.to_vec()?, &[0.0, 0.0, 0.0, 1.0, 3.0], 0.0);
    assert_close(&x.leaky_relu(0.1)?.to_vec()?, &[-0.2, -0.05, 0.0, 1.0, 3.0], 1e-6);
    assert_close(&x.sigmoid()?.to_vec()?, &[0.119_202_92, 0.377_540_67, 0.5, 0.731_058_6, 0.952_574_1], 1e-6);
    // PyTorch: torch.nn.functional.gelu(x) and gelu(x, approximate="tanh").
    assert_close(&x.gelu()?.to_vec()?, &[-0.045_500_26, -0.154_268_5, 0.0, 0.841_344_7, 2.995_950_3], 1e-5);
    assert_close(&x.gelu_tanh()?.to_vec()?, &[-0.045_402_3, -0.154_286, 0.0, 0.841_192, 2.996_362_6], 1e-5);
    assert_close(&x.silu()?.to_vec()?, &[-0.238_405_84, -0.188_770_33, 0.0, 0.731_058_6, 2.857_722_3], 1e-6);
    assert_close(&x.clamp(-1.0, 1.0)?.to_vec()?, &[-1.0, -0.5, 0.0, 1.0, 1.0], 0.0);
    assert_close(&x.abs()?.powf(2.0)?.to_vec()?, &[4.0, 0.25, 0.0, 1.0, 9.0], 1e-6);
    Ok(())
}

#[test]
fn unary_gradients_match_finite_differences() -> Result<()> {
    // Inputs away from kinks (0 for relu/abs, the clamp bounds) so differences are smooth.
    let x = t(&[-1.7, -0.6, 0.3, 0.9, 2.2, -2.4], &[2, 3]);
    let positive = t(&[0.5, 1.2, 2.0, 3.1, 0.8, 1.7], &[2, 3]);
    type UnaryFn = Box<dyn Fn(&RawTensor) -> Result<RawTensor>>;
    let ops: Vec<(&str, UnaryFn)> = vec![
        ("neg", Box::new(|x| x.neg())),
        ("exp", Box::new(|x| x.exp())),
        ("relu", Box::new(|x| x.relu())),
        ("leaky_relu", Box::new(|x| x.leaky_relu(0.2))),
        ("sigmoid", Box::new(|x| x.sigmoid())),
        ("tanh", Box::new(|x| x.tanh())),
        ("gelu", Box::new(|x| x.gelu())),
        ("gelu_tanh", Box::new(|x| x.gelu_tanh())),
        ("silu", Box::new(|x| x.silu())),
        ("abs", Box::new(|x| x.abs())),
        ("clamp", Box::new(|x| x.clamp(-1.0, 1.0))),
        ("affine", Box::new(|x| x.affine(3.0, -1.0))),
    ];
    for (name, op) in &ops {
        grad_check(std::slice::from_ref(&x), GradCheck::default(), |i| op(&i[0]))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    grad_check(std::slice::from_ref(&positive), GradCheck::default(), |i| i[0].log())?;
    grad_check(std::slice::from_ref(&positive), GradCheck::default(), |i| i[0].sqrt())?;
    grad_check(&[positive], GradCheck::default(), |i| i[0].powf(1.5))?;
    Ok(())
}

#[test]
fn binary_broadcasting_values_and_gradients() -> Result<()> {
    let a = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let b = t(&[10.0, 20.0, 30.0], &[3]);
    assert_eq!(a.add(&b)?.to_vec()?, vec![11.0, 22.0, 33.0, 14.0, 25.0, 36.0]);
    let col = t(&[2.0, 4.0], &[2, 1]);
    assert_eq!(a.div(&col)?.to_vec()?, vec![0.5, 1.0, 1.5, 1.0, 1.25, 1.5]);
    assert!(a.add(&t(&[1.0, 2.0], &[2])).is_err());

    let x = randn(&[3, 1, 4], 1);
    let y = randn(&[2, 4], 2).abs()?.add_scalar(0.5)?;
    for op in ["add", "sub", "mul", "div", "maximum", "minimum"] {
        grad_check(&[x.clone(), y.clone()], GradCheck::default(), |i| match op {
            "add" => i[0].add(&i[1]),
            "sub" => i[0].sub(&i[1]),
            "mul" => i[0].mul(&i[1]),
            "div" => i[0].div(&i[1]),
            "maximum" => i[0].maximum(&i[1]),
            _ => i[0].minimum(&i[1]),
        })
        .unwrap_or_else(|e| panic!("{op}: {e}"));
    }
    Ok(())
}

#[test]
fn large_broadcasts_match_per_element_values() -> Result<()> {
    // Big enough for the threaded path, with short rows (a conv bias: one value per plane) and
    // long ones (a linear bias: one value per column), and a strided lhs.
    let x = randn(&[9, 6, 700], 3);
    let per_plane = randn(&[6, 1], 4);
    let per_column = randn(&[700], 5);
    let (xv, pv, cv) = (x.to_vec()?, per_plane.to_vec()?, per_column.to_vec()?);
    let sum = x.add(&per_plane)?.to_vec()?;
    let quotient = x.div(&per_column)?.to_vec()?;
    for (i, &v) in xv.iter().enumerate() {
        assert_eq!(sum[i], v + pv[i / 700 % 6], "add at {i}");
        assert_eq!(quotient[i], v / cv[i % 700], "div at {i}");
    }
    let xt = x.transpose(0, 1)?;
    let product = xt.mul(&per_column)?.to_vec()?;
    for (i, p) in product.iter().enumerate() {
        let (c, n, k) = (i / (9 * 700), i / 700 % 9, i % 700);
        assert_eq!(*p, xv[(n * 6 + c) * 700 + k] * cv[k], "mul at {i}");
    }
    Ok(())
}

#[test]
fn non_contiguous_inputs_are_handled() -> Result<()> {
    let a = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let at = a.transpose(0, 1)?;
    assert!(!at.is_contiguous());
    assert_eq!(at.to_vec()?, vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    assert_eq!(
        at.exp()?.log()?.to_vec()?.iter().map(|v| v.round()).collect::<Vec<_>>(),
        vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]
    );
    assert_eq!(a.narrow(1, 1, 3)?.to_vec()?, vec![2.0, 3.0, 5.0, 6.0]);
    let x = randn(&[3, 4], 3);
    grad_check(std::slice::from_ref(&x), GradCheck::default(), |i| {
        i[0].transpose(0, 1)?.tanh()?.mul(&i[0].transpose(0, 1)?)
    })?;
    grad_check(std::slice::from_ref(&x), GradCheck::default(), |i| i[0].narrow(1, 1, 3)?.sigmoid())?;
    grad_check(&[x], GradCheck::default(), |i| i[0].permute(&[1, 0])?.reshape(&[2, 6]))?;
    Ok(())
}

#[test]
fn reductions_values_and_gradients() -> Result<()> {
    let a = t(&[1.0, 5.0, 3.0, 4.0, 2.0, 6.0], &[2, 3]);
    assert_eq!(a.sum(&[1], false)?.to_vec()?, vec![9.0, 12.0]);
    assert_eq!(a.sum(&[0], true)?.shape(), &[1, 3]);
    assert_eq!(a.mean(&[0, 1], false)?.item()?, 3.5);
    assert_eq!(a.max(&[1], false)?.to_vec()?, vec![5.0, 6.0]);
    assert_eq!(a.min(&[0], false)?.to_vec()?, vec![1.0, 2.0, 3.0]);
    assert_eq!(a.argmax(1)?.to_vec_u32()?, vec![1, 2]);
    let x = randn(&[3, 4, 5], 4);
    grad_check(std::slice::from_ref(&x), GradCheck::default(), |i| i[0].sum(&[1], false))?;
    grad_check(std::slice::from_ref(&x), GradCheck::default(), |i| i[0].mean(&[0, 2], true))?;
    grad_check(std::slice::from_ref(&x), GradCheck::default(), |i| i[0].max(&[-1], false))?;
    grad_check(std::slice::from_ref(&x), GradCheck::default(), |i| i[0].min(&[0], true))?;
    grad_check(&[x], GradCheck::default(), |i| i[0].transpose(0, 2)?.sum(&[2], false))?;
    Ok(())
}

#[test]
fn matmul_values_and_gradients() -> Result<()> {
    let a = t(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    let b = t(&[7.0, 8.0, 9.0, 10.0, 11.0, 12.0], &[3, 2]);
    assert_eq!(a.matmul(&b)?.to_vec()?, vec![58.0, 64.0, 139.0, 154.0]);
    let err = a.matmul(&a).unwrap_err().to_string();
    assert_eq!(err, "matmul: lhs [2, 3] rhs [2, 3]: inner dims 3 and 2 differ");

    // Batched with a broadcast batch, and transposed operands.
    let x = randn(&[2, 1, 3, 4], 5);
    let y = randn(&[3, 4, 2], 6);
    let out = x.matmul(&y)?;
    assert_eq!(out.shape(), &[2, 3, 3, 2]);
    grad_check(&[x, y], GradCheck::default(), |i| i[0].matmul(&i[1]))?;
    let p = randn(&[4, 3], 7);
    let q = randn(&[5, 4], 8);
    grad_check(&[p, q], GradCheck::default(), |i| i[0].transpose(0, 1)?.matmul(&i[1].transpose(0, 1)?))?;
    Ok(())
}

/// `x @ w.T` (a linear layer) gives `w` a gradient in `w`'s own memory order, so the optimizer
/// reads it without a copy. Its values are checked against finite differences above.
#[test]
fn a_transposed_matmul_operand_gets_a_contiguous_gradient() -> Result<()> {
    let w = randn(&[3, 5], 9).requires_grad_()?;
    let x = randn(&[4, 5], 10).requires_grad_()?;
    let grads = x.matmul(&w.transpose(0, 1)?)?.sum_all()?.backward()?;
    for (name, t) in [("w", &w), ("x", &x)] {
        let g = grads.get(t).expect("a gradient");
        assert_eq!(g.shape(), t.shape(), "{name}");
        assert!(g.is_contiguous(), "gradient of {name} has strides {:?}", g.layout().strides());
    }
    Ok(())
}

#[test]
fn softmax_rows_of_every_edge_length_are_stable() -> Result<()> {
    for cols in [1usize, 63, 64, 65, 1000] {
        let x = randn(&[3, cols], cols as u64).mul_scalar(1e4)?;
        let y = x.softmax(-1)?.to_vec()?;
        assert!(y.iter().all(|v| v.is_finite()), "softmax produced non-finite values at cols {cols}");
        for row in y.chunks(cols) {
            assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-4);
        }
        let ly = x.log_softmax(-1)?.to_vec()?;
        assert!(ly.iter().all(|v| v.is_finite()), "log_softmax non-finite at cols {cols}");
    }
    let x = t(&[1.0, 2.0, 3.0], &[1, 3]);
    assert_close(&x.softmax(-1)?.to_vec()?, &[0.090_030_57, 0.244_728_48, 0.665_240_94], 1e-6);
    Ok(())
}

#[test]
fn softmax_gradients_on_any_axis() -> Result<()> {
    let x = randn(&[2, 3, 5], 9);
    grad_check(std::slice::from_ref(&x), GradCheck::default(), |i| i[0].softmax(-1))?;
    grad_check(std::slice::from_ref(&x), GradCheck::default(), |i| i[0].softmax(1))?;
    grad_check(std::slice::from_ref(&x), GradCheck::default(), |i| i[0].log_softmax(-1))?;
    grad_check(&[x], GradCheck::default(), |i| i[0].log_softmax(0))?;
    for cols in [1usize, 63, 64, 65] {
        grad_check(&[randn(&[2, cols], cols as u64)], GradCheck::default(), |i| i[0].log_softmax(-1))?;
    }
    Ok(())
}

#[test]
fn gradients_accumulate_when_a_tensor_is_used_twice() -> Result<()> {
    let x = t(&[3.0], &[1]).requires_grad_()?;
    let y = x.mul(&x)?.add(&x)?.sum_all()?; // x² + x → 2x + 1 = 7
    let grads = y.backward()?;
    assert_eq!(grads.get(&x).unwrap().to_vec()?, vec![7.0]);
    let z = rumus::no_grad(|| x.mul(&x))?;
    assert!(!z.requires_grad());
    assert!(t(&[1.0, 2.0], &[2]).requires_grad_()?.backward().is_err());
    Ok(())
}
