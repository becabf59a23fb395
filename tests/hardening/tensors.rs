//! Issue #27, core classes: checked shape arithmetic, fallible allocation, axes of every rank,
//! deadlock-free locking, iterative graph release, repeated axes and reshape inference, and
//! nested no-grad guards. Every case must return `Ok` with a consistent shape or an `Err`:
//! never panic, abort, hang or segfault.

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use rumus::autograd::NoGradGuard;
use rumus::layout::{checked_numel, MAX_ELEMENTS};
use rumus::nn::Param;
use rumus::{Device, Error, RawTensor};

fn cpu() -> Device {
    Device::cpu()
}

fn tensor(values: &[f32], shape: &[usize]) -> RawTensor {
    RawTensor::from_vec(values.to_vec(), shape, &cpu()).unwrap()
}

fn scalar(value: f32) -> RawTensor {
    tensor(&[value], &[])
}

/// Product of `shape`'s non-zero dimensions, exactly.
fn nonzero_product(shape: &[usize]) -> u128 {
    shape.iter().filter(|&&d| d != 0).fold(1u128, |acc, &d| acc.saturating_mul(d as u128))
}

/// Exact element count of `shape`.
fn exact_numel(shape: &[usize]) -> u128 {
    if shape.contains(&0) {
        0
    } else {
        nonzero_product(shape)
    }
}

// ----- 1. shape arithmetic -----

#[test]
fn a_reshape_whose_element_count_wraps_is_refused_and_matmul_cannot_reach_gemm() {
    let x = tensor(&[1.0, 2.0, 3.0, 4.0], &[4]);
    let err = x.reshape(&[(1 << 62) + 1, 4]).unwrap_err();
    assert!(matches!(err, Error::Shape { op: "reshape", .. }), "{err}");
    // The same product through reshape_infer and a huge middle axis.
    assert!(x.reshape_infer(&[1 << 62, 4, 4]).is_err());
    assert!(x.reshape(&[usize::MAX, usize::MAX, 0]).is_err(), "strides of a zero-size shape must fit too");
    let ones = RawTensor::ones(&[4, 4], &cpu()).unwrap();
    assert_eq!(x.reshape(&[1, 4]).unwrap().matmul(&ones).unwrap().to_vec().unwrap(), vec![10.0; 4]);
}

#[test]
fn constructors_refuse_shapes_whose_element_count_overflows() {
    let d = cpu();
    for shape in [vec![1 << 32, 1 << 32], vec![0, 1 << 40, 1 << 40], vec![usize::MAX, 2], vec![MAX_ELEMENTS + 1]] {
        let err = RawTensor::zeros(&shape, &d).unwrap_err();
        assert!(matches!(err, Error::Shape { .. }), "{shape:?}: {err}");
        assert!(RawTensor::randn(&shape, 0.0, 1.0, 1, &d).is_err(), "{shape:?}");
        assert!(RawTensor::rand_uniform(&shape, 0.0, 1.0, 1, &d).is_err(), "{shape:?}");
        assert!(RawTensor::from_vec(vec![], &shape, &d).is_err(), "{shape:?}");
        assert!(RawTensor::from_indices(&[], &shape, &d).is_err(), "{shape:?}");
    }
    let empty = RawTensor::zeros(&[0, 3], &d).unwrap();
    assert_eq!((empty.shape(), empty.numel()), (&[0, 3][..], 0));
}

#[test]
fn broadcast_and_elementwise_refuse_huge_shapes() {
    let one = tensor(&[1.0], &[1, 1]);
    assert!(one.broadcast_to(&[1 << 32, 1 << 32]).is_err());
    let wide = one.broadcast_to(&[1, 1 << 30]).unwrap();
    let tall = one.broadcast_to(&[1 << 30, 1]).unwrap();
    let err = wide.add(&tall).unwrap_err();
    assert!(matches!(err, Error::Shape { .. }), "{err}");
}

#[test]
fn convolution_and_pooling_with_huge_padding_or_dilation_are_errors() {
    let x = RawTensor::ones(&[1, 1, 4, 4], &cpu()).unwrap();
    let w = RawTensor::ones(&[1, 1, 2, 2], &cpu()).unwrap();
    let huge = [usize::MAX, usize::MAX / 2, usize::MAX / 2 + 1, 1 << 62, 1 << 40];
    for h in huge {
        assert!(x.conv2d(&w, None, (1, 1), (h, h), (1, 1), 1).is_err(), "padding {h}");
        assert!(x.conv2d(&w, None, (1, 1), (0, 0), (h, h), 1).is_err(), "dilation {h}");
        assert!(x.conv2d(&w, None, (2, 2), (h, 0), (1, 1), 1).is_err(), "padding {h} stride 2");
        assert!(x.im2col((2, 2), (1, 1), (h, h), (1, 1)).is_err(), "im2col padding {h}");
        assert!(x.im2col((2, 2), (1, 1), (0, 0), (h, 1)).is_err(), "im2col dilation {h}");
        assert!(x.im2col((h, 2), (1, 1), (0, 0), (1, 1)).is_err(), "im2col kernel {h}");
        assert!(x.max_pool2d((2, 2), (1, 1), (h, h), (1, 1)).is_err(), "max_pool padding {h}");
        assert!(x.max_pool2d((2, 2), (1, 1), (0, 0), (h, h)).is_err(), "max_pool dilation {h}");
        assert!(x.max_pool2d((h, h), (1, 1), (h / 2, h / 2), (1, 1)).is_err(), "max_pool kernel {h}");
        assert!(x.avg_pool2d((h, h), (1, 1), (h / 2, h / 2)).is_err(), "avg_pool kernel {h}");
        assert!(x.adaptive_avg_pool2d((h, 1)).is_err(), "adaptive output {h}");
    }
    // A huge stride is fine: one window.
    let y = x.conv2d(&w, None, (usize::MAX, usize::MAX), (0, 0), (1, 1), 1).unwrap();
    assert_eq!((y.shape(), y.to_vec().unwrap()), (&[1, 1, 1, 1][..], vec![4.0]));
}

#[test]
fn slices_with_huge_bounds_are_errors() {
    let x = tensor(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    assert!(x.narrow(1, usize::MAX, usize::MAX).is_err());
    assert!(x.narrow(1, 1, usize::MAX).is_err());
    assert!(x.narrow(isize::MIN, 0, 1).is_err());
    assert_eq!(x.narrow(1, 3, 3).unwrap().shape(), &[2, 0]);
    assert_eq!(x.narrow(-1, 1, 3).unwrap().to_vec().unwrap(), vec![2.0, 3.0, 5.0, 6.0]);
}

#[test]
fn concat_and_index_select_outputs_are_checked() {
    let big = tensor(&[1.0], &[1, 1]).broadcast_to(&[1 << 39, 1]).unwrap();
    let err = RawTensor::concat(&[&big, &big, &big], 0).unwrap_err();
    assert!(matches!(err, Error::Shape { .. }), "{err}");
    let wide = tensor(&[1.0, 2.0], &[2, 1]).broadcast_to(&[2, 1 << 39]).unwrap();
    let picks = RawTensor::from_indices(&[0, 1, 0, 1], &[4], &cpu()).unwrap();
    let err = wide.index_select(0, &picks).unwrap_err();
    assert!(matches!(err, Error::Shape { op: "index_select", .. }), "{err}");
    let narrow = tensor(&[1.0, 2.0], &[2, 1]).index_select(0, &picks).unwrap();
    assert_eq!(narrow.to_vec().unwrap(), vec![1.0, 2.0, 1.0, 2.0]);
}

#[test]
fn the_public_backend_refuses_bogus_kernel_arguments() {
    use rumus::backend::{ConvGeom, MatmulArgs, MatrixLayout};
    let d = cpu();
    let backend = d.backend();
    let x = tensor(&[1.0; 16], &[4, 4]);
    // The reproduction's layout: 2^62 + 1 rows of 4 over a 16-element storage.
    let lhs = MatrixLayout::row_major((1 << 62) + 1, 4);
    let args = MatmulArgs { batch: 1, m: (1 << 62) + 1, k: 4, n: 4, lhs, rhs: MatrixLayout::row_major(4, 4) };
    assert!(backend.matmul(x.storage(), x.storage(), &args).is_err());
    let geom = ConvGeom::square(1, 1, (4, 4), 2, 1, 0, 1).unwrap();
    let cols = backend.im2col(x.storage(), &geom).unwrap();
    assert_eq!(cols.len(), 4 * 9);
    for bad in [
        ConvGeom { out_h: 1 << 40, ..geom },
        ConvGeom { pad_h: usize::MAX, ..geom },
        ConvGeom { batch: 2, ..geom },
        ConvGeom { stride_w: 0, ..geom },
    ] {
        assert!(backend.im2col(x.storage(), &bad).is_err(), "{bad:?}");
        assert!(backend.col2im(&cols, &bad).is_err(), "{bad:?}");
        assert!(backend.max_pool2d(x.storage(), &bad).is_err(), "{bad:?}");
        assert!(backend.avg_pool2d(x.storage(), &bad).is_err(), "{bad:?}");
    }
    let picks = RawTensor::from_indices(&[0, 7], &[2], &d).unwrap();
    let index = rumus::backend::IndexArgs { outer: 1, len: 4, inner: 4, count: 2 };
    let err = backend.index_select(x.storage(), picks.storage(), &index).unwrap_err();
    assert!(matches!(err, Error::IndexOutOfRange { index: 7, limit: 4, position: 1, .. }), "{err}");
    let huge = rumus::backend::IndexArgs { outer: 1 << 62, ..index };
    assert!(backend.index_select(x.storage(), picks.storage(), &huge).is_err());
    let gather = rumus::backend::GatherArgs { outer: 1, len: 4, inner: 1, count: 2 };
    assert!(backend.gather(x.storage(), picks.storage(), &gather).is_err());
    let adaptive = ConvGeom { out_h: usize::MAX / 2, ..geom };
    assert!(backend.adaptive_avg_pool2d(x.storage(), &adaptive).is_err());
    let wide = rumus::Layout::new(vec![4, 8], vec![4, 1], 0).unwrap();
    let mut out = RawTensor::zeros(&[4, 8], &d).unwrap();
    assert!(backend.copy_strided(x.storage(), &wide, out.storage(), out.layout()).is_err());
    out = RawTensor::zeros(&[4, 4], &d).unwrap();
    backend.copy_strided(x.storage(), x.layout(), out.storage(), out.layout()).unwrap();
    assert_eq!(out.to_vec().unwrap(), vec![1.0; 16]);
}

/// Loss scaling's unscale-and-check (`rumus::testing::unscale_grad`): a flag of the wrong
/// dtype, length or device, a flag that is a view, a gradient that is not f32, and an inverse
/// scale that is NaN or infinite are errors, raised before any kernel runs (the flag is left
/// zero); the kernel behind it refuses a length past its storages. On wgpu too where available.
#[test]
fn unscale_grad_refuses_bad_flags_and_scales() {
    use rumus::testing::{non_finite_flag, unscale_grad, wgpu_or_skip};
    let refuse = |device: &Device| {
        let grad = RawTensor::from_vec(vec![1.0, f32::NAN, 3.0], &[3], device).unwrap();
        let flag = non_finite_flag(device).unwrap();
        let f32_flag = RawTensor::zeros(&[1], device).unwrap();
        let two = RawTensor::from_indices(&[0, 0], &[2], device).unwrap();
        let empty = RawTensor::from_indices(&[], &[0], device).unwrap();
        let view = two.narrow(0, 1, 2).unwrap();
        let indices = RawTensor::from_indices(&[1, 2, 3], &[3], device).unwrap();
        let cases: [(&str, rumus::Result<RawTensor>); 9] = [
            ("f32 flag", unscale_grad(&grad, 0.5, &f32_flag)),
            ("flag of 2", unscale_grad(&grad, 0.5, &two)),
            ("flag of 0", unscale_grad(&grad, 0.5, &empty)),
            ("flag view at offset 1", unscale_grad(&grad, 0.5, &view)),
            ("u32 gradient", unscale_grad(&indices, 0.5, &flag)),
            ("NaN scale", unscale_grad(&grad, f32::NAN, &flag)),
            ("+inf scale", unscale_grad(&grad, f32::INFINITY, &flag)),
            ("-inf scale", unscale_grad(&grad, f32::NEG_INFINITY, &flag)),
            ("the flag as its own gradient", unscale_grad(&flag, 0.5, &flag)),
        ];
        for (what, result) in cases {
            match result {
                Err(Error::DType { op: "unscale_grad", .. })
                | Err(Error::Shape { op: "unscale_grad", .. })
                | Err(Error::InvalidArgument { op: "unscale_grad", .. }) => {}
                other => panic!("{what} on {device:?}: expected an unscale_grad error, got {other:?}"),
            }
        }
        assert_eq!(two.to_vec_u32().unwrap(), [0, 0], "{device:?}: no kernel ran");
        assert_eq!(flag.to_vec_u32().unwrap(), [0], "{device:?}: no kernel ran");
        // The kernel itself: more elements than the gradient holds, a flag of no element or of f32.
        let b = device.backend();
        assert!(b.unscale_grad(grad.storage(), 4, 0.5, flag.storage()).is_err(), "{device:?}: length past the storage");
        assert!(b.unscale_grad(grad.storage(), 3, 0.5, empty.storage()).is_err(), "{device:?}: empty flag");
        assert!(b.unscale_grad(grad.storage(), 3, 0.5, f32_flag.storage()).is_err(), "{device:?}: f32 flag");
        assert_eq!(flag.to_vec_u32().unwrap(), [0]);
        // And the good call still works after them.
        assert_eq!(unscale_grad(&grad, 0.5, &flag).unwrap().to_vec().unwrap()[2], 1.5);
        assert_ne!(flag.to_vec_u32().unwrap(), [0]);
    };
    refuse(&cpu());
    if let Some(gpu) = wgpu_or_skip() {
        refuse(&gpu);
        // The gradient and the flag on different devices, either way round.
        let grad = RawTensor::ones(&[3], &cpu()).unwrap();
        let gpu_flag = non_finite_flag(&gpu).unwrap();
        assert!(matches!(unscale_grad(&grad, 0.5, &gpu_flag), Err(Error::DeviceMismatch { .. })));
        let gpu_grad = grad.to_device(&gpu).unwrap();
        assert!(matches!(
            unscale_grad(&gpu_grad, 0.5, &non_finite_flag(&cpu()).unwrap()),
            Err(Error::DeviceMismatch { .. })
        ));
        assert_eq!(gpu_flag.to_vec_u32().unwrap(), [0]);
    }
}

// ----- 2. allocation -----

#[test]
fn allocations_beyond_the_machine_are_errors_not_aborts() {
    let d = cpu();
    let err = RawTensor::zeros(&[1 << 62], &d).unwrap_err();
    assert!(matches!(err, Error::Shape { .. }), "{err}");
    let err = RawTensor::arange(0.0, 1e30, 1.0, &d).unwrap_err();
    assert!(err.to_string().contains("arange"), "{err}");
    assert!(RawTensor::arange(-3e38, 3e38, 1e-3, &d).is_err());
    assert_eq!(RawTensor::arange(0.0, 3.0, 1.0, &d).unwrap().to_vec().unwrap(), vec![0.0, 1.0, 2.0]);
    assert_eq!(RawTensor::arange(3.0, 0.0, 1.0, &d).unwrap().numel(), 0);
    // Past the address space: the backend refuses with the byte count, whatever the machine.
    let err = d.backend().full(usize::MAX / 4, 0.0).unwrap_err();
    assert!(matches!(err, Error::OutOfMemory { .. }), "{err}");
    assert!(err.to_string().contains(&((usize::MAX / 4) as u128 * 4).to_string()), "{err}");
    assert!(d.backend().from_u32(&[]).is_ok());
}

#[test]
fn forty_gigabytes_of_zeros_is_an_error_or_a_tensor_never_an_abort() {
    // Aborted with "memory allocation failed" before. A machine with less than 40 GB of
    // physical memory refuses it up front (one buffer may not exceed it); a larger one maps
    // lazily zeroed pages, so this is fast either way.
    match RawTensor::zeros(&[100_000, 100_000], &cpu()) {
        Ok(t) => assert_eq!(t.numel(), 10_000_000_000),
        Err(err) => assert!(matches!(err, Error::OutOfMemory { op: "full", .. }), "{err}"),
    }
}

// ----- 3. rank-0 tensors and axes -----

#[test]
fn a_rank_0_tensor_has_no_axis() {
    let s = scalar(3.0);
    assert!(s.sum(&[0], false).is_err());
    assert!(s.sum(&[-1], false).is_err());
    assert!(s.mean(&[0], false).is_err());
    assert!(s.max(&[0], false).is_err());
    assert!(s.min(&[0], true).is_err());
    assert!(s.argmax(0).is_err());
    assert!(s.squeeze(0).is_err());
    assert!(s.transpose(0, 0).is_err());
    assert!(s.dim(0).is_err());
    assert!(s.dim(-1).is_err());
    assert!(s.softmax(0).is_err());
    assert!(s.log_softmax(-1).is_err());
    assert!(s.narrow(0, 0, 1).is_err());
    assert!(s.flatten_from(0).is_err());
    assert_eq!(s.sum(&[], false).unwrap().item().unwrap(), 3.0);
    assert_eq!(s.sum_all().unwrap().item().unwrap(), 3.0);
    assert_eq!(s.mean_all().unwrap().item().unwrap(), 3.0);
    assert_eq!(s.unsqueeze(0).unwrap().shape(), &[1]);
}

#[test]
fn out_of_range_axes_are_errors_for_every_rank() {
    let x = tensor(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    for axis in [2, -3, isize::MAX, isize::MIN] {
        assert!(x.sum(&[axis], false).is_err(), "{axis}");
        assert!(x.argmax(axis).is_err(), "{axis}");
        assert!(x.transpose(axis, 0).is_err(), "{axis}");
        assert!(x.dim(axis).is_err(), "{axis}");
        assert!(x.softmax(axis).is_err(), "{axis}");
    }
    assert_eq!(x.dim(-2).unwrap(), 2);
    assert_eq!(x.sum(&[-1], false).unwrap().to_vec().unwrap(), vec![6.0, 15.0]);
}

// ----- 8. repeated axes and reshape inference -----

#[test]
fn repeated_axes_are_errors() {
    let x = tensor(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    for axes in [[1, 1], [0, -2], [-1, 1]] {
        let err = x.mean(&axes, false).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { op: "mean", .. }), "{axes:?}: {err}");
        assert!(x.sum(&axes, false).is_err(), "{axes:?}");
        assert!(x.max(&axes, true).is_err(), "{axes:?}");
    }
    assert_eq!(x.mean(&[1], false).unwrap().to_vec().unwrap(), vec![2.0, 5.0]);
    assert_eq!(x.mean(&[0, 1], false).unwrap().item().unwrap(), 3.5);
}

#[test]
fn only_minus_one_is_inferred_and_only_once() {
    let x = tensor(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
    for shape in [&[-7, 2][..], &[-2, 3], &[-1, -1], &[isize::MIN, 1], &[-1, 0], &[-1, 4]] {
        assert!(x.reshape_infer(shape).is_err(), "{shape:?}");
    }
    assert_eq!(x.reshape_infer(&[-1, 2]).unwrap().shape(), &[3, 2]);
    assert_eq!(x.reshape_infer(&[3, -1]).unwrap().shape(), &[3, 2]);
    assert_eq!(x.reshape_infer(&[6]).unwrap().shape(), &[6]);
}

// ----- 4. locks -----

/// Runs `work` on two threads `rounds` times each; fails (instead of hanging) if they do not
/// finish within a generous bound.
fn race(rounds: usize, work: impl Fn(usize) -> rumus::Result<()> + Send + Sync + Clone + 'static) {
    let (done, finished) = mpsc::channel();
    let start = std::sync::Arc::new(std::sync::Barrier::new(2));
    for side in 0..2 {
        let (work, done, start) = (work.clone(), done.clone(), start.clone());
        thread::spawn(move || {
            start.wait();
            let result = (0..rounds).try_for_each(|_| work(side));
            let _ = done.send(result);
        });
    }
    for _ in 0..2 {
        match finished.recv_timeout(Duration::from_secs(60)) {
            Ok(result) => result.unwrap(),
            Err(_) => panic!("deadlock: the racing threads did not finish within 60 s"),
        }
    }
}

#[test]
fn crossed_assigns_do_not_deadlock() {
    let a = Param::new(RawTensor::full(1.0, &[16], &cpu()).unwrap()).unwrap();
    let b = Param::new(RawTensor::full(2.0, &[16], &cpu()).unwrap()).unwrap();
    let (a2, b2) = (a.clone(), b.clone());
    race(200_000, move |side| if side == 0 { a2.assign(b2.tensor()) } else { b2.assign(a2.tensor()) });
    // Both hold one of the two values, every element alike.
    for p in [&a, &b] {
        let v = p.to_vec().unwrap();
        assert!(v.iter().all(|&x| x == v[0] && (x == 1.0 || x == 2.0)), "{v:?}");
    }
}

#[test]
fn a_tensor_used_twice_against_a_writer_does_not_deadlock() {
    let t = Param::new(RawTensor::full(3.0, &[256], &cpu()).unwrap()).unwrap();
    let value = RawTensor::full(3.0, &[256], &cpu()).unwrap();
    let t2 = t.clone();
    race(100_000, move |side| {
        if side == 0 {
            let y = t2.tensor().mul(t2.tensor())?;
            assert_eq!(y.to_vec()?[0], 9.0);
            Ok(())
        } else {
            t2.assign(&value)
        }
    });
    assert_eq!(t.to_vec().unwrap(), vec![3.0; 256]);
}

#[test]
fn backend_copies_between_two_storages_in_both_directions_do_not_deadlock() {
    let a = RawTensor::full(1.0, &[1 << 12], &cpu()).unwrap();
    let b = RawTensor::full(1.0, &[1 << 12], &cpu()).unwrap();
    let (a2, b2) = (a.clone(), b.clone());
    race(20_000, move |side| {
        let (src, dst) = if side == 0 { (&a2, &b2) } else { (&b2, &a2) };
        let backend = src.device().backend();
        backend.copy_strided(src.storage(), src.layout(), dst.storage(), dst.layout())?;
        // A kernel reading both at once, in the other order.
        dst.add(src).map(drop)
    });
    assert_eq!(a.to_vec().unwrap(), vec![1.0; 1 << 12]);
}

// ----- 5. dropping long graphs -----

#[test]
fn dropping_a_300000_op_graph_does_not_overflow_the_stack() {
    // A thread with the default 2 MiB stack, as the test harness's own threads have.
    let handle = thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(|| {
            let x = scalar(1.0).requires_grad_().unwrap();
            let mut y = x.clone();
            for _ in 0..300_000 {
                y = y.add(&x).unwrap();
            }
            assert_eq!(y.item().unwrap(), 300_001.0);
            drop(y);
            // And once more through backward, which frees saved tensors as it goes.
            let mut y = x.clone();
            for _ in 0..300_000 {
                y = y.add(&x).unwrap();
            }
            let grads = y.backward().unwrap();
            assert_eq!(grads.get(&x).unwrap().item().unwrap(), 300_001.0);
            drop(y);
            // Views, unary ops and ops that save tensors of their own, 300,000 nodes in all.
            let mut y = x.clone();
            for _ in 0..100_000 {
                y = y.relu().unwrap().reshape(&[1]).unwrap().max(&[0], false).unwrap();
            }
            assert_eq!(y.item().unwrap(), 1.0);
            drop(y);
        })
        .unwrap();
    handle.join().expect("the thread overflowed its stack or panicked");
}

#[test]
fn a_shared_subgraph_survives_dropping_one_of_its_users() {
    let x = scalar(2.0).requires_grad_().unwrap();
    let shared = x.mul(&x).unwrap();
    let a = shared.add(&x).unwrap();
    let b = shared.mul_scalar(3.0).unwrap();
    drop(shared);
    drop(a);
    let grads = b.backward().unwrap();
    assert_eq!(grads.get(&x).unwrap().item().unwrap(), 12.0);
}

// ----- 12. no-grad guards -----

#[test]
fn nested_no_grad_guards_restore_recording_in_any_drop_order() {
    let x = scalar(1.0).requires_grad_().unwrap();
    let records = || x.mul_scalar(2.0).unwrap().requires_grad();
    let (outer, inner) = (NoGradGuard::new(), NoGradGuard::new());
    drop(outer);
    assert!(!records(), "the inner guard is alive");
    drop(inner);
    assert!(records(), "out-of-order drops left grad disabled");
    let (outer, inner) = (NoGradGuard::new(), NoGradGuard::new());
    drop(inner);
    assert!(!records());
    drop(outer);
    assert!(records());
    // Another thread's guards never touch this thread's state.
    thread::spawn(|| std::mem::forget(NoGradGuard::new())).join().unwrap();
    assert!(records());
}

// ----- properties -----

/// Sizes mixing the small (where shapes are real) and the huge (where arithmetic overflows).
fn dim() -> impl Strategy<Value = usize> {
    prop_oneof![
        4 => 0usize..5,
        1 => (1usize << 20)..(1usize << 33),
        1 => Just(usize::MAX),
        1 => (usize::MAX / 4)..=usize::MAX,
        1 => (1usize << 62)..=(1usize << 62) + 5,
    ]
}

fn shape() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(dim(), 0..5)
}

proptest! {
    // Failing cases are kept in tensors.proptest-regressions beside this file (proptest's default
    // would be tests/proptest-regressions/, beside the binary's main.rs).
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn checked_numel_is_the_exact_product_or_an_error(shape in shape()) {
        let within = nonzero_product(&shape) <= MAX_ELEMENTS as u128;
        match checked_numel("test", &shape) {
            Ok(n) => {
                prop_assert!(within);
                prop_assert_eq!(n as u128, exact_numel(&shape));
            }
            Err(e) => {
                prop_assert!(!within);
                prop_assert!(matches!(e, Error::Shape { op: "test", .. }), "{}", e);
            }
        }
    }

    #[test]
    fn reshape_accepts_exactly_the_shapes_of_its_element_count(small in prop::collection::vec(1usize..4, 0..4), target in shape()) {
        let n: usize = small.iter().product();
        let x = RawTensor::from_vec(vec![1.0; n], &small, &cpu()).unwrap();
        let fits = nonzero_product(&target) <= MAX_ELEMENTS as u128 && exact_numel(&target) == n as u128;
        match x.reshape(&target) {
            Ok(y) => {
                prop_assert!(fits);
                prop_assert_eq!(y.shape(), &target[..]);
                prop_assert_eq!(y.to_vec().unwrap().len(), n);
            }
            Err(_) => prop_assert!(!fits),
        }
        let signed: Vec<isize> = target.iter().map(|&d| d as isize).collect();
        // Never a panic; Ok only with the right count.
        if let Ok(y) = x.reshape_infer(&signed) {
            prop_assert_eq!(y.numel(), n);
        }
    }

    #[test]
    fn small_shapes_allocate_and_huge_ones_are_refused(shape in shape()) {
        let product = nonzero_product(&shape);
        prop_assume!(product <= 4096 || product > MAX_ELEMENTS as u128);
        match RawTensor::zeros(&shape, &cpu()) {
            Ok(t) => {
                prop_assert!(product <= 4096);
                prop_assert_eq!(t.shape(), &shape[..]);
                prop_assert_eq!(t.numel() as u128, exact_numel(&shape));
                prop_assert!(t.to_vec().unwrap().iter().all(|&v| v == 0.0));
            }
            Err(e) => {
                prop_assert!(product > MAX_ELEMENTS as u128);
                prop_assert!(matches!(e, Error::Shape { .. }), "{}", e);
            }
        }
        prop_assert_eq!(tensor(&[1.0], &[]).broadcast_to(&shape).is_ok(), product <= MAX_ELEMENTS as u128);
    }

    #[test]
    fn window_ops_return_the_reference_shape_or_an_error(
        hw in (1usize..6, 1usize..6),
        kernel in prop_oneof![3 => 1usize..4, 1 => (usize::MAX - 3)..=usize::MAX, 1 => (1usize << 40)..(1usize << 41)],
        stride in prop_oneof![3 => 1usize..4, 1 => Just(0usize), 1 => (1usize << 40)..=usize::MAX],
        pad in prop_oneof![3 => 0usize..3, 1 => (1usize << 21)..=usize::MAX],
        dilation in prop_oneof![3 => 1usize..3, 1 => Just(0usize), 1 => (1usize << 21)..=usize::MAX],
    ) {
        let (h, w) = hw;
        let x = RawTensor::rand_uniform(&[1, 2, h, w], -1.0, 1.0, 7, &cpu()).unwrap();
        // The output extent in exact arithmetic.
        let extent = |size: usize| -> Option<u128> {
            let span = dilation as u128 * (kernel as u128).checked_sub(1)? + 1;
            let padded = size as u128 + 2 * pad as u128;
            (stride > 0 && dilation > 0 && span <= padded).then(|| (padded - span) / stride as u128 + 1)
        };
        let small = pad < 3 && kernel < 4 && dilation < 3;
        let reference = match (extent(h), extent(w)) {
            (Some(oh), Some(ow)) => Some((oh as usize, ow as usize)),
            _ => None,
        };
        let check = |out: rumus::Result<RawTensor>, channels: usize, pool: bool| -> Result<(), TestCaseError> {
            let allowed = !pool || pad <= kernel / 2;
            match out {
                Ok(y) => {
                    let (oh, ow) = reference.expect("Ok for a window that does not fit");
                    prop_assert!(allowed);
                    prop_assert_eq!(y.shape(), &[1, channels, oh, ow][..]);
                    prop_assert!(y.to_vec().unwrap().iter().all(|v| !v.is_nan()));
                }
                Err(_) => prop_assert!(!(small && allowed && reference.is_some())),
            }
            Ok(())
        };
        let weight = RawTensor::ones(&[3, 2, kernel.min(3), kernel.min(3)], &cpu()).unwrap();
        if kernel < 4 {
            check(x.conv2d(&weight, None, (stride, stride), (pad, pad), (dilation, dilation), 1), 3, false)?;
        }
        check(x.max_pool2d((kernel, kernel), (stride, stride), (pad, pad), (dilation, dilation)), 2, true)?;
        if dilation == 1 {
            check(x.avg_pool2d((kernel, kernel), (stride, stride), (pad, pad)), 2, true)?;
        }
        match x.im2col((kernel, kernel), (stride, stride), (pad, pad), (dilation, dilation)) {
            Ok(cols) => {
                let (oh, ow) = reference.expect("Ok for a window that does not fit");
                prop_assert_eq!(cols.shape(), &[1, 2 * kernel * kernel, oh * ow][..]);
            }
            Err(_) => prop_assert!(!(small && reference.is_some())),
        }
    }

    #[test]
    fn axes_resolve_within_minus_rank_to_rank(rank in 0usize..4, axis in prop_oneof![-6isize..6, Just(isize::MIN), Just(isize::MAX)]) {
        let shape = vec![2; rank];
        let x = RawTensor::ones(&shape, &cpu()).unwrap();
        let valid = axis >= -(rank as isize) && axis < rank as isize;
        prop_assert_eq!(x.sum(&[axis], false).is_ok(), valid);
        prop_assert_eq!(x.mean(&[axis], true).is_ok(), valid);
        prop_assert_eq!(x.argmax(axis).is_ok(), valid);
        prop_assert_eq!(x.dim(axis).is_ok(), valid);
        prop_assert_eq!(x.softmax(axis).is_ok(), valid);
        prop_assert_eq!(x.transpose(axis, axis).is_ok(), valid);
        if valid {
            // Naming the axis twice, once negative, is a repeat.
            let other = if axis < 0 { axis + rank as isize } else { axis - rank as isize };
            prop_assert!(x.sum(&[axis, other], false).is_err());
            prop_assert_eq!(x.sum(&[axis], false).unwrap().numel(), 1 << (rank - 1));
        }
    }

    #[test]
    fn arange_counts_exactly_or_refuses(start in -1e6f32..1e6, len in prop_oneof![0f32..100.0, 1e13f32..1e30], step in prop_oneof![0.5f32..4.0, -4f32..-0.5, Just(0.0)]) {
        let end = if step < 0.0 { start - len } else { start + len };
        let count = ((end as f64 - start as f64) / step as f64).ceil().max(0.0);
        match RawTensor::arange(start, end, step, &cpu()) {
            Ok(t) => {
                prop_assert!(step != 0.0 && count <= 1e4);
                prop_assert_eq!(t.numel() as f64, count);
            }
            Err(_) => prop_assert!(step == 0.0 || count > MAX_ELEMENTS as f64),
        }
    }
}

/// Random streams are indexed by a u32 counter (two words per normal value): a draw longer than
/// the period would silently repeat values, so every backend refuses it before allocating.
#[test]
fn random_draws_beyond_the_generators_period_are_refused() {
    use rumus::backend::RandomKind;
    let d = cpu();
    for (kind, period) in [(RandomKind::Uniform, 1usize << 32), (RandomKind::Normal, 1 << 31)] {
        match d.backend().random(kind, period + 1, 7) {
            Err(Error::InvalidArgument { op: "random", .. }) => {}
            other => panic!("{kind:?} of {} values: {:?}", period + 1, other.map(|s| s.len())),
        }
        assert!(kind.check_len(period).is_ok());
    }
    assert!(matches!(RawTensor::randn(&[1 << 16, (1 << 15) + 1], 0.0, 1.0, 3, &d), Err(Error::InvalidArgument { .. })));
}

/// A layer axis at the edge of `isize` is an error, not an overflow when the batch axis is added.
#[test]
fn softmax_layers_with_extreme_axes_are_errors() {
    use rumus::nn::{LogSoftmax, Module, Softmax};
    let x = tensor(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    for axis in [isize::MAX, isize::MAX - 1, 1, isize::MIN, -3] {
        assert!(Softmax { axis }.forward_raw(&x).is_err(), "Softmax axis {axis}");
        assert!(LogSoftmax { axis }.forward_raw(&x).is_err(), "LogSoftmax axis {axis}");
    }
    assert_eq!(Softmax { axis: -1 }.forward_raw(&x).unwrap().shape(), &[2, 2]);
}
