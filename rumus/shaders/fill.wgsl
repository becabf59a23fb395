// Fills a buffer with one value (as raw 32-bit words, so it serves f32 and u32 alike).

struct Params {
    n: u32,
    value: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(256)
fn fill(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    // 2-D dispatch: x never exceeds 65,535 workgroups, y carries the rest.
    let i = (wid.x + wid.y * nwg.x) * 256u + lid;
    if i < p.n {
        out[i] = p.value;
    }
}
