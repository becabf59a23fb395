// Fused optimizer updates, in place, for several parameters in one dispatch (PyTorch's `foreach`
// optimizers): each slot of a module is one parameter with its gradient and state buffers, bound
// at bindings of their own, which the module's constants declare with `SLOTS` and `apply`
// (`optimizer.rs`). Formulas follow torch.optim and rumus/src/backend/cpu/optim.rs; bias
// corrections are computed on the host (f32 powi) so both backends use the same numbers.

struct Params {
    // Slot k's first workgroup (k / 4, k % 4), ascending; u32 max for an unused slot.
    starts: array<vec4<u32>, 4>,
    // Slot k's elements.
    lens: array<vec4<u32>, 4>,
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

// SGD without momentum (no state): the new parameter.
fn sgd(w: f32, grad: f32) -> f32 {
    return w - p.lr * (grad + p.weight_decay * w);
}

// SGD with momentum, `velocity` the state: the new parameter and velocity.
fn sgd_momentum(w: f32, grad: f32, velocity: f32) -> vec2<f32> {
    var g = grad + p.weight_decay * w;
    let momentum = p.a;
    let dampening = p.b;
    var buf = g;
    if (p.flags & 2u) == 0u {
        buf = momentum * velocity + (1.0 - dampening) * g;
    }
    if (p.flags & 1u) != 0u {
        g = g + momentum * buf;
    } else {
        g = buf;
    }
    return vec2<f32>(w - p.lr * g, buf);
}

// Adam / AdamW, states m and v: the new parameter, m and v.
fn adam(param: f32, grad: f32, m0: f32, v0: f32) -> vec3<f32> {
    var g = grad;
    var w = param;
    if (p.flags & 4u) != 0u {
        w *= 1.0 - p.lr * p.weight_decay;
    } else {
        g += p.weight_decay * w;
    }
    let m = p.a * m0 + (1.0 - p.a) * g;
    let v = p.b * v0 + (1.0 - p.b) * g * g;
    let m_hat = m / p.bias1;
    let v_hat = v / p.bias2;
    return vec3<f32>(w - p.lr * m_hat / (sqrt(v_hat) + p.eps), m, v);
}

// RMSprop, states square average and momentum buffer: the new parameter and both states.
fn rmsprop(w: f32, grad: f32, square_avg: f32, momentum_buf: f32) -> vec3<f32> {
    let g = grad + p.weight_decay * w;
    let alpha = p.a;
    let momentum = p.b;
    let sq = alpha * square_avg + (1.0 - alpha) * g * g;
    let update = g / (sqrt(sq) + p.eps);
    if momentum > 0.0 {
        let buf = momentum * momentum_buf + update;
        return vec3<f32>(w - p.lr * buf, sq, buf);
    }
    return vec3<f32>(w - p.lr * update, sq, momentum_buf);
}

fn slot_start(k: u32) -> u32 {
    return p.starts[k / 4u][k % 4u];
}

// Workgroup g (over a 2-D dispatch, as lib/linear.wgsl counts them) updates 256 elements of the
// last slot starting at or before it.
@compute @workgroup_size(256)
fn optimizer(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
    let g = wid.x + wid.y * nwg.x;
    var slot = 0u;
    for (var k = 1u; k < SLOTS; k++) {
        if g >= slot_start(k) {
            slot = k;
        }
    }
    let i = (g - slot_start(slot)) * 256u + lid;
    if i < p.lens[slot / 4u][slot % 4u] {
        apply(slot, i);
    }
}
