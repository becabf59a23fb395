// Shared by unary.wgsl and unary_backward.wgsl (placed before them by backend/wgpu/pipelines.rs):
// their parameters and the activation math both need. Formulas mirror
// rumus/src/backend/cpu/elementwise.rs.

struct Params {
    n: u32,
    op: u32,
    s0: f32,
    s1: f32,
    // Passed in because WGSL constant expressions cannot be infinite or NaN.
    inf: f32,
    nan: f32,
    // The first element the scalar entry points make (the `_vec4` ones make 0..n / 4 * 4).
    start: u32,
}

@group(0) @binding(0) var<uniform> p: Params;

const SQRT_2_OVER_PI: f32 = 0.7978846;
const GELU_TANH_C: f32 = 0.044715;
const INV_SQRT_2: f32 = 0.70710678118654752;
const INV_SQRT_2PI: f32 = 0.3989423;

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
