// Dynamic loss scaling: one pass that unscales a gradient and flags NaN or infinite values, as
// PyTorch's _amp_foreach_non_finite_check_and_unscale_ does per tensor (the CPU twin is
// `unscale_grad` in rumus/src/backend/cpu/optim.rs). out[i] = grad[i] * inv_scale; found[0]
// gets bit 0 set when some grad[i], or its product, is NaN or infinite, and is left alone
// otherwise, so one flag zeroed by the host accumulates over every gradient of a step.
//
// The test is on the bits (exponent all ones), never `x != x` or a comparison with infinity:
// WGSL lets a compiler assume that floats are finite and fold such tests away.

struct Params {
    n: u32,
    inv_scale: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> grad: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<storage, read_write> found: array<atomic<u32>>;

fn non_finite(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7f800000u) == 0x7f800000u;
}

// A 1-D dispatch of at most the adapter's limit of workgroups, each invocation walking the
// elements with a grid stride; one atomic per invocation that saw a non-finite value.
@compute @workgroup_size(256)
fn grad_unscale(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
    let stride = nwg.x * 256u;
    var bad = false;
    for (var i = wid.x * 256u + lid; i < p.n; i += stride) {
        let g = grad[i];
        let y = g * p.inv_scale;
        out[i] = y;
        bad = bad | non_finite(g) | non_finite(y);
    }
    if bad {
        atomicOr(&found[0], 1u);
    }
}
