// Workgroup-wide reductions through shared memory, for adapters without subgroup operations.
// Prepended to row_reduce shaders (softmax, cross_entropy, reduce ...) on such adapters; the
// subgroup variant is prelude_reduce_subgroup.wgsl with the same functions.
// Call from uniform control flow with all RED_WG invocations of the workgroup.

// 64 invocations per row: enough to saturate memory on long rows, few enough that short rows
// and CPU emulations (lavapipe) don't pay for idle lanes and barriers.
const RED_WG: u32 = 64u;
var<workgroup> red_scratch: array<f32, 64>;

fn wg_sum(v: f32, lid: u32) -> f32 {
    red_scratch[lid] = v;
    workgroupBarrier();
    for (var s = RED_WG / 2u; s > 0u; s = s >> 1u) {
        if lid < s {
            red_scratch[lid] = red_scratch[lid] + red_scratch[lid + s];
        }
        workgroupBarrier();
    }
    let r = red_scratch[0];
    workgroupBarrier();
    return r;
}

fn wg_max(v: f32, lid: u32) -> f32 {
    red_scratch[lid] = v;
    workgroupBarrier();
    for (var s = RED_WG / 2u; s > 0u; s = s >> 1u) {
        if lid < s {
            red_scratch[lid] = max(red_scratch[lid], red_scratch[lid + s]);
        }
        workgroupBarrier();
    }
    let r = red_scratch[0];
    workgroupBarrier();
    return r;
}
