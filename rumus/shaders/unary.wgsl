// Elementwise functions of one tensor; `op` is UnaryOp::code() (the OP_* constants,
// placed before this file by backend/wgpu/elementwise.rs) and s0/s1 its scalars.
// Parameters and the activation math are in lib/activation.wgsl.

@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
// The same bindings as 16-byte elements, for unary_vec4 alone.
@group(0) @binding(1) var<storage, read> x4: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> out4: array<vec4<f32>>;

fn apply(op: u32, v: f32, s0: f32, s1: f32) -> f32 {
    switch op {
        case OP_NEG: { return -v; }
        case OP_EXP: { return exp(v); }
        case OP_LOG: { return log(v); }
        case OP_SQRT: { return sqrt(v); }
        case OP_ABS: { return abs(v); }
        case OP_RELU: { return max(v, 0.0); }
        case OP_LEAKY_RELU: { return select(s0 * v, v, v > 0.0); }
        case OP_SIGMOID: { return sigmoid(v); }
        case OP_TANH: { return stable_tanh(v); }
        case OP_GELU: { return 0.5 * v * (1.0 + erf(v * INV_SQRT_2)); }
        case OP_GELU_TANH: { return 0.5 * v * (1.0 + stable_tanh(SQRT_2_OVER_PI * (v + GELU_TANH_C * v * v * v))); }
        case OP_SILU: { return v * sigmoid(v); }
        case OP_ADD_SCALAR: { return v + s0; }
        case OP_MUL_SCALAR: { return v * s0; }
        case OP_POWF: { return powf(v, s0); }
        case OP_CLAMP: { return min(max(v, s0), s1); }
        default: { return v; }
    }
}

@compute @workgroup_size(256)
fn unary(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) lid: u32) {
    let i = p.start + (wid.x + wid.y * nwg.x) * 256u + lid;
    if i < p.n {
        out[i] = apply(p.op, x[i], p.s0, p.s1);
    }
}

// Elements 4q..4q+3 with 16-byte loads and stores, for q < n / 4 (the host runs `unary` from
// start = n / 4 * 4 for the rest).
@compute @workgroup_size(256)
fn unary_vec4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let q = (wid.x + wid.y * nwg.x) * 256u + lid;
    if q < p.n / 4u {
        let v = x4[q];
        out4[q] = vec4<f32>(apply(p.op, v.x, p.s0, p.s1), apply(p.op, v.y, p.s0, p.s1),
                            apply(p.op, v.z, p.s0, p.s1), apply(p.op, v.w, p.s0, p.s1));
    }
}
