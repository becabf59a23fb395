// Copies a strided view into another strided view of the same shape, word by word (f32 and u32
// share the kernel). `copy_strided` takes shapes and strides padded to rank 8 with size-1 axes in
// its parameters; `copy_strided_any`, for views of more axes, reads them from `axes`: the shape,
// then the source strides, then the destination strides, `rank` words each.

struct Params {
    n: u32,
    rank: u32,
    src_offset: u32,
    dst_offset: u32,
    shape: array<vec4<u32>, 2>,
    src_strides: array<vec4<u32>, 2>,
    dst_strides: array<vec4<u32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;
@group(0) @binding(3) var<storage, read> axes: array<u32>;

@compute @workgroup_size(256)
fn copy_strided(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * 256u + lid;
    if i >= p.n {
        return;
    }
    var rest = i;
    var s = p.src_offset;
    var d = p.dst_offset;
    for (var k = 0u; k < p.rank; k++) {
        let axis = p.rank - 1u - k;
        let dim = p.shape[axis / 4u][axis % 4u];
        let c = rest % dim;
        rest = rest / dim;
        s += c * p.src_strides[axis / 4u][axis % 4u];
        d += c * p.dst_strides[axis / 4u][axis % 4u];
    }
    dst[d] = src[s];
}

@compute @workgroup_size(256)
fn copy_strided_any(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                    @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * 256u + lid;
    if i >= p.n {
        return;
    }
    var rest = i;
    var s = p.src_offset;
    var d = p.dst_offset;
    for (var k = 0u; k < p.rank; k++) {
        let axis = p.rank - 1u - k;
        let dim = axes[axis];
        let c = rest % dim;
        rest = rest / dim;
        s += c * axes[p.rank + axis];
        d += c * axes[2u * p.rank + axis];
    }
    dst[d] = src[s];
}
