// grad * d op(x)/dx given the forward input x and output y; `op` is UnaryOp::code() (the
// OP_* constants, placed before this file by backend/wgpu/elementwise.rs).
// Derivatives mirror unary_derivative in rumus/src/backend/cpu/elementwise.rs; parameters and
// the activation math are in lib/activation.wgsl.

@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> y: array<f32>;
@group(0) @binding(3) var<storage, read> grad: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
// The same bindings as 16-byte elements, for unary_backward_vec4 alone.
@group(0) @binding(1) var<storage, read> x4: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> y4: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> grad4: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> out4: array<vec4<f32>>;

fn derivative(op: u32, v: f32, w: f32, s0: f32, s1: f32) -> f32 {
    switch op {
        case OP_NEG: { return -1.0; }
        case OP_EXP: { return w; }
        case OP_LOG: { return 1.0 / v; }
        case OP_SQRT: { return 0.5 / w; }
        case OP_ABS: { return select(select(0.0, -1.0, v < 0.0), 1.0, v > 0.0); }
        case OP_RELU: { return select(0.0, 1.0, v > 0.0); }
        case OP_LEAKY_RELU: { return select(s0, 1.0, v > 0.0); }
        case OP_SIGMOID: { return w * (1.0 - w); }
        case OP_TANH: { return 1.0 - w * w; }
        case OP_GELU: { return 0.5 * (1.0 + erf(v * INV_SQRT_2)) + v * INV_SQRT_2PI * exp(-0.5 * v * v); }
        case OP_GELU_TANH: {
            let t = stable_tanh(SQRT_2_OVER_PI * (v + GELU_TANH_C * v * v * v));
            return 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_TANH_C * v * v);
        }
        case OP_SILU: {
            let s = sigmoid(v);
            return s * (1.0 + v * (1.0 - s));
        }
        case OP_ADD_SCALAR: { return 1.0; }
        case OP_MUL_SCALAR: { return s0; }
        case OP_POWF: { return s0 * powf(v, s0 - 1.0); }
        case OP_CLAMP: { return select(0.0, 1.0, v >= s0 && v <= s1); }
        default: { return 0.0; }
    }
}

// Which of x and y `derivative` reads for `op`: the kernels load only those (the branch is
// uniform), so ReLU's backward streams x and grad, not y as well.
fn reads_x(op: u32) -> bool {
    switch op {
        case OP_NEG, OP_EXP, OP_SQRT, OP_SIGMOID, OP_TANH, OP_ADD_SCALAR, OP_MUL_SCALAR: { return false; }
        default: { return true; }
    }
}

fn reads_y(op: u32) -> bool {
    switch op {
        case OP_EXP, OP_SQRT, OP_SIGMOID, OP_TANH: { return true; }
        default: { return false; }
    }
}

@compute @workgroup_size(256)
fn unary_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
    let i = p.start + (wid.x + wid.y * nwg.x) * 256u + lid;
    if i < p.n {
        var v = 0.0;
        var w = 0.0;
        if reads_x(p.op) {
            v = x[i];
        }
        if reads_y(p.op) {
            w = y[i];
        }
        out[i] = grad[i] * derivative(p.op, v, w, p.s0, p.s1);
    }
}

// Elements 4q..4q+3 with 16-byte loads and stores, for q < n / 4 (the host runs
// `unary_backward` from start = n / 4 * 4 for the rest).
@compute @workgroup_size(256)
fn unary_backward_vec4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                       @builtin(local_invocation_index) lid: u32) {
    let q = (wid.x + wid.y * nwg.x) * 256u + lid;
    if q < p.n / 4u {
        var v = vec4<f32>(0.0);
        var w = vec4<f32>(0.0);
        if reads_x(p.op) {
            v = x4[q];
        }
        if reads_y(p.op) {
            w = y4[q];
        }
        let d = vec4<f32>(derivative(p.op, v.x, w.x, p.s0, p.s1), derivative(p.op, v.y, w.y, p.s0, p.s1),
                          derivative(p.op, v.z, w.z, p.s0, p.s1), derivative(p.op, v.w, w.w, p.s0, p.s1));
        out4[q] = grad4[q] * d;
    }
}
