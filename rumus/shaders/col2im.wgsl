// Adjoint of im2col: columns [n, c*kh*kw, oh*ow] summed back into [n, c, h, w]. One invocation
// per input pixel gathers every (tap, output) pair that read it, so no atomics are needed. The
// window's parameters are in lib/window.wgsl.

@group(0) @binding(1) var<storage, read> cols: array<f32>;
@group(0) @binding(2) var<storage, read_write> x: array<f32>;

@compute @workgroup_size(256)
fn col2im(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x) * 256u + lid;
    if i >= p.n {
        return;
    }
    let plane = p.in_h * p.in_w;
    let nc = i / plane;
    let ii = (i % plane) / p.in_w;
    let ij = i % p.in_w;
    let spatial = p.out_h * p.out_w;
    let taps = p.kernel_h * p.kernel_w;
    let block = nc * taps * spatial;
    var acc = 0.0;
    for (var ki = 0u; ki < p.kernel_h; ki++) {
        // oi * stride = ii + pad - ki * dilation
        let hi = i32(ii + p.pad_h) - i32(ki * p.dilation_h);
        if hi < 0 || u32(hi) % p.stride_h != 0u {
            continue;
        }
        let oi = u32(hi) / p.stride_h;
        if oi >= p.out_h {
            continue;
        }
        for (var kj = 0u; kj < p.kernel_w; kj++) {
            let wj = i32(ij + p.pad_w) - i32(kj * p.dilation_w);
            if wj < 0 || u32(wj) % p.stride_w != 0u {
                continue;
            }
            let oj = u32(wj) / p.stride_w;
            if oj >= p.out_w {
                continue;
            }
            acc += cols[block + (ki * p.kernel_w + kj) * spatial + oi * p.out_w + oj];
        }
    }
    x[i] = acc;
}
