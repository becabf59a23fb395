//! `optimizer.wgsl`: fused update steps of SGD (with or without momentum), Adam/AdamW and
//! RMSprop, in place on parameters and their state buffers, up to [`SLOTS`] parameters per
//! dispatch (as PyTorch's `foreach` optimizers launch one kernel for many tensors): ResNet-18's
//! 62 parameters take 4 dispatches, not 62, where the adapter binds the buffers of 16.
//!
//! A dispatch binds each of its parameters' buffers at bindings of their own (WGSL has no
//! pointers to choose among buffers at run time): `constants` writes those bindings and the
//! `apply` function that picks a slot's, one module per update and slot count. An adapter that
//! binds fewer storage buffers per kernel gets the modules of fewer slots ([`SLOT_COUNTS`]).

use std::sync::Arc;

use super::launch::{bind, check_len};
use super::params::kernel_params;
use super::pipelines::{self, Access};
use super::{WgpuBackend, WgpuStorage};
use crate::backend::{DType, OptimizerStep, OptimizerUpdate, Storage};
use crate::{Error, Layout, Result};

use Access::{Read as R, Write as W};

const OP: &str = "optimizer";

/// The most parameters one dispatch updates.
const SLOTS: usize = 16;

/// Parameters per dispatch of the modules, one set per entry (`pipelines::OPTIMIZER`): the
/// largest whose buffers the adapter binds to one kernel is used (lavapipe binds 32 storage
/// buffers, so 8 parameters of Adam, 16 of SGD without momentum).
const SLOT_COUNTS: [usize; 4] = [1, 4, 8, SLOTS];

/// Workgroup size of `optimizer.wgsl`: elements per workgroup.
const GROUP: usize = 256;

/// The updates, one module each: the function of `optimizer.wgsl` that computes it, and its
/// state buffers. Indexed by [`kind`].
const KINDS: [(&str, usize); 4] = [("sgd", 0), ("sgd_momentum", 1), ("adam", 2), ("rmsprop", 2)];

kernel_params! {
    /// `starts`/`lens`: slot k's first workgroup and elements at `[k / 4][k % 4]` (unused slots:
    /// start `u32::MAX`, no elements); `flags` bit 0 Nesterov, bit 1 first SGD step, bit 2
    /// decoupled weight decay; `a`, `b` are SGD's momentum and dampening, Adam's betas or
    /// RMSprop's alpha and momentum; `bias1`, `bias2` Adam's bias corrections.
    struct OptimizerParams {
        starts: [[u32; 4]; 4],
        lens: [[u32; 4]; 4],
        flags: u32,
        lr: f32,
        weight_decay: f32,
        a: f32,
        b: f32,
        eps: f32,
        bias1: f32,
        bias2: f32,
    }
}

const _: () = assert!(SLOTS == 16, "OptimizerParams holds 16 slots");

/// The WGSL that `optimizer.wgsl` needs for update `KIND` (see [`KINDS`]) over `N` slots: the
/// slots' bindings (parameter, gradient, then the state buffers) and `apply(slot, i)`, which
/// updates element `i` of one slot.
pub(super) fn constants<const KIND: usize, const N: usize>() -> String {
    let (update, states) = KINDS[KIND];
    let per_slot = 2 + states;
    let mut wgsl = format!("const SLOTS: u32 = {N}u;\n");
    for k in 0..N {
        let first = 1 + k * per_slot;
        wgsl += &format!("@group(0) @binding({first}) var<storage, read_write> param{k}: array<f32>;\n");
        wgsl += &format!("@group(0) @binding({}) var<storage, read> grad{k}: array<f32>;\n", first + 1);
        for j in 0..states {
            wgsl +=
                &format!("@group(0) @binding({}) var<storage, read_write> state{k}_{j}: array<f32>;\n", first + 2 + j);
        }
    }
    // The update is written once, the operands loaded and stored per slot. (Sixteen copies of
    // the update compiled as slowly: Adam's 16-slot module takes 60-115 ms on an H100 either way,
    // against 9-19 for one slot, hence the one-slot stand-in.)
    let operands = per_slot;
    let operand = |j: usize, k: usize| match j {
        0 => format!("param{k}"),
        1 => format!("grad{k}"),
        _ => format!("state{k}_{}", j - 2),
    };
    // Every operand but the gradient is written back, from the update's result in order.
    let written: Vec<usize> = (0..operands).filter(|&j| j != 1).collect();
    let cases = |body: &dyn Fn(usize) -> String| {
        let cases: String = (0..N).map(|k| format!("        case {k}u: {{{} }}\n", body(k))).collect();
        format!("    switch slot {{\n{cases}        default: {{}}\n    }}\n")
    };
    wgsl += &format!("fn apply(slot: u32, i: u32) {{\n    var v: array<f32, {operands}>;\n");
    wgsl += &cases(&|k| (0..operands).map(|j| format!(" v[{j}] = {}[i];", operand(j, k))).collect());
    let args: Vec<String> = (0..operands).map(|j| format!("v[{j}]")).collect();
    wgsl += &match states {
        0 => format!("    let r = array<f32, 1>({update}({}));\n", args.join(", ")),
        _ => format!("    let r = {update}({});\n", args.join(", ")),
    };
    wgsl += &cases(&|k| written.iter().enumerate().map(|(r, &j)| format!(" {}[i] = r[{r}];", operand(j, k))).collect());
    wgsl += "}\n";
    wgsl
}

/// Which of [`KINDS`] runs `step`.
fn kind(step: &OptimizerStep) -> usize {
    match *step {
        OptimizerStep::Sgd { momentum: 0.0, .. } => 0,
        OptimizerStep::Sgd { .. } => 1,
        OptimizerStep::Adam { .. } => 2,
        OptimizerStep::RmsProp { .. } => 3,
    }
}

/// The hyper-parameters of `step`, every slot unused.
fn uniform(step: &OptimizerStep) -> OptimizerParams {
    let mut params = OptimizerParams {
        starts: [[u32::MAX; 4]; 4],
        lens: [[0; 4]; 4],
        flags: 0,
        lr: 0.0,
        weight_decay: 0.0,
        a: 0.0,
        b: 0.0,
        eps: 0.0,
        bias1: 0.0,
        bias2: 0.0,
    };
    match *step {
        OptimizerStep::Sgd { lr, momentum, dampening, weight_decay, nesterov, first_step } => {
            params.flags = nesterov as u32 | (first_step as u32) << 1;
            (params.lr, params.weight_decay, params.a, params.b) = (lr, weight_decay, momentum, dampening);
        }
        OptimizerStep::Adam { lr, beta1, beta2, eps, weight_decay, decoupled, step } => {
            params.flags = (decoupled as u32) << 2;
            (params.lr, params.weight_decay, params.a, params.b, params.eps) = (lr, weight_decay, beta1, beta2, eps);
            params.bias1 = 1.0 - beta1.powi(step as i32);
            params.bias2 = 1.0 - beta2.powi(step as i32);
        }
        OptimizerStep::RmsProp { lr, alpha, eps, weight_decay, momentum } => {
            (params.lr, params.weight_decay, params.a, params.b, params.eps) = (lr, weight_decay, alpha, momentum, eps);
        }
    }
    params
}

/// Parameters per dispatch of update `kind` on an adapter with `limits`: the index in
/// [`SLOT_COUNTS`] of the most whose buffers it binds to one kernel.
fn slots_under(limits: &::wgpu::Limits, kind: usize) -> usize {
    let fits = |slots: usize| {
        let buffers = slots * (2 + KINDS[kind].1);
        limits.max_storage_buffers_per_shader_stage as usize >= buffers
            && limits.max_bindings_per_bind_group as usize > buffers
    };
    (0..SLOT_COUNTS.len()).rev().find(|&i| fits(SLOT_COUNTS[i])).unwrap_or(0)
}

/// The module each update (SGD, SGD with momentum, Adam, RMSprop) runs on an adapter with
/// `limits` (for the check against WebGPU's default limits).
pub(super) fn modules_under(limits: &::wgpu::Limits) -> [&'static str; 4] {
    std::array::from_fn(|kind| pipelines::OPTIMIZER[slots_under(limits, kind)][kind].name)
}

/// One update with its operands checked: the storages (for overlap tests) and their buffers.
struct Checked<'a> {
    step: OptimizerStep,
    kind: usize,
    len: usize,
    /// The parameter, then the state buffers the update writes.
    written: Vec<&'a Storage>,
    written_gpu: Vec<&'a WgpuStorage>,
    grad: &'a Storage,
    /// The gradient's buffer: its own, or a copy where it shares memory with what it updates.
    grad_gpu: GradBuffer<'a>,
}

enum GradBuffer<'a> {
    Own(&'a WgpuStorage),
    Copy(Arc<WgpuStorage>),
}

impl Checked<'_> {
    fn grad(&self) -> &WgpuStorage {
        match &self.grad_gpu {
            GradBuffer::Own(g) => g,
            GradBuffer::Copy(g) => g,
        }
    }

    /// Whether this update must wait for `earlier` (queued before it): one writes memory the
    /// other reads or writes.
    fn depends_on(&self, earlier: &Checked<'_>) -> bool {
        let overlaps = |written: &[&Storage], other: &Checked<'_>| {
            written.iter().any(|w| other.written.iter().any(|o| w.same_memory(o)) || w.same_memory(other.grad))
        };
        overlaps(&self.written, earlier) || overlaps(&earlier.written, self)
    }
}

impl WgpuBackend {
    /// [`Backend::optimizer_steps`](crate::backend::Backend::optimizer_steps): every operand
    /// checked before anything runs, then updates of one kind with the same hyper-parameters and
    /// apart in memory dispatched together, up to [`SLOTS`] at a time (a later one moved ahead of
    /// others where it shares no memory with them); all on the one-parameter modules where
    /// `one_slot` (the stand-ins, which the warm-up compiles first).
    pub(super) fn optimizer_updates(&self, updates: &[OptimizerUpdate<'_>], one_slot: bool) -> Result<()> {
        self.pipelines.note_training_step();
        let checked = updates.iter().map(|u| self.check_update(u)).collect::<Result<Vec<_>>>()?;
        let mut pending: Vec<&Checked<'_>> = checked.iter().collect();
        while let Some(&first) = pending.first() {
            let mut size = slots_under(&self.ctx.limits, first.kind);
            // Until the warm-up has compiled the many-parameter module (60-115 ms for Adam's on
            // an H100), the one-parameter one (9-19 ms) stands in.
            if one_slot || (size > 0 && self.pipelines.stand_in(&pipelines::OPTIMIZER[size][first.kind], "optimizer")) {
                size = 0;
            }
            let slots = SLOT_COUNTS[size];
            // The first update, then the next ones with its hyper-parameters (an AdamW's decayed
            // and undecayed parameters alternate), each moved ahead of the updates it passes
            // only where it shares no memory with any update before it.
            let mut batch = vec![0];
            for j in 1..pending.len() {
                if batch.len() == slots {
                    break;
                }
                if pending[j].step == first.step && !pending[..j].iter().any(|earlier| pending[j].depends_on(earlier)) {
                    batch.push(j);
                }
            }
            let together: Vec<&Checked<'_>> = batch.iter().map(|&j| pending[j]).collect();
            self.dispatch_updates(&together, size)?;
            pending = pending.iter().enumerate().filter(|(j, _)| !batch.contains(j)).map(|(_, &u)| u).collect();
        }
        Ok(())
    }

    /// `update`'s buffers, checked for type, device and length; its gradient copied where it
    /// shares memory with the parameter or a state buffer.
    fn check_update<'a>(&self, update: &'a OptimizerUpdate<'a>) -> Result<Checked<'a>> {
        let kind = kind(&update.step);
        let states = KINDS[kind].1;
        let state = update.state.get(..states).ok_or_else(|| {
            Error::invalid(OP, format!("this optimizer needs {states} state buffers, got {}", update.state.len()))
        })?;
        let written: Vec<&Storage> = std::iter::once(update.param).chain(state.iter().copied()).collect();
        for (i, a) in written.iter().enumerate() {
            if written[..i].iter().any(|b| a.same_memory(b)) {
                return Err(Error::invalid(OP, "the parameter and its state buffers must be apart in memory"));
            }
        }
        let written_gpu = written.iter().map(|s| self.gpu(s, DType::F32, OP)).collect::<Result<Vec<_>>>()?;
        let grad = self.gpu(update.grad, DType::F32, OP)?;
        for s in written_gpu.iter().chain([&grad]) {
            check_len(OP, s, update.len)?;
        }
        if update.len > u32::MAX as usize {
            return Err(Error::invalid(OP, format!("{} elements exceed the kernel's 32-bit indexing", update.len)));
        }
        let grad_gpu = if written.iter().any(|w| w.same_memory(update.grad)) {
            let copy = self.alloc(update.len, DType::F32, OP)?;
            let layout = Layout::contiguous(&[update.len]);
            self.copy_kernel(grad, &layout, &copy, &layout, OP)?;
            GradBuffer::Copy(copy)
        } else {
            GradBuffer::Own(grad)
        };
        Ok(Checked { step: update.step, kind, len: update.len, written, written_gpu, grad: update.grad, grad_gpu })
    }

    /// One dispatch of the module with `SLOT_COUNTS[size]` slots over `updates` (of one kind,
    /// with the same hyper-parameters, at most that many); unused slots bind the first update's
    /// buffers again and are never reached.
    fn dispatch_updates(&self, updates: &[&Checked<'_>], size: usize) -> Result<()> {
        let slots = SLOT_COUNTS[size];
        let Some(&first) = updates.first() else { return Ok(()) };
        let mut params = uniform(&first.step);
        let mut groups = 0usize;
        for (k, u) in updates.iter().enumerate() {
            let start = u32::try_from(groups)
                .map_err(|_| Error::invalid(OP, format!("{groups} workgroups exceed the kernel's 32-bit indexing")))?;
            (params.starts[k / 4][k % 4], params.lens[k / 4][k % 4]) = (start, u.len as u32);
            groups += u.len.div_ceil(GROUP);
        }
        if u32::try_from(groups).is_err() {
            return Err(Error::invalid(OP, format!("{groups} workgroups exceed the kernel's 32-bit indexing")));
        }
        let states = KINDS[first.kind].1;
        let mut signature = Vec::with_capacity(slots * (2 + states));
        let mut buffers = Vec::with_capacity(signature.capacity());
        for k in 0..slots {
            let u = updates.get(k).copied().unwrap_or(first);
            signature.extend([W, R].into_iter().chain(std::iter::repeat_n(W, states)));
            buffers.extend(
                [bind(u.written_gpu[0]), bind(u.grad())].into_iter().chain(u.written_gpu[1..].iter().map(|s| bind(s))),
            );
        }
        let shader = &pipelines::OPTIMIZER[size][first.kind];
        let threads = groups.checked_mul(GROUP).ok_or_else(|| Error::invalid(OP, "too many elements"))?;
        let grid = self.groups_for(threads, OP)?;
        self.run(shader, "optimizer", &signature, &params, &buffers, grid)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_data::{normal, read};
    use super::*;

    /// The one-parameter stand-ins give what the many-parameter modules give.
    #[test]
    fn stand_ins_match_the_many_parameter_modules() {
        let Some(crate::Device::Wgpu(b)) = crate::testing::wgpu_or_skip() else { return };
        let steps = [
            OptimizerStep::Sgd {
                lr: 0.1,
                momentum: 0.9,
                dampening: 0.0,
                weight_decay: 0.01,
                nesterov: true,
                first_step: false,
            },
            OptimizerStep::Adam {
                lr: 1e-2,
                beta1: 0.9,
                beta2: 0.99,
                eps: 1e-8,
                weight_decay: 0.0,
                decoupled: false,
                step: 2,
            },
        ];
        for step in steps {
            let run = |one_slot: bool| {
                let lens = [1usize, 255, 256, 257, 1000, 3, 0, 77, 513];
                let storages: Vec<[Storage; 4]> = lens
                    .iter()
                    .enumerate()
                    .map(|(k, &len)| {
                        let [p, g, m, v] = [0, 1, 2, 3].map(|j| normal(&b, len, (4 * k + j) as u32));
                        let positive = |s: Storage| {
                            crate::backend::Backend::from_f32(
                                &*b,
                                &read(&b, &s).iter().map(|x| x.abs()).collect::<Vec<_>>(),
                            )
                        };
                        [p, g, positive(m).unwrap(), positive(v).unwrap()]
                    })
                    .collect();
                let states: Vec<[&Storage; 2]> = storages.iter().map(|[_, _, m, v]| [m, v]).collect();
                let updates: Vec<OptimizerUpdate<'_>> = storages
                    .iter()
                    .zip(&states)
                    .zip(lens)
                    .map(|(([p, g, ..], state), len)| OptimizerUpdate { step, param: p, grad: g, state, len })
                    .collect();
                b.optimizer_updates(&updates, one_slot).unwrap();
                storages.iter().flat_map(|s| s.iter().map(|t| read(&b, t)).collect::<Vec<_>>()).collect::<Vec<_>>()
            };
            let (one, many) = (run(true), run(false));
            for (k, (a, c)) in one.iter().zip(&many).enumerate() {
                crate::testing::assert_close(&format!("{step:?}: storage {k}"), a, c, 1e-6);
            }
        }
    }

    #[test]
    fn every_slot_of_a_module_is_bound_and_applied() {
        let wgsl = constants::<2, 16>();
        assert!(wgsl.contains("@binding(64) var<storage, read_write> state15_1"), "{wgsl}");
        assert!(wgsl
            .contains("case 15u: { v[0] = param15[i]; v[1] = grad15[i]; v[2] = state15_0[i]; v[3] = state15_1[i]; }"));
        assert!(wgsl.contains("let r = adam(v[0], v[1], v[2], v[3]);"), "{wgsl}");
        assert!(wgsl.contains("case 15u: { param15[i] = r[0]; state15_0[i] = r[1]; state15_1[i] = r[2]; }"));
        assert_eq!(wgsl.matches("adam(").count(), 1, "{wgsl}");
        let wgsl = constants::<0, 1>();
        assert!(wgsl.contains("case 0u: { param0[i] = r[0]; }"), "{wgsl}");
        assert!(!wgsl.contains("binding(3)"), "{wgsl}");
    }
}
