//! Many parameters' optimizer updates in one call (`Backend::optimizer_steps`, which the wgpu
//! backend runs up to 16 parameters per dispatch): over random lists of parameters (lengths
//! across workgroup edges, empty ones, every update kind, runs of equal hyper-parameters broken
//! by others) and random aliasing between them (a gradient shared by two parameters, a gradient
//! that is its own parameter, a gradient that is an earlier parameter, a parameter that is an
//! earlier gradient, a parameter stepped twice), the result on wgpu is that of the CPU applying
//! the updates one after another. The update formulas themselves are checked one parameter at a
//! time in `wgpu_parity.rs` (`optimizer_kernels_match`, CPU against wgpu) and in
//! `tests/nn/optim.rs` (against `torch.optim`'s update rules, re-derived in f64).

use proptest::prelude::*;

use crate::wgpu_parity::optimizer_steps as steps;
use rumus::backend::cpu::CpuBackend;
use rumus::backend::{Backend, OptimizerUpdate, Storage};
use rumus::rng::Rng;
use rumus::testing::{assert_close, wgpu_or_skip};
use rumus::{Device, Layout, Result};

/// How an update's operands relate to the earlier ones'.
#[derive(Clone, Copy, Debug)]
enum Alias {
    None,
    /// Its gradient is the gradient of update `k % earlier`.
    SharedGrad(usize),
    /// Its gradient is its own parameter.
    GradIsParam,
    /// Its gradient is the parameter of update `k % earlier`.
    GradIsEarlierParam(usize),
    /// Its parameter is the gradient of update `k % earlier`.
    ParamIsEarlierGrad(usize),
    /// Its parameter (not its state) is the parameter of update `k % earlier`.
    SameParam(usize),
}

/// One update of a plan: its length, which of `wgpu_parity::optimizer_steps`, how it aliases.
type Planned = (usize, usize, Alias);

/// The buffers of one update: indices into the storages of a run.
struct Operands {
    param: usize,
    grad: usize,
    state: [usize; 3],
    len: usize,
}

/// The storages a plan needs on `b`, with every update's operands (three state buffers each:
/// SGD with momentum reads one, Adam and RMSprop two, the second moments kept non-negative, and
/// the rest must be left alone), then the updates applied:
/// all in one `optimizer_steps` call, or one call per update (`one_by_one`). Returns every
/// storage read back, in order.
fn run(b: &dyn Backend, plan: &[Planned], one_by_one: bool) -> Result<Vec<Vec<f32>>> {
    let mut storages: Vec<Storage> = Vec::new();
    let mut operands: Vec<Operands> = Vec::new();
    let new = |len: usize, positive: bool, storages: &mut Vec<Storage>| -> Result<usize> {
        let mut rng = Rng::new(storages.len() as u64 + 1);
        let values: Vec<f32> =
            (0..len).map(|_| if positive { rng.uniform() + 0.25 } else { rng.uniform() * 4.0 - 2.0 }).collect();
        storages.push(b.from_f32(&values)?);
        Ok(storages.len() - 1)
    };
    for (k, &(len, _, alias)) in plan.iter().enumerate() {
        let earlier = |i: usize| &operands[i % k.max(1)];
        let len = match alias {
            Alias::None | Alias::GradIsParam => len,
            _ if k == 0 => len,
            Alias::SharedGrad(i)
            | Alias::GradIsEarlierParam(i)
            | Alias::ParamIsEarlierGrad(i)
            | Alias::SameParam(i) => earlier(i).len,
        };
        let param = match alias {
            Alias::ParamIsEarlierGrad(i) if k > 0 => earlier(i).grad,
            Alias::SameParam(i) if k > 0 => earlier(i).param,
            _ => new(len, false, &mut storages)?,
        };
        let grad = match alias {
            Alias::SharedGrad(i) if k > 0 => earlier(i).grad,
            Alias::GradIsEarlierParam(i) if k > 0 => earlier(i).param,
            Alias::GradIsParam => param,
            _ => new(len, false, &mut storages)?,
        };
        let state = [new(len, true, &mut storages)?, new(len, true, &mut storages)?, new(len, false, &mut storages)?];
        operands.push(Operands { param, grad, state, len });
    }
    let steps = steps();
    let state_refs: Vec<[&Storage; 3]> = operands.iter().map(|o| o.state.map(|s| &storages[s])).collect();
    let updates: Vec<OptimizerUpdate<'_>> = operands
        .iter()
        .zip(plan)
        .zip(&state_refs)
        .map(|((o, &(_, step, _)), state)| OptimizerUpdate {
            step: steps[step],
            param: &storages[o.param],
            grad: &storages[o.grad],
            state,
            len: o.len,
        })
        .collect();
    if one_by_one {
        for u in &updates {
            b.optimizer_steps(std::slice::from_ref(u))?;
        }
    } else {
        b.optimizer_steps(&updates)?;
    }
    storages.iter().map(|s| b.to_f32(s, &Layout::contiguous(&[s.len()]))).collect()
}

/// The plan on wgpu, in one call, against the CPU one update at a time.
fn check(plan: &[Planned]) {
    let Some(Device::Wgpu(gpu)) = wgpu_or_skip() else {
        return;
    };
    let want = run(&CpuBackend, plan, true).unwrap_or_else(|e| panic!("{plan:?} on the CPU: {e}"));
    let got = run(&*gpu, plan, false).unwrap_or_else(|e| panic!("{plan:?} on wgpu: {e}"));
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_close(&format!("storage {k} of {plan:?}"), g, w, 1e-5);
    }
}

fn alias() -> impl Strategy<Value = Alias> {
    prop_oneof![
        6 => Just(Alias::None),
        1 => any::<usize>().prop_map(Alias::SharedGrad),
        1 => Just(Alias::GradIsParam),
        1 => any::<usize>().prop_map(Alias::GradIsEarlierParam),
        1 => any::<usize>().prop_map(Alias::ParamIsEarlierGrad),
        1 => any::<usize>().prop_map(Alias::SameParam),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    /// Lengths around one workgroup (256) and empty parameters; runs of one update kind long
    /// enough to fill several dispatches of 16.
    #[test]
    fn many_updates_in_one_call_match_the_cpu_one_by_one(
        plan in proptest::collection::vec(
            (prop_oneof![Just(0usize), 1usize..300, Just(256), Just(257), 500usize..1100], 0usize..8, alias()),
            1..40,
        ),
        runs in 1usize..5,
    ) {
        // Sort part of the plan by update so that long runs of one kind occur.
        let mut plan = plan;
        let cut = plan.len() * (runs - 1) / 4;
        plan[..cut].sort_by_key(|&(_, step, _)| step);
        check(&plan);
    }
}

/// Forty parameters of one update (three dispatches of up to 16) and the same list one update
/// at a time give the same values on wgpu.
#[test]
fn one_call_and_one_update_per_call_agree_on_wgpu() {
    let Some(Device::Wgpu(gpu)) = wgpu_or_skip() else {
        return;
    };
    for step in 0..steps().len() {
        let plan: Vec<Planned> = (0..40).map(|k| (k * 37 % 600, step, Alias::None)).collect();
        let together = run(&*gpu, &plan, false).unwrap();
        let apart = run(&*gpu, &plan, true).unwrap();
        for (k, (a, b)) in together.iter().zip(&apart).enumerate() {
            assert_close(&format!("update {step}, storage {k}"), a, b, 1e-6);
        }
    }
}

/// An AdamW's decayed and undecayed parameters alternate in parameter order: updates with the
/// same hyper-parameters share dispatches although others come between them (far fewer
/// dispatches than updates), and where a later update shares a parameter with an earlier one of
/// the other kind it still runs after it: the CPU's values one update at a time.
#[test]
fn alternating_hyper_parameters_share_dispatches() {
    let Some(Device::Wgpu(gpu)) = wgpu_or_skip() else {
        return;
    };
    // steps()[3] and [4]: Adam without weight decay and AdamW.
    let mut plan: Vec<Planned> = (0..40).map(|k| (100 + k * 13, 3 + k % 2, Alias::None)).collect();
    plan.push((0, 3, Alias::SameParam(39)));
    plan.push((0, 4, Alias::SameParam(2)));
    check(&plan);
    let dispatches = || -> u64 {
        let times = gpu.profile_kernels(|| run(&*gpu, &plan, false).map(drop)).unwrap();
        times.iter().filter(|t| t.shader.starts_with("optimizer")).map(|t| t.calls).sum()
    };
    // While another test's thread compiles the many-parameter module, updates run one per
    // dispatch on the stand-in: wait for the compile (at most 5 s).
    let mut counted = dispatches();
    for _ in 0..50 {
        if counted <= 10 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        counted = dispatches();
    }
    assert!(counted <= 10, "{} updates in {counted} dispatches", plan.len());
}

/// Wrong operands are errors before anything is written: a missing state buffer, a short
/// gradient, a parameter that is its own state buffer.
#[test]
fn bad_operands_are_refused_before_any_update() {
    let Some(Device::Wgpu(gpu)) = wgpu_or_skip() else {
        return;
    };
    let b: &dyn Backend = &*gpu;
    let p = b.from_f32(&[1.0; 8]).unwrap();
    let g = b.from_f32(&[1.0; 8]).unwrap();
    let short = b.from_f32(&[1.0; 4]).unwrap();
    let m = b.from_f32(&[0.0; 8]).unwrap();
    let (momentum, adam) = (steps()[1], steps()[3]);
    let (only_m, only_p) = ([&m], [&p]);
    let good = OptimizerUpdate { step: momentum, param: &p, grad: &g, state: &only_m, len: 8 };
    let bad_lists: [Vec<OptimizerUpdate<'_>>; 3] = [
        vec![good, OptimizerUpdate { step: adam, param: &p, grad: &g, state: &only_m, len: 8 }],
        vec![good, OptimizerUpdate { grad: &short, ..good }],
        vec![good, OptimizerUpdate { state: &only_p, ..good }],
    ];
    for updates in &bad_lists {
        let err = b.optimizer_steps(updates).unwrap_err();
        assert!(matches!(err, rumus::Error::InvalidArgument { .. }), "{err}");
        assert_eq!(b.to_f32(&p, &Layout::contiguous(&[8])).unwrap(), vec![1.0; 8], "{err}: the parameter changed");
    }
}
