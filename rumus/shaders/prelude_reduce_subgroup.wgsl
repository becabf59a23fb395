// Workgroup-wide reductions with subgroup operations: one subgroupAdd/Max per subgroup, then the
// per-subgroup partials combine through a few words of shared memory. Works for any subgroup
// size (8 on lavapipe, 32 on NVIDIA). Same functions as prelude_reduce_shared.wgsl.
// Call from uniform control flow with all RED_WG invocations of the workgroup.

// 64 invocations per row: enough to saturate memory on long rows, few enough that short rows
// and CPU emulations (lavapipe) don't pay for idle lanes and barriers.
const RED_WG: u32 = 64u;
var<workgroup> red_scratch: array<f32, 64>;

// Subgroup size and this invocation's lane, without the subgroup builtins (so the function
// signature matches the shared-memory variant). All invocations are active here.
fn sg_size() -> u32 {
    return subgroupAdd(1u);
}

fn wg_sum(v: f32, lid: u32) -> f32 {
    let s = subgroupAdd(v);
    let size = sg_size();
    let lane = subgroupExclusiveAdd(1u);
    if lane == 0u {
        red_scratch[lid / size] = s;
    }
    workgroupBarrier();
    var total = 0.0;
    for (var k = 0u; k < RED_WG / size; k++) {
        total += red_scratch[k];
    }
    workgroupBarrier();
    return total;
}

fn wg_max(v: f32, lid: u32) -> f32 {
    let s = subgroupMax(v);
    let size = sg_size();
    let lane = subgroupExclusiveAdd(1u);
    if lane == 0u {
        red_scratch[lid / size] = s;
    }
    workgroupBarrier();
    var best = red_scratch[0];
    for (var k = 1u; k < RED_WG / size; k++) {
        best = max(best, red_scratch[k]);
    }
    workgroupBarrier();
    return best;
}
