//! Bad input at the tensor level gives a precise `rumus::Error`, never a panic; tensors and
//! layers work across threads.

use rumus::nn::{Linear, Module};
use rumus::{Device, Error, RawTensor, Shape1, Shape3, Tensor};

fn cpu() -> Device {
    Device::cpu()
}

#[test]
fn untyped_to_typed_conversion_checks_the_shape() {
    let raw = RawTensor::zeros(&[4, 784], &cpu()).unwrap();
    let err = Tensor::<Shape3<1, 28, 28>>::from_raw(raw.clone()).unwrap_err();
    assert!(matches!(err, Error::Shape { op: "Tensor::from_raw", .. }), "{err}");
    assert!(err.to_string().contains("[1, 28, 28]") && err.to_string().contains("[4, 784]"), "{err}");
    let typed: Tensor<Shape1<784>> = raw.try_into().unwrap();
    assert_eq!(typed.batch_size(), 4);
    let scalar = RawTensor::zeros(&[], &cpu()).unwrap();
    assert!(matches!(Tensor::<Shape1<1>>::from_raw(scalar), Err(Error::Shape { .. })));
}

#[test]
fn constructors_reject_wrong_element_counts_and_negative_indices() {
    let err = RawTensor::from_vec(vec![1.0; 5], &[2, 3], &cpu()).unwrap_err();
    assert!(matches!(err, Error::Shape { op: "from_vec", .. }), "{err}");
    let err = RawTensor::from_i64(&[3, -1, 2], &[3], &cpu()).unwrap_err();
    assert!(matches!(err, Error::IndexOutOfRange { index: -1, position: 1, .. }), "{err}");
    assert!(matches!(Tensor::<Shape1<3>>::from_vec(vec![0.0; 4], &cpu()), Err(Error::Shape { .. })));
    assert!(matches!(RawTensor::arange(0.0, 1.0, 0.0, &cpu()), Err(Error::InvalidArgument { .. })));
}

#[test]
fn shape_errors_name_the_op_and_both_shapes() {
    let a = RawTensor::zeros(&[32, 784], &cpu()).unwrap();
    let b = RawTensor::zeros(&[128, 10], &cpu()).unwrap();
    assert_eq!(
        a.matmul(&b).unwrap_err().to_string(),
        "matmul: lhs [32, 784] rhs [128, 10]: inner dims 784 and 128 differ"
    );
    let err = a.add(&b).unwrap_err();
    assert!(matches!(err, Error::Shape { op: "add", .. }), "{err}");
    assert!(matches!(a.reshape(&[7, 7]), Err(Error::Shape { op: "reshape", .. })));
    assert!(matches!(a.sum(&[2], false), Err(Error::InvalidArgument { .. })));
    assert!(matches!(a.permute(&[0, 0]), Err(Error::InvalidArgument { op: "permute", .. })));
    assert!(matches!(a.narrow(1, 700, 800), Err(Error::InvalidArgument { op: "slice", .. })));
    assert!(matches!(a.item(), Err(Error::Shape { op: "item", .. })));
    let idx = RawTensor::from_indices(&[1, 2], &[2], &cpu()).unwrap();
    assert!(matches!(idx.exp(), Err(Error::DType { expected: "f32", got: "u32", .. })));
    assert!(matches!(a.to_vec_u32(), Err(Error::DType { .. })));
}

#[test]
fn backward_needs_a_scalar_that_requires_grad() {
    let x = RawTensor::ones(&[3], &cpu()).unwrap().requires_grad_().unwrap();
    assert!(matches!(x.exp().unwrap().backward(), Err(Error::Autograd(_))));
    let y = RawTensor::ones(&[1], &cpu()).unwrap();
    assert!(matches!(y.backward(), Err(Error::Autograd(_))));
}

#[test]
fn a_second_backward_through_a_freed_graph_is_an_error() {
    let x = RawTensor::from_vec(vec![1.0, 2.0], &[2], &cpu()).unwrap().requires_grad_().unwrap();
    let y = x.exp().unwrap();
    let loss = y.sum_all().unwrap();
    assert!(loss.backward().is_ok());
    const SECOND_TIME: &str = "backward through the graph a second time";
    let second_time = |result: rumus::Result<rumus::Gradients>| matches!(result, Err(Error::Autograd(message)) if message.contains(SECOND_TIME));
    assert!(second_time(loss.backward()));
    // A new root over part of the old graph reaches the freed node too.
    assert!(second_time(y.mean_all().unwrap().backward()));
    // A fresh forward pass builds a fresh graph from the same leaf.
    let grads = x.exp().unwrap().sum_all().unwrap().backward().unwrap();
    assert_eq!(grads.get(&x).unwrap().to_vec().unwrap(), vec![1f32.exp(), 2f32.exp()]);
}

#[test]
fn softmax_family_is_stable_at_extreme_logits() {
    let big = RawTensor::from_vec(vec![1e4, -1e4, 0.0, 1e4, 1e4, 1e4], &[2, 3], &cpu()).unwrap();
    let y = big.softmax(-1).unwrap().to_vec().unwrap();
    assert_eq!(y[..3], [1.0, 0.0, 0.0]);
    for v in &y[3..] {
        assert!((v - 1.0 / 3.0).abs() < 1e-6, "all-equal row must be uniform: {y:?}");
    }
    let ly = big.log_softmax(-1).unwrap().to_vec().unwrap();
    assert!(ly.iter().all(|v| v.is_finite()), "{ly:?}");
    assert_eq!(ly[1], -2e4);
    // A row that is -inf everywhere but one place puts all mass there.
    let inf = RawTensor::from_vec(vec![f32::NEG_INFINITY, 2.0, f32::NEG_INFINITY], &[1, 3], &cpu()).unwrap();
    assert_eq!(inf.softmax(-1).unwrap().to_vec().unwrap(), vec![0.0, 1.0, 0.0]);
    let lin = inf.log_softmax(-1).unwrap().to_vec().unwrap();
    assert_eq!(lin[1], 0.0);
    // Gradients stay finite at extreme logits too.
    let x = big.requires_grad_().unwrap();
    let grads = x.log_softmax(-1).unwrap().sum_all().unwrap().backward().unwrap();
    assert!(grads.get(&x).unwrap().to_vec().unwrap().iter().all(|v| v.is_finite()));
}

#[test]
fn nan_propagates_through_max_instead_of_vanishing() {
    let x = RawTensor::from_vec(vec![1.0, f32::NAN, 3.0], &[1, 3], &cpu()).unwrap();
    assert!(x.max(&[1], false).unwrap().item().unwrap().is_nan());
    assert!(x.sum_all().unwrap().item().unwrap().is_nan());
}

#[test]
fn tensors_and_layers_are_shared_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<RawTensor>();
    assert_send_sync::<Tensor<Shape1<3>>>();
    assert_send_sync::<Linear>();
    assert_send_sync::<Device>();

    // Two models trained concurrently on one device reach the same weights as sequentially.
    let train = |seed: u64| -> Vec<f32> {
        let device = cpu();
        let layer = Linear::new(&device, 4, 2, true, seed).unwrap();
        let x = RawTensor::randn(&[8, 4], 0.0, 1.0, 99, &device).unwrap();
        for _ in 0..20 {
            let loss = layer.forward_raw(&x).unwrap().powf(2.0).unwrap().mean_all().unwrap();
            let grads = loss.backward().unwrap();
            for p in [&layer.weight, layer.bias.as_ref().unwrap()] {
                let g = grads.get(p.tensor()).unwrap();
                let updated = rumus::no_grad(|| p.tensor().sub(&g.mul_scalar(0.1)?)).unwrap();
                p.assign(&updated).unwrap();
            }
        }
        layer.weight.to_vec().unwrap()
    };
    let sequential = (train(1), train(2));
    let concurrent = std::thread::scope(|s| {
        let a = s.spawn(|| train(1));
        let b = s.spawn(|| train(2));
        (a.join().unwrap(), b.join().unwrap())
    });
    assert_eq!(sequential, concurrent, "CPU training must be deterministic and thread-independent");
}

#[test]
#[cfg(target_arch = "x86_64")]
fn cpu_kernels_flush_subnormals_to_zero() {
    if std::env::var_os("RUMUS_KEEP_DENORMALS").is_some() {
        return;
    }
    // On a fresh thread, and large enough that rayon's workers take part.
    std::thread::spawn(|| {
        let n = 200_000;
        // A subnormal result (1e-40) is flushed to zero (FTZ)...
        let x = RawTensor::full(1e-30, &[n], &cpu()).unwrap();
        assert!(x.mul_scalar(1e-10).unwrap().to_vec().unwrap().iter().all(|&v| v == 0.0));
        // ...and a subnormal input reads as zero (DAZ): 1e-40 · 1e30 is 0, not 1e-10.
        let sub = RawTensor::from_vec(vec![1e-40; n], &[n], &cpu()).unwrap();
        assert!(sub.mul_scalar(1e30).unwrap().to_vec().unwrap().iter().all(|&v| v == 0.0));
        // Normal values are untouched.
        let small = RawTensor::full(1e-30, &[3], &cpu()).unwrap().mul_scalar(1e-5).unwrap().to_vec().unwrap();
        assert!(small.iter().all(|&v| v == 1e-30f32 * 1e-5), "{small:?}");
    })
    .join()
    .unwrap();
}
