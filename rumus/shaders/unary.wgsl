// Elementwise functions of one tensor; `op` is UnaryOp::code() and s0/s1 its scalars.
// Parameters and the activation math are in lib/activation.wgsl.

@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

fn apply(op: u32, v: f32, s0: f32, s1: f32) -> f32 {
    switch op {
        case 0u: { return -v; }
        case 1u: { return exp(v); }
        case 2u: { return log(v); }
        case 3u: { return sqrt(v); }
        case 4u: { return abs(v); }
        case 5u: { return max(v, 0.0); }
        case 6u: { return select(s0 * v, v, v > 0.0); }
        case 7u: { return sigmoid(v); }
        case 8u: { return stable_tanh(v); }
        case 9u: { return 0.5 * v * (1.0 + erf(v * INV_SQRT_2)); }
        case 10u: { return 0.5 * v * (1.0 + stable_tanh(SQRT_2_OVER_PI * (v + GELU_TANH_C * v * v * v))); }
        case 11u: { return v * sigmoid(v); }
        case 12u: { return v + s0; }
        case 13u: { return v * s0; }
        case 14u: { return powf(v, s0); }
        case 15u: { return min(max(v, s0), s1); }
        default: { return v; }
    }
}

@compute @workgroup_size(256)
fn unary(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * 256u + lid;
    if i < p.n {
        out[i] = apply(p.op, x[i], p.s0, p.s1);
    }
}
