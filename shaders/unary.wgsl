// Elementwise functions of one tensor; `op` is UnaryOp::code() and s0/s1 its scalars.
// Formulas mirror rumus/src/backend/cpu/elementwise.rs.

struct Params {
    n: u32,
    op: u32,
    s0: f32,
    s1: f32,
    // Passed in because WGSL constant expressions cannot be infinite or NaN.
    inf: f32,
    nan: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

const SQRT_2_OVER_PI: f32 = 0.7978846;
const GELU_TANH_C: f32 = 0.044715;
const INV_SQRT_2: f32 = 0.70710678118654752;

fn sigmoid(v: f32) -> f32 {
    return 1.0 / (1.0 + exp(-v));
}

// tanh through exp(-2|v|): never overflows, unlike some drivers' builtin for large |v|.
fn stable_tanh(v: f32) -> f32 {
    let e = exp(-2.0 * abs(v));
    return sign(v) * (1.0 - e) / (1.0 + e);
}

// erf to ~1e-7 (Numerical Recipes' erfc Chebyshev fit).
fn erf(v: f32) -> f32 {
    let z = abs(v);
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806
        + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
    let e = 1.0 - r;
    return select(-e, e, v >= 0.0);
}

// x^p with the host's semantics for negative bases and integer exponents.
fn powf(v: f32, e: f32) -> f32 {
    if e == 0.0 {
        return 1.0;
    }
    if v == 0.0 {
        return select(p.inf, 0.0, e > 0.0);
    }
    if v < 0.0 {
        if floor(e) != e {
            return p.nan;
        }
        let m = pow(-v, e);
        let odd = abs(e % 2.0) == 1.0;
        return select(m, -m, odd);
    }
    return pow(v, e);
}

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
