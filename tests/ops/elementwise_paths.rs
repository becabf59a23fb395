//! CPU ↔ wgpu parity of every path of the elementwise and reduction kernels (issue #32): the
//! 16-byte (vec4) kernels with lengths that are not multiples of 4 (their one-element tail),
//! offsets and strides that rule them out, a broadcast scalar on either side, per-channel and
//! per-row broadcasts, the unary kernels and their backward, and long sums, maxima and minima
//! read as vec4s (NaN included). Called on the backends directly, so each layout reaches the
//! kernel as written here.

use rumus::backend::cpu::CpuBackend;
use rumus::backend::wgpu::WgpuBackend;
use rumus::backend::{Backend, BinaryOp, ReduceDims, ReduceOp, Storage, UnaryOp};
use rumus::testing::{assert_close, wgpu_or_skip};
use rumus::{Device, Layout, Result};

/// Deterministic data in [-2, 2) with some exact zeros and repeats (for relu, eq, gt).
fn data(len: usize, seed: u64) -> Vec<f32> {
    let mut rng = rumus::rng::Rng::new(seed);
    (0..len)
        .map(|i| {
            if i % 7 == 3 {
                0.0
            } else if i % 11 == 5 {
                1.0
            } else {
                rng.uniform() * 4.0 - 2.0
            }
        })
        .collect()
}

/// Runs `f` on the CPU backend and on both wgpu variants (subgroup and shared-memory
/// reductions) and compares the results (read back whole).
fn both(name: &str, tol: f32, f: impl Fn(&dyn Backend) -> Result<Storage>) {
    let Some(Device::Wgpu(gpu)) = wgpu_or_skip() else {
        return;
    };
    let shared = WgpuBackend::with_shared_memory_reductions().unwrap_or_else(|e| panic!("{name}: {e}"));
    let read = |b: &dyn Backend, s: &Storage| b.to_f32(s, &Layout::contiguous(&[s.len()]));
    let want = f(&CpuBackend).and_then(|s| read(&CpuBackend, &s)).unwrap_or_else(|e| panic!("{name} on cpu: {e}"));
    for (variant, backend) in [("subgroups", &*gpu), ("shared memory", &shared)] {
        let got = f(backend).and_then(|s| read(backend, &s)).unwrap_or_else(|e| panic!("{name} on wgpu: {e}"));
        assert_close(&format!("{name} ({variant})"), &got, &want, tol);
    }
}

/// `lhs op rhs` over two views of the storages `(len, layout)`, for several ops.
fn binary_case(name: &str, lhs: (usize, Layout), rhs: (usize, Layout)) {
    for op in
        [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Maximum, BinaryOp::Gt, BinaryOp::AddRelu]
    {
        // Division may round differently on the GPU (WGSL allows 2.5 ulp).
        let tol = if op == BinaryOp::Div { 1e-6 } else { 0.0 };
        both(&format!("{name} {}", op.name()), tol, |b| {
            let l = b.from_f32(&data(lhs.0, 1))?;
            let mut r = data(rhs.0, 2);
            if op == BinaryOp::Div {
                r.iter_mut().for_each(|v| *v = v.abs() + 0.5);
            }
            let r = b.from_f32(&r)?;
            b.binary(op, &l, &lhs.1, &r, &rhs.1)
        });
    }
}

fn flat(len: usize) -> (usize, Layout) {
    (len, Layout::contiguous(&[len]))
}

#[test]
fn binary_contiguous_lengths_and_offsets() -> Result<()> {
    // Multiples of 4 and not (vec4 kernel plus a tail of 1 to 3), and shorter than a quad.
    for len in [1, 3, 4, 5, 7, 8, 1001, 65_539] {
        binary_case(&format!("flat {len}"), flat(len), flat(len));
    }
    // Views at offsets: aligned (vec4 with a tail), odd (one-element kernel), mixed.
    let view = |storage: usize, start: usize, len: usize| -> Result<(usize, Layout)> {
        Ok((storage, Layout::contiguous(&[storage]).narrow(0, start, start + len)?))
    };
    binary_case("offsets 4 and 8", view(1020, 4, 1003)?, view(1020, 8, 1003)?);
    binary_case("offsets 1 and 0", view(1020, 1, 1003)?, view(1020, 0, 1003)?);
    binary_case("offsets 0 and 3", view(1020, 0, 1000)?, view(1020, 3, 1000)?);
    binary_case("offset 2 short", view(9, 2, 5)?, flat(5));
    // Rows of 12 out of 16 from column 4 (vec4 over two axes), of 14 (outer stride not a
    // multiple of 4: one-element kernel), and a transpose.
    let cols = |width: usize, start: usize| -> Result<(usize, Layout)> {
        Ok((10 * width, Layout::contiguous(&[10, width]).narrow(1, start, start + 12)?))
    };
    binary_case("rows of 16 from 4", cols(16, 4)?, (120, Layout::contiguous(&[10, 12])));
    binary_case("rows of 14", cols(14, 0)?, cols(16, 4)?);
    binary_case(
        "transpose",
        (120, Layout::contiguous(&[12, 10]).permute(&[1, 0])?),
        (120, Layout::contiguous(&[10, 12])),
    );
    Ok(())
}

#[test]
fn binary_broadcasts() -> Result<()> {
    let scalar =
        |shape: &[usize]| -> Result<(usize, Layout)> { Ok((1, Layout::contiguous(&[1]).broadcast_to(shape)?)) };
    // A broadcast scalar on either side (the backward of a product under sum_all), flat and 2-D,
    // with and without a tail; a scalar at an offset inside a larger storage.
    for shape in [&[1003][..], &[37, 64], &[4], &[2]] {
        let full = (shape.iter().product(), Layout::contiguous(shape));
        binary_case(&format!("scalar * {shape:?}"), scalar(shape)?, full.clone());
        binary_case(&format!("{shape:?} * scalar"), full, scalar(shape)?);
    }
    let inner = Layout::new(vec![37, 64], vec![0, 0], 5)?;
    binary_case("scalar at offset 5", (9, inner.clone()), (37 * 64, Layout::contiguous(&[37, 64])));
    binary_case("both scalars", (9, inner.clone()), (9, inner));
    // Per-channel [c, 1, 1] against [n, c, h, w]: h·w a multiple of 4 (vec4 with one side
    // splat) and not (one-element kernel); per-row and per-column vectors.
    for (n, c, h, w) in [(6, 8, 5, 4), (3, 5, 3, 5), (2, 64, 8, 8)] {
        let channel = Layout::contiguous(&[c, 1, 1]).broadcast_to(&[n, c, h, w])?;
        let full = (n * c * h * w, Layout::contiguous(&[n, c, h, w]));
        binary_case(&format!("[{n},{c},{h},{w}] + channel"), full.clone(), (c, channel.clone()));
        binary_case(&format!("channel + [{n},{c},{h},{w}]"), (c, channel), full);
    }
    let row = Layout::contiguous(&[12]).broadcast_to(&[33, 12])?;
    let column = Layout::contiguous(&[33, 1]).broadcast_to(&[33, 12])?;
    let full = (33 * 12, Layout::contiguous(&[33, 12]));
    binary_case("[33,12] + row", full.clone(), (12, row));
    binary_case("[33,12] + column", full.clone(), (33, column.clone()));
    binary_case("column + [33,12]", (33, column), full);
    Ok(())
}

#[test]
fn unary_and_backward_lengths() {
    let ops = [UnaryOp::Relu, UnaryOp::LeakyRelu(0.1), UnaryOp::Exp, UnaryOp::MulScalar(-1.5), UnaryOp::Sigmoid];
    for len in [1, 3, 4, 5, 1027, 262_147] {
        for op in ops {
            let tol = if matches!(op, UnaryOp::Exp | UnaryOp::Sigmoid) { 1e-5 } else { 0.0 };
            both(&format!("{} {len}", op.name()), tol, |b| b.unary(op, &b.from_f32(&data(len, 3))?, len));
            both(&format!("{} backward {len}", op.name()), tol, |b| {
                let x = b.from_f32(&data(len, 3))?;
                let y = b.unary(op, &x, len)?;
                b.unary_backward(op, &x, &y, &b.from_f32(&data(len, 4))?, len)
            });
        }
    }
}

#[test]
fn long_reductions() {
    let positive = |len: usize, seed: u64| data(len, seed).iter().map(|v| v.abs() + 0.25).collect::<Vec<f32>>();
    // One long row (a sum_all; split into chunks), many rows, a few long rows; lengths a
    // multiple of 4 (vec4 kernel) and not.
    let shapes = [(1, 1_000_004), (1, 1_000_003), (300, 1024), (300, 1022), (3, 5000), (3, 5001), (5, 36)];
    for (outer, len) in shapes {
        let dims = ReduceDims { outer, len, inner: 1 };
        both(&format!("sum {outer}x{len}"), 1e-4, |b| {
            b.reduce(ReduceOp::Sum, &b.from_f32(&positive(outer * len, 5))?, dims)
        });
        for op in [ReduceOp::Max, ReduceOp::Min] {
            both(&format!("{op:?} {outer}x{len}"), 0.0, |b| b.reduce(op, &b.from_f32(&data(outer * len, 6))?, dims));
        }
    }
    // NaN in one lane of one quad wins in max and min, as on the CPU.
    for lane in 0..4 {
        let mut x = data(8192, 7);
        x[4096 + lane] = f32::NAN;
        let dims = ReduceDims { outer: 2, len: 4096, inner: 1 };
        for op in [ReduceOp::Max, ReduceOp::Min, ReduceOp::Sum] {
            let tol = if op == ReduceOp::Sum { 1e-4 } else { 0.0 };
            both(&format!("{op:?} with NaN in lane {lane}"), tol, |b| b.reduce(op, &b.from_f32(&x)?, dims));
        }
    }
}
