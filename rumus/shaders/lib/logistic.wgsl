// The logistic functions shared by the activation kernels (lib/activation.wgsl) and the
// recurrent cells (lib/recurrent_cell.wgsl).

fn sigmoid(v: f32) -> f32 {
    return 1.0 / (1.0 + exp(-v));
}

// tanh through exp(-2|v|): never overflows, unlike some drivers' builtin for large |v|.
fn stable_tanh(v: f32) -> f32 {
    let e = exp(-2.0 * abs(v));
    return sign(v) * (1.0 - e) / (1.0 + e);
}
