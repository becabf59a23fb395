// Fused optimizer updates, in place: one pass over a parameter, its gradient and its state.
// Formulas follow torch.optim and rumus/src/backend/cpu/optim.rs; bias corrections are computed
// on the host (f32 powi) so both backends use the same numbers.

struct Params {
    n: u32,
    // bit 0: nesterov, bit 1: first SGD step, bit 2: decoupled (AdamW) weight decay
    flags: u32,
    lr: f32,
    weight_decay: f32,
    // SGD: momentum, dampening. Adam: beta1, beta2. RMSprop: alpha, momentum.
    a: f32,
    b: f32,
    eps: f32,
    // Adam: 1 - beta1^t and 1 - beta2^t
    bias1: f32,
    bias2: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> param: array<f32>;
@group(0) @binding(2) var<storage, read> grad: array<f32>;
@group(0) @binding(3) var<storage, read_write> s0: array<f32>;
@group(0) @binding(4) var<storage, read_write> s1: array<f32>;

// SGD without momentum (no state buffer).
@compute @workgroup_size(256)
fn sgd(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
       @builtin(local_invocation_index) lid: u32) {
    let i = linear(wid, nwg, lid);
    if i < p.n {
        let g = grad[i] + p.weight_decay * param[i];
        param[i] -= p.lr * g;
    }
}

// SGD with momentum: s0 is the velocity.
@compute @workgroup_size(256)
fn sgd_momentum(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
    let i = linear(wid, nwg, lid);
    if i < p.n {
        var g = grad[i] + p.weight_decay * param[i];
        let momentum = p.a;
        let dampening = p.b;
        var buf: f32;
        if (p.flags & 2u) != 0u {
            buf = g;
        } else {
            buf = momentum * s0[i] + (1.0 - dampening) * g;
        }
        s0[i] = buf;
        if (p.flags & 1u) != 0u {
            g = g + momentum * buf;
        } else {
            g = buf;
        }
        param[i] -= p.lr * g;
    }
}

// Adam / AdamW: s0 = m, s1 = v.
@compute @workgroup_size(256)
fn adam(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = linear(wid, nwg, lid);
    if i < p.n {
        var g = grad[i];
        var w = param[i];
        if (p.flags & 4u) != 0u {
            w *= 1.0 - p.lr * p.weight_decay;
        } else {
            g += p.weight_decay * w;
        }
        let m = p.a * s0[i] + (1.0 - p.a) * g;
        let v = p.b * s1[i] + (1.0 - p.b) * g * g;
        s0[i] = m;
        s1[i] = v;
        let m_hat = m / p.bias1;
        let v_hat = v / p.bias2;
        param[i] = w - p.lr * m_hat / (sqrt(v_hat) + p.eps);
    }
}

// RMSprop: s0 = square average, s1 = momentum buffer.
@compute @workgroup_size(256)
fn rmsprop(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
    let i = linear(wid, nwg, lid);
    if i < p.n {
        let g = grad[i] + p.weight_decay * param[i];
        let alpha = p.a;
        let momentum = p.b;
        let sq = alpha * s0[i] + (1.0 - alpha) * g * g;
        s0[i] = sq;
        let update = g / (sqrt(sq) + p.eps);
        if momentum > 0.0 {
            let buf = momentum * s1[i] + update;
            s1[i] = buf;
            param[i] -= p.lr * buf;
        } else {
            param[i] -= p.lr * update;
        }
    }
}
