//! The fused scaled dot-product attention (`RawTensor::scaled_dot_product_attention`, kernels
//! `Backend::attention_forward` / `attention_backward`) against the composed
//! `attention_reference`: values and gradients on CPU and wgpu, causal and not, fewer queries
//! than keys (decoding), sizes that are not multiples of the kernels' tiles, finite
//! differences, CPU ↔ wgpu parity, the saved log-sum-exp, and bad input.
//!
//! wgpu tests run on lavapipe in CI: sizes stay small.

use rumus::backend::{AttentionArgs, AttentionLayout};
use rumus::testing::{assert_close, grad_check, wgpu_or_skip, GradCheck};
use rumus::{Device, RawTensor, Result};

/// Deterministic pseudo-random values in [-2, 2).
fn data(len: usize, seed: u64) -> Vec<f32> {
    let mut rng = rumus::rng::Rng::new(seed);
    (0..len).map(|_| rng.uniform() * 4.0 - 2.0).collect()
}

/// One attention problem: leading axes, queries, keys, head dimension, causal.
#[derive(Clone, Debug)]
struct Case {
    lead: Vec<usize>,
    tq: usize,
    tk: usize,
    d: usize,
    causal: bool,
}

fn case(lead: &[usize], tq: usize, tk: usize, d: usize, causal: bool) -> Case {
    Case { lead: lead.to_vec(), tq, tk, d, causal }
}

impl Case {
    fn shape(&self, t: usize) -> Vec<usize> {
        let mut s = self.lead.clone();
        s.extend([t, self.d]);
        s
    }

    /// q, k, v as host data.
    fn inputs(&self, seed: u64) -> [(Vec<f32>, Vec<usize>); 3] {
        let (sq, sk) = (self.shape(self.tq), self.shape(self.tk));
        let (nq, nk) = (sq.iter().product(), sk.iter().product());
        [(data(nq, seed), sq), (data(nk, seed + 1), sk.clone()), (data(nk, seed + 2), sk)]
    }
}

/// The output and the gradients of q, k, v (of a weighted sum of the output) on `device`,
/// through the fused op or the reference.
fn run(device: &Device, c: &Case, fused: bool) -> Result<(Vec<f32>, Vec<Vec<f32>>)> {
    let leaves = c
        .inputs(7)
        .iter()
        .map(|(x, s)| RawTensor::from_slice(x, s, device)?.requires_grad_())
        .collect::<Result<Vec<_>>>()?;
    let (q, k, v) = (&leaves[0], &leaves[1], &leaves[2]);
    let out =
        if fused { q.scaled_dot_product_attention(k, v, c.causal)? } else { q.attention_reference(k, v, c.causal)? };
    assert_eq!(out.shape(), c.shape(c.tq).as_slice());
    let weights = RawTensor::rand_uniform(out.shape(), 0.5, 1.5, 99, device)?;
    let grads = out.mul(&weights)?.sum_all()?.backward()?;
    let grads = leaves.iter().map(|l| grads.get(l).expect("a gradient").to_vec()).collect::<Result<Vec<_>>>()?;
    Ok((out.to_vec()?, grads))
}

fn check_against_reference(device: &Device, cases: &[Case], tol: f32) {
    for c in cases {
        let (out, grads) = run(device, c, true).unwrap();
        let (want, want_grads) = run(device, c, false).unwrap();
        assert_close(&format!("{c:?} output"), &out, &want, tol);
        for (name, (g, w)) in ["dq", "dk", "dv"].iter().zip(grads.iter().zip(&want_grads)) {
            assert_close(&format!("{c:?} {name}"), g, w, tol);
        }
        assert!(out.iter().any(|&x| x != 0.0), "{c:?}: an all-zero output proves nothing");
    }
}

fn cpu_cases() -> Vec<Case> {
    vec![
        case(&[1], 1, 1, 8, true),
        case(&[2, 3], 5, 5, 8, true),
        case(&[2], 5, 9, 8, false),
        case(&[1], 37, 37, 16, true),
        case(&[1, 2], 3, 70, 16, true),
        case(&[1], 1, 37, 16, true),
        case(&[2], 70, 70, 64, true),
        case(&[1], 37, 70, 64, false),
        case(&[3], 130, 130, 12, true),
    ]
}

#[test]
fn fused_matches_the_reference_on_cpu() {
    check_against_reference(&Device::cpu(), &cpu_cases(), 1e-4);
}

#[test]
fn fused_matches_the_reference_on_wgpu() {
    let Some(device) = wgpu_or_skip() else { return };
    let cases = [
        case(&[1], 1, 1, 8, true),
        case(&[2, 3], 5, 5, 8, true),
        case(&[2], 5, 9, 8, false),
        case(&[1], 37, 37, 16, true),
        case(&[1, 2], 3, 70, 16, true),
        case(&[1], 1, 37, 16, true),
        case(&[1], 70, 70, 64, true),
        case(&[1], 20, 37, 40, false),
        case(&[1], 9, 9, 100, true),
    ];
    check_against_reference(&device, &cases, 1e-4);
}

/// A head dimension above the wgpu kernels' 128 runs the composed path on the device.
#[test]
fn wide_heads_on_wgpu_use_the_composed_path() {
    let Some(device) = wgpu_or_skip() else { return };
    check_against_reference(&device, &[case(&[1], 3, 4, 136, true)], 1e-4);
}

/// Values narrower or wider than the queries (`dv != d`) run the composed path.
#[test]
fn values_of_another_width_use_the_composed_path() {
    let device = Device::cpu();
    let q = RawTensor::from_vec(data(2 * 3 * 4, 1), &[2, 3, 4], &device).unwrap();
    let k = RawTensor::from_vec(data(2 * 5 * 4, 2), &[2, 5, 4], &device).unwrap();
    let v = RawTensor::from_vec(data(2 * 5 * 6, 3), &[2, 5, 6], &device).unwrap();
    let out = q.scaled_dot_product_attention(&k, &v, true).unwrap();
    assert_eq!(out.shape(), &[2, 3, 6]);
    let want = q.attention_reference(&k, &v, true).unwrap();
    assert_close("dv != d", &out.to_vec().unwrap(), &want.to_vec().unwrap(), 1e-5);
}

/// Heads split out of `[batch, t, heads, d]` by a transpose (a strided view), as a
/// transformer block does.
#[test]
fn strided_views_of_heads_match_the_reference() {
    let mut devices = vec![Device::cpu()];
    devices.extend(wgpu_or_skip());
    for device in devices {
        let x = |seed| RawTensor::from_vec(data(2 * 6 * 3 * 8, seed), &[2, 6, 3, 8], &device)?.transpose(1, 2);
        let (q, k, v) = (x(1).unwrap(), x(2).unwrap(), x(3).unwrap());
        assert!(!q.is_contiguous());
        let out = q.scaled_dot_product_attention(&k, &v, true).unwrap();
        let want = q.attention_reference(&k, &v, true).unwrap();
        assert_eq!(out.shape(), &[2, 3, 6, 8]);
        assert_close("strided heads", &out.to_vec().unwrap(), &want.to_vec().unwrap(), 1e-5);
    }
}

#[test]
fn gradients_match_finite_differences_on_cpu() {
    let device = Device::cpu();
    for (tq, tk, causal) in [(3, 3, true), (2, 4, true), (3, 2, false)] {
        let c = case(&[2], tq, tk, 4, causal);
        let inputs: Vec<RawTensor> =
            c.inputs(3).iter().map(|(x, s)| RawTensor::from_slice(x, s, &device).unwrap()).collect();
        let settings = GradCheck { eps: 1e-2, tolerance: 1e-2 };
        grad_check(&inputs, settings, |t| t[0].scaled_dot_product_attention(&t[1], &t[2], causal))
            .unwrap_or_else(|e| panic!("{c:?}: {e}"));
    }
}

#[test]
fn gradients_match_finite_differences_on_wgpu() {
    let Some(device) = wgpu_or_skip() else { return };
    let c = case(&[1], 3, 4, 4, true);
    let inputs: Vec<RawTensor> =
        c.inputs(5).iter().map(|(x, s)| RawTensor::from_slice(x, s, &device).unwrap()).collect();
    let settings = GradCheck { eps: 1e-2, tolerance: 1e-2 };
    grad_check(&inputs, settings, |t| t[0].scaled_dot_product_attention(&t[1], &t[2], true)).unwrap();
}

#[test]
fn cpu_and_wgpu_agree() {
    let Some(device) = wgpu_or_skip() else { return };
    for c in [case(&[2, 2], 33, 33, 32, true), case(&[1], 7, 65, 16, true), case(&[3], 17, 5, 24, false)] {
        let (out, grads) = run(&Device::cpu(), &c, true).unwrap();
        let (gpu_out, gpu_grads) = run(&device, &c, true).unwrap();
        assert_close(&format!("{c:?} output"), &gpu_out, &out, 1e-4);
        for (name, (g, w)) in ["dq", "dk", "dv"].iter().zip(gpu_grads.iter().zip(&grads)) {
            assert_close(&format!("{c:?} {name}"), g, w, 1e-4);
        }
    }
}

/// The backward has no atomics: two runs give the same bits.
#[test]
fn wgpu_backward_is_deterministic() {
    let Some(device) = wgpu_or_skip() else { return };
    let c = case(&[2], 70, 70, 16, true);
    let first = run(&device, &c, true).unwrap();
    let second = run(&device, &c, true).unwrap();
    assert_eq!(first, second);
}

/// The saved log-sum-exp of each query's scaled scores, against the host's.
#[test]
fn the_forward_saves_each_querys_log_sum_exp() {
    let (batch, tq, tk, d) = (2, 3, 5, 4);
    let (q, k, v) = (data(batch * tq * d, 1), data(batch * tk * d, 2), data(batch * tk * d, 3));
    let scale = 0.5;
    let mut want = Vec::new();
    for b in 0..batch {
        for i in 0..tq {
            let seen = i + 1 + (tk - tq);
            let scores: Vec<f64> = (0..seen)
                .map(|j| {
                    let qi = &q[(b * tq + i) * d..][..d];
                    let kj = &k[(b * tk + j) * d..][..d];
                    qi.iter().zip(kj).map(|(a, b)| (a * b) as f64).sum::<f64>() * scale as f64
                })
                .collect();
            want.push(scores.iter().map(|s| s.exp()).sum::<f64>().ln() as f32);
        }
    }
    let args = AttentionArgs { batch, tq, tk, d, scale, causal: true, layout: AttentionLayout::Separate };
    let mut devices = vec![Device::cpu()];
    devices.extend(wgpu_or_skip());
    for device in devices {
        let b = device.backend();
        let (qs, ks, vs) = (b.from_f32(&q).unwrap(), b.from_f32(&k).unwrap(), b.from_f32(&v).unwrap());
        let (_, lse) = b.attention_forward(&qs, &ks, &vs, &args).unwrap().expect("a fused kernel for d = 4");
        let lse = b.to_f32(&lse, &rumus::Layout::contiguous(&[batch * tq])).unwrap();
        assert_close(&format!("lse on {}", b.name()), &lse, &want, 1e-5);
    }
}

#[test]
fn bad_input_is_an_error() {
    let device = Device::cpu();
    let t = |shape: &[usize]| RawTensor::zeros(shape, &device).unwrap();
    let shape_error = |r: Result<RawTensor>| matches!(r, Err(rumus::Error::Shape { .. }));
    // Causal with more queries than keys.
    assert!(shape_error(t(&[1, 4, 8]).scaled_dot_product_attention(&t(&[1, 3, 8]), &t(&[1, 3, 8]), true)));
    // Head dimensions of q and k differ.
    assert!(shape_error(t(&[1, 4, 8]).scaled_dot_product_attention(&t(&[1, 4, 6]), &t(&[1, 4, 8]), false)));
    // Keys and values of different lengths.
    assert!(shape_error(t(&[1, 4, 8]).scaled_dot_product_attention(&t(&[1, 4, 8]), &t(&[1, 5, 8]), false)));
    // Leading axes differ, ranks differ, rank below 2.
    assert!(shape_error(t(&[2, 4, 8]).scaled_dot_product_attention(&t(&[1, 4, 8]), &t(&[1, 4, 8]), false)));
    assert!(shape_error(t(&[1, 4, 8]).scaled_dot_product_attention(&t(&[4, 8]), &t(&[4, 8]), false)));
    assert!(shape_error(t(&[8]).scaled_dot_product_attention(&t(&[8]), &t(&[8]), false)));
    // Kernel arguments: causal tq > tk, sizes whose product overflows, a non-finite scale.
    let ok =
        AttentionArgs { batch: 2, tq: 3, tk: 3, d: 4, scale: 0.5, causal: true, layout: AttentionLayout::Separate };
    assert!(ok.check("attention").is_ok());
    assert!(AttentionArgs { tq: 4, ..ok }.check("attention").is_err());
    assert!(AttentionArgs { batch: usize::MAX / 2, ..ok }.check("attention").is_err());
    assert!(AttentionArgs { scale: f32::NAN, ..ok }.check("attention").is_err());
    // A backend refuses arguments its buffers do not hold.
    let b = device.backend();
    let small = b.from_f32(&[0.0; 8]).unwrap();
    assert!(b.attention_forward(&small, &small, &small, &ok).is_err());
    // Packed: the heads must divide the batch, queries and keys be as many, and the one buffer
    // hold the projection.
    let packed = AttentionArgs { layout: AttentionLayout::Packed { heads: 2 }, ..ok };
    assert!(packed.check("attention").is_ok());
    assert!(AttentionArgs { layout: AttentionLayout::Packed { heads: 3 }, ..ok }.check("attention").is_err());
    assert!(AttentionArgs { layout: AttentionLayout::Packed { heads: 0 }, ..ok }.check("attention").is_err());
    assert!(AttentionArgs { tk: 4, causal: false, ..packed }.check("attention").is_err());
    // Sizes whose rows or strides overflow, hidden behind an empty batch, are errors too.
    assert!(AttentionArgs { batch: 0, tk: usize::MAX, causal: false, ..ok }.check("attention").is_err());
    assert!(AttentionArgs { batch: 0, tq: 1 << 40, tk: 1 << 40, d: 1 << 40, ..ok }.check("attention").is_err());
    let huge_heads = AttentionLayout::Packed { heads: usize::MAX / 2 };
    assert!(AttentionArgs { batch: 0, layout: huge_heads, ..ok }.check("attention").is_err());
    let unpacked = b.from_f32(&[0.0; 2 * 3 * 4]).unwrap();
    assert!(b.attention_forward(&unpacked, &unpacked, &unpacked, &packed).is_err());
}

/// Empty axes give the reference's (empty or zero) result instead of reaching a kernel.
#[test]
fn empty_axes_follow_the_reference() {
    let device = Device::cpu();
    let t = |shape: &[usize]| RawTensor::zeros(shape, &device).unwrap();
    let out = t(&[0, 3, 4]).scaled_dot_product_attention(&t(&[0, 3, 4]), &t(&[0, 3, 4]), true).unwrap();
    assert_eq!(out.shape(), &[0, 3, 4]);
    let out = t(&[2, 0, 4]).scaled_dot_product_attention(&t(&[2, 3, 4]), &t(&[2, 3, 4]), true).unwrap();
    assert_eq!(out.shape(), &[2, 0, 4]);
}
