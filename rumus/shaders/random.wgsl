// Counter-based random numbers, bit-for-bit the stream of rumus/src/rng.rs: value i depends only
// on (key, i). Uniform values match the CPU exactly; normal values match up to the last ulps of
// log/cos.

struct Params {
    n: u32,
    key: u32,
    // random_keep_mask: out[i] = scale where uniform value i is above p, else 0.
    p: f32,
    scale: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;

fn pcg_hash(x: u32) -> u32 {
    let state = x * 747796405u + 2891336453u;
    let word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
    return (word >> 22u) ^ word;
}

fn rotl16(x: u32) -> u32 {
    return (x << 16u) | (x >> 16u);
}

fn random_u32(key: u32, index: u32) -> u32 {
    return pcg_hash(index ^ pcg_hash(key + rotl16(index)));
}

fn uniform01(key: u32, index: u32) -> f32 {
    return f32(random_u32(key, index) >> 8u) * (1.0 / 16777216.0);
}

fn gid(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.x + wid.y * nwg.x) * 256u + lid;
}

@compute @workgroup_size(256)
fn random_uniform(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
    let i = gid(wid, nwg, lid);
    if i < p.n {
        out[i] = uniform01(p.key, i);
    }
}

// Inverted dropout's keep-mask, the uniform draw compared and scaled in one pass (the CPU's
// `RandomKind::KeepMask`).
@compute @workgroup_size(256)
fn random_keep_mask(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lid: u32) {
    let i = gid(wid, nwg, lid);
    if i < p.n {
        out[i] = select(0.0, p.scale, uniform01(p.key, i) > p.p);
    }
}

@compute @workgroup_size(256)
fn random_normal(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let i = gid(wid, nwg, lid);
    if i < p.n {
        // Box-Muller on words 2i and 2i+1, as on the CPU.
        let u1 = (f32(random_u32(p.key, i * 2u) >> 8u) + 1.0) * (1.0 / 16777216.0); // the CPU's f32 literal 16777217.0 rounds to 2^24
        let u2 = uniform01(p.key, i * 2u + 1u);
        out[i] = sqrt(-2.0 * log(u1)) * cos(6.28318530717958647 * u2);
    }
}
