// The running statistics of a batch norm moved in place towards a batch's (batch_norm.wgsl's
// mean and biased variance), one invocation per channel: running = (1 - momentum) * running +
// momentum * batch, the variance made unbiased (times count / (count - 1), `unbiased`), as
// rumus/src/ops/norm.rs composes it on devices without this kernel.

// struct Params: lib/batch_norm_params.wgsl.

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> mean: array<f32>;
@group(0) @binding(2) var<storage, read> variance: array<f32>;
@group(0) @binding(3) var<storage, read_write> running_mean: array<f32>;
@group(0) @binding(4) var<storage, read_write> running_var: array<f32>;

@compute @workgroup_size(256)
fn batch_norm_running(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                      @builtin(local_invocation_index) lid: u32) {
    let c = linear(wid, nwg, lid);
    if c >= p.channels {
        return;
    }
    let m = p.momentum;
    running_mean[c] = running_mean[c] * (1.0 - m) + mean[c] * m;
    running_var[c] = running_var[c] * (1.0 - m) + variance[c] * (m * p.unbiased);
}
